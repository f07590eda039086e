"""TxnOffsetCommit (API key 28): request and response schemas, as in Apache Kafka.

Version 5 is the same as version 4 (KIP-890 part 2): under transaction.version 2
it also adds the offsets to the transaction (no AddOffsetsToTxn)."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'TxnOffsetCommitRequest',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=28,
    type='request',
    fields=[
        Field('TransactionalId', 'string', '0+', entity_type='transactionalId'),
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('ProducerId', 'int64', '0+', entity_type='producerId'),
        Field('ProducerEpoch', 'int16', '0+'),
        Field('GenerationId', 'int32', '3+', default=-1),
        Field('MemberId', 'string', '3+', default=''),
        Field('GroupInstanceId', 'string', '3+', nullable_versions='3+', default=None),
        Field('Topics', '[]TxnOffsetCommitRequestTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]TxnOffsetCommitRequestPartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('CommittedOffset', 'int64', '0+'),
                Field('CommittedLeaderEpoch', 'int32', '2+', default=-1, ignorable=True),
                Field('CommittedMetadata', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'TxnOffsetCommitResponse',
    valid_versions='0-5',
    flexible_versions='3+',
    api_key=28,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Topics', '[]TxnOffsetCommitResponseTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]TxnOffsetCommitResponsePartition', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(28, 'TxnOffsetCommit', REQUEST, RESPONSE)
