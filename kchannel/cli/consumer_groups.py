"""``kchannel consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` on
:class:`kchannel.client.admin.Admin`.

    kchannel consumer-groups --bootstrap-server HOST:PORT [--command-config FILE]
        --list [--state [STATES]]
        --describe (--group G ... | --all-groups) [--members | --state | --offsets] [--verbose]
        --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P] ... | --all-topics)
            (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N
             | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --by-duration PnDTnHnMnS)
            [--dry-run | --execute]
        --delete (--group G ... | --all-groups)
        --delete-offsets --group G --topic T[:P,P] ...

Output is Kafka's, column for column (its ``ConsumerGroupCommand``).  Exit
status: 0 ok, 1 failure (Kafka's tool prints ``Error: ...`` and still exits
0; kchannel exits 1 as its other tools do), 2 usage error.
"""
import datetime
import re
import sys
import time

from kchannel.client.admin import Admin, OffsetSpec
from kchannel.config.properties import load_properties
from kchannel.errors import KafkaError, KChannelError
from kchannel.client.metadata import TopicPartition
from kchannel.protocol.errors import Errors

NAME = "consumer-groups"
HELP = "List, describe, delete consumer groups and reset their offsets " \
       "(kafka-consumer-groups.sh)."

MISSING = "-"
_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                 "Assigning", "Reconciling")
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")


