"""``kchannel producer-perf-test`` and ``kchannel consumer-perf-test``:
Kafka's ``kafka-producer-perf-test.sh`` (ProducerPerformance) and
``kafka-consumer-perf-test.sh`` (ConsumerPerformance), same flags and output
lines (a progress line every 5 s while the producer runs)."""
import random
import sys
import time

from kchannel.cli.console_common import parse_properties
from kchannel.client import RequestTimeoutError
from kchannel.config.properties import load_properties
from kchannel.consumer import Consumer
from kchannel.errors import KChannelError
from kchannel.producer import Producer

__all__ = ["ProducerPerfTest", "ConsumerPerfTest"]


def _configs(config_file, props):
    configs = dict(load_properties(config_file)) if config_file else {}
    configs.update(props)
    return configs


class _Stats:
    """Kafka's ProducerPerformance.Stats: a window line every 5 s, the
    totals and latency percentiles at the end."""

    def __init__(self, out):
        self.out = out
        self.start = self.window_start = time.monotonic()
        self.count = self.bytes = 0
        self.total_latency = self.max_latency = 0
        self.w_count = self.w_bytes = self.w_latency = self.w_max = 0
        self.latencies = []

    def record(self, latency_ms, size):
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.w_count += 1
        self.w_bytes += size
        self.w_latency += latency_ms
        self.w_max = max(self.w_max, latency_ms)
        self.latencies.append(latency_ms)
        now = time.monotonic()
        if now - self.window_start >= 5.0:
            self.print_window(now)

    def print_window(self, now):
        elapsed = max(now - self.window_start, 1e-9)
        self.out.write(f"{self.w_count} records sent, {self.w_count / elapsed:.1f} records/sec "
                       f"({self.w_bytes / elapsed / 1024 / 1024:.2f} MB/sec), "
                       f"{self.w_latency / max(self.w_count, 1):.1f} ms avg latency, "
                       f"{float(self.w_max):.1f} ms max latency.\n")
        self.out.flush()
        self.window_start = now
        self.w_count = self.w_bytes = self.w_latency = self.w_max = 0

    def print_total(self):
        elapsed = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.latencies) or [0]

        def pct(p):
            return int(lat[min(len(lat) - 1, int(p * len(lat)))])
        self.out.write(f"{self.count} records sent, {self.count / elapsed:f} records/sec "
                       f"({self.bytes / elapsed / 1024 / 1024:.2f} MB/sec), "
                       f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
                       f"{float(self.max_latency):.2f} ms max latency, {pct(0.5)} ms 50th, "
                       f"{pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.\n")


