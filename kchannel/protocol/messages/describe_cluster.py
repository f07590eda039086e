"""DescribeCluster (API key 60): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeClusterRequest',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=60,
    type='request',
    fields=[
        Field('IncludeClusterAuthorizedOperations', 'bool', '0+'),
        Field('EndpointType', 'int8', '1+', default=1),
    ],
)

RESPONSE = MessageSpec(
    'DescribeClusterResponse',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=60,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+', default=None),
        Field('EndpointType', 'int8', '1+', default=1),
        Field('ClusterId', 'string', '0+'),
        Field('ControllerId', 'int32', '0+', default=-1, entity_type='brokerId'),
        Field('Brokers', '[]DescribeClusterBroker', '0+', fields=[
            Field('BrokerId', 'int32', '0+', entity_type='brokerId', map_key=True),
            Field('Host', 'string', '0+'),
            Field('Port', 'int32', '0+'),
            Field('Rack', 'string', '0+', nullable_versions='0+', default=None),
        ]),
        Field('ClusterAuthorizedOperations', 'int32', '0+', default=-2147483648),
    ],
)

API = Api(60, 'DescribeCluster', REQUEST, RESPONSE)
