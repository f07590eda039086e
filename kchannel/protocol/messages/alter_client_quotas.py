"""AlterClientQuotas (API key 49): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AlterClientQuotasRequest',
    valid_versions='0-1',
    flexible_versions='1+',
    api_key=49,
    type='request',
    fields=[
        Field('Entries', '[]EntryData', '0+', fields=[
            Field('Entity', '[]EntityData', '0+', fields=[
                Field('EntityType', 'string', '0+'),
                Field('EntityName', 'string', '0+', nullable_versions='0+'),
            ]),
            Field('Ops', '[]OpData', '0+', fields=[
                Field('Key', 'string', '0+'),
                Field('Value', 'float64', '0+'),
                Field('Remove', 'bool', '0+'),
            ]),
        ]),
        Field('ValidateOnly', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'AlterClientQuotasResponse',
    valid_versions='0-1',
    flexible_versions='1+',
    api_key=49,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Entries', '[]EntryData', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            Field('Entity', '[]EntityData', '0+', fields=[
                Field('EntityType', 'string', '0+'),
                Field('EntityName', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

API = Api(49, 'AlterClientQuotas', REQUEST, RESPONSE)
