"""SaslHandshake (API key 17): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'SaslHandshakeRequest',
    valid_versions='0-1',
    flexible_versions='none',
    api_key=17,
    type='request',
    fields=[
        Field('Mechanism', 'string', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'SaslHandshakeResponse',
    valid_versions='0-1',
    flexible_versions='none',
    api_key=17,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('Mechanisms', '[]string', '0+'),
    ],
)

API = Api(17, 'SaslHandshake', REQUEST, RESPONSE)
