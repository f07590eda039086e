"""Schemas of the Kafka messages kchannel speaks, one module per API.

``API`` maps each supported API key to its ``Api`` (request/response schemas
and the version range kchannel supports); the module constants
(``API_VERSIONS``, ``METADATA``, ...) are the same ``Api`` objects.
"""
from kchannel.protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_delegation_token,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_delegation_token,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    expire_delegation_token,
    fetch,
    find_coordinator,
    header,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    renew_delegation_token,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
    txn_offset_commit,
)
# Authorized by the gateway's ACL checks (issue 23): codecs for what it reads
# and answers.
from kchannel.protocol.messages import (  # noqa: E402
    alter_client_quotas,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_transactions,
    elect_leaders,
    list_partition_reassignments,
    list_transactions,
    unregister_broker,
    update_features,
)

PRODUCE = produce.API
FETCH = fetch.API
LIST_OFFSETS = list_offsets.API
INIT_PRODUCER_ID = init_producer_id.API
JOIN_GROUP = join_group.API
SYNC_GROUP = sync_group.API
HEARTBEAT = heartbeat.API
LEAVE_GROUP = leave_group.API
OFFSET_COMMIT = offset_commit.API
OFFSET_FETCH = offset_fetch.API
CREATE_TOPICS = create_topics.API
DELETE_TOPICS = delete_topics.API
METADATA = metadata.API
FIND_COORDINATOR = find_coordinator.API
SASL_HANDSHAKE = sasl_handshake.API
API_VERSIONS = api_versions.API
SASL_AUTHENTICATE = sasl_authenticate.API
CREATE_DELEGATION_TOKEN = create_delegation_token.API
RENEW_DELEGATION_TOKEN = renew_delegation_token.API
EXPIRE_DELEGATION_TOKEN = expire_delegation_token.API
DESCRIBE_DELEGATION_TOKEN = describe_delegation_token.API
DESCRIBE_USER_SCRAM_CREDENTIALS = describe_user_scram_credentials.API
ALTER_USER_SCRAM_CREDENTIALS = alter_user_scram_credentials.API
DESCRIBE_CLIENT_QUOTAS = describe_client_quotas.API
DESCRIBE_CLUSTER = describe_cluster.API
ADD_OFFSETS_TO_TXN = add_offsets_to_txn.API
ADD_PARTITIONS_TO_TXN = add_partitions_to_txn.API
ALTER_CONFIGS = alter_configs.API
CREATE_ACLS = create_acls.API
CREATE_PARTITIONS = create_partitions.API
DELETE_ACLS = delete_acls.API
DELETE_GROUPS = delete_groups.API
DELETE_RECORDS = delete_records.API
DESCRIBE_ACLS = describe_acls.API
DESCRIBE_CONFIGS = describe_configs.API
DESCRIBE_GROUPS = describe_groups.API
END_TXN = end_txn.API
INCREMENTAL_ALTER_CONFIGS = incremental_alter_configs.API
LIST_GROUPS = list_groups.API
OFFSET_DELETE = offset_delete.API
OFFSET_FOR_LEADER_EPOCH = offset_for_leader_epoch.API
TXN_OFFSET_COMMIT = txn_offset_commit.API
DESCRIBE_LOG_DIRS = describe_log_dirs.API
DESCRIBE_PRODUCERS = describe_producers.API
DESCRIBE_TRANSACTIONS = describe_transactions.API
LIST_TRANSACTIONS = list_transactions.API
CONSUMER_GROUP_HEARTBEAT = consumer_group_heartbeat.API
CONSUMER_GROUP_DESCRIBE = consumer_group_describe.API

ALTER_CLIENT_QUOTAS = alter_client_quotas.API
ALTER_PARTITION_REASSIGNMENTS = alter_partition_reassignments.API
ALTER_REPLICA_LOG_DIRS = alter_replica_log_dirs.API
DESCRIBE_LOG_DIRS = describe_log_dirs.API
DESCRIBE_PRODUCERS = describe_producers.API
DESCRIBE_TRANSACTIONS = describe_transactions.API
ELECT_LEADERS = elect_leaders.API
LIST_PARTITION_REASSIGNMENTS = list_partition_reassignments.API
LIST_TRANSACTIONS = list_transactions.API
DESCRIBE_QUORUM = describe_quorum.API
UNREGISTER_BROKER = unregister_broker.API
UPDATE_FEATURES = update_features.API

REQUEST_HEADER = header.REQUEST_HEADER
RESPONSE_HEADER = header.RESPONSE_HEADER

