"""DescribeUserScramCredentials (API key 50): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeUserScramCredentialsRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=50,
    type='request',
    fields=[
        Field('Users', '[]UserName', '0+', nullable_versions='0+', fields=[
            Field('Name', 'string', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DescribeUserScramCredentialsResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=50,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Results', '[]DescribeUserScramCredentialsResult', '0+', fields=[
            Field('User', 'string', '0+'),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            Field('CredentialInfos', '[]CredentialInfo', '0+', fields=[
                Field('Mechanism', 'int8', '0+'),
                Field('Iterations', 'int32', '0+'),
            ]),
        ]),
    ],
)

API = Api(50, 'DescribeUserScramCredentials', REQUEST, RESPONSE)
