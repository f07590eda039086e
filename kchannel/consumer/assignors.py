"""The consumer group's embedded protocol (Kafka's ``ConsumerProtocol``
subscription and assignment, versions 0-3) and the partition assignors
Kafka's ``RangeAssignor`` and ``RoundRobinAssignor`` (sans-I/O: member
subscriptions and partition counts in, assignments out)."""
import struct

from kchannel.errors import InvalidRequestError
from kchannel.metadata import TopicPartition
from kchannel.protocol.schema import Field, MessageSpec

__all__ = ["SUBSCRIPTION", "ASSIGNMENT", "encode_subscription", "decode_subscription",
           "encode_assignment", "decode_assignment", "RangeAssignor", "RoundRobinAssignor",
           "ASSIGNORS"]

SUBSCRIPTION = MessageSpec(
    'ConsumerProtocolSubscription',
    valid_versions='0-3',
    flexible_versions='none',
    type='data',
    fields=[
        Field('Topics', '[]string', '0+'),
        Field('UserData', 'bytes', '0+', nullable_versions='0+', default=None),
        Field('OwnedPartitions', '[]TopicPartition', '1+', ignorable=True, fields=[
            Field('Topic', 'string', '1+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]int32', '1+'),
        ]),
        Field('GenerationId', 'int32', '2+', default=-1, ignorable=True),
        Field('RackId', 'string', '3+', nullable_versions='3+', default=None, ignorable=True),
    ],
)

ASSIGNMENT = MessageSpec(
    'ConsumerProtocolAssignment',
    valid_versions='0-3',
    flexible_versions='none',
    type='data',
    fields=[
        Field('AssignedPartitions', '[]TopicPartition', '0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]int32', '0+'),
        ]),
        Field('UserData', 'bytes', '0+', nullable_versions='0+', default=None),
    ],
)

_VERSION = 3
_I16 = struct.Struct(">h")


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

    def assign(self, partitions_per_topic, subscriptions):
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

    def assign(self, partitions_per_topic, subscriptions):
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


def _member_key(member_id, subscriptions):
    # Kafka orders members by group.instance.id when they have one, else by
    # member id (static members keep their partitions across restarts).
    instance = subscriptions[member_id][1]
    return (0, instance) if instance is not None else (1, member_id)


ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
}
