"""The consumer group's embedded protocol, Kafka's ``ConsumerProtocol``:
the subscription and assignment a member puts in JoinGroup/SyncGroup,
versions 0-3 (its message schemas ConsumerProtocolSubscription and
ConsumerProtocolAssignment).  Read by the consumer's assignors and by the
Admin client's group descriptions."""
from kchannel.protocol.schema import Field, MessageSpec

__all__ = ["SUBSCRIPTION", "ASSIGNMENT"]

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
