"""``kchannel console-producer``: Kafka's ``kafka-console-producer.sh``.

    kchannel console-producer --bootstrap-server HOST:PORT --topic TOPIC
        [--producer.config FILE | --command-config FILE] [--producer-property K=V ...]
        [--property parse.key=true --property key.separator=: ...]
        [--compression-codec [CODEC]] [--request-required-acks ACKS] [--sync]

Reads records from stdin, one per line, as Kafka's ``LineMessageReader``
(``parse.key``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``null.marker``,
``ignore.error``).  Exit status: 0 success, 1 failure, 2 usage error.
"""
import sys

from kchannel.cli.console_common import parse_properties, producer_or_consumer_configs
from kchannel.errors import KChannelError
from kchannel.producer import Producer

NAME = "console-producer"
HELP = ("This tool helps to read data from standard input and publish it to Kafka "
        "(kafka-console-producer.sh).")


def add_arguments(parser):
    parser.add_argument("--bootstrap-server", metavar="SERVERS",
                        help="REQUIRED: The server(s) to connect to.")
    parser.add_argument("--topic", metavar="TOPIC",
                        help="REQUIRED: The topic id to produce messages to.")
    parser.add_argument("--producer.config", "--command-config", dest="command_config",
                        metavar="FILE", help="Producer config properties file.")
    parser.add_argument("--producer-property", "--command-property", action="append",
                        dest="producer_property", metavar="PROP",
                        help="A mechanism to pass user-defined properties in the form key=value "
                             "to the producer.")
    parser.add_argument("--property", "--reader-property", action="append", dest="property",
                        metavar="PROP",
                        help="A mechanism to pass user-defined properties in the form key=value "
                             "to the message reader (parse.key, key.separator, parse.headers, "
                             "headers.delimiter, headers.separator, headers.key.separator, "
                             "null.marker, ignore.error).")
    parser.add_argument("--compression-codec", nargs="?", const="gzip", metavar="CODEC",
                        help="The compression codec: either 'none', 'gzip', 'snappy', 'lz4', "
                             "or 'zstd'. If specified without value, then it defaults to "
                             "'gzip'")
    parser.add_argument("--request-required-acks", default="-1", metavar="ACKS",
                        help="The required acks of the producer requests (default: -1)")
    parser.add_argument("--request-timeout-ms", type=int, default=1500, metavar="MS",
                        help="The ack timeout of the producer requests (default: 1500)")
    parser.add_argument("--timeout", type=int, default=1000, metavar="MS",
                        help="If set and the producer is running in asynchronous mode, this "
                             "gives the maximum amount of time a message will queue awaiting "
                             "sufficient batch size (linger.ms, default: 1000)")
    parser.add_argument("--batch-size", type=int, default=16384, metavar="SIZE",
                        help="Number of messages to send in a single batch (default: 16384)")
    parser.add_argument("--message-send-max-retries", type=int, default=3, metavar="N",
                        help="Brokers can fail receiving the message for multiple reasons... "
                             "(retries, default: 3)")
    parser.add_argument("--max-block-ms", type=int, default=60000, metavar="MS",
                        help="The max time that the producer will block for during a send "
                             "request (default: 60000)")
    parser.add_argument("--sync", action="store_true",
                        help="If set message send requests to the brokers are synchronously, "
                             "one at a time as they arrive.")


def _reader(props):
    parse_key = props.get("parse.key", "false").lower() == "true"
    key_sep = props.get("key.separator", "\t")
    parse_headers = props.get("parse.headers", "false").lower() == "true"
    headers_delim = props.get("headers.delimiter", "\t")
    headers_sep = props.get("headers.separator", ",")
    header_key_sep = props.get("headers.key.separator", ":")
    null_marker = props.get("null.marker")
    ignore_error = props.get("ignore.error", "false").lower() == "true"

    def field(text):
        if null_marker is not None and text == null_marker:
            return None
        return text.encode("utf-8")

    def parse(line, number):
        headers = []
        rest = line
        if parse_headers:
            head, delim, tail = rest.partition(headers_delim)
            if not delim:
                if ignore_error:
                    head, tail = "", rest
                else:
                    raise KChannelError(f"No headers delimiter found on line number {number}: "
                                        f"'{line}'")
            rest = tail
            if head and head != null_marker:
                for h in head.split(headers_sep):
                    k, sep, v = h.partition(header_key_sep)
                    headers.append((k, field(v) if sep else None))
        key = None
        if parse_key:
            k, sep, v = rest.partition(key_sep)
            if not sep:
                if not ignore_error:
                    raise KChannelError(f"No key separator found on line number {number}: "
                                        f"'{line}'")
                k, v = None, rest
            key = field(k) if k is not None else None
            rest = v
        return key, field(rest), headers
    return parse


def run(args):
    if not args.bootstrap_server or not args.topic:
        missing = "bootstrap-server" if not args.bootstrap_server else "topic"
        print(f"Missing required argument \"[{missing}]\"", file=sys.stderr)
        return 2
    if "--property" in getattr(args, "_argv", ()):
        # Kafka 4.x says so on standard output, and so do we.
        print("Warning: --property is deprecated and will be removed in a future version. "
              "Use --reader-property instead.")
    try:
        reader_props = parse_properties(args.property)
        extra = {
            "acks": args.request_required_acks, "request.timeout.ms": args.request_timeout_ms,
            "linger.ms": args.timeout, "batch.size": args.batch_size,
            "retries": args.message_send_max_retries, "max.block.ms": args.max_block_ms,
            "delivery.timeout.ms": max(120000, args.timeout + args.request_timeout_ms),
        }
        if args.compression_codec:
            extra["compression.type"] = args.compression_codec
        configs = producer_or_consumer_configs(args.bootstrap_server, args.command_config,
                                               args.producer_property, extra)
    except (KChannelError, ValueError, OSError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    parse = _reader(reader_props)
    failures = []
    try:
        with Producer(configs) as producer:
            for number, line in enumerate(sys.stdin, 1):
                line = line.rstrip("\n").rstrip("\r")
                key, value, headers = parse(line, number)
                future = producer.send(args.topic, value=value, key=key, headers=headers,
                                       callback=lambda md, exc: exc and failures.append(exc))
                if args.sync:
                    future.get()
            producer.flush()
    except KChannelError as exc:
        print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for exc in failures[:10]:
        print(f"ERROR Error when sending message to topic {args.topic}: {exc}",
              file=sys.stderr)
    return 1 if failures else 0
