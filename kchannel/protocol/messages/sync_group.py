"""SyncGroup (API key 14): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'SyncGroupRequest',
    valid_versions='0-5',
    flexible_versions='4+',
    api_key=14,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('GenerationId', 'int32', '0+'),
        Field('MemberId', 'string', '0+'),
        Field('GroupInstanceId', 'string', '3+', nullable_versions='3+', default=None),
        Field('ProtocolType', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        Field('ProtocolName', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        Field('Assignments', '[]SyncGroupRequestAssignment', '0+', fields=[
            Field('MemberId', 'string', '0+'),
            Field('Assignment', 'bytes', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'SyncGroupResponse',
    valid_versions='0-5',
    flexible_versions='4+',
    api_key=14,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
        Field('ProtocolType', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        Field('ProtocolName', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        Field('Assignment', 'bytes', '0+'),
    ],
)

API = Api(14, 'SyncGroup', REQUEST, RESPONSE)
