"""``kchannel console-consumer``: Kafka's ``kafka-console-consumer.sh``.

    kchannel console-consumer --bootstrap-server HOST:PORT --topic TOPIC
        [--from-beginning] [--group GROUP] [--partition N [--offset earliest|latest|N]]
        [--max-messages N] [--timeout-ms MS] [--isolation-level read_committed]
        [--consumer.config FILE | --command-config FILE] [--consumer-property K=V ...]
        [--property print.key=true --property key.separator=: ...]

Prints records as Kafka's ``DefaultMessageFormatter`` (``print.timestamp``,
``print.key``, ``print.offset``, ``print.partition``, ``print.headers``,
``print.value``, ``key.separator``, ``line.separator``,
``headers.separator``, ``null.literal``) and, at the end, "Processed a total
of N messages" on stderr.  Exit status: 0 success, 1 failure, 2 usage error.
"""
import sys
import time
import uuid

from kchannel.cli.console_common import parse_properties, producer_or_consumer_configs
from kchannel.client import RequestTimeoutError
from kchannel.consumer import Consumer
from kchannel.errors import KChannelError
from kchannel.client.metadata import TopicPartition

NAME = "console-consumer"
HELP = ("This tool helps to read data from Kafka topics and outputs it to standard output "
        "(kafka-console-consumer.sh).")


def add_arguments(parser):
    parser.add_argument("--bootstrap-server", metavar="SERVERS",
                        help="REQUIRED: The server(s) to connect to.")
    parser.add_argument("--topic", metavar="TOPIC", help="The topic to consume on.")
    parser.add_argument("--partition", type=int, metavar="PARTITION",
                        help="The partition to consume from. Consumption starts from the end "
                             "of the partition unless '--offset' is specified.")
    parser.add_argument("--offset", default="latest", metavar="OFFSET",
                        help="The offset to consume from (a non-negative number), or "
                             "'earliest' which means from beginning, or 'latest' which means "
                             "from end (default: latest)")
    parser.add_argument("--from-beginning", action="store_true",
                        help="If the consumer does not already have an established offset to "
                             "consume from, start with the earliest message present in the log "
                             "rather than the latest message.")
    parser.add_argument("--group", metavar="GROUP",
                        help="The consumer group id of the consumer.")
    parser.add_argument("--max-messages", type=int, metavar="N",
                        help="The maximum number of messages to consume before exiting. If not "
                             "set, consumption is continual.")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="If specified, exit if no message is available for consumption "
                             "for the specified interval.")
    parser.add_argument("--isolation-level", default="read_uncommitted", metavar="LEVEL",
                        help="Set to read_committed in order to filter out transactional "
                             "messages which are not committed. Set to read_uncommitted to "
                             "read all messages. (default: read_uncommitted)")
    parser.add_argument("--consumer.config", "--command-config", dest="command_config",
                        metavar="FILE", help="Consumer config properties file.")
    parser.add_argument("--consumer-property", "--command-property", action="append",
                        dest="consumer_property", metavar="PROP",
                        help="A mechanism to pass user-defined properties in the form key=value "
                             "to the consumer.")
    parser.add_argument("--property", "--formatter-property", action="append",
                        dest="property", metavar="PROP",
                        help="The properties to initialize the message formatter (print.key, "
                             "print.timestamp, print.offset, print.partition, print.headers, "
                             "print.value, key.separator, line.separator, headers.separator, "
                             "null.literal).")
    parser.add_argument("--skip-message-on-error", action="store_true",
                        help="If there is an error when processing a message, skip it instead "
                             "of halt.")


