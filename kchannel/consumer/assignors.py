"""The consumer group's embedded protocol (Kafka's ``ConsumerProtocol``
subscription and assignment, versions 0-3) and the partition assignors
Kafka's ``RangeAssignor``, ``RoundRobinAssignor`` and
``CooperativeStickyAssignor`` (sans-I/O: member subscriptions, previously
owned partitions and partition counts in, assignments out)."""
import struct

from kchannel.errors import InvalidRequestError
from kchannel.client.metadata import TopicPartition
from kchannel.protocol.consumer_protocol import ASSIGNMENT, SUBSCRIPTION

__all__ = ["SUBSCRIPTION", "ASSIGNMENT", "encode_subscription", "decode_subscription",
           "encode_assignment", "decode_assignment", "RangeAssignor", "RoundRobinAssignor",
           "CooperativeStickyAssignor", "ASSIGNORS", "EAGER", "COOPERATIVE"]

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"

_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _group_tps(tps):
    by_topic = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def encode_subscription(topics, owned=(), generation_id=-1, rack_id=None, user_data=None):
    body = {"topics": sorted(topics), "user_data": user_data,
            "owned_partitions": _group_tps(owned), "generation_id": generation_id,
            "rack_id": rack_id}
    return _I16.pack(_VERSION) + SUBSCRIPTION.encode(body, _VERSION)


def _version(data, what):
    if data is None or len(data) < 2:
        raise InvalidRequestError(f"Consumer protocol {what} is too short")
    version = _I16.unpack_from(data)[0]
    if version < 0:
        raise InvalidRequestError(f"Unsupported consumer protocol {what} version {version}")
    # A newer version is read as the newest this side knows, as Kafka does.
    return min(version, _VERSION)


def decode_subscription(data):
    return SUBSCRIPTION.decode(data, _version(data, "subscription"), 2)


def encode_assignment(tps, user_data=None):
    return _I16.pack(_VERSION) + ASSIGNMENT.encode(
        {"assigned_partitions": _group_tps(tps), "user_data": user_data}, _VERSION)


def decode_assignment(data):
    if not data:
        return []
    body = ASSIGNMENT.decode(data, _version(data, "assignment"), 2)
    return [TopicPartition(t["topic"], p) for t in body["assigned_partitions"]
            for p in t["partitions"]]


class RangeAssignor:
    """Kafka's ``RangeAssignor``: per topic, consecutive ranges of
    partitions to the members subscribed to it, in member order."""

    name = "range"
    rebalance_protocols = (EAGER,)

    def subscription_user_data(self, generation):
        return None

    def on_assignment(self, generation):
        pass

    def assign(self, partitions_per_topic, subscriptions, member_data=None):
        """``partitions_per_topic``: {topic: count}; ``subscriptions``:
        {member_id: (topics, group_instance_id)} -> {member_id: [tp]}."""
        out = {m: [] for m in subscriptions}
        for topic in sorted(partitions_per_topic):
            count = partitions_per_topic[topic]
            members = sorted((m for m, (topics, _) in subscriptions.items() if topic in topics),
                             key=lambda m: _member_key(m, subscriptions))
            if not members:
                continue
            per, extra = divmod(count, len(members))
            for i, m in enumerate(members):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor:
    """Kafka's ``RoundRobinAssignor``: every partition of every subscribed
    topic, in topic/partition order, dealt to the members in turn (skipping
    members not subscribed to its topic)."""

    name = "roundrobin"
    rebalance_protocols = (EAGER,)

    def subscription_user_data(self, generation):
        return None

    def on_assignment(self, generation):
        pass

    def assign(self, partitions_per_topic, subscriptions, member_data=None):
        out = {m: [] for m in subscriptions}
        members = sorted(subscriptions, key=lambda m: _member_key(m, subscriptions))
        if not members:
            return out
        all_topics = set()
        for topics, _ in subscriptions.values():
            all_topics.update(topics)
        i = 0
        for topic in sorted(all_topics):
            for p in range(partitions_per_topic.get(topic, 0)):
                for _ in range(len(members)):
                    m = members[i % len(members)]
                    i += 1
                    if topic in subscriptions[m][0]:
                        out[m].append(TopicPartition(topic, p))
                        break
        return out


