"""CreateAcls (API key 30): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'CreateAclsRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=30,
    type='request',
    fields=[
        Field('Creations', '[]AclCreation', '0+', fields=[
            Field('ResourceType', 'int8', '0+'),
            Field('ResourceName', 'string', '0+'),
            Field('ResourcePatternType', 'int8', '1+', default=3),
            Field('Principal', 'string', '0+'),
            Field('Host', 'string', '0+'),
            Field('Operation', 'int8', '0+'),
            Field('PermissionType', 'int8', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'CreateAclsResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=30,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]AclCreationResult', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        ]),
    ],
)

API = Api(30, 'CreateAcls', REQUEST, RESPONSE)