def add_arguments(parser):
    a = parser.add_argument
    a("--bootstrap-server", metavar="server to connect to",
      help="REQUIRED: The server(s) to connect to.")
    a("--command-config", metavar="command config property file",
      help="Property file containing configs to be passed to Admin Client and Consumer.")
    a("--list", action="store_true", help="List all consumer groups.")
    a("--describe", action="store_true",
      help="Describe consumer group and list offset lag (number of messages not yet "
           "processed) related to given group.")
    a("--delete", action="store_true", help="Pass in groups to delete topic partition offsets "
      "and ownership information over the entire consumer group.")
    a("--reset-offsets", action="store_true",
      help="Reset offsets of consumer group. Supports one consumer group at the time, and "
           "instances should be inactive.")
    a("--delete-offsets", action="store_true",
      help="Delete offsets of consumer group. Supports one consumer group at the time, and "
           "multiple topics.")
    a("--group", action="append", metavar="consumer group", help="The consumer group we wish "
      "to act on.")
    a("--all-groups", action="store_true", help="Apply to all consumer groups.")
    a("--topic", action="append", metavar="topic", help="The topic whose consumer group "
      "information should be deleted or topic whose should be included in the reset offset "
      "process. In `reset-offsets` case, partitions can be specified using this format: "
      "`topic1:0,1,2`.")
    a("--all-topics", action="store_true", help="Consider all topics assigned to a group in "
      "the `reset-offsets` process.")
    a("--members", action="store_true", help="Describe members of the group.")
    a("--offsets", action="store_true", help="Describe the group and list all topic "
      "partitions in the group along with their offset lag. This is the default sub-action.")
    a("--state", nargs="?", const="", default=None, metavar="state",
      help="When specified with '--describe', includes the state of the group. When "
           "specified with '--list', it displays the state of all groups; it can also filter "
           "the listed groups by state (comma-separated).")
    a("--verbose", action="store_true", help="Provide additional information, if any, when "
      "describing the group.")
    a("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    a("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    a("--to-current", action="store_true", help="Reset offsets to current offset.")
    a("--to-offset", type=int, metavar="offset", help="Reset offsets to a specific offset.")
    a("--shift-by", type=int, metavar="number-of-offsets",
      help="Reset offsets shifting current offset by 'n', where 'n' can be positive or "
           "negative.")
    a("--to-datetime", metavar="datetime", help="Reset offsets to offset from datetime. "
      "Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    a("--by-duration", metavar="duration", help="Reset offsets to offset by duration from "
      "current timestamp. Format: 'PnDTnHnMnS'")
    a("--dry-run", action="store_true", help="Only show results without executing changes "
      "on Consumer Groups. Supported operations: reset-offsets.")
    a("--execute", action="store_true", help="Execute operation. Supported operations: "
      "reset-offsets.")
    a("--timeout", type=int, default=5000, metavar="timeout (ms)",
      help="The timeout that can be set for some use cases.")


class _Usage(Exception):
    pass


# Kafka's exception classes whose names are not their error's name in
# CamelCase (Errors.java).
_EXCEPTION_CLASSES = {"NON_EMPTY_GROUP": "GroupNotEmptyException",
                      "UNKNOWN_SERVER_ERROR": "UnknownServerException"}


def _describe_error(exc):
    """``exc`` as Java's Throwable.toString() of Kafka's exception for its
    error code (the tool prints that), else as kchannel words it."""
    if isinstance(exc, KafkaError) and exc.name:
        cls = _EXCEPTION_CLASSES.get(exc.name) or "".join(
            w.capitalize() for w in exc.name.split("_")) + "Exception"
        text = exc.message or ""
        return f"org.apache.kafka.common.errors.{cls}" + (f": {text}" if text else "")
    return str(exc)


def _error(msg):
    # Kafka's ConsumerGroupCommand.printError: on stdout.
    print(f"\nError: {msg}")


def run(args):
    try:
        return _run(args)
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (KChannelError, OSError, ValueError) as exc:
        _error(f"Executing consumer group command failed due to {_describe_error(exc)}")
        return 1


def _run(args):
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise _Usage("Command must include exactly one action: --list, --describe, --delete, "
                     "--reset-offsets, --delete-offsets")
    if not args.bootstrap_server:
        raise _Usage("Missing required argument \"[bootstrap-server]\"")
    action = actions[0]
    if action != "list" and not args.group and not args.all_groups:
        raise _Usage(f"Option [{action.replace('_', '-')}] takes one of these options: "
                     "[all-groups], [group]")
    if args.group and args.all_groups:
        raise _Usage("Option [all-groups] is not valid with [group]")
    if action == "reset_offsets":
        scenarios = [s for s in ("to_earliest", "to_latest", "to_current")
                     if getattr(args, s)] + \
            [s for s in ("to_offset", "shift_by", "to_datetime", "by_duration")
             if getattr(args, s) is not None]
        if len(scenarios) != 1:
            raise _Usage("Option [reset-offsets] takes exactly one of these options: "
                         "[to-offset], [to-earliest], [to-latest], [to-current], [shift-by], "
                         "[to-datetime], [by-duration]")
        if not args.topic and not args.all_topics:
            raise _Usage("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.dry_run and args.execute:
            raise _Usage("Option [reset-offsets] only accepts one of [execute], [dry-run]")
        if not args.dry_run and not args.execute:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "In a future major release, the default behavior of this command will be "
                  "to prompt the user before executing the reset rather than doing a dry run. "
                  "You should add the --dry-run option explicitly if you are scripting this "
                  "command and want to keep the current default behavior without prompting.",
                  file=sys.stderr)
    if action == "delete_offsets" and (not args.topic or args.all_groups or
                                       len(args.group or ()) != 1):
        raise _Usage("Option [delete-offsets] takes the options [group] (one) and [topic]")
    configs = dict(load_properties(args.command_config)) if args.command_config else {}
    configs["bootstrap.servers"] = args.bootstrap_server
    configs.setdefault("request.timeout.ms", str(max(args.timeout, 1)))
    with Admin(configs) as admin:
        return globals()[f"_{action}"](admin, args)


def _group_ids(admin, args):
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    return list(args.group)


# -- list --------------------------------------------------------------------
def _list(admin, args):
    if args.state is None:
        for g in admin.list_consumer_groups():
            print(g.group_id)
        return 0
    states = [s.strip() for s in args.state.split(",") if s.strip()]
    by_lower = {s.lower(): s for s in _GROUP_STATES}
    bad = [s for s in states if s.lower() not in by_lower]
    if bad:
        raise _Usage(f"Invalid state list '{args.state}'. Valid states are: "
                     + ", ".join(_GROUP_STATES))
    groups = admin.list_consumer_groups([by_lower[s.lower()] for s in states])
    width = max([15] + [len(g.group_id) for g in groups]) + 10
    print(f"{'GROUP':<{width}} {'STATE':<20}")
    for g in groups:
        print(f"{g.group_id:<{width}} {(g.state or 'Unknown'):<20}")
    return 0


# -- describe ----------------------------------------------------------------
def _should_print(group, state, rows):
    """Kafka's shouldPrintMemberState."""
    if rows is None:
        _error(f"The consumer group '{group}' does not exist.")
        return False
    if state == "Dead":
        _error(f"Consumer group '{group}' does not exist.")
    elif state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return state != "Dead" and rows > 0


def _describe(admin, args):
    groups = admin.describe_consumer_groups(_group_ids(admin, args))
    if args.members and not args.offsets:
        return _print_members(groups)
    if args.state is not None and not args.offsets:
        return _print_states(groups)
    return _print_offsets(admin, groups)


def _offset_rows(admin, desc):
    committed = admin.list_consumer_group_offsets(desc.group_id)
    rows, assigned = [], set()
    members = sorted((m for m in desc.members if m.assignment),
                     key=lambda m: -len(m.assignment))
    for m in members:
        assigned.update(m.assignment)
        rows.extend(_partition_rows(admin, desc.group_id, m.assignment, committed,
                                    m.consumer_id, m.host, m.client_id))
    rest = [tp for tp in committed if tp not in assigned]
    if rest:
        rows.extend(_partition_rows(admin, desc.group_id, rest, committed,
                                    MISSING, MISSING, MISSING))
    return rows


def _partition_rows(admin, group, partitions, committed, consumer_id, host, client_id):
    partitions = sorted(set(partitions))
    ends = {}
    try:
        ends = {tp: r.offset for tp, r in admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions}).items()}
    except KafkaError:
        # A topic deleted since: its rows show "-" as Kafka's Unknown offsets.
        ends = {}
    out = []
    for tp in partitions:
        offset = committed[tp].offset if tp in committed else None
        end = ends.get(tp)
        lag = end - offset if offset is not None and offset != -1 and end is not None \
            else None
        out.append([group, tp.topic, str(tp.partition), _s(offset), _s(end), _s(lag),
                    consumer_id, host, client_id])
    return out


