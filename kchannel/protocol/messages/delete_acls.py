"""DeleteAcls (API key 31): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DeleteAclsRequest',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=31,
    type='request',
    fields=[
        Field('Filters', '[]DeleteAclsFilter', '0+', fields=[
            Field('ResourceTypeFilter', 'int8', '0+'),
            Field('ResourceNameFilter', 'string', '0+', nullable_versions='0+'),
            Field('PatternTypeFilter', 'int8', '1+', default=3),
            Field('PrincipalFilter', 'string', '0+', nullable_versions='0+'),
            Field('HostFilter', 'string', '0+', nullable_versions='0+'),
            Field('Operation', 'int8', '0+'),
            Field('PermissionType', 'int8', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DeleteAclsResponse',
    valid_versions='0-3',
    flexible_versions='2+',
    api_key=31,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('FilterResults', '[]DeleteAclsFilterResult', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            Field('MatchingAcls', '[]DeleteAclsMatchingAcl', '0+', fields=[
                Field('ErrorCode', 'int16', '0+'),
                Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
                Field('ResourceType', 'int8', '0+'),
                Field('ResourceName', 'string', '0+'),
                Field('PatternType', 'int8', '1+', default=3),
                Field('Principal', 'string', '0+'),
                Field('Host', 'string', '0+'),
                Field('Operation', 'int8', '0+'),
                Field('PermissionType', 'int8', '0+'),
            ]),
        ]),
    ],
)

API = Api(31, 'DeleteAcls', REQUEST, RESPONSE)
