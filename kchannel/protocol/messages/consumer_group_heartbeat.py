"""ConsumerGroupHeartbeat (API key 68, KIP-848): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'ConsumerGroupHeartbeatRequest',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=68,
    type='request',
    fields=[
        Field('GroupId', 'string', '0+', entity_type='groupId'),
        Field('MemberId', 'string', '0+'),
        Field('MemberEpoch', 'int32', '0+'),
        Field('InstanceId', 'string', '0+', nullable_versions='0+', default=None),
        Field('RackId', 'string', '0+', nullable_versions='0+', default=None),
        Field('RebalanceTimeoutMs', 'int32', '0+', default=-1),
        Field('SubscribedTopicNames', '[]string', '0+', nullable_versions='0+', default=None,
              entity_type='topicName'),
        Field('SubscribedTopicRegex', 'string', '1+', nullable_versions='1+', default=None),
        Field('ServerAssignor', 'string', '0+', nullable_versions='0+', default=None),
        Field('TopicPartitions', '[]TopicPartitions', '0+', nullable_versions='0+', default=None,
              fields=[
                  Field('TopicId', 'uuid', '0+'),
                  Field('Partitions', '[]int32', '0+'),
              ]),
    ],
)

RESPONSE = MessageSpec(
    'ConsumerGroupHeartbeatResponse',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=68,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('ErrorCode', 'int16', '0+'),
        Field('ErrorMessage', 'string', '0+', nullable_versions='0+', default=None),
        Field('MemberId', 'string', '0+', nullable_versions='0+', default=None),
        Field('MemberEpoch', 'int32', '0+'),
        Field('HeartbeatIntervalMs', 'int32', '0+'),
        Field('Assignment', 'Assignment', '0+', nullable_versions='0+', default=None, fields=[
            Field('TopicPartitions', '[]TopicPartitions', '0+', fields=[
                Field('TopicId', 'uuid', '0+'),
                Field('Partitions', '[]int32', '0+'),
            ]),
        ]),
    ],
)

API = Api(68, 'ConsumerGroupHeartbeat', REQUEST, RESPONSE)
