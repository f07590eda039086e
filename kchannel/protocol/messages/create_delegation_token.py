"""CreateDelegationToken (API key 38): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'CreateDelegationTokenRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=38,
    type='request',
    fields=[
        Field('OwnerPrincipalType', 'string', '3+', nullable_versions='3+'),
        Field('OwnerPrincipalName', 'string', '3+', nullable_versions='3+'),
        Field('Renewers', '[]CreatableRenewers', '0+', fields=[
            Field('PrincipalType', 'string', '0+'),
            Field('PrincipalName', 'string', '0+'),
        ]),
        Field('MaxLifetimeMs', 'int64', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'CreateDelegationTokenResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=38,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('PrincipalType', 'string', '0+'),
        Field('PrincipalName', 'string', '0+'),
        Field('TokenRequesterPrincipalType', 'string', '3+'),
        Field('TokenRequesterPrincipalName', 'string', '3+'),
        Field('IssueTimestampMs', 'int64', '0+'),
        Field('ExpiryTimestampMs', 'int64', '0+'),
        Field('MaxTimestampMs', 'int64', '0+'),
        Field('TokenId', 'string', '0+'),
        Field('Hmac', 'bytes', '0+'),
        Field('ThrottleTimeMs', 'int32', '0+'),
    ],
)

API = Api(38, 'CreateDelegationToken', REQUEST, RESPONSE)
