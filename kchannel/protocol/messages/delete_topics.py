"""DeleteTopics (API key 20): request and response schemas, as in Apache Kafka."""
from kchannel.protocol.schema import Api, Field, MessageSpec

REQUEST = MessageSpec(
    'DeleteTopicsRequest',
    valid_versions='0-6',
    flexible_versions='4+',
    api_key=20,
    type='request',
    fields=[
        Field('Topics', '[]DeleteTopicState', '6+', fields=[
            Field('Name', 'string', '6+', nullable_versions='6+', default=None, entity_type='topicName'),
            Field('TopicId', 'uuid', '6+'),
        ]),
        Field('TopicNames', '[]string', '0-5', ignorable=True, entity_type='topicName'),
        Field('TimeoutMs', 'int32', '0+'),
    ],
)

RESPONSE = MessageSpec(
    'DeleteTopicsResponse',
    valid_versions='0-6',
    flexible_versions='4+',
    api_key=20,
    type='response',
    fields=[
        Field('ThrottleTimeMs', 'int32', '1+', ignorable=True),
        Field('Responses', '[]DeletableTopicResult', '0+', fields=[
            Field('Name', 'string', '0+', nullable_versions='6+', entity_type='topicName', map_key=True),
            Field('TopicId', 'uuid', '6+', ignorable=True),
            Field('ErrorCode', 'int16', '0+'),
            Field('ErrorMessage', 'string', '5+', nullable_versions='5+', default=None, ignorable=True),
        ]),
    ],
)

API = Api(20, 'DeleteTopics', REQUEST, RESPONSE)
