"""AddPartitionsToTxn (API key 24): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AddPartitionsToTxnRequest',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=24,
    type='request',
    fields=[
        Field('Transactions', '[]AddPartitionsToTxnTransaction', '4+', fields=[
            Field('TransactionalId', 'string', '4+', entity_type='transactionalId', map_key=True),
            Field('ProducerId', 'int64', '4+', entity_type='producerId'),
            Field('ProducerEpoch', 'int16', '4+'),
            Field('VerifyOnly', 'bool', '4+', default=False),
            Field('Topics', '[]AddPartitionsToTxnTopic', '4+', fields=[
                Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
                Field('Partitions', '[]int32', '0+'),
            ]),
        ]),
        Field('V3AndBelowTransactionalId', 'string', '0-3', entity_type='transactionalId'),
        Field('V3AndBelowProducerId', 'int64', '0-3', entity_type='producerId'),
        Field('V3AndBelowProducerEpoch', 'int16', '0-3'),
        Field('V3AndBelowTopics', '[]AddPartitionsToTxnTopic', '0-3', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]int32', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'AddPartitionsToTxnResponse',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=24,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '4+', ignorable=True),
        Field('ResultsByTransaction', '[]AddPartitionsToTxnResult', '4+', fields=[
            Field('TransactionalId', 'string', '4+', entity_type='transactionalId', map_key=True),
            Field('TopicResults', '[]AddPartitionsToTxnTopicResult', '4+', fields=[
                Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
                Field('ResultsByPartition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=[
                    Field('PartitionIndex', 'int32', '0+', map_key=True),
                    Field('PartitionErrorCode', 'int16', '0+'),
                ]),
            ]),
        ]),
        Field('ResultsByTopicV3AndBelow', '[]AddPartitionsToTxnTopicResult', '0-3', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('ResultsByPartition', '[]AddPartitionsToTxnPartitionResult', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+', map_key=True),
                Field('PartitionErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(24, 'AddPartitionsToTxn', REQUEST, RESPONSE)
