"""Produce (API key 0): request and response schemas, as in Apache Kafka.

Version 12 is the same as version 11 (KIP-890 part 2): within a
transaction under transaction.version 2 it also adds the partition to the
transaction, so only a transaction-version-2 producer sends it (see
kchannel.producer.sender).  Version 13 (topic ids) is not spoken."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ProduceRequest',
    valid_versions='0-12',
    flexible_versions='9+',
    api_key=0,
    type='request',
    fields=[
        Field('TransactionalId', 'string', '3+', nullable_versions='3+', default=None, entity_type='transactionalId'),
        Field('Acks', 'int16', '0+'),
        Field('TimeoutMs', 'int32', '0+'),
        Field('TopicData', '[]TopicProduceData', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('PartitionData', '[]PartitionProduceData', '0+', fields=[
                Field('Index', 'int32', '0+'),
                Field('Records', 'records', '0+', nullable_versions='0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'ProduceResponse',
    valid_versions='0-12',
    flexible_versions='9+',
    api_key=0,
    type='response',
    fields=[
        Field('Responses', '[]TopicProduceResponse', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('PartitionResponses', '[]PartitionProduceResponse', '0+', fields=[
                Field('Index', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
                Field('BaseOffset', 'int64', '0+'),
                Field('LogAppendTimeMs', 'int64', '2+', default=-1, ignorable=True),
                Field('LogStartOffset', 'int64', '5+', default=-1, ignorable=True),
                Field('RecordErrors', '[]BatchIndexAndErrorMessage', '8+', ignorable=True, fields=[
                    Field('BatchIndex', 'int32', '8+'),
                    Field('BatchIndexErrorMessage', 'string', '8+', nullable_versions='8+', default=None),
                ]),
                Field('ErrorMessage', 'string', '8+', nullable_versions='8+', default=None, ignorable=True),
                Field('CurrentLeader', 'LeaderIdAndEpoch', '10+', tag=0, fields=[
                    Field('LeaderId', 'int32', '10+', default=-1, entity_type='brokerId'),
                    Field('LeaderEpoch', 'int32', '10+', default=-1),
                ]),
            ]),
        ]),
        Field('ThrottleTimeMs', 'int32', '1+', default=0, ignorable=True),
        Field('NodeEndpoints', '[]NodeEndpoint', '10+', tag=0, fields=[
            Field('NodeId', 'int32', '10+', entity_type='brokerId', map_key=True),
            Field('Host', 'string', '10+'),
            Field('Port', 'int32', '10+'),
            Field('Rack', 'string', '10+', nullable_versions='10+', default=None),
        ]),
    ],
)

API = Api(0, 'Produce', REQUEST, RESPONSE, min_version=3)
