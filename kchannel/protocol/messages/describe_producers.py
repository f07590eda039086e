"""DescribeProducers (API key 61): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeProducersRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=61,
    type='request',
    fields=[
        Field('Topics', '[]TopicRequest', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('PartitionIndexes', '[]int32', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DescribeProducersResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=61,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Topics', '[]TopicResponse', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]PartitionResponse', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('ErrorMessage', 'string', '0+', nullable_versions='0+', default=None),
                Field('ActiveProducers', '[]ProducerState', '0+', fields=[
                    Field('ProducerId', 'int64', '0+', entity_type='producerId'),
                    Field('ProducerEpoch', 'int32', '0+'),
                    Field('LastSequence', 'int32', '0+', default=-1),
                    Field('LastTimestamp', 'int64', '0+', default=-1),
                    Field('CoordinatorEpoch', 'int32', '0+'),
                    Field('CurrentTxnStartOffset', 'int64', '0+', default=-1),
                ]),
            ]),
        ]),
    ],
)

API = Api(61, 'DescribeProducers', REQUEST, RESPONSE)
