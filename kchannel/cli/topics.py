"""``kchannel topics``: Kafka's ``kafka-topics.sh`` for create, list,
describe and delete, on :class:`kchannel.client.admin.Admin`.

    kchannel topics --bootstrap-server HOST:PORT [--command-config FILE]
        --create --topic T [--partitions N] [--replication-factor R] [--config K=V ...]
                 [--if-not-exists]
        --list [--exclude-internal]
        --describe [--topic T] [--exclude-internal]
        --delete --topic T [--if-exists]

Exit status: 0 success, 1 failure ("Error while executing topic command :
..." on stderr, as Kafka's TopicCommand), 2 usage error.
"""
import base64
import sys

from kchannel.cli.console_common import parse_properties
from kchannel.client.admin import Admin, NewTopic
from kchannel.config.properties import load_properties
from kchannel.errors import KafkaError, KChannelError
from kchannel.protocol.errors import Errors, exception_for

NAME = "topics"
HELP = "Create, delete, describe, or change a topic (kafka-topics.sh)."


def add_arguments(parser):
    parser.add_argument("--bootstrap-server", metavar="SERVERS",
                        help="REQUIRED: The Kafka server to connect to.")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Property file containing configs to be passed to Admin Client.")
    for action, text in (("create", "Create a new topic."),
                         ("list", "List all available topics."),
                         ("describe", "List details for the given topics."),
                         ("delete", "Delete a topic")):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--topic", metavar="TOPIC", help="The topic to create, describe or "
                        "delete.")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="The number of partitions for the topic being created.")
    parser.add_argument("--replication-factor", type=int, metavar="R",
                        help="The replication factor for each partition in the topic being "
                             "created.")
    parser.add_argument("--config", action="append", metavar="K=V",
                        help="A topic configuration override for the topic being created.")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="If set when creating topics, the action will only execute if "
                             "the topic does not already exist.")
    parser.add_argument("--if-exists", action="store_true",
                        help="If set when deleting topics, the action will only execute if "
                             "the topic exists.")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="exclude internal topics when running list or describe command.")


def _fail(message):
    print(f"Error while executing topic command : {message}", file=sys.stderr)
    return 1


def run(args):
    actions = [a for a in ("create", "list", "describe", "delete") if getattr(args, a)]
    if len(actions) != 1:
        print("Command must include exactly one action: --list, --describe, --create, "
              "--alter or --delete", file=sys.stderr)
        return 2
    if not args.bootstrap_server:
        print("Only one of --bootstrap-server or --zookeeper must be specified",
              file=sys.stderr)
        return 2
    if actions[0] in ("create", "delete") and not args.topic:
        print('Missing required argument "[topic]"', file=sys.stderr)
        return 2
    try:
        configs = dict(load_properties(args.command_config)) if args.command_config else {}
        configs["bootstrap.servers"] = args.bootstrap_server
        with Admin(configs) as admin:
            return globals()[f"_{actions[0]}"](admin, args)
    except KafkaError as exc:
        return _fail(exc.message or exception_for(exc.error_code).message)
    except (KChannelError, OSError, ValueError) as exc:
        return _fail(f"{exc}")


def _create(admin, args):
    try:
        admin.create_topics([NewTopic(
            args.topic, -1 if args.partitions is None else args.partitions,
            -1 if args.replication_factor is None else args.replication_factor,
            parse_properties(args.config))])
    except KafkaError as exc:
        if exc.error_code == Errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _list(admin, args):
    for name in admin.list_topics(list_internal=not args.exclude_internal):
        print(name)
    return 0


def _describe(admin, args):
    if args.topic:
        try:
            topics = admin.describe_topics([args.topic])
        except KafkaError as exc:
            if exc.error_code != Errors.UNKNOWN_TOPIC_OR_PARTITION:
                raise
            topics = {}
    else:
        topics = admin.describe_topics(list(admin.list_topics(list_internal=True)))
    shown = 0
    for name in sorted(topics):
        t = topics[name]
        if args.exclude_internal and t.is_internal:
            continue
        parts = t.partitions
        rf = len(parts[0].replicas) if parts else 0
        print(f"Topic: {name}\tTopicId: {_topic_id(t.topic_id)}\tPartitionCount: {len(parts)}"
              f"\tReplicationFactor: {rf}\tConfigs: ")
        for p in parts:
            leader = p.leader if p.leader >= 0 else "none"
            print(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}"
                  f"\tReplicas: {','.join(map(str, p.replicas))}"
                  f"\tIsr: {','.join(map(str, p.isr))}\tElr: \tLastKnownElr: ")
        shown += 1
    if args.topic and not shown:
        return _fail(f"Topic '{args.topic}' does not exist as expected")
    return 0


def _topic_id(tid):
    if tid is None:
        return ""
    # Kafka prints topic ids in its URL-safe base64 form.
    return base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")


def _delete(admin, args):
    try:
        admin.delete_topics([args.topic])
    except KafkaError as exc:
        if exc.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            return 0
        raise
    return 0
