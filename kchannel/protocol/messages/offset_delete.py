"""OffsetDelete (API key 47): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'OffsetDeleteRequest',
    valid_versions='0',
    flexible_versions='none',
    api_key=47,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('Topics', '[]OffsetDeleteRequestTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]OffsetDeleteRequestPartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'OffsetDeleteResponse',
    valid_versions='0',
    flexible_versions='none',
    api_key=47,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ThrottleTimeMs', 'int32', '0+', ignorable=True),
        Field('Topics', '[]OffsetDeleteResponseTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]OffsetDeleteResponsePartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+', map_key=True),
                Field('ErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(47, 'OffsetDelete', REQUEST, RESPONSE)
