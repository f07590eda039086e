"""DescribeDelegationToken (API key 41): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeDelegationTokenRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=41,
    type='request',
    fields=[
        Field('Owners', '[]DescribeDelegationTokenOwner', '0+', nullable_versions='0+', fields=[
            Field('PrincipalType', 'string', '0+'),
            Field('PrincipalName', 'string', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DescribeDelegationTokenResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=41,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('Tokens', '[]DescribedDelegationToken', '0+', fields=[
            Field('PrincipalType', 'string', '0+'),
            Field('PrincipalName', 'string', '0+'),
            Field('TokenRequesterPrincipalType', 'string', '3+'),
            Field('TokenRequesterPrincipalName', 'string', '3+'),
            Field('IssueTimestamp', 'int64', '0+'),
            Field('ExpiryTimestamp', 'int64', '0+'),
            Field('MaxTimestamp', 'int64', '0+'),
            Field('TokenId', 'string', '0+'),
            Field('Hmac', 'bytes', '0+'),
            Field('Renewers', '[]DescribedDelegationTokenRenewer', '0+', fields=[
                Field('PrincipalType', 'string', '0+'),
                Field('PrincipalName', 'string', '0+'),
            ]),
        ]),
        Field('ThrottleTimeMs', 'int32', '0+'),
    ],
)

API = Api(41, 'DescribeDelegationToken', REQUEST, RESPONSE)
