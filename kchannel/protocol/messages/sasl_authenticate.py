"""SaslAuthenticate (API key 36): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'SaslAuthenticateRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=36,
    type='request',
    fields=[
        Field('AuthBytes', 'bytes', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'SaslAuthenticateResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=36,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('AuthBytes', 'bytes', '0+'),
        Field('SessionLifetimeMs', 'int64', '1+', default=0, ignorable=True),
    ],
)

API = Api(36, 'SaslAuthenticate', REQUEST, RESPONSE)
