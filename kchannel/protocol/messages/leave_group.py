"""LeaveGroup (API key 13): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'LeaveGroupRequest',
    valid_versions='0-5',
    flexible_versions='4+',
    api_key=13,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('MemberId', 'string', '0-2'),
        Field('Members', '[]MemberIdentity', '3+', fields=[
            Field('MemberId', 'string', '3+'),
            Field('GroupInstanceId', 'string', '3+', nullable_versions='3+', default=None),
            Field('Reason', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'LeaveGroupResponse',
    valid_versions='0-5',
    flexible_versions='4+',
    api_key=13,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
        Field('Members', '[]MemberResponse', '3+', fields=[
            Field('MemberId', 'string', '3+'),
            Field('GroupInstanceId', 'string', '3+', nullable_versions='3+'),
            Field('ErrorCode', 'int16', '3+'),
        ]),
    ],
)

API = Api(13, 'LeaveGroup', REQUEST, RESPONSE)