class CooperativeStickyAssignor:
    """Kafka's ``CooperativeStickyAssignor``: a balanced assignment (member
    partition counts differ by at most one where subscriptions allow) that
    keeps as many previously owned partitions as balance permits, then, for
    the incremental cooperative protocol, withholds every partition that
    would move from its owner to another member: the owner revokes it and
    rejoins, and the next rebalance assigns it (no partition is ever owned
    by two members).  Each member's subscription carries its owned
    partitions and generation; the generation is also in ``UserData`` as
    four bytes, as Java's assignor writes it for older leaders."""

    name = "cooperative-sticky"
    rebalance_protocols = (COOPERATIVE, EAGER)

    def __init__(self):
        self.generation = -1

    def subscription_user_data(self, generation):
        return _I32.pack(generation)

    def on_assignment(self, generation):
        self.generation = generation

    def assign(self, partitions_per_topic, subscriptions, member_data=None):
        """``member_data``: {member_id: (generation, [owned tp])} from the
        members' subscriptions (missing members own nothing)."""
        owned = _valid_ownership(member_data or {}, subscriptions, partitions_per_topic)
        result = sticky_assignment(partitions_per_topic, subscriptions, owned)
        # Partitions changing owner are left unassigned for this generation.
        owner = {tp: m for m, tps in owned.items() for tp in tps}
        return {m: [tp for tp in tps if owner.get(tp, m) == m] for m, tps in result.items()}


def subscription_version(data):
    return _version(data, "subscription")


def member_data_from_subscription(sub, version=_VERSION):
    """(generation, owned partitions) of a subscription decoded from
    ``version``: the generation field (v2+), else the generation in
    ``UserData`` (Java's ``CooperativeStickyAssignor`` before v2), else -1."""
    owned = [TopicPartition(t["topic"], p) for t in sub.get("owned_partitions") or ()
             for p in t["partitions"]]
    generation = sub.get("generation_id", -1)
    if version < 2:
        data = sub.get("user_data")
        generation = _I32.unpack_from(data)[0] if data and len(data) >= 4 else -1
    return generation, owned


def _valid_ownership(member_data, subscriptions, partitions_per_topic):
    """{member: set(tp)} of claims Kafka's sticky assignor honours: only
    members of the highest generation keep theirs; a partition claimed by two
    members of that generation is owned by neither; claims on partitions that
    no longer exist or that the member no longer subscribes to are dropped."""
    generations = [member_data[m][0] for m in subscriptions if m in member_data]
    top = max(generations, default=-1)
    owned = {m: set() for m in subscriptions}
    claimed_by = {}
    conflicts = set()
    for m in subscriptions:
        if m not in member_data:
            continue
        generation, tps = member_data[m]
        if generation != top:
            continue
        topics = subscriptions[m][0]
        for tp in tps:
            if tp.topic not in topics or not 0 <= tp.partition < partitions_per_topic.get(
                    tp.topic, 0):
                continue
            if tp in claimed_by and claimed_by[tp] != m:
                conflicts.add(tp)
            claimed_by[tp] = m
            owned[m].add(tp)
    for m in owned:
        owned[m] -= conflicts
    return owned


def sticky_assignment(partitions_per_topic, subscriptions, owned):
    """The sticky assignment before the cooperative adjustment: every owned
    partition stays, every other partition goes to the least loaded member
    subscribed to its topic, then partitions move from a member to one with
    at least two fewer (newly given ones first, then owned ones in
    topic/partition order) until no such move exists."""
    key = {m: _member_key(m, subscriptions) for m in subscriptions}
    members = sorted(subscriptions, key=key.get)
    out = {m: set(owned.get(m, ())) for m in members}
    taken = set()
    for tps in out.values():
        taken |= tps
    by_topic = {}
    for m in members:
        for t in subscriptions[m][0]:
            if partitions_per_topic.get(t):
                by_topic.setdefault(t, []).append(m)
    free = [TopicPartition(t, p) for t in sorted(by_topic)
            for p in range(partitions_per_topic[t]) if TopicPartition(t, p) not in taken]
    # Partitions with fewer candidates first, so they find room.
    free.sort(key=lambda tp: (len(by_topic[tp.topic]), tp))
    for tp in free:
        m = min(by_topic[tp.topic], key=lambda m: (len(out[m]), key[m]))
        out[m].add(tp)
    moved = True
    while moved:
        moved = False
        for src in sorted(members, key=lambda m: (-len(out[m]), key[m])):
            # Give away what was not owned before, then the highest numbered.
            for tp in sorted(out[src], key=lambda tp: (tp in owned.get(src, ()), tp)):
                candidates = [m for m in by_topic[tp.topic]
                              if len(out[m]) + 1 < len(out[src])]
                if candidates:
                    dst = min(candidates, key=lambda m: (len(out[m]), key[m]))
                    out[src].discard(tp)
                    out[dst].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: sorted(out[m]) for m in members}


def _member_key(member_id, subscriptions):
    # Kafka orders members by group.instance.id when they have one, else by
    # member id (static members keep their partitions across restarts).
    instance = subscriptions[member_id][1]
    return (0, instance) if instance is not None else (1, member_id)


ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor,
    # The protocol names, as librdkafka spells partition.assignment.strategy.
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
