"""DescribeClientQuotas (API key 48): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeClientQuotasRequest',
    valid_versions='0-1',
    flexible_versions='1+',
    api_key=48,
    type='request',
    fields=[
        Field('Components', '[]ComponentData', '0+', fields=[
            Field('EntityType', 'string', '0+'),
            Field('MatchType', 'int8', '0+'),
            Field('Match', 'string', '0+', nullable_versions='0+'),
        ]),
        Field('Strict', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'DescribeClientQuotasResponse',
    valid_versions='0-1',
    flexible_versions='1+',
    api_key=48,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Entries', '[]EntryData', '0+', nullable_versions='0+', fields=[
            Field('Entity', '[]EntityData', '0+', fields=[
                Field('EntityType', 'string', '0+'),
                Field('EntityName', 'string', '0+', nullable_versions='0+'),
            ]),
            Field('Values', '[]ValueData', '0+', fields=[
                Field('Key', 'string', '0+'),
                Field('Value', 'float64', '0+'),
            ]),
        ]),
    ],
)

API = Api(48, 'DescribeClientQuotas', REQUEST, RESPONSE)