class _Formatter:
    """Kafka's ``DefaultMessageFormatter``."""

    def __init__(self, props):
        flag = lambda k, d: props.get(k, d).strip().lower() == "true"  # noqa: E731
        self.print_timestamp = flag("print.timestamp", "false")
        self.print_key = flag("print.key", "false")
        self.print_offset = flag("print.offset", "false")
        self.print_partition = flag("print.partition", "false")
        self.print_headers = flag("print.headers", "false")
        self.print_value = flag("print.value", "true")
        self.key_sep = props.get("key.separator", "\t")
        self.line_sep = props.get("line.separator", "\n")
        self.headers_sep = props.get("headers.separator", ",")
        self.null = props.get("null.literal", "null")

    def _text(self, data):
        return self.null if data is None else data.decode("utf-8", "replace")

    def format(self, r):
        parts = []
        if self.print_timestamp:
            parts.append(f"{r.timestamp_type}:{r.timestamp}" if r.timestamp_type !=
                         "NoTimestampType" else "NO_TIMESTAMP")
        if self.print_partition:
            parts.append(f"Partition:{r.partition}")
        if self.print_offset:
            parts.append(f"Offset:{r.offset}")
        if self.print_headers:
            parts.append(self.headers_sep.join(f"{k}:{self._text(v)}" for k, v in r.headers)
                         if r.headers else "NO_HEADERS")
        if self.print_key:
            parts.append(self._text(r.key))
        if self.print_value:
            parts.append(self._text(r.value))
        return self.key_sep.join(parts) + self.line_sep


def run(args):
    if not args.bootstrap_server:
        print('Missing required argument "[bootstrap-server]"', file=sys.stderr)
        return 2
    if not args.topic:
        print("Exactly one of include/topic is required.", file=sys.stderr)
        return 2
    if args.partition is None and args.offset != "latest":
        print("The partition is required when offset is specified.", file=sys.stderr)
        return 2
    if args.from_beginning and args.partition is not None and args.offset != "latest":
        print("Options from-beginning and offset cannot be specified together.",
              file=sys.stderr)
        return 2
    if "--property" in getattr(args, "_argv", ()):
        # Kafka 4.x says so on standard output, and so do we.
        print("Option --property is deprecated and will be removed in a future version. "
              "Use --formatter-property instead.")
    try:
        formatter = _Formatter(parse_properties(args.property))
        props = parse_properties(args.consumer_property)
        group = args.group or props.get("group.id")
        defaults = {"auto.offset.reset": "earliest" if args.from_beginning else "latest",
                    "isolation.level": args.isolation_level}
        if group is None and args.partition is None:
            # Kafka's console consumer invents a group when it subscribes
            group = f"console-consumer-{uuid.uuid4().int % 100000}"
            defaults["enable.auto.commit"] = "false"
        if group is not None:
            defaults["group.id"] = group
        configs = producer_or_consumer_configs(args.bootstrap_server, args.command_config,
                                               args.consumer_property, defaults)
        if args.timeout_ms is not None:
            # --timeout-ms bounds the whole wait, connected or not (Kafka's
            # poll(timeout) does): the consumer's own waits for metadata,
            # the coordinator and offsets (default.api.timeout.ms, 60 s)
            # must not outlast it.
            configs["default.api.timeout.ms"] = max(1, min(
                int(configs.get("default.api.timeout.ms", 60000)), args.timeout_ms))
    except (KChannelError, ValueError, OSError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    count = 0
    out = sys.stdout
    try:
        with Consumer(configs) as consumer:
            if args.partition is not None:
                tp = TopicPartition(args.topic, args.partition)
                consumer.assign([tp])
                if args.offset == "earliest" or args.from_beginning:
                    consumer.seek_to_beginning([tp])
                elif args.offset == "latest":
                    consumer.seek_to_end([tp])
                else:
                    consumer.seek(tp, int(args.offset))
            else:
                consumer.subscribe([args.topic])
            last = time.monotonic()
            while args.max_messages is None or count < args.max_messages:
                try:
                    records = consumer.poll(0.2)
                except RequestTimeoutError:
                    # (the broker is unreachable: the consumer's wait ended)
                    if args.timeout_ms is None:
                        raise
                    records = None
                if not records:
                    if args.timeout_ms is not None and \
                            (time.monotonic() - last) * 1000 >= args.timeout_ms:
                        # Kafka's ConsoleConsumer logs this and exits 0.
                        print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] ERROR Error processing "
                              "message, terminating consumer process:  "
                              "(org.apache.kafka.tools.consumer.ConsoleConsumer)\n"
                              "org.apache.kafka.common.errors.TimeoutException",
                              file=sys.stderr)
                        break
                    continue
                last = time.monotonic()
                for r in records:
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                    out.write(formatter.format(r))
                    count += 1
                out.flush()
    except KChannelError as exc:
        print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"Processed a total of {count} messages", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
