"""DescribeAcls (API key 29): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeAclsRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=29,
    type='request',
    fields=[
        Field('ResourceTypeFilter', 'int8', '0+'),
        Field('ResourceNameFilter', 'string', '0+', nullable_versions='0+'),
        Field('PatternTypeFilter', 'int8', '1+', default=3),
        Field('PrincipalFilter', 'string', '0+', nullable_versions='0+'),
        Field('HostFilter', 'string', '0+', nullable_versions='0+'),
        Field('Operation', 'int8', '0+'),
        Field('PermissionType', 'int8', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'DescribeAclsResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=29,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Resources', '[]DescribeAclsResource', '0+', fields=[
            Field('ResourceType', 'int8', '0+'),
            Field('ResourceName', 'string', '0+'),
            Field('PatternType', 'int8', '1+', default=3),
            Field('Acls', '[]AclDescription', '0+', fields=[
                Field('Principal', 'string', '0+'),
                Field('Host', 'string', '0+'),
                Field('Operation', 'int8', '0+'),
                Field('PermissionType', 'int8', '0+'),
            ]),
        ]),
    ],
)

API = Api(29, 'DescribeAcls', REQUEST, RESPONSE)
