"""AddOffsetsToTxn (API key 25): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AddOffsetsToTxnRequest',
    valid_versions='0-4',
    flexible_versions='3+',
    api_key=25,
    type='request',
    fields=[
        Field('TransactionalId', 'string', '0+', entity_type='transactionalId'),
        Field('ProducerId', 'int64', '0+', entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '0+'),
        Field('GroupId', 'string', '0+', entity_type='groupId'),
    ],
)

RESPONSE = MessageSpec(
    'AddOffsetsToTxnResponse',
    valid_versions='0-4',
    flexible_versions='3+',
    api_key=25,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
    ],
)

API = Api(25, 'AddOffsetsToTxn', REQUEST, RESPONSE)
