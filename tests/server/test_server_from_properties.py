"""``Server.from_properties`` is the broker ``kchannel serve`` runs: built
from the same properties, both answer the same ApiVersions and the same
SCRAM, ACL and delegation token requests (real sockets, ``kchannel serve``
as a subprocess)."""
import sqlite3

from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl.scram_store import default_store_path
from kchannel.server import Server

from tests.fixtures.serve import read_listeners, start_serve

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def broker_props(data_dir):
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "delegation.token.secret.key": "shared-secret",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }


def answers(port):
    """ApiVersions, then one SCRAM, one ACL and one token request."""
    with KafkaClient({"bootstrap.servers": f"127.0.0.1:{port}"}).connect() as c:
        versions = dict(c.api_versions)
        scram = c.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
        acls = c.request(ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": 1, "resource_name_filter": None,
            "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
            "operation": 1, "permission_type": 1})
        tokens = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})
    return (versions, scram["error_code"], sorted(scram["results"] or [], key=str),
            acls["error_code"], acls["resources"], tokens["error_code"], tokens["tokens"])


def test_from_properties_is_what_serve_runs(tmp_path):
    proc = start_serve(tmp_path, broker_props(tmp_path / "serve-data"))
    server = Server.from_properties(broker_props(tmp_path / "server-data"))
    try:
        server.start()
        served = answers(read_listeners(proc, 1)["PLAINTEXT"][2])
        embedded = answers(server.bound_port("PLAINTEXT"))
        versions = embedded[0]
        # More than Server(config) alone: the assembly's handlers are there.
        for key in (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                    ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
                    ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN,
                    ApiKey.DESCRIBE_CLIENT_QUOTAS):
            assert key in versions, key
        assert embedded == served
    finally:
        server.shutdown()
        proc.terminate()
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    # shutdown() closed the SCRAM store it opened: its SQLite file is not
    # left locked (an exclusive transaction starts at once).
    db = sqlite3.connect(default_store_path(str(tmp_path / "server-data")), timeout=0)
    db.execute("BEGIN EXCLUSIVE")
    db.rollback()
    db.close()


def test_plain_server_has_only_the_built_in_apis():
    with Server(listeners=["PLAINTEXT://127.0.0.1:0"]) as server:
        server.start()
        with KafkaClient({"bootstrap.servers":
                          f"127.0.0.1:{server.bound_port('PLAINTEXT')}"}).connect() as c:
            assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS not in c.api_versions
            assert ApiKey.DESCRIBE_ACLS not in c.api_versions
