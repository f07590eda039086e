"""DeleteGroups (API key 42): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DeleteGroupsRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=42,
    type='request',
    fields=[
        Field('GroupsNames', '[]string', '0+', entity_type='groupId'),
    ],
)

RESPONSE = MessageSpec(
    'DeleteGroupsResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=42,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]DeletableGroupResult', '0+', fields=[
            Field('GroupId', 'string', '0+', entity_type='groupId', map_key=True),
            Field('ErrorCode', 'int16', '0+'),
        ]),
    ],
)

API = Api(42, 'DeleteGroups', REQUEST, RESPONSE)
