"""ListTransactions (API key 66): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ListTransactionsRequest',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=66,
    type='request',
    fields=[
        Field('StateFilters', '[]string', '0+'),
        Field('ProducerIdFilters', '[]int64', '0+', entity_type='producerId'),
        Field('DurationFilter', 'int64', '1+', default=-1),
    ],
)

RESPONSE = MessageSpec(
    'ListTransactionsResponse',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=66,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('UnknownStateFilters', '[]string', '0+'),
        Field('TransactionStates', '[]TransactionState', '0+', fields=[
            Field('TransactionalId', 'string', '0+', entity_type='transactionalId'),
            Field('ProducerId', 'int64', '0+', entity_type='producerId'),
            Field('TransactionState', 'string', '0+'),
        ]),
    ],
)

API = Api(66, 'ListTransactions', REQUEST, RESPONSE)
