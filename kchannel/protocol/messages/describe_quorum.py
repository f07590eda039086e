"""DescribeQuorum (API key 55): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeQuorumRequest',
    valid_versions='0-2',
    flexible_versions='0+',
    api_key=55,
    type='request',
    fields=[
        Field('Topics', '[]TopicData', '0+', fields=[
            Field('TopicName', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]PartitionData', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DescribeQuorumResponse',
    valid_versions='0-2',
    flexible_versions='0+',
    api_key=55,
    type='response',
    fields=[
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '2+', nullable_versions='2+', ignorable=True),
        Field('Topics', '[]TopicData', '0+', fields=[
            Field('TopicName', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]PartitionData', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('ErrorMessage', 'string', '2+', nullable_versions='2+', ignorable=True),
                Field('LeaderId', 'int32', '0+', entity_type='brokerId'),
                Field('LeaderEpoch', 'int32', '0+'),
                Field('HighWatermark', 'int64', '0+'),
                Field('CurrentVoters', '[]ReplicaState', '0+', fields=[
                    Field('ReplicaId', 'int32', '0+', entity_type='brokerId'),
                    Field('ReplicaDirectoryId', 'uuid', '2+'),
                    Field('LogEndOffset', 'int64', '0+'),
                    Field('LastFetchTimestamp', 'int64', '1+', default=-1, ignorable=True),
                    Field('LastCaughtUpTimestamp', 'int64', '1+', default=-1, ignorable=True),
                ]),
                Field('Observers', '[]ReplicaState', '0+', fields=[
                    Field('ReplicaId', 'int32', '0+', entity_type='brokerId'),
                    Field('ReplicaDirectoryId', 'uuid', '2+'),
                    Field('LogEndOffset', 'int64', '0+'),
                    Field('LastFetchTimestamp', 'int64', '1+', default=-1, ignorable=True),
                    Field('LastCaughtUpTimestamp', 'int64', '1+', default=-1, ignorable=True),
                ]),
            ]),
        ]),
        Field('Nodes', '[]Node', '2+', fields=[
            Field('NodeId', 'int32', '2+', entity_type='brokerId', map_key=True),
            Field('Listeners', '[]Listener', '2+', fields=[
                Field('Name', 'string', '2+', map_key=True),
                Field('Host', 'string', '2+'),
                Field('Port', 'uint16', '2+'),
            ]),
        ]),
    ],
)

API = Api(55, 'DescribeQuorum', REQUEST, RESPONSE)