def _s(value):
    return MISSING if value is None else str(value)


def _print_offsets(admin, groups):
    for gid in sorted(groups):
        desc = groups[gid]
        rows = _offset_rows(admin, desc) if desc.state != "Dead" else []
        if not _should_print(gid, desc.state, len(rows)):
            continue
        g = max([15] + [len(r[0]) for r in rows])
        t = max([15] + [len(r[1]) for r in rows])
        c = max([15] + [len(r[6]) for r in rows])
        h = max([15] + [len(r[7]) for r in rows])

        def line(r):
            return (f"\n{r[0]:<{g}} {r[1]:<{t}} {r[2]:<10} {r[3]:<15} {r[4]:<15} {r[5]:<15} "
                    f"{r[6]:<{c}} {r[7]:<{h}} {r[8]}")
        sys.stdout.write(line(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                               "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]))
        for r in rows:
            sys.stdout.write(line(r))
        print()
    return 0


def _print_members(groups):
    for gid in sorted(groups):
        desc = groups[gid]
        members = desc.members
        g, c, i, h, cl = 15, 15, 17, 15, 15
        with_instance = False
        if _should_print(gid, desc.state, len(members)):
            for m in members:
                g = max(g, len(gid))
                c = max(c, len(m.consumer_id))
                i = max(i, len(m.group_instance_id or ""))
                h = max(h, len(m.host))
                cl = max(cl, len(m.client_id))
                with_instance = with_instance or bool(m.group_instance_id)

        def line(values):
            if with_instance:
                return (f"{values[0]:<{g}} {values[1]:<{c}} {values[2]:<{i}} {values[3]:<{h}} "
                        f"{values[4]:<{cl}} {values[5]:<15} ")
            return (f"{values[0]:<{g}} {values[1]:<{c}} {values[3]:<{h}} {values[4]:<{cl}} "
                    f"{values[5]:<15} ")
        sys.stdout.write("\n" + line(["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST",
                                      "CLIENT-ID", "#PARTITIONS"]))
        print()
        for m in members:
            sys.stdout.write(line([gid, m.consumer_id, m.group_instance_id or "", m.host,
                                   m.client_id, str(len(m.assignment))]))
            print()
    return 0


def _print_states(groups):
    for gid in sorted(groups):
        desc = groups[gid]
        if not _should_print(gid, desc.state, 1):
            continue
        co = desc.coordinator
        coordinator = f"{co.host}:{co.port}  ({co.id})"
        cw = max(25, len(coordinator))
        gw = max(15, len(gid))
        strategy = desc.partition_assignor or MISSING

        def line(r):
            return f"\n{r[0]:<{gw}} {r[1]:<{cw}} {r[2]:<20} {r[3]:<20} {r[4]}"
        sys.stdout.write(line(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                               "#MEMBERS"]))
        sys.stdout.write(line([gid, coordinator, strategy, desc.state,
                               str(len(desc.members))]))
        print()
    return 0


# -- reset-offsets -----------------------------------------------------------
def _partitions_to_reset(admin, args, group):
    if args.all_topics:
        return list(admin.list_consumer_group_offsets(group))
    out, whole = [], []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if sep:
            out.extend(TopicPartition(topic, int(p)) for p in parts.split(",") if p.strip())
        else:
            whole.append(topic)
    if whole:
        for name, desc in admin.describe_topics(whole).items():
            out.extend(TopicPartition(name, p.partition) for p in desc.partitions)
    return out


def _prepare(admin, args, group, partitions):
    if not partitions:
        return {}
    earliest = {tp: r.offset for tp, r in admin.list_offsets(
        {tp: OffsetSpec.earliest() for tp in partitions}).items()}
    latest = {tp: r.offset for tp, r in admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in partitions}).items()}

    def clamp(tp, offset):
        # Kafka's checkOffsetRange: an offset outside the log moves to its edge.
        return min(max(offset, earliest[tp]), latest[tp])
    if args.to_earliest:
        return {tp: earliest[tp] for tp in partitions}
    if args.to_latest:
        return {tp: latest[tp] for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.to_datetime is not None or args.by_duration is not None:
        ts = parse_datetime(args.to_datetime) if args.to_datetime is not None \
            else int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        found = admin.list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp in partitions})
        out = {}
        for tp in partitions:
            offset = found[tp].offset
            if offset == -1:
                # Kafka's getLogTimestampOffsets: no record at or after the time.
                print(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. "
                      "Falling back to latest known offset.")
                offset = latest[tp]
            out[tp] = offset
        return out
    current = admin.list_consumer_group_offsets(group)
    missing = [tp for tp in partitions if tp not in current]
    if missing:
        tp = missing[0]
        raise ValueError(f"Cannot shift offset for partition {tp.topic}-{tp.partition} since "
                         "there is no current committed offset")
    if args.to_current:
        return {tp: current[tp].offset for tp in partitions}
    return {tp: clamp(tp, current[tp].offset + args.shift_by) for tp in partitions}


