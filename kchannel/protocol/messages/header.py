"""Request and response header schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Field, MessageSpec

REQUEST_HEADER = MessageSpec(
    'RequestHeader',
    valid_versions='0-2',
    flexible_versions='2+',
    type='header',
    fields=[
        Field('RequestApiKey', 'int16', '0+'),
        Field('RequestApiVersion', 'int16', '0+'),
        Field('CorrelationId', 'int32', '0+'),
        Field('ClientId', 'string', '1+', nullable_versions='1+', ignorable=True, flexible_versions='none'),
    ],
)

RESPONSE_HEADER = MessageSpec(
    'ResponseHeader',
    valid_versions='0-1',
    flexible_versions='1+',
    type='header',
    fields=[
        Field('CorrelationId', 'int32', '0+'),
    ],
)
