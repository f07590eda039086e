"""UnregisterBroker (API key 64): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'UnregisterBrokerRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=64,
    type='request',
    fields=[
        Field('BrokerId', 'int32', '0+', entity_type='brokerId'),
    ],
)

RESPONSE = MessageSpec(
    'UnregisterBrokerResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=64,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
    ],
)

API = Api(64, 'UnregisterBroker', REQUEST, RESPONSE)
