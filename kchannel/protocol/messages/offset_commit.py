"""OffsetCommit (API key 8): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'OffsetCommitRequest',
    valid_versions='0-9',
    flexible_versions='8+',
    api_key=8,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('GenerationIdOrMemberEpoch', 'int32', '1+', default=-1, ignorable=True),
        Field('MemberId', 'string', '1+', ignorable=True),
        Field('GroupInstanceId', 'string', '7+', nullable_versions='7+', default=None),
        Field('RetentionTimeMs', 'int64', '2-4', default=-1, ignorable=True),
        Field('Topics', '[]OffsetCommitRequestTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]OffsetCommitRequestPartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('CommittedOffset', 'int64', '0+'),
                Field('CommittedLeaderEpoch', 'int32', '6+', default=-1, ignorable=True),
                Field('CommitTimestamp', 'int64', '1', default=-1),
                Field('CommittedMetadata', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'OffsetCommitResponse',
    valid_versions='0-9',
    flexible_versions='8+',
    api_key=8,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '3+', ignorable=True),
        Field('Topics', '[]OffsetCommitResponseTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]OffsetCommitResponsePartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(8, 'OffsetCommit', REQUEST, RESPONSE)
