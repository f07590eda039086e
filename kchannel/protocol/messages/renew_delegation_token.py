"""RenewDelegationToken (API key 39): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'RenewDelegationTokenRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=39,
    type='request',
    fields=[
        Field('Hmac', 'bytes', '0+'),
        Field('RenewPeriodMs', 'int64', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'RenewDelegationTokenResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=39,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ExpiryTimestampMs', 'int64', '0+'),
        Field('ThrottleTimeMs', 'int32', '0+'),
    ],
)

API = Api(39, 'RenewDelegationToken', REQUEST, RESPONSE)
