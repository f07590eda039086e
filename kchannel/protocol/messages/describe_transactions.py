"""DescribeTransactions (API key 65): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeTransactionsRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=65,
    type='request',
    fields=[
        Field('TransactionalIds', '[]string', '0+', entity_type='transactionalId'),
    ],
)

RESPONSE = MessageSpec(
    'DescribeTransactionsResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=65,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('TransactionStates', '[]TransactionState', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('TransactionalId', 'string', '0+', entity_type='transactionalId'),
            Field('TransactionState', 'string', '0+'),
            Field('TransactionTimeoutMs', 'int32', '0+'),
            Field('TransactionStartTimeMs', 'int64', '0+'),
            Field('ProducerId', 'int64', '0+', entity_type='producerId'),
            Field('ProducerEpoch', 'int16', '0+'),
            Field('Topics', '[]TopicData', '0+', fields=[
                Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
                Field('Partitions', '[]int32', '0+'),
            ]),
        ]),
    ],
)

API = Api(65, 'DescribeTransactions', REQUEST, RESPONSE)
