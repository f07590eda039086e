"""ListPartitionReassignments (API key 46): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ListPartitionReassignmentsRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=46,
    type='request',
    fields=[
        Field('TimeoutMs', 'int32', '0+', default=60000),
        Field('Topics', '[]ListPartitionReassignmentsTopics', '0+', nullable_versions='0+', default=None, fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('PartitionIndexes', '[]int32', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'ListPartitionReassignmentsResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=46,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Topics', '[]OngoingTopicReassignment', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]OngoingPartitionReassignment', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('Replicas', '[]int32', '0+', entity_type='brokerId'),
                Field('AddingReplicas', '[]int32', '0+', entity_type='brokerId'),
                Field('RemovingReplicas', '[]int32', '0+', entity_type='brokerId'),
            ]),
        ]),
    ],
)

API = Api(46, 'ListPartitionReassignments', REQUEST, RESPONSE)
