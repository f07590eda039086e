"""CreateTopics (API key 19): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'CreateTopicsRequest',
    valid_versions='0-7',
    flexible_versions='5+',
    api_key=19,
    type='request',
    fields=[
        Field('Topics', '[]CreatableTopic', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('NumPartitions', 'int32', '0+'),
            Field('ReplicationFactor', 'int16', '0+'),
            Field('Assignments', '[]CreatableReplicaAssignment', '0+', fields=[
                Field('PartitionIndex', 'int32', '0+', map_key=True),
                Field('BrokerIds', '[]int32', '0+', entity_type='brokerId'),
            ]),
            Field('Configs', '[]CreatableTopicConfig', '0+', fields=[
                Field('Name', 'string', '0+', map_key=True),
                Field('Value', 'string', '0+', nullable_versions='0+'),
            ]),
        ]),
        Field('timeoutMs', 'int32', '0+', default=60000),
        Field('validateOnly', 'bool', '1+', default=False),
    ],
)

RESPONSE = MessageSpec(
    'CreateTopicsResponse',
    valid_versions='0-7',
    flexible_versions='5+',
    api_key=19,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '2+', ignorable=True),
        Field('Topics', '[]CreatableTopicResult', '0+', fields=[
            Field('Name', 'string', '0+', entity_type='topicName', map_key=True),
            Field('TopicId', 'uuid', '7+', ignorable=True),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '1+', nullable_versions='0+', ignorable=True),
            Field('TopicConfigErrorCode', 'int16', '5+', tag=0, ignorable=True),
            Field('NumPartitions', 'int32', '5+', default=-1, ignorable=True),
            Field('ReplicationFactor', 'int16', '5+', default=-1, ignorable=True),
            Field('Configs', '[]CreatableTopicConfigs', '5+', nullable_versions='5+', ignorable=True, fields=[
                Field('Name', 'string', '5+'),
                Field('Value', 'string', '5+', nullable_versions='5+'),
                Field('ReadOnly', 'bool', '5+'),
                Field('ConfigSource', 'int8', '5+', default=-1, ignorable=True),
                Field('IsSensitive', 'bool', '5+'),
            ]),
        ]),
    ],
)

API = Api(19, 'CreateTopics', REQUEST, RESPONSE)
