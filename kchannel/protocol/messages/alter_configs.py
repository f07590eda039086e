"""AlterConfigs (API key 33): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AlterConfigsRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=33,
    type='request',
    fields=[
        Field('Resources', '[]AlterConfigsResource', '0+', fields=[
            Field('ResourceType', 'int8', '0+', map_key=True),
            Field('ResourceName', 'string', '0+', map_key=True),
            Field('Configs', '[]AlterableConfig', '0+', fields=[
                Field('Name', 'string', '0+', map_key=True),
                Field('Value', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
        Field('ValidateOnly', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'AlterConfigsResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=33,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Responses', '[]AlterConfigsResourceResponse', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            Field('ResourceType', 'int8', '0+'),
            Field('ResourceName', 'string', '0+'),
        ]),
    ],
)

API = Api(33, 'AlterConfigs', REQUEST, RESPONSE)
