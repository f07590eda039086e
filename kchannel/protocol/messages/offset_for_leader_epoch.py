"""OffsetForLeaderEpoch (API key 23): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'OffsetForLeaderEpochRequest',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=23,
    type='request',
    fields=[
        Field('ReplicaId', 'int32', '3+', default=-2, ignorable=True, entity_type='brokerId'),
        Field('Topics', '[]OffsetForLeaderTopic', '0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]OffsetForLeaderPartition', '0+', fields=[
                Field('Partition', 'int32', '0+'),
                Field('CurrentLeaderEpoch', 'int32', '2+', default=-1, ignorable=True),
                Field('LeaderEpoch', 'int32', '0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'OffsetForLeaderEpochResponse',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=23,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '2+', ignorable=True),
        Field('Topics', '[]OffsetForLeaderTopicResult', '0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]EpochEndOffset', '0+', fields=[
                Field('ErrorCode', 'int16', '0+'),
                Field('Partition', 'int32', '0+'),
                Field('LeaderEpoch', 'int32', '1+', default=-1, ignorable=True),
                Field('EndOffset', 'int64', '0+', default=-1),
            ]),
        ]),
    ],
)

API = Api(23, 'OffsetForLeaderEpoch', REQUEST, RESPONSE)
