"""AlterPartitionReassignments (API key 45): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AlterPartitionReassignmentsRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=45,
    type='request',
    fields=[
        Field('TimeoutMs', 'int32', '0+', default=60000),
        Field('Topics', '[]ReassignableTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]ReassignablePartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('Replicas', '[]int32', '0+', nullable_versions='0+', default=None, entity_type='brokerId'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'AlterPartitionReassignmentsResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=45,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Responses', '[]ReassignableTopicResponse', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]ReassignablePartitionResponse', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

API = Api(45, 'AlterPartitionReassignments', REQUEST, RESPONSE)
