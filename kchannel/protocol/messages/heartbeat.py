"""Heartbeat (API key 12): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'HeartbeatRequest',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=12,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('GenerationId', 'int32', '0+'),
        Field('MemberId', 'string', '0+'),
        Field('GroupInstanceId', 'string', '3+', nullable_versions='3+', default=None),
    ],
)

RESPONSE = MessageSpec(
    'HeartbeatResponse',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=12,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
    ],
)

API = Api(12, 'Heartbeat', REQUEST, RESPONSE)
