"""``kchannel get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell).

    kchannel get-offsets --bootstrap-server HOST:PORT [--command-config FILE]
        [--topic REGEX] [--partitions 0,1] [--time -1|-2|-3|latest|earliest|max-timestamp|MS]
        [--exclude-internal-topics]

Prints ``topic:partition:offset`` per partition, sorted by topic and
partition; a partition without an offset for the time (a timestamp after its
last record) is left out, as Kafka's tool does.  Exit status 0 ok, 1 failure, 2 usage.
"""
import re
import sys

from kchannel.client.admin import Admin, OffsetSpec
from kchannel.config.properties import load_properties
from kchannel.errors import KChannelError
from kchannel.client.metadata import TopicPartition

NAME = "get-offsets"
HELP = "Offsets of topic partitions at a time (kafka-get-offsets.sh)."

_TIMES = {"latest": OffsetSpec.LATEST, "earliest": OffsetSpec.EARLIEST,
          "max-timestamp": OffsetSpec.MAX_TIMESTAMP}


def add_arguments(parser):
    a = parser.add_argument
    a("--bootstrap-server", metavar="HOST1:PORT1,...,HOST3:PORT3",
      help="REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.")
    a("--command-config", metavar="config file", help="Property file containing configs to "
      "be passed to Admin Client.")
    a("--topic", metavar="topic", help="The topic to get the offsets for. It also accepts a "
      "regular expression. If not present, all authorized topics are queried.")
    a("--partitions", metavar="partition ids", help="Comma separated list of partition ids "
      "to get the offsets for. If not present, all partitions of the authorized topics are "
      "queried.")
    a("--time", default="latest", metavar="<timestamp> / -1 or latest / -2 or earliest / "
      "-3 or max-timestamp", help="timestamp of the offsets before that. [Note: No offset is "
      "returned, if the timestamp greater than recently committed record timestamp is "
      "given.] (default: latest)")
    a("--exclude-internal-topics", action="store_true", help="By default, internal topics "
      "are included. If specified, internal topics are excluded.")


def _time(text):
    text = str(text).strip()
    if text.lower() in _TIMES:
        return _TIMES[text.lower()]
    value = int(text)
    if value < -3:
        raise ValueError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                         "earliest / -3 or max-timestamp, or a specified long format "
                         "timestamp")
    return value


def run(args):
    if not args.bootstrap_server:
        print("Missing required argument \"[bootstrap-server]\"", file=sys.stderr)
        return 2
    try:
        spec = _time(args.time)
        partitions = None
        if args.partitions:
            partitions = {int(p) for p in args.partitions.split(",") if p.strip()}
        pattern = re.compile(args.topic) if args.topic else None
    except (ValueError, re.error) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    try:
        configs = dict(load_properties(args.command_config)) if args.command_config else {}
        configs["bootstrap.servers"] = args.bootstrap_server
        with Admin(configs) as admin:
            listing = admin.list_topics(list_internal=not args.exclude_internal_topics)
            topics = [t for t in listing if pattern is None or pattern.fullmatch(t)]
            wanted = []
            for name, desc in admin.describe_topics(topics).items() if topics else ():
                wanted.extend(TopicPartition(name, p.partition) for p in desc.partitions
                              if partitions is None or p.partition in partitions)
            results = admin.list_offsets({tp: spec for tp in wanted}) if wanted else {}
    except (KChannelError, OSError) as exc:
        print(f"Error occurred: {exc}", file=sys.stderr)
        return 1
    for tp in sorted(results):
        if results[tp].offset >= 0:
            print(f"{tp.topic}:{tp.partition}:{results[tp].offset}")
    return 0
