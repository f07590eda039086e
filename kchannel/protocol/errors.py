"""Kafka's error codes: code, name and default message of every error, as in
Apache Kafka's ``Errors`` enum, and their mapping onto kchannel exceptions."""
from enum import IntEnum

from kchannel import errors as _errors

__all__ = ["Errors", "ERROR_TABLE", "error_name", "error_message", "exception_for",
           "RETRIABLE_ERRORS", "INVALID_METADATA_ERRORS", "COORDINATOR_ERRORS",
           "COORDINATOR_MOVED_ERRORS"]

# (code, name, default message) for every Kafka error.
ERROR_TABLE = (
    (-1, 'UNKNOWN_SERVER_ERROR', 'The server experienced an unexpected error when processing the request.'),
    (0, 'NONE', ''),
    (1, 'OFFSET_OUT_OF_RANGE', 'The requested offset is not within the range of offsets maintained by the server.'),
    (2, 'CORRUPT_MESSAGE', 'This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.'),
    (3, 'UNKNOWN_TOPIC_OR_PARTITION', 'This server does not host this topic-partition.'),
    (4, 'INVALID_FETCH_SIZE', 'The requested fetch size is invalid.'),
    (5, 'LEADER_NOT_AVAILABLE', 'There is no leader for this topic-partition as we are in the middle of a leadership election.'),
    (6, 'NOT_LEADER_OR_FOLLOWER', 'For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.'),
    (7, 'REQUEST_TIMED_OUT', 'The request timed out.'),
    (8, 'BROKER_NOT_AVAILABLE', 'The broker is not available.'),
    (9, 'REPLICA_NOT_AVAILABLE', 'The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.'),
    (10, 'MESSAGE_TOO_LARGE', 'The request included a message larger than the max message size the server will accept.'),
    (11, 'STALE_CONTROLLER_EPOCH', 'The controller moved to another broker.'),
    (12, 'OFFSET_METADATA_TOO_LARGE', 'The metadata field of the offset request was too large.'),
    (13, 'NETWORK_EXCEPTION', 'The server disconnected before a response was received.'),
    (14, 'COORDINATOR_LOAD_IN_PROGRESS', "The coordinator is loading and hence can't process requests."),
    (15, 'COORDINATOR_NOT_AVAILABLE', 'The coordinator is not available.'),
    (16, 'NOT_COORDINATOR', 'This is not the correct coordinator.'),
    (17, 'INVALID_TOPIC_EXCEPTION', 'The request attempted to perform an operation on an invalid topic.'),
    (18, 'RECORD_LIST_TOO_LARGE', 'The request included message batch larger than the configured segment size on the server.'),
    (19, 'NOT_ENOUGH_REPLICAS', 'Messages are rejected since there are fewer in-sync replicas than required.'),
    (20, 'NOT_ENOUGH_REPLICAS_AFTER_APPEND', 'Messages are written to the log, but to fewer in-sync replicas than required.'),
    (21, 'INVALID_REQUIRED_ACKS', 'Produce request specified an invalid value for required acks.'),
    (22, 'ILLEGAL_GENERATION', 'Specified group generation id is not valid.'),
    (23, 'INCONSISTENT_GROUP_PROTOCOL', "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    (24, 'INVALID_GROUP_ID', 'The configured groupId is invalid.'),
    (25, 'UNKNOWN_MEMBER_ID', 'The coordinator is not aware of this member.'),
    (26, 'INVALID_SESSION_TIMEOUT', 'The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).'),
    (27, 'REBALANCE_IN_PROGRESS', 'The group is rebalancing, so a rejoin is needed.'),
    (28, 'INVALID_COMMIT_OFFSET_SIZE', 'The committing offset data size is not valid.'),
    (29, 'TOPIC_AUTHORIZATION_FAILED', 'Topic authorization failed.'),
    (30, 'GROUP_AUTHORIZATION_FAILED', 'Group authorization failed.'),
    (31, 'CLUSTER_AUTHORIZATION_FAILED', 'Cluster authorization failed.'),
    (32, 'INVALID_TIMESTAMP', 'The timestamp of the message is out of acceptable range.'),
    (33, 'UNSUPPORTED_SASL_MECHANISM', 'The broker does not support the requested SASL mechanism.'),
    (34, 'ILLEGAL_SASL_STATE', 'Request is not valid given the current SASL state.'),
    (35, 'UNSUPPORTED_VERSION', 'The version of API is not supported.'),
    (36, 'TOPIC_ALREADY_EXISTS', 'Topic with this name already exists.'),
    (37, 'INVALID_PARTITIONS', 'Number of partitions is below 1.'),
    (38, 'INVALID_REPLICATION_FACTOR', 'Replication factor is below 1 or larger than the number of available brokers.'),
    (39, 'INVALID_REPLICA_ASSIGNMENT', 'Replica assignment is invalid.'),
    (40, 'INVALID_CONFIG', 'Configuration is invalid.'),
    (41, 'NOT_CONTROLLER', 'This is not the correct controller for this cluster.'),
    (42, 'INVALID_REQUEST', 'This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.'),
    (43, 'UNSUPPORTED_FOR_MESSAGE_FORMAT', 'The message format version on the broker does not support the request.'),
    (44, 'POLICY_VIOLATION', 'Request parameters do not satisfy the configured policy.'),
    (45, 'OUT_OF_ORDER_SEQUENCE_NUMBER', 'The broker received an out of order sequence number.'),
    (46, 'DUPLICATE_SEQUENCE_NUMBER', 'The broker received a duplicate sequence number.'),
    (47, 'INVALID_PRODUCER_EPOCH', 'Producer attempted to produce with an old epoch.'),
    (48, 'INVALID_TXN_STATE', 'The producer attempted a transactional operation in an invalid state.'),
    (49, 'INVALID_PRODUCER_ID_MAPPING', 'The producer attempted to use a producer id which is not currently assigned to its transactional id.'),
    (50, 'INVALID_TRANSACTION_TIMEOUT', 'The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).'),
    (51, 'CONCURRENT_TRANSACTIONS', 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.'),
    (52, 'TRANSACTION_COORDINATOR_FENCED', 'Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.'),
    (53, 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 'Transactional Id authorization failed.'),
    (54, 'SECURITY_DISABLED', 'Security features are disabled.'),
    (55, 'OPERATION_NOT_ATTEMPTED', 'The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.'),
    (56, 'KAFKA_STORAGE_ERROR', 'Disk error when trying to access log file on the disk.'),
    (57, 'LOG_DIR_NOT_FOUND', 'The user-specified log directory is not found in the broker config.'),
    (58, 'SASL_AUTHENTICATION_FAILED', 'SASL Authentication failed.'),
    (59, 'UNKNOWN_PRODUCER_ID', "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    (60, 'REASSIGNMENT_IN_PROGRESS', 'A partition reassignment is in progress.'),
    (61, 'DELEGATION_TOKEN_AUTH_DISABLED', 'Delegation Token feature is not enabled.'),
    (62, 'DELEGATION_TOKEN_NOT_FOUND', 'Delegation Token is not found on server.'),
    (63, 'DELEGATION_TOKEN_OWNER_MISMATCH', 'Specified Principal is not valid Owner/Renewer.'),
    (64, 'DELEGATION_TOKEN_REQUEST_NOT_ALLOWED', 'Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.'),
    (65, 'DELEGATION_TOKEN_AUTHORIZATION_FAILED', 'Delegation Token authorization failed.'),
    (66, 'DELEGATION_TOKEN_EXPIRED', 'Delegation Token is expired.'),
    (67, 'INVALID_PRINCIPAL_TYPE', 'Supplied principalType is not supported.'),
    (68, 'NON_EMPTY_GROUP', 'The group is not empty.'),
    (69, 'GROUP_ID_NOT_FOUND', 'The group id does not exist.'),
    (70, 'FETCH_SESSION_ID_NOT_FOUND', 'The fetch session ID was not found.'),
    (71, 'INVALID_FETCH_SESSION_EPOCH', 'The fetch session epoch is invalid.'),
    (72, 'LISTENER_NOT_FOUND', 'There is no listener on the leader broker that matches the listener on which metadata request was processed.'),
    (73, 'TOPIC_DELETION_DISABLED', 'Topic deletion is disabled.'),
    (74, 'FENCED_LEADER_EPOCH', 'The leader epoch in the request is older than the epoch on the broker.'),
    (75, 'UNKNOWN_LEADER_EPOCH', 'The leader epoch in the request is newer than the epoch on the broker.'),
    (76, 'UNSUPPORTED_COMPRESSION_TYPE', 'The requesting client does not support the compression type of given partition.'),
    (77, 'STALE_BROKER_EPOCH', 'Broker epoch has changed.'),
    (78, 'OFFSET_NOT_AVAILABLE', 'The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.'),
    (79, 'MEMBER_ID_REQUIRED', 'The group member needs to have a valid member id before actually entering a consumer group.'),
    (80, 'PREFERRED_LEADER_NOT_AVAILABLE', 'The preferred leader was not available.'),
    (81, 'GROUP_MAX_SIZE_REACHED', 'The consumer group has reached its max size.'),
    (82, 'FENCED_INSTANCE_ID', 'The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.'),
    (83, 'ELIGIBLE_LEADERS_NOT_AVAILABLE', 'Eligible topic partition leaders are not available.'),
    (84, 'ELECTION_NOT_NEEDED', 'Leader election not needed for topic partition.'),
    (85, 'NO_REASSIGNMENT_IN_PROGRESS', 'No partition reassignment is in progress.'),
    (86, 'GROUP_SUBSCRIBED_TO_TOPIC', 'Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.'),
    (87, 'INVALID_RECORD', 'This record has failed the validation on broker and hence will be rejected.'),
    (88, 'UNSTABLE_OFFSET_COMMIT', 'There are unstable offsets that need to be cleared.'),
    (89, 'THROTTLING_QUOTA_EXCEEDED', 'The throttling quota has been exceeded.'),
    (90, 'PRODUCER_FENCED', 'There is a newer producer with the same transactionalId which fences the current one.'),
    (91, 'RESOURCE_NOT_FOUND', 'A request illegally referred to a resource that does not exist.'),
    (92, 'DUPLICATE_RESOURCE', 'A request illegally referred to the same resource twice.'),
    (93, 'UNACCEPTABLE_CREDENTIAL', 'Requested credential would not meet criteria for acceptability.'),
    (94, 'INCONSISTENT_VOTER_SET', 'Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.'),
    (95, 'INVALID_UPDATE_VERSION', 'The given update version was invalid.'),
    (96, 'FEATURE_UPDATE_FAILED', 'Unable to update finalized features due to an unexpected server error.'),
    (97, 'PRINCIPAL_DESERIALIZATION_FAILURE', 'Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.'),
    (98, 'SNAPSHOT_NOT_FOUND', 'Requested snapshot was not found.'),
    (100, 'UNKNOWN_TOPIC_ID', 'This server does not host this topic ID.'),
    (101, 'DUPLICATE_BROKER_REGISTRATION', 'This broker ID is already in use.'),
    (102, 'BROKER_ID_NOT_REGISTERED', 'The given broker ID was not registered.'),
    (103, 'INCONSISTENT_TOPIC_ID', "The log's topic ID did not match the topic ID in the request."),
    (104, 'INCONSISTENT_CLUSTER_ID', 'The clusterId in the request does not match that found on the server.'),
    (105, 'TRANSACTIONAL_ID_NOT_FOUND', 'The transactionalId could not be found.'),
    (106, 'FETCH_SESSION_TOPIC_ID_ERROR', 'The fetch session encountered inconsistent topic ID usage.'),
    (107, 'INELIGIBLE_REPLICA', 'The new ISR contains at least one ineligible replica.'),
    (108, 'NEW_LEADER_ELECTED', 'The AlterPartition request successfully updated the partition state but the leader has changed.'),
    (109, 'OFFSET_MOVED_TO_TIERED_STORAGE', 'The requested offset is moved to tiered storage.'),
    (110, 'FENCED_MEMBER_EPOCH', 'The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.'),
    (111, 'UNRELEASED_INSTANCE_ID', 'The instance ID is still used by another member in the consumer group. That member must leave first.'),
    (112, 'UNSUPPORTED_ASSIGNOR', 'The assignor or its version range is not supported by the consumer group.'),
    (113, 'STALE_MEMBER_EPOCH', 'The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.'),
    (114, 'MISMATCHED_ENDPOINT_TYPE', 'The request was sent to an endpoint of the wrong type.'),
    (115, 'UNSUPPORTED_ENDPOINT_TYPE', 'This endpoint type is not supported yet.'),
    (116, 'UNKNOWN_CONTROLLER_ID', 'This controller ID is not known.'),
    (117, 'UNKNOWN_SUBSCRIPTION_ID', 'Client sent a push telemetry request with an invalid or outdated subscription ID.'),
    (118, 'TELEMETRY_TOO_LARGE', 'Client sent a push telemetry request larger than the maximum size the broker will accept.'),
    (119, 'INVALID_REGISTRATION', 'The controller has considered the broker registration to be invalid.'),
    (120, 'TRANSACTION_ABORTABLE', 'The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.'),
    (121, 'INVALID_RECORD_STATE', 'The record state is invalid. The acknowledgement of delivery could not be completed.'),
    (122, 'SHARE_SESSION_NOT_FOUND', 'The share session was not found.'),
    (123, 'INVALID_SHARE_SESSION_EPOCH', 'The share session epoch is invalid.'),
    (124, 'FENCED_STATE_EPOCH', 'The share coordinator rejected the request because the share-group state epoch did not match.'),
    (125, 'INVALID_VOTER_KEY', "The voter key doesn't match the receiving replica's key."),
    (126, 'DUPLICATE_VOTER', 'The voter is already part of the set of voters.'),
    (127, 'VOTER_NOT_FOUND', 'The voter is not part of the set of voters.'),
    (128, 'INVALID_REGULAR_EXPRESSION', 'The regular expression is not valid.'),
)

_MESSAGES = {code: msg for code, _name, msg in ERROR_TABLE}
_NAMES = {code: name for code, name, _msg in ERROR_TABLE}


class Errors(IntEnum):
    """Every Kafka error code; ``Errors.X.message`` is Kafka's default message."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128

    @property
    def message(self):
        """Kafka's default message for this error."""
        return _MESSAGES[self.value]

    @property
    def retriable(self):
        """Java's exception for this code is a ``RetriableException``: the
        same request may succeed later."""
        return self.value in RETRIABLE_ERRORS

    @property
    def invalid_metadata(self):
        """Java's exception is an ``InvalidMetadataException`` (retriable,
        and the client's metadata is stale: refresh it before retrying)."""
        return self.value in INVALID_METADATA_ERRORS


# The codes whose Java exception extends InvalidMetadataException ...
INVALID_METADATA_ERRORS = frozenset(Errors[name] for name in (
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER",
    "REPLICA_NOT_AVAILABLE", "NETWORK_EXCEPTION", "KAFKA_STORAGE_ERROR", "LISTENER_NOT_FOUND",
    "FENCED_LEADER_EPOCH", "PREFERRED_LEADER_NOT_AVAILABLE", "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    "ELECTION_NOT_NEEDED", "UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID"))
# ... and every code whose Java exception extends RetriableException (the
# producer's Sender, the consumer's Fetcher and offset lookups retry these).
RETRIABLE_ERRORS = INVALID_METADATA_ERRORS | frozenset(Errors[name] for name in (
    "CORRUPT_MESSAGE", "REQUEST_TIMED_OUT", "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NOT_CONTROLLER", "CONCURRENT_TRANSACTIONS",
    "FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH", "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE", "UNSTABLE_OFFSET_COMMIT", "THROTTLING_QUOTA_EXCEEDED",
    "FETCH_SESSION_TOPIC_ID_ERROR", "SHARE_SESSION_NOT_FOUND", "INVALID_SHARE_SESSION_EPOCH"))
# The group coordinator moved, is starting or is loading the group: find it
# again (Kafka's AbstractCoordinator marks it unknown) and retry.
COORDINATOR_ERRORS = frozenset((Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR))
# Of those, the ones that mean the coordinator is elsewhere or gone: find it
# again before retrying (COORDINATOR_LOAD_IN_PROGRESS only waits: the
# coordinator is the right one, still loading).  The group and transaction
# coordinators' clients all use this one set.
COORDINATOR_MOVED_ERRORS = COORDINATOR_ERRORS - {Errors.COORDINATOR_LOAD_IN_PROGRESS}


# The transaction errors with an exception class of their own (by name:
# kchannel.errors defines them).
_TRANSACTION_ERRORS = {
    Errors.PRODUCER_FENCED: "ProducerFencedError",
    Errors.INVALID_PRODUCER_EPOCH: "InvalidProducerEpochError",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationError",
    Errors.INVALID_TXN_STATE: "InvalidTxnStateError",
    Errors.TRANSACTION_ABORTABLE: "TransactionAbortableError",
}


def error_name(code):
    """Kafka's name of ``code`` (``"UNSUPPORTED_VERSION"``); a code this table
    does not know is reported as Kafka's Errors.forCode does: UNKNOWN_SERVER_ERROR."""
    return _NAMES.get(code, "UNKNOWN_SERVER_ERROR")


def error_message(code):
    """Kafka's default message for ``code`` (``""`` for NONE)."""
    return _MESSAGES.get(code, _MESSAGES[-1])


_DELEGATION_TOKEN_CODES = frozenset((
    Errors.DELEGATION_TOKEN_AUTH_DISABLED, Errors.DELEGATION_TOKEN_NOT_FOUND,
    Errors.DELEGATION_TOKEN_OWNER_MISMATCH, Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
    Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED, Errors.DELEGATION_TOKEN_EXPIRED))


def exception_for(code, message=None):
    """The kchannel exception for a non-zero error code from a response.

    ``message`` is the server's error message when the response carries one;
    otherwise Kafka's default message for the code is used.  Returns the
    exception instance (callers raise it); ``None`` for code 0.
    """
    if code == Errors.NONE:
        return None
    text = message if message else error_message(code)
    if code == Errors.SASL_AUTHENTICATION_FAILED:
        return _errors.SaslAuthenticationError(text)
    if code == Errors.ILLEGAL_SASL_STATE:
        return _errors.IllegalSaslStateError(text)
    if code == Errors.UNSUPPORTED_SASL_MECHANISM:
        return _errors.UnsupportedSaslMechanismError(text)
    if code == Errors.UNSUPPORTED_VERSION:
        return _errors.UnsupportedVersionError(text)
    if code in _DELEGATION_TOKEN_CODES:
        return _errors.DelegationTokenError(code, error_name(code), text)
    txn_error = _TRANSACTION_ERRORS.get(code)
    if txn_error is not None:
        return getattr(_errors, txn_error)(text)
    exc = _errors.KafkaError(code, error_name(code), text)
    if code in RETRIABLE_ERRORS:
        exc.retriable = True
    return exc