def _reset_offsets(admin, args):
    result, failed = {}, False
    for gid in _group_ids(admin, args):
        try:
            state = admin.describe_consumer_groups([gid])[gid].state
        except KafkaError as exc:
            # A group the coordinator does not know is reset as an inactive one.
            if exc.error_code != Errors.GROUP_ID_NOT_FOUND:
                raise
            state = "Dead"
        if state not in ("Empty", "Dead"):
            _error(f"Assignments can only be reset if the group '{gid}' is inactive, but the "
                   f"current state is {state}.")
            result[gid], failed = {}, True
            continue
        partitions = sorted(set(_partitions_to_reset(admin, args, gid)))
        offsets = _prepare(admin, args, gid, partitions)
        if args.execute:
            admin.alter_consumer_group_offsets(gid, offsets)
        result[gid] = offsets
    rows = [(gid, tp.topic, str(tp.partition), str(o)) for gid, offsets in result.items()
            for tp, o in sorted(offsets.items())]
    g = max([15] + [len(gid) for gid in result])
    t = max([15] + [len(r[1]) for r in rows])
    if result:
        sys.stdout.write(f"\n{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET")
    for r in rows:
        sys.stdout.write(f"\n{r[0]:<{g}} {r[1]:<{t}} {r[2]:<10} {r[3]}")
    print()
    return 1 if failed else 0


