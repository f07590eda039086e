"""Fetch (API key 1): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'FetchRequest',
    valid_versions='0-17',
    flexible_versions='12+',
    api_key=1,
    type='request',
    fields=[
        Field('ClusterId', 'string', '12+', nullable_versions='12+', tag=0, default=None, ignorable=True),
        Field('ReplicaId', 'int32', '0-14', default=-1, entity_type='brokerId'),
        Field('ReplicaState', 'ReplicaState', '15+', tag=1, fields=[
            Field('ReplicaId', 'int32', '15+', default=-1, entity_type='brokerId'),
            Field('ReplicaEpoch', 'int64', '15+', default=-1),
        ]),
        Field('MaxWaitMs', 'int32', '0+'),
        Field('MinBytes', 'int32', '0+'),
        Field('MaxBytes', 'int32', '3+', default=2147483647, ignorable=True),
        Field('IsolationLevel', 'int8', '4+', default=0, ignorable=True),
        Field('SessionId', 'int32', '7+', default=0, ignorable=True),
        Field('SessionEpoch', 'int32', '7+', default=-1, ignorable=True),
        Field('Topics', '[]FetchTopic', '0+', fields=[
            Field('Topic', 'string', '0-12', ignorable=True, entity_type='topicName'),
            Field('TopicId', 'uuid', '13+', ignorable=True),
            Field('Partitions', '[]FetchPartition', '0+', fields=[
                Field('Partition', 'int32', '0+'),
                Field('CurrentLeaderEpoch', 'int32', '9+', default=-1, ignorable=True),
                Field('FetchOffset', 'int64', '0+'),
                Field('LastFetchedEpoch', 'int32', '12+', default=-1),
                Field('LogStartOffset', 'int64', '5+', default=-1, ignorable=True),
                Field('PartitionMaxBytes', 'int32', '0+'),
                Field('ReplicaDirectoryId', 'uuid', '17+', tag=0, ignorable=True),
            ]),
        ]),
        Field('ForgottenTopicsData', '[]ForgottenTopic', '7+', fields=[
            Field('Topic', 'string', '7-12', ignorable=True, entity_type='topicName'),
            Field('TopicId', 'uuid', '13+', ignorable=True),
            Field('Partitions', '[]int32', '7+'),
        ]),
        Field('RackId', 'string', '11+', default='', ignorable=True),
    ],
)

RESPONSE = MessageSpec(
    'FetchResponse',
    valid_versions='0-17',
    flexible_versions='12+',
    api_key=1,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('ErrorCode', 'int16', '7+', ignorable=True),
        Field('SessionId', 'int32', '7+', default=0),
        Field('Responses', '[]FetchableTopicResponse', '0+', fields=[
            Field('Topic', 'string', '0-12', ignorable=True, entity_type='topicName'),
            Field('TopicId', 'uuid', '13+', ignorable=True),
            Field('Partitions', '[]PartitionData', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('HighWatermark', 'int64', '0+'),
                Field('LastStableOffset', 'int64', '4+', default=-1, ignorable=True),
                Field('LogStartOffset', 'int64', '5+', default=-1, ignorable=True),
                Field('DivergingEpoch', 'EpochEndOffset', '12+', tag=0, fields=[
                    Field('Epoch', 'int32', '12+', default=-1),
                    Field('EndOffset', 'int64', '12+', default=-1),
                ]),
                Field('CurrentLeader', 'LeaderIdAndEpoch', '12+', tag=1, fields=[
                    Field('LeaderId', 'int32', '12+', default=-1, entity_type='brokerId'),
                    Field('LeaderEpoch', 'int32', '12+', default=-1),
                ]),
                Field('SnapshotId', 'SnapshotId', '12+', tag=2, fields=[
                    Field('EndOffset', 'int64', '0+', default=-1),
                    Field('Epoch', 'int32', '0+', default=-1),
                ]),
                Field('AbortedTransactions', '[]AbortedTransaction', '4+', nullable_versions='4+', ignorable=True, fields=[
                    Field('ProducerId', 'int64', '4+', entity_type='producerId'),
                    Field('FirstOffset', 'int64', '4+'),
                ]),
                Field('PreferredReadReplica', 'int32', '11+', default=-1, entity_type='brokerId'),
                Field('Records', 'records', '0+', nullable_versions='0+'),
            ]),
        ]),
        Field('NodeEndpoints', '[]NodeEndpoint', '16+', tag=0, fields=[
            Field('NodeId', 'int32', '16+', entity_type='brokerId', map_key=True),
            Field('Host', 'string', '16+'),
            Field('Port', 'int32', '16+'),
            Field('Rack', 'string', '16+', nullable_versions='16+', default=None),
        ]),
    ],
)

API = Api(1, 'Fetch', REQUEST, RESPONSE, min_version=4)
