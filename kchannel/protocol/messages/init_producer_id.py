"""InitProducerId (API key 22): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'InitProducerIdRequest',
    valid_versions='0-5',
    flexible_versions='2+',
    api_key=22,
    type='request',
    fields=[
        Field('TransactionalId', 'string', '0+', nullable_versions='0+', entity_type='transactionalId'),
        Field('TransactionTimeoutMs', 'int32', '0+'),
        Field('ProducerId', 'int64', '3+', default=-1, entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '3+', default=-1),
    ],
)

RESPONSE = MessageSpec(
    'InitProducerIdResponse',
    valid_versions='0-5',
    flexible_versions='2+',
    api_key=22,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
        Field('ProducerId', 'int64', '0+', default=-1, entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '0+'),
    ],
)

API = Api(22, 'InitProducerId', REQUEST, RESPONSE)
