"""EndTxn (API key 26): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'EndTxnRequest',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=26,
    type='request',
    fields=[
        Field('TransactionalId', 'string', '0+', entity_type='transactionalId'),
        Field('ProducerId', 'int64', '0+', entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '0+'),
        Field('Committed', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'EndTxnResponse',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=26,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ProducerId', 'int64', '5+', default=-1, ignorable=True, entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '5+', default=-1, ignorable=True),
    ],
)

API = Api(26, 'EndTxn', REQUEST, RESPONSE)
