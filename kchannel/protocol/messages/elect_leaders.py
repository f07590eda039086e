"""ElectLeaders (API key 43): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ElectLeadersRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=43,
    type='request',
    fields=[
        Field('ElectionType', 'int8', '1+'),
        Field('TopicPartitions', '[]TopicPartitions', '0+', nullable_versions='0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]int32', '0+'),
        ]),
        Field('TimeoutMs', 'int32', '0+', default=60000),
    ],
)

RESPONSE = MessageSpec(
    'ElectLeadersResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=43,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '1+'),
        Field('ReplicaElectionResults', '[]ReplicaElectionResult', '0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName'),
            Field('PartitionResult', '[]PartitionResult', '0+', fields=[
                Field('PartitionId', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

API = Api(43, 'ElectLeaders', REQUEST, RESPONSE)
