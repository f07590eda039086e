"""DescribeGroups (API key 15): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeGroupsRequest',
    valid_versions='0-5',
    flexible_versions='5+',
    api_key=15,
    type='request',
    fields=[
        Field('Groups', '[]string', '0+', entity_type='groupId'),
        Field('IncludeAuthorizedOperations', 'bool', '3+'),
    ],
)

RESPONSE = MessageSpec(
    'DescribeGroupsResponse',
    valid_versions='0-5',
    flexible_versions='5+',
    api_key=15,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('Groups', '[]DescribedGroup', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('GroupId', 'string', '0+', entity_type='groupId'),
            Field('GroupState', 'string', '0+'),
            Field('ProtocolType', 'string', '0+'),
            Field('ProtocolData', 'string', '0+'),
            Field('Members', '[]DescribedGroupMember', '0+', fields=[
                Field('MemberId', 'string', '0+'),
                Field('GroupInstanceId', 'string', '4+', nullable_versions='4+', default=None, ignorable=True),
                Field('ClientId', 'string', '0+'),
                Field('ClientHost', 'string', '0+'),
                Field('MemberMetadata', 'bytes', '0+'),
                Field('MemberAssignment', 'bytes', '0+'),
            ]),
            Field('AuthorizedOperations', 'int32', '3+', default=-2147483648),
        ]),
    ],
)

API = Api(15, 'DescribeGroups', REQUEST, RESPONSE)