API = {
    api.api_key: api
    for api in (
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        INIT_PRODUCER_ID,
        JOIN_GROUP,
        SYNC_GROUP,
        HEARTBEAT,
        LEAVE_GROUP,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        CREATE_TOPICS,
        DELETE_TOPICS,
        METADATA,
        FIND_COORDINATOR,
        SASL_HANDSHAKE,
        API_VERSIONS,
        SASL_AUTHENTICATE,
        CREATE_DELEGATION_TOKEN,
        RENEW_DELEGATION_TOKEN,
        EXPIRE_DELEGATION_TOKEN,
        DESCRIBE_DELEGATION_TOKEN,
        DESCRIBE_CLIENT_QUOTAS,
        DESCRIBE_USER_SCRAM_CREDENTIALS,
        ALTER_USER_SCRAM_CREDENTIALS,
        DESCRIBE_CLUSTER,
        ADD_OFFSETS_TO_TXN,
        ADD_PARTITIONS_TO_TXN,
        ALTER_CONFIGS,
        CREATE_ACLS,
        CREATE_PARTITIONS,
        DELETE_ACLS,
        DELETE_GROUPS,
        DELETE_RECORDS,
        DESCRIBE_ACLS,
        DESCRIBE_CONFIGS,
        DESCRIBE_GROUPS,
        END_TXN,
        INCREMENTAL_ALTER_CONFIGS,
        LIST_GROUPS,
        OFFSET_DELETE,
        OFFSET_FOR_LEADER_EPOCH,
        TXN_OFFSET_COMMIT,
        CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE,
        ALTER_CLIENT_QUOTAS,
        ALTER_PARTITION_REASSIGNMENTS,
        ALTER_REPLICA_LOG_DIRS,
        DESCRIBE_LOG_DIRS,
        DESCRIBE_PRODUCERS,
        DESCRIBE_TRANSACTIONS,
        ELECT_LEADERS,
        LIST_PARTITION_REASSIGNMENTS,
        LIST_TRANSACTIONS,
        DESCRIBE_QUORUM,
        UNREGISTER_BROKER,
        UPDATE_FEATURES,
    )
}

__all__ = [
    "API",
    "PRODUCE",
    "FETCH",
    "LIST_OFFSETS",
    "INIT_PRODUCER_ID",
    "JOIN_GROUP",
    "SYNC_GROUP",
    "HEARTBEAT",
    "LEAVE_GROUP",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "CREATE_TOPICS",
    "DELETE_TOPICS",
    "METADATA",
    "FIND_COORDINATOR",
    "SASL_HANDSHAKE",
    "API_VERSIONS",
    "SASL_AUTHENTICATE",
    "CREATE_DELEGATION_TOKEN",
    "RENEW_DELEGATION_TOKEN",
    "EXPIRE_DELEGATION_TOKEN",
    "DESCRIBE_DELEGATION_TOKEN",
    "DESCRIBE_CLIENT_QUOTAS",
    "DESCRIBE_USER_SCRAM_CREDENTIALS",
    "ALTER_USER_SCRAM_CREDENTIALS",
    "DESCRIBE_CLUSTER",
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "ALTER_CONFIGS",
    "CREATE_ACLS",
    "CREATE_PARTITIONS",
    "DELETE_ACLS",
    "DELETE_GROUPS",
    "DELETE_RECORDS",
    "DESCRIBE_ACLS",
    "DESCRIBE_CONFIGS",
    "DESCRIBE_GROUPS",
    "END_TXN",
    "INCREMENTAL_ALTER_CONFIGS",
    "LIST_GROUPS",
    "OFFSET_DELETE",
    "OFFSET_FOR_LEADER_EPOCH",
    "TXN_OFFSET_COMMIT",
    "CONSUMER_GROUP_HEARTBEAT",
    "CONSUMER_GROUP_DESCRIBE",
    "ALTER_CLIENT_QUOTAS",
    "ALTER_PARTITION_REASSIGNMENTS",
    "ALTER_REPLICA_LOG_DIRS",
    "DESCRIBE_LOG_DIRS",
    "DESCRIBE_PRODUCERS",
    "DESCRIBE_TRANSACTIONS",
    "ELECT_LEADERS",
    "LIST_PARTITION_REASSIGNMENTS",
    "LIST_TRANSACTIONS",
    "DESCRIBE_QUORUM",
    "UNREGISTER_BROKER",
    "UPDATE_FEATURES",
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
]
