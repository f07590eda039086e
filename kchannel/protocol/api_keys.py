"""Every Kafka API key with its Kafka name, and the facts needed to parse
any request header: each API's valid versions and first flexible version.

Kept in step with Apache Kafka's message schemas; ``ApiKey`` member names
are Kafka's ``ApiKeys`` enum names, ``API_NAMES`` its display names
(``ApiVersions``), as printed by kafka-broker-api-versions."""
from enum import IntEnum

__all__ = ["ApiKey", "API_NAMES", "api_name", "API_VALID_VERSIONS",
           "REQUEST_FLEXIBLE_FROM", "RESPONSE_FLEXIBLE_FROM"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    LIST_CLIENT_METRICS_RESOURCES = 74      # its name before Kafka 4.1 (KIP-1142)
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92

    @property
    def api_name(self):
        """Kafka's display name, e.g. ``ApiVersions``."""
        return API_NAMES[self.value]


# api key -> Kafka display name
API_NAMES = {
    0: 'Produce',
    1: 'Fetch',
    2: 'ListOffsets',
    3: 'Metadata',
    4: 'LeaderAndIsr',
    5: 'StopReplica',
    6: 'UpdateMetadata',
    7: 'ControlledShutdown',
    8: 'OffsetCommit',
    9: 'OffsetFetch',
    10: 'FindCoordinator',
    11: 'JoinGroup',
    12: 'Heartbeat',
    13: 'LeaveGroup',
    14: 'SyncGroup',
    15: 'DescribeGroups',
    16: 'ListGroups',
    17: 'SaslHandshake',
    18: 'ApiVersions',
    19: 'CreateTopics',
    20: 'DeleteTopics',
    21: 'DeleteRecords',
    22: 'InitProducerId',
    23: 'OffsetForLeaderEpoch',
    24: 'AddPartitionsToTxn',
    25: 'AddOffsetsToTxn',
    26: 'EndTxn',
    27: 'WriteTxnMarkers',
    28: 'TxnOffsetCommit',
    29: 'DescribeAcls',
    30: 'CreateAcls',
    31: 'DeleteAcls',
    32: 'DescribeConfigs',
    33: 'AlterConfigs',
    34: 'AlterReplicaLogDirs',
    35: 'DescribeLogDirs',
    36: 'SaslAuthenticate',
    37: 'CreatePartitions',
    38: 'CreateDelegationToken',
    39: 'RenewDelegationToken',
    40: 'ExpireDelegationToken',
    41: 'DescribeDelegationToken',
    42: 'DeleteGroups',
    43: 'ElectLeaders',
    44: 'IncrementalAlterConfigs',
    45: 'AlterPartitionReassignments',
    46: 'ListPartitionReassignments',
    47: 'OffsetDelete',
    48: 'DescribeClientQuotas',
    49: 'AlterClientQuotas',
    50: 'DescribeUserScramCredentials',
    51: 'AlterUserScramCredentials',
    52: 'Vote',
    53: 'BeginQuorumEpoch',
    54: 'EndQuorumEpoch',
    55: 'DescribeQuorum',
    56: 'AlterPartition',
    57: 'UpdateFeatures',
    58: 'Envelope',
    59: 'FetchSnapshot',
    60: 'DescribeCluster',
    61: 'DescribeProducers',
    62: 'BrokerRegistration',
    63: 'BrokerHeartbeat',
    64: 'UnregisterBroker',
    65: 'DescribeTransactions',
    66: 'ListTransactions',
    67: 'AllocateProducerIds',
    68: 'ConsumerGroupHeartbeat',
    69: 'ConsumerGroupDescribe',
    70: 'ControllerRegistration',
    71: 'GetTelemetrySubscriptions',
    72: 'PushTelemetry',
    73: 'AssignReplicasToDirs',
    74: 'ListConfigResources',
    75: 'DescribeTopicPartitions',
    76: 'ShareGroupHeartbeat',
    77: 'ShareGroupDescribe',
    78: 'ShareFetch',
    79: 'ShareAcknowledge',
    80: 'AddRaftVoter',
    81: 'RemoveRaftVoter',
    82: 'UpdateRaftVoter',
    83: 'InitializeShareGroupState',
    84: 'ReadShareGroupState',
    85: 'WriteShareGroupState',
    86: 'DeleteShareGroupState',
    87: 'ReadShareGroupStateSummary',
    88: 'StreamsGroupHeartbeat',
    89: 'StreamsGroupDescribe',
    90: 'DescribeShareGroupOffsets',
    91: 'AlterShareGroupOffsets',
    92: 'DeleteShareGroupOffsets',
}

# api key -> (lowest, highest) version in Kafka's schema
API_VALID_VERSIONS = {
    0: (0, 12),     # 12: transaction version 2 (KIP-890); 13 (topic ids) not spoken
    1: (0, 17),
    2: (0, 10),
    3: (0, 12),
    4: (0, 7),
    5: (0, 4),
    6: (0, 8),
    7: (0, 3),
    8: (0, 9),
    9: (0, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    17: (0, 1),
    18: (0, 4),
    19: (0, 7),
    20: (0, 6),
    21: (0, 2),
    22: (0, 5),
    23: (0, 4),
    24: (0, 5),
    25: (0, 4),
    26: (0, 5),
    27: (0, 1),
    28: (0, 5),     # 5: transaction version 2 (KIP-890)
    29: (0, 3),
    30: (0, 3),
    31: (0, 3),
    32: (0, 4),
    33: (0, 2),
    34: (0, 2),
    35: (0, 4),
    36: (0, 2),
    37: (0, 3),
    38: (0, 3),
    39: (0, 2),
    40: (0, 2),
    41: (0, 3),
    42: (0, 2),
    43: (0, 2),
    44: (0, 1),
    45: (0, 0),
    46: (0, 0),
    47: (0, 0),
    48: (0, 1),
    49: (0, 1),
    50: (0, 0),
    51: (0, 0),
    52: (0, 1),
    53: (0, 1),
    54: (0, 1),
    55: (0, 2),
    56: (0, 3),
    57: (0, 2),
    58: (0, 0),
    59: (0, 1),
    60: (0, 1),
    61: (0, 0),
    62: (0, 4),
    63: (0, 1),
    64: (0, 0),
    65: (0, 0),
    66: (0, 1),
    67: (0, 0),
    68: (0, 1),
    69: (0, 1),
    70: (0, 0),
    71: (0, 0),
    72: (0, 0),
    73: (0, 0),
    74: (0, 0),
    75: (0, 0),
    76: (0, 0),
    77: (0, 0),
    78: (0, 0),
    79: (0, 0),
    80: (0, 0),
    81: (0, 0),
    82: (0, 0),
    83: (0, 0),
    84: (0, 0),
    85: (0, 0),
    86: (0, 0),
    87: (0, 0),
    88: (0, 0),
    89: (0, 0),
    90: (0, 1),
    91: (0, 0),
    92: (0, 0),
}

# api key -> first flexible request version (None: never flexible).  Decides
# the request header version (v2 from this version on, else v1).
REQUEST_FLEXIBLE_FROM = {
    0: 9,
    1: 12,
    2: 6,
    3: 9,
    4: 4,
    5: 2,
    6: 6,
    7: 3,
    8: 8,
    9: 6,
    10: 3,
    11: 6,
    12: 4,
    13: 4,
    14: 4,
    15: 5,
    16: 3,
    17: None,
    18: 3,
    19: 5,
    20: 4,
    21: 2,
    22: 2,
    23: 4,
    24: 3,
    25: 3,
    26: 3,
    27: 1,
    28: 3,
    29: 2,
    30: 2,
    31: 2,
    32: 4,
    33: 2,
    34: 2,
    35: 2,
    36: 2,
    37: 2,
    38: 2,
    39: 2,
    40: 2,
    41: 2,
    42: 2,
    43: 2,
    44: 1,
    45: 0,
    46: 0,
    47: None,
    48: 1,
    49: 1,
    50: 0,
    51: 0,
    52: 0,
    53: 1,
    54: 1,
    55: 0,
    56: 0,
    57: 0,
    58: 0,
    59: 0,
    60: 0,
    61: 0,
    62: 0,
    63: 0,
    64: 0,
    65: 0,
    66: 0,
    67: 0,
    68: 0,
    69: 0,
    70: 0,
    71: 0,
    72: 0,
    73: 0,
    74: 0,
    75: 0,
    76: 0,
    77: 0,
    78: 0,
    79: 0,
    80: 0,
    81: 0,
    82: 0,
    83: 0,
    84: 0,
    85: 0,
    86: 0,
    87: 0,
    88: 0,
    89: 0,
    90: 0,
    91: 0,
    92: 0,
}

# api key -> first flexible response version.  Kafka's schemas give every
# request and its response the same flexibleVersions, so this is the same
# table (a test checks the equality holds for every API kchannel encodes).
RESPONSE_FLEXIBLE_FROM = REQUEST_FLEXIBLE_FROM


def api_name(api_key):
    """Kafka's display name of ``api_key``, or ``None`` if unknown."""
    return API_NAMES.get(api_key)
