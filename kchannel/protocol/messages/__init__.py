"""Schemas of the Kafka messages kchannel speaks, one module per API.

``API`` maps each supported API key to its ``Api`` (request/response schemas
and the version range kchannel supports); the module constants
(``API_VERSIONS``, ``METADATA``, ...) are the same ``Api`` objects.
"""
from kchannel.protocol.messages import (
    alter_user_scram_credentials,
    api_versions,
    create_delegation_token,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_delegation_token,
    describe_groups,
    describe_user_scram_credentials,
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
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    produce,
    renew_delegation_token,
    sasl_authenticate,
    sasl_handshake,
    sync_group,
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
DESCRIBE_GROUPS = describe_groups.API
LIST_GROUPS = list_groups.API
DESCRIBE_CONFIGS = describe_configs.API
CREATE_PARTITIONS = create_partitions.API
DELETE_GROUPS = delete_groups.API
INCREMENTAL_ALTER_CONFIGS = incremental_alter_configs.API
OFFSET_DELETE = offset_delete.API

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
        DESCRIBE_GROUPS,
        LIST_GROUPS,
        DESCRIBE_CONFIGS,
        CREATE_PARTITIONS,
        DELETE_GROUPS,
        INCREMENTAL_ALTER_CONFIGS,
        OFFSET_DELETE,
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
    "DESCRIBE_GROUPS",
    "LIST_GROUPS",
    "DESCRIBE_CONFIGS",
    "CREATE_PARTITIONS",
    "DELETE_GROUPS",
    "INCREMENTAL_ALTER_CONFIGS",
    "OFFSET_DELETE",
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
]
