"""ExpireDelegationToken (API key 40): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ExpireDelegationTokenRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=40,
    type='request',
    fields=[
        Field('Hmac', 'bytes', '0+'),
        Field('ExpiryTimePeriodMs', 'int64', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'ExpireDelegationTokenResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=40,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ExpiryTimestampMs', 'int64', '0+'),
        Field('ThrottleTimeMs', 'int32', '0+'),
    ],
)

API = Api(40, 'ExpireDelegationToken', REQUEST, RESPONSE)
