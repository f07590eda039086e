"""DescribeConfigs (API key 32): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeConfigsRequest',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=32,
    type='request',
    fields=[
        Field('Resources', '[]DescribeConfigsResource', '0+', fields=[
            Field('ResourceType', 'int8', '0+'),
            Field('ResourceName', 'string', '0+'),
            Field('ConfigurationKeys', '[]string', '0+', nullable_versions='0+'),
        ]),
        Field('IncludeSynonyms', 'bool', '1+', default=False),
        Field('IncludeDocumentation', 'bool', '3+', default=False),
    ],
)

RESPONSE = MessageSpec(
    'DescribeConfigsResponse',
    valid_versions='0-4',
    flexible_versions='4+',
    api_key=32,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]DescribeConfigsResult', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
            Field('ResourceType', 'int8', '0+'),
            Field('ResourceName', 'string', '0+'),
            Field('Configs', '[]DescribeConfigsResourceResult', '0+', fields=[
                Field('Name', 'string', '0+'),
                Field('Value', 'string', '0+', nullable_versions='0+'),
                Field('ReadOnly', 'bool', '0+'),
                Field('IsDefault', 'bool', '0'),
                Field('ConfigSource', 'int8', '1+', default=-1, ignorable=True),
                Field('IsSensitive', 'bool', '0+'),
                Field('Synonyms', '[]DescribeConfigsSynonym', '1+', ignorable=True, fields=[
                    Field('Name', 'string', '1+'),
                    Field('Value', 'string', '1+', nullable_versions='0+'),
                    Field('Source', 'int8', '1+'),
                ]),
                Field('ConfigType', 'int8', '3+', default=0, ignorable=True),
                Field('Documentation', 'string', '3+', nullable_versions='0+', ignorable=True),
            ]),
        ]),
    ],
)

API = Api(32, 'DescribeConfigs', REQUEST, RESPONSE)
