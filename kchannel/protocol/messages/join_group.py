"""JoinGroup (API key 11): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'JoinGroupRequest',
    valid_versions='0-9',
    flexible_versions='6+',
    api_key=11,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('SessionTimeoutMs', 'int32', '0+'),
        Field('RebalanceTimeoutMs', 'int32', '1+', default=-1, ignorable=True),
        Field('MemberId', 'string', '0+'),
        Field('GroupInstanceId', 'string', '5+', nullable_versions='5+', default=None),
        Field('ProtocolType', 'string', '0+'),
        Field('Protocols', '[]JoinGroupRequestProtocol', '0+', fields=[
            Field('Name', 'string', '0+', map_key=True),
            Field('Metadata', 'bytes', '0+'),
        ]),
        Field('Reason', 'string', '8+', nullable_versions='8+', default=None, ignorable=True),
    ],
)

RESPONSE = MessageSpec(
    'JoinGroupResponse',
    valid_versions='0-9',
    flexible_versions='6+',
    api_key=11,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '2+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
        Field('GenerationId', 'int32', '0+', default=-1),
        Field('ProtocolType', 'string', '7+', nullable_versions='7+', default=None, ignorable=True),
        Field('ProtocolName', 'string', '0+', nullable_versions='7+'),
        Field('Leader', 'string', '0+'),
        Field('SkipAssignment', 'bool', '9+', default=False),
        Field('MemberId', 'string', '0+'),
        Field('Members', '[]JoinGroupResponseMember', '0+', fields=[
            Field('MemberId', 'string', '0+'),
            Field('GroupInstanceId', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
            Field('Metadata', 'bytes', '0+'),
        ]),
    ],
)

API = Api(11, 'JoinGroup', REQUEST, RESPONSE)
