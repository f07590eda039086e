"""AlterUserScramCredentials (API key 51): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AlterUserScramCredentialsRequest',
    valid_versions='0',
    flexible_versions='0+',
    api_key=51,
    type='request',
    fields=[
        Field('Deletions', '[]ScramCredentialDeletion', '0+', fields=[
            Field('Name', 'string', '0+'),
            Field('Mechanism', 'int8', '0+'),
        ]),
        Field('Upsertions', '[]ScramCredentialUpsertion', '0+', fields=[
            Field('Name', 'string', '0+'),
            Field('Mechanism', 'int8', '0+'),
            Field('Iterations', 'int32', '0+'),
            Field('Salt', 'bytes', '0+'),
            Field('SaltedPassword', 'bytes', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'AlterUserScramCredentialsResponse',
    valid_versions='0',
    flexible_versions='0+',
    api_key=51,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]AlterUserScramCredentialsResult', '0+', fields=[
            Field('User', 'string', '0+'),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        ]),
    ],
)

API = Api(51, 'AlterUserScramCredentials', REQUEST, RESPONSE)
