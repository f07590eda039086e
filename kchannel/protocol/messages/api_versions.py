"""ApiVersions (API key 18): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ApiVersionsRequest',
    valid_versions='0-4',
    flexible_versions='3+',
    api_key=18,
    type='request',
    fields=[
        Field('ClientSoftwareName', 'string', '3+', ignorable=True),
        Field('ClientSoftwareVersion', 'string', '3+', ignorable=True),
    ],
)

RESPONSE = MessageSpec(
    'ApiVersionsResponse',
    valid_versions='0-4',
    flexible_versions='3+',
    api_key=18,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ApiKeys', '[]ApiVersion', '0+', fields=[
            Field('ApiKey', 'int16', '0+', map_key=True),
            Field('MinVersion', 'int16', '0+'),
            Field('MaxVersion', 'int16', '0+'),
        ]),
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('SupportedFeatures', '[]SupportedFeatureKey', '3+', tag=0, tagged_versions='3+', ignorable=True, fields=[
            Field('Name', 'string', '3+', map_key=True),
            Field('MinVersion', 'int16', '3+'),
            Field('MaxVersion', 'int16', '3+'),
        ]),
        Field('FinalizedFeaturesEpoch', 'int64', '3+', tag=1, tagged_versions='3+', default=-1, ignorable=True),
        Field('FinalizedFeatures', '[]FinalizedFeatureKey', '3+', tag=2, tagged_versions='3+', ignorable=True, fields=[
            Field('Name', 'string', '3+', map_key=True),
            Field('MaxVersionLevel', 'int16', '3+'),
            Field('MinVersionLevel', 'int16', '3+'),
        ]),
        Field('ZkMigrationReady', 'bool', '3+', tag=3, tagged_versions='3+', default=False, ignorable=True),
    ],
)

API = Api(18, 'ApiVersions', REQUEST, RESPONSE)