class ProducerPerfTest:
    NAME = "producer-perf-test"
    HELP = "This tool is used to verify the producer performance (kafka-producer-perf-test.sh)."

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--topic", metavar="TOPIC", help="produce messages to this topic")
        parser.add_argument("--num-records", type=int, metavar="NUM-RECORDS",
                            help="number of messages to produce")
        parser.add_argument("--record-size", type=int, metavar="RECORD-SIZE",
                            help="message size in bytes.")
        parser.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                            help="file to read the message payloads from.")
        parser.add_argument("--payload-delimiter", default="\\n", metavar="DELIMITER",
                            help="delimiter to split the payload file (default \\n)")
        parser.add_argument("--throughput", type=float, metavar="THROUGHPUT",
                            help="throttle maximum message throughput to approximately "
                                 "THROUGHPUT messages/sec. Set this to -1 to disable throttling.")
        parser.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                            help="kafka producer related configuration properties.")
        parser.add_argument("--producer.config", "--command-config", dest="command_config",
                            metavar="CONFIG-FILE", help="producer config properties file.")
        parser.add_argument("--bootstrap-server", metavar="BOOTSTRAP-SERVERS",
                            help="The server(s) to connect to (overrides bootstrap.servers in "
                                 "the producer properties).")

    @staticmethod
    def run(args):
        missing = [f for f, v in (("topic", args.topic), ("num-records", args.num_records),
                                  ("throughput", args.throughput)) if v is None]
        if missing:
            print(f'Missing required argument "[{missing[0]}]"', file=sys.stderr)
            return 2
        if (args.record_size is None) == (args.payload_file is None):
            print("Either --record-size or --payload-file must be specified but not both.",
                  file=sys.stderr)
            return 2
        try:
            configs = _configs(args.command_config, parse_properties(args.producer_props))
            if args.bootstrap_server:
                configs["bootstrap.servers"] = args.bootstrap_server
            if args.payload_file:
                delim = args.payload_delimiter.encode().decode("unicode_escape")
                with open(args.payload_file, encoding="utf-8") as f:
                    payloads = [p.encode() for p in f.read().split(delim) if p]
            else:
                rng = random.Random()
                payloads = [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
        except (KChannelError, ValueError, OSError) as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        stats = _Stats(sys.stdout)
        failures = []
        throttle = args.throughput if args.throughput and args.throughput > 0 else None
        try:
            with Producer(configs) as producer:
                start = time.monotonic()
                for i in range(args.num_records):
                    payload = payloads[i % len(payloads)]
                    sent = time.monotonic()

                    def done(md, exc, sent=sent, size=len(payload)):
                        if exc is not None:
                            failures.append(exc)
                        else:
                            stats.record(int((time.monotonic() - sent) * 1000), size)
                    producer.send(args.topic, value=payload, callback=done)
                    if throttle is not None:
                        ahead = (i + 1) / throttle - (time.monotonic() - start)
                        if ahead > 0:
                            time.sleep(ahead)
                producer.flush()
        except KChannelError as exc:
            print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        stats.print_total()
        for exc in failures[:5]:
            print(f"ERROR {exc}", file=sys.stderr)
        return 1 if failures else 0


class ConsumerPerfTest:
    NAME = "consumer-perf-test"
    HELP = "This tool is used to verify the consumer performance (kafka-consumer-perf-test.sh)."

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--bootstrap-server", metavar="SERVERS",
                            help="REQUIRED: The server(s) to connect to.")
        parser.add_argument("--topic", metavar="TOPIC", help="REQUIRED: The topic to consume "
                            "from.")
        parser.add_argument("--messages", type=int, metavar="COUNT",
                            help="REQUIRED: The number of messages to consume.")
        parser.add_argument("--group", default=None, metavar="GROUP",
                            help="The group id to consume on.")
        parser.add_argument("--fetch-size", type=int, default=1048576, metavar="SIZE",
                            help="The amount of data to fetch in a single request.")
        parser.add_argument("--from-latest", action="store_true",
                            help="If the consumer does not already have an established offset "
                                 "to consume from, start with the latest message present in "
                                 "the log rather than the earliest message.")
        parser.add_argument("--timeout", type=int, default=10000, metavar="MS",
                            help="The maximum allowed time in milliseconds between returned "
                                 "records.")
        parser.add_argument("--consumer.config", "--command-config", dest="command_config",
                            metavar="FILE", help="Consumer config properties file.")
        parser.add_argument("--hide-header", action="store_true",
                            help="If set, skips printing the header for the stats")
        parser.add_argument("--date-format", default="%Y-%m-%d %H:%M:%S:%f", metavar="FMT",
                            help="The date format to use for formatting the time field.")

    @staticmethod
    def run(args):
        missing = [f for f, v in (("bootstrap-server", args.bootstrap_server),
                                  ("topic", args.topic), ("messages", args.messages))
                   if v is None]
        if missing:
            print(f'Missing required argument "[{missing[0]}]"', file=sys.stderr)
            return 2
        try:
            configs = _configs(args.command_config, {})
            configs.update({"bootstrap.servers": args.bootstrap_server,
                            "group.id": args.group or f"perf-consumer-{random.randrange(100000)}",
                            "max.partition.fetch.bytes": args.fetch_size,
                            "auto.offset.reset": "latest" if args.from_latest else "earliest",
                            "enable.auto.commit": "false"})
            # --timeout bounds every wait, connected or not: the consumer's
            # own waits (default.api.timeout.ms) must not outlast it.
            configs["default.api.timeout.ms"] = max(1, min(
                int(configs.get("default.api.timeout.ms", 60000)), args.timeout))
        except (KChannelError, ValueError, OSError) as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        count = size = 0
        start_wall = time.time()
        try:
            with Consumer(configs) as consumer:
                consumer.subscribe([args.topic])
                join_start = time.monotonic()
                last = time.monotonic()
                rebalance_ms = None
                fetch_start = None
                while count < args.messages:
                    try:
                        records = consumer.poll(0.1)
                    except RequestTimeoutError:
                        # (the broker is unreachable: the consumer's wait ended)
                        records = None
                    now = time.monotonic()
                    if rebalance_ms is None and consumer.assignment():
                        rebalance_ms = int((now - join_start) * 1000)
                        fetch_start = now
                    if not records:
                        if (now - last) * 1000 > args.timeout:
                            print(f"WARNING: Exiting before consuming the expected number of "
                                  f"messages: timeout ({args.timeout} ms) exceeded. You can "
                                  f"use the --timeout option to increase the timeout.",
                                  file=sys.stderr)
                            break
                        continue
                    last = now
                    for r in records:
                        count += 1
                        size += (len(r.value) if r.value is not None else 0) + \
                            (len(r.key) if r.key is not None else 0)
        except KChannelError as exc:
            print(f"ERROR {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        end_wall = time.time()
        elapsed = max(end_wall - start_wall, 1e-9)
        fetch_s = max(time.monotonic() - (fetch_start or time.monotonic()), 1e-9)
        mb = size / 1024 / 1024
        if not args.hide_header:
            print("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                  "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")

        def stamp(t):
            text = time.strftime(args.date_format.replace("%f", "{ms}"), time.localtime(t))
            return text.replace("{ms}", f"{int(t * 1000) % 1000:03d}")
        print(f"{stamp(start_wall)}, {stamp(end_wall)}, {mb:.4f}, {mb / elapsed:.4f}, {count}, "
              f"{count / elapsed:.4f}, {rebalance_ms or 0}, {int(fetch_s * 1000)}, "
              f"{mb / fetch_s:.4f}, {count / fetch_s:.4f}")
        return 0
