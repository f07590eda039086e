"""DescribeLogDirs (API key 35): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DescribeLogDirsRequest',
    valid_versions='0-4',
    flexible_versions='2+',
    api_key=35,
    type='request',
    fields=[
        Field('Topics', '[]DescribableLogDirTopic', '0+', nullable_versions='0+', fields=[
            Field('Topic', 'string', '0+', entity_type='topicName', map_key=True),
            Field('Partitions', '[]int32', '0+'),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'DescribeLogDirsResponse',
    valid_versions='0-4',
    flexible_versions='2+',
    api_key=35,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '3+', ignorable=True),
        Field('Results', '[]DescribeLogDirsResult', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('LogDir', 'string', '0+'),
            Field('Topics', '[]DescribeLogDirsTopic', '0+', fields=[
                Field('Name', 'string', '0+', entity_type='topicName'),
                Field('Partitions', '[]DescribeLogDirsPartition', '0+', fields=[
                    Field('PartitionIndex', 'int32', '0+'),
                    Field('PartitionSize', 'int64', '0+'),
                    Field('OffsetLag', 'int64', '0+'),
                    Field('IsFutureKey', 'bool', '0+'),
                ]),
            ]),
            Field('TotalBytes', 'int64', '4+', default=-1, ignorable=True),
            Field('UsableBytes', 'int64', '4+', default=-1, ignorable=True),
        ]),
    ],
)

API = Api(35, 'DescribeLogDirs', REQUEST, RESPONSE)
