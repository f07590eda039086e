"""ListGroups (API key 16): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ListGroupsRequest',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=16,
    type='request',
    fields=[
        Field('StatesFilter', '[]string', '4+'),
        Field('TypesFilter', '[]string', '5+'),
    ],
)

RESPONSE = MessageSpec(
    'ListGroupsResponse',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=16,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '0+'),
        Field('Groups', '[]ListedGroup', '0+', fields=[
            Field('GroupId', 'string', '0+', entity_type='groupId'),
            Field('ProtocolType', 'string', '0+'),
            Field('GroupState', 'string', '4+', ignorable=True),
            Field('GroupType', 'string', '5+', ignorable=True),
        ]),
    ],
)

API = Api(16, 'ListGroups', REQUEST, RESPONSE)
