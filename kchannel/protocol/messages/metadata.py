"""Metadata (API key 3): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'MetadataRequest',
    valid_versions='0-12',
    flexible_versions='9+',
    api_key=3,
    type='request',
    fields=[
        Field('Topics', '[]MetadataRequestTopic', '0+', nullable_versions='1+', fields=[
            Field('TopicId', 'uuid', '10+', ignorable=True),
            Field('Name', 'string', '0+', nullable_versions='10+', entity_type='topicName'),
        ]),
        Field('AllowAutoTopicCreation', 'bool', '4+', default=True),
        Field('IncludeClusterAuthorizedOperations', 'bool', '8-10'),
        Field('IncludeTopicAuthorizedOperations', 'bool', '8+'),
    ],
)

RESPONSE = MessageSpec(
    'MetadataResponse',
    valid_versions='0-12',
    flexible_versions='9+',
    api_key=3,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '3+', ignorable=True),
        Field('Brokers', '[]MetadataResponseBroker', '0+', fields=[
            Field('NodeId', 'int32', '0+', entity_type='brokerId', map_key=True),
            Field('Host', 'string', '0+'),
            Field('Port', 'int32', '0+'),
            Field('Rack', 'string', '1+', nullable_versions='1+', default=None, ignorable=True),
        ]),
        Field('ClusterId', 'string', '2+', nullable_versions='2+', default=None, ignorable=True),
        Field('ControllerId', 'int32', '1+', default=-1, ignorable=True, entity_type='brokerId'),
        Field('Topics', '[]MetadataResponseTopic', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('Name', 'string', '0+', nullable_versions='12+', entity_type='topicName', map_key=True),
            Field('TopicId', 'uuid', '10+', ignorable=True),
            Field('IsInternal', 'bool', '1+', default=False, ignorable=True),
            Field('Partitions', '[]MetadataResponsePartition', '0+', fields=[
                Field('ErrorCode', 'int16', '0+'),
                Field('PartitionIndex', 'int32', '0+'),
                Field('LeaderId', 'int32', '0+', entity_type='brokerId'),
                Field('LeaderEpoch', 'int32', '7+', default=-1, ignorable=True),
                Field('ReplicaNodes', '[]int32', '0+', entity_type='brokerId'),
                Field('IsrNodes', '[]int32', '0+', entity_type='brokerId'),
                Field('OfflineReplicas', '[]int32', '5+', ignorable=True, entity_type='brokerId'),
            ]),
            Field('TopicAuthorizedOperations', 'int32', '8+', default=-2147483648),
        ]),
        Field('ClusterAuthorizedOperations', 'int32', '8-10', default=-2147483648),
    ],
)

API = Api(3, 'Metadata', REQUEST, RESPONSE)
