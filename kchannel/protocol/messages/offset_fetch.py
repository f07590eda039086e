"""OffsetFetch (API key 9): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'OffsetFetchRequest',
    valid_versions='0-9',
    flexible_versions='6+',
    api_key=9,
    type='request',
    fields=[
        Field('GroupId', 'string', '0-7', entity_type='groupId'),
        Field('Topics', '[]OffsetFetchRequestTopic', '0-7', nullable_versions='2-7', fields=[
            Field('Name', 'string', '0-7', entity_type='topicName'),
            Field('PartitionIndexes', '[]int32', '0-7'),
        ]),
        Field('Groups', '[]OffsetFetchRequestGroup', '8+', fields=[
            Field('GroupId', 'string', '8+', entity_type='groupId'),
            Field('MemberId', 'string', '9+', nullable_versions='9+', default=None, ignorable=True),
            Field('MemberEpoch', 'int32', '9+', default=-1, ignorable=True),
            Field('Topics', '[]OffsetFetchRequestTopics', '8+', nullable_versions='8+', fields=[
                Field('Name', 'string', '8+', entity_type='topicName'),
                Field('PartitionIndexes', '[]int32', '8+'),
            ]),
        ]),
        Field('RequireStable', 'bool', '7+', default=False),
    ],
)

RESPONSE = MessageSpec(
    'OffsetFetchResponse',
    valid_versions='0-9',
    flexible_versions='6+',
    api_key=9,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '3+', ignorable=True),
        Field('Topics', '[]OffsetFetchResponseTopic', '0-7', fields=[
            Field('Name', 'string', '0-7', entity_type='topicName'),
            Field('Partitions', '[]OffsetFetchResponsePartition', '0-7', fields=[
                Field('PartitionIndex', 'int32', '0-7'),
                Field('CommittedOffset', 'int64', '0-7'),
                Field('CommittedLeaderEpoch', 'int32', '5-7', default=-1, ignorable=True),
                Field('Metadata', 'string', '0-7', nullable_versions='0-7'),
                Field('ErrorCode', 'int16', '0-7'),
            ]),
        ]),
        Field('ErrorCode', 'int16', '2-7', default=0, ignorable=True),
        Field('Groups', '[]OffsetFetchResponseGroup', '8+', fields=[
            Field('GroupId', 'string', '8+', entity_type='groupId'),
            Field('Topics', '[]OffsetFetchResponseTopics', '8+', fields=[
                Field('Name', 'string', '8+', entity_type='topicName'),
                Field('Partitions', '[]OffsetFetchResponsePartitions', '8+', fields=[
                    Field('PartitionIndex', 'int32', '8+'),
                    Field('CommittedOffset', 'int64', '8+'),
                    Field('CommittedLeaderEpoch', 'int32', '8+', default=-1, ignorable=True),
                    Field('Metadata', 'string', '8+', nullable_versions='8+'),
                    Field('ErrorCode', 'int16', '8+'),
                ]),
            ]),
            Field('ErrorCode', 'int16', '8+', default=0),
        ]),
    ],
)

API = Api(9, 'OffsetFetch', REQUEST, RESPONSE)
