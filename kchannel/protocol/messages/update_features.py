"""UpdateFeatures (API key 57): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'UpdateFeaturesRequest',
    valid_versions='0-2',
    flexible_versions='0+',
    api_key=57,
    type='request',
    fields=[
        Field('timeoutMs', 'int32', '0+', default=60000),
        Field('FeatureUpdates', '[]FeatureUpdateKey', '0+', fields=[
            Field('Feature', 'string', '0+', map_key=True),
            Field('MaxVersionLevel', 'int16', '0+'),
            Field('AllowDowngrade', 'bool', '0'),
            Field('UpgradeType', 'int8', '1+', default=1),
        ]),
        Field('ValidateOnly', 'bool', '1+', default=False),
    ],
)

RESPONSE = MessageSpec(
    'UpdateFeaturesResponse',
    valid_versions='0-2',
    flexible_versions='0+',
    api_key=57,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        Field('Results', '[]UpdatableFeatureResult', '0-1', ignorable=True, fields=[
            Field('Feature', 'string', '0+', map_key=True),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+'),
        ]),
    ],
)

API = Api(57, 'UpdateFeatures', REQUEST, RESPONSE)
