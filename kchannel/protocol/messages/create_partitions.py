"""CreatePartitions (API key 37): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'CreatePartitionsRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=37,
    type='request',
    fields=[
        Field('Topics', '[]CreatePartitionsTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Count', 'int32', '0+'),
            Field('Assignments', '[]CreatePartitionsAssignment', '0+', nullable_versions='0+', fields=[
                Field('BrokerIds', '[]int32', '0+', entity_type='brokerId'),
            ]),
        ]),
        Field('TimeoutMs', 'int32', '0+'),
        Field('ValidateOnly', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'CreatePartitionsResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=37,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]CreatePartitionsTopicResult', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+', default=None),
        ]),
    ],
)

API = Api(37, 'CreatePartitions', REQUEST, RESPONSE)
