"""AlterReplicaLogDirs (API key 34): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'AlterReplicaLogDirsRequest',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=34,
    type='request',
    fields=[
        Field('Dirs', '[]AlterReplicaLogDir', '0+', fields=[
            Field('Path', 'string', '0+', map_key=True),
            Field('Topics', '[]AlterReplicaLogDirTopic', '0+', fields=[
                Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
                Field('Partitions', '[]int32', '0+'),
            ]),
        ]),
    ],
)

RESPONSE = MessageSpec(
    'AlterReplicaLogDirsResponse',
    valid_versions='0-2',
    flexible_versions='2+',
    api_key=34,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Results', '[]AlterReplicaLogDirTopicResult', '0+', fields=[
            Field('TopicName', 'string', '0+', entity_type='topicName'),
            Field('Partitions', '[]AlterReplicaLogDirPartitionResult', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+'),
                Field('ErrorCode', 'int16', '0+'),
            ]),
        ]),
    ],
)

API = Api(34, 'AlterReplicaLogDirs', REQUEST, RESPONSE)