# -- delete ------------------------------------------------------------------
def _delete(admin, args):
    results = admin.delete_consumer_groups_results(_group_ids(admin, args))
    ok = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok)
              + ") was successful.")
        return 0
    _error("Deletion of some consumer groups failed:")
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {_describe_error(e)}")
    if ok:
        print("\nThese consumer groups were deleted successfully: "
              + ", ".join(f"'{g}'" for g in ok))
    return 1


def _delete_offsets(admin, args):
    group = args.group[0]
    partitions = sorted(set(_partitions_to_reset(admin, args, group)))
    try:
        admin.delete_consumer_group_offsets(group, partitions)
    except KafkaError as exc:
        if exc.error_code in (Errors.GROUP_SUBSCRIBED_TO_TOPIC,
                              Errors.UNKNOWN_TOPIC_OR_PARTITION):
            _error("Encountered some partition-level error, see the follow-up details.")
        else:
            _error(exc.message or str(exc))
        return 1
    print(f"Request succeeded for deleting offsets from group {group}.")
    t = max([15] + [len(tp.topic) for tp in partitions])
    sys.stdout.write(f"\n{'TOPIC':<{t}} {'PARTITION':<10} {'STATUS':<15}")
    for tp in partitions:
        sys.stdout.write(f"\n{tp.topic:<{t}} {str(tp.partition):<10} {'Successful':<15}")
    print()
    return 0


# -- time arguments (Kafka's Utils.getDateTime and java.time.Duration.parse) --
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?")
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.I)


def parse_datetime(text):
    """``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``, ``+01``,
    ``+0100``, ``+01:00``; none is UTC, as Kafka's tool) -> epoch ms."""
    if "T" not in text:
        raise ValueError(f"Error parsing timestamp. It does not contain a 'T' according to "
                         f"ISO8601 format ({text}).")
    m = _DATETIME.fullmatch(text.strip())
    if not m:
        raise ValueError(f'Unparseable date: "{text}"')
    y, mo, d, h, mi, sec, ms, zone = m.groups()
    tz = datetime.timezone.utc
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        tz = datetime.timezone(sign * datetime.timedelta(hours=int(digits[:2]),
                                                         minutes=int(digits[2:] or 0)))
    when = datetime.datetime(int(y), int(mo), int(d), int(h), int(mi), int(sec),
                             int(ms) * 1000, tzinfo=tz)
    return int(when.timestamp() * 1000)


def parse_duration_ms(text):
    """ISO-8601 ``PnDTnHnMnS`` (java.time.Duration.parse) -> ms."""
    m = _DURATION.fullmatch(text.strip())
    if not m or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(f"Text cannot be parsed to a Duration: {text}")
    neg, days, _, hours, minutes, seconds, frac = m.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 \
        + int(seconds or 0) * 1000
    if frac:
        part = int((frac + "000")[:3])
        ms += -part if (seconds or "").startswith("-") else part
    return -ms if neg == "-" else ms
