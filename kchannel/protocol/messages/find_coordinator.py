"""FindCoordinator (API key 10): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'FindCoordinatorRequest',
    valid_versions='0-6',
    flexible_versions='3+',
    api_key=10,
    type='request',
    fields=[
        Field('Key', 'string', '0-3'),
        Field('KeyType', 'int8', '1+', default=0),
        Field('CoordinatorKeys', '[]string', '4+'),
    ],
)

RESPONSE = MessageSpec(
    'FindCoordinatorResponse',
    valid_versions='0-6',
    flexible_versions='3+',
    api_key=10,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '0-3'),
        Field('ErrorMessage', 'string', '1-3', nullable_versions='1-3', ignorable=True),
        Field('NodeId', 'int32', '0-3', entity_type='brokerId'),
        Field('Host', 'string', '0-3'),
        Field('Port', 'int32', '0-3'),
        Field('Coordinators', '[]Coordinator', '4+', fields=[
            Field('Key', 'string', '4+'),
            Field('NodeId', 'int32', '4+', entity_type='brokerId'),
            Field('Host', 'string', '4+'),
            Field('Port', 'int32', '4+'),
            Field('ErrorCode', 'int16', '4+'),
            Field('ErrorMessage', 'string', '4+', nullable_versions='4+', ignorable=True),
        ]),
    ],
)

API = Api(10, 'FindCoordinator', REQUEST, RESPONSE)
