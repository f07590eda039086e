"""ListOffsets (API key 2): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ListOffsetsRequest',
    valid_versions='0-10',
    flexible_versions='6+',
    api_key=2,
    type='request',
    fields=[
        Field('ReplicaId', 'int32', '0+', entity_type='brokerId'),
        Field('IsolationLevel', 'int8', '2+'),
        Field('Topics', '[]ListOffsetsTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]ListOffsetsPartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('CurrentLeaderEpoch', 'int32', '4+', default=-1, ignorable=True),
                Field('Timestamp', 'int64', '0+'),
                Field('MaxNumOffsets', 'int32', '0', default=1),
            ]),
        ]),
        Field('TimeoutMs', 'int32', '10+', ignorable=True),
    ],
)

RESPONSE = MessageSpec(
    'ListOffsetsResponse',
    valid_versions='0-10',
    flexible_versions='6+',
    api_key=2,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '2+', ignorable=True),
        Field('Topics', '[]ListOffsetsTopicResponse', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]ListOffsetsPartitionResponse', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('OldStyleOffsets', '[]int64', '0'),
                Field('Timestamp', 'int64', '1+', default=-1),
                Field('Offset', 'int64', '1+', default=-1),
                Field('LeaderEpoch', 'int32', '4+', default=-1),
            ]),
        ]),
    ],
)

API = Api(2, 'ListOffsets', REQUEST, RESPONSE)
