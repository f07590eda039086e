"""ConsumerGroupDescribe (API key 69, KIP-848): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec


def _assignment(versions):
    return [Field('TopicPartitions', '[]TopicPartitions', versions, fields=[
        Field('TopicId', 'uuid', '0+'),
        Field('TopicName', 'string', '0+', entity_type='topicName'),
        Field('Partitions', '[]int32', '0+'),
    ])]


REQUEST = MessageSpec(
    'ConsumerGroupDescribeRequest',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=69,
    type='request',
    fields=[
        Field('GroupIds', '[]string', '0+', entity_type='groupId'),
        Field('IncludeAuthorizedOperations', 'bool', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'ConsumerGroupDescribeResponse',
    valid_versions='0-1',
    flexible_versions='0+',
    api_key=69,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '0+'),
        Field('Groups', '[]DescribedGroup', '0+', fields=[
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '0+', nullable_versions='0+', default=None),
            Field('GroupId', 'string', '0+', entity_type='groupId'),
            Field('GroupState', 'string', '0+'),
            Field('GroupEpoch', 'int32', '0+'),
            Field('AssignmentEpoch', 'int32', '0+'),
            Field('AssignorName', 'string', '0+'),
            Field('Members', '[]Member', '0+', fields=[
                Field('MemberId', 'string', '0+'),
                Field('InstanceId', 'string', '0+', nullable_versions='0+', default=None),
                Field('RackId', 'string', '0+', nullable_versions='0+', default=None),
                Field('MemberEpoch', 'int32', '0+'),
                Field('ClientId', 'string', '0+'),
                Field('ClientHost', 'string', '0+'),
                Field('SubscribedTopicNames', '[]string', '0+', entity_type='topicName'),
                Field('SubscribedTopicRegex', 'string', '0+', nullable_versions='0+',
                      default=None),
                Field('Assignment', 'Assignment', '0+', fields=_assignment('0+')),
                Field('TargetAssignment', 'Assignment', '0+', fields=_assignment('0+')),
                Field('MemberType', 'int8', '1+', default=-1, ignorable=True),
            ]),
            Field('AuthorizedOperations', 'int32', '0+', default=-2147483648),
        ]),
    ],
)

API = Api(69, 'ConsumerGroupDescribe', REQUEST, RESPONSE)
