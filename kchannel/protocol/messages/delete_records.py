"""DeleteRecords (API key 21): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DeleteRecordsRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=21,
    type='request',
    fields=[
        Field('Topics', '[]DeleteRecordsTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]DeleteRecordsPartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('Offset', 'int64', '0+'),
            ]),
        ]),
        Field('TimeoutMs', 'int32', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'DeleteRecordsResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=21,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Topics', '[]DeleteRecordsTopicResult', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]DeleteRecordsPartitionResult', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+', map_key=True),
                Field('LowWatermark', 'int64', '0+'),
                Field('ErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(21, 'DeleteRecords', REQUEST, RESPONSE)
