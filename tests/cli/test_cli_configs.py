"""``kchannel configs`` (kafka-configs.sh for SCRAM users), run as a real
subprocess against a server's credential store (--server-config)."""
import sys

import pytest

from kchannel.cli.configs import CommandError, parse_add_config
from kchannel.security.sasl import mechanism as registry
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.scram_store import SqliteScramCredentialStore

from tests.fixtures.scram import kc

@pytest.fixture
def server_config(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(f"node.id=1\nlog.dirs={tmp_path / 'data'},{tmp_path / 'other'}\n")
    return path


def store_of(tmp_path):
    return SqliteScramCredentialStore(tmp_path / "data" / "scram-credentials.db")


def test_add_describe_delete_cycle(server_config, tmp_path):
    cfg = ["--server-config", str(server_config)]
    r = kc(*cfg, "--alter", "--add-config",
           "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
           "SCRAM-SHA-512=[password=alice-secret]",
           "--entity-type", "users", "--entity-name", "alice")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user alice.\n")
    r = kc(*cfg, "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]", "--user", "bob")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user bob.\n")

    r = kc(*cfg, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert r.returncode == 0
    assert r.stdout == ("SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    r = kc(*cfg, "--describe", "--entity-type", "users")
    assert r.returncode == 0
    # Kafka's order: the java.util.HashMap the broker collects users in.
    assert r.stdout.splitlines() == [
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"]

    # The stored credential works with the SCRAM server mechanism, and only
    # salt/iterations/StoredKey/ServerKey were stored.
    with store_of(tmp_path) as store:
        cred = store.get("alice", "SCRAM-SHA-256")
        assert cred.iterations == 8192
        client = registry.create_client("SCRAM-SHA-256", jaas_options={
            "username": "alice", "password": "alice-secret"})
        server = registry.create_server("SCRAM-SHA-256",
                                        callbacks=ServerCallbacks.default(store=store), now=0)
        token = client.evaluate_challenge(b"")
        while not server.is_complete():
            token = client.evaluate_challenge(server.evaluate_response(token, 0))
        assert server.get_authorization_id() == "alice"
    raw = (tmp_path / "data" / "scram-credentials.db").read_bytes()
    assert b"alice-secret" not in raw

    r = kc(*cfg, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
           "--entity-name", "alice")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user alice.\n")
    r = kc(*cfg, "--describe", "--user", "alice")
    assert r.stdout == ("SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192\n")
    # Deleting what is gone fails like Kafka.
    r = kc(*cfg, "--alter", "--delete-config", "SCRAM-SHA-512", "--user", "alice")
    assert r.returncode == 1
    assert "ResourceNotFoundException: Attempt to delete a user credential that does not exist" \
        in r.stderr


def test_describe_unknown_user_prints_nothing(server_config):
    r = kc("--server-config", str(server_config), "--describe", "--entity-type", "users",
           "--entity-name", "nobody")
    assert (r.returncode, r.stdout) == (0, "")


@pytest.mark.parametrize("args,message", [
    (["--alter", "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]", "--user", "a"],
     "Iterations 1000 is less than the minimum 4096 required for SCRAM-SHA-256"),
    (["--alter", "--add-config", "SCRAM-SHA-256=[iterations=20000,password=x]", "--user", "a"],
     "UnacceptableCredentialException: Too many iterations"),
    (["--alter", "--add-config", "SCRAM-SHA-256=[pass=x]", "--user", "a"],
     "Invalid credential property SCRAM_SHA_256=pass=x"),
    (["--alter", "--add-config", "producer_byte_rate=1024", "--user", "a"],
     "Unexpected config names: producer_byte_rate"),
    (["--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--delete-config",
      "SCRAM-SHA-256", "--user", "a"],
     "DuplicateResourceException: A user credential cannot be altered twice in the same request"),
    (["--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--entity-type", "users",
      "--entity-default"],
     "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials"),
])
def test_failures_exit_1_with_kafka_message(server_config, args, message):
    r = kc("--server-config", str(server_config), *args)
    assert r.returncode == 1, r
    assert message in r.stderr
    assert "Completed" not in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--alter", "--user", "a"],
     "At least one of --add-config, --add-config-file, or --delete-config must be specified"),
    (["--describe", "--entity-type", "topics"], "Invalid entity type topics"),
    (["--entity-type", "users"], "Command must include exactly one action: --describe, --alter"),
    (["--describe"], "At least one entity type must be specified"),
    (["--describe", "--add-config", "SCRAM-SHA-256=[password=x]", "--user", "a"],
     "Option \"[describe]\" can't be used with option \"[add-config]\""),
    (["--describe", "--user", "a", "--entity-type", "users"],
     "Duplicate entity type(s) specified: users"),
    (["--alter", "--add-config", "SCRAM-SHA-256=[password=x]", "--add-config-file", "f",
      "--user", "a"], "Only one of --add-config or --add-config-file must be specified"),
])
def test_invalid_option_combinations_exit_2_with_usage(server_config, args, message):
    r = kc("--server-config", str(server_config), *args)
    assert r.returncode == 2, r
    assert message in r.stderr
    assert "usage: kchannel configs" in r.stderr
    assert r.stdout == ""


def test_usage_errors_exit_2(server_config):
    r = kc("--server-config", str(server_config), "--describe", "--no-such-flag")
    assert r.returncode == 2
    r = kc("--server-config", str(server_config), "--describe", "--entity-type")
    assert r.returncode == 2


def test_needs_a_target():
    r = kc("--describe", "--entity-type", "users")
    assert r.returncode == 2
    assert "--bootstrap-server" in r.stderr
    r = kc("--server-config", "a", "--bootstrap-server", "b:1", "--describe",
           "--entity-type", "users")
    assert r.returncode == 2
    assert "Only one of --bootstrap-server, --bootstrap-controller, and --server-config" \
        in r.stderr


def test_error_line_echoes_the_arguments_given_to_main(tmp_path, capsys, monkeypatch):
    from kchannel.cli import main
    # Whatever the process was started with, the message names main's argv.
    monkeypatch.setattr(sys, "argv", ["pytest", "configs", "--unrelated"])
    argv = ["configs", "--bootstrap-server", "127.0.0.1:1", "--describe",
            "--entity-type", "users"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert ("Error while executing config command with args '--bootstrap-server 127.0.0.1:1 "
            "--describe --entity-type users'") in err
    assert "--unrelated" not in err


def test_memory_store_server_refused(tmp_path):
    cfg = tmp_path / "s.properties"
    cfg.write_text(f"log.dirs={tmp_path}\nkchannel.scram.credential.store=memory\n")
    r = kc("--server-config", str(cfg), "--describe", "--entity-type", "users")
    assert r.returncode == 1 and "--bootstrap-server" in r.stderr


def test_add_config_file(server_config, tmp_path):
    f = tmp_path / "add.properties"
    f.write_text("SCRAM-SHA-512=iterations=4096,password=p,w\n")
    r = kc("--server-config", str(server_config), "--alter", "--add-config-file", str(f),
           "--user", "carol")
    assert r.returncode == 0, r.stderr
    with store_of(tmp_path) as store:
        assert store.get("carol", "SCRAM-SHA-512").iterations == 4096


def test_parse_add_config_like_kafka():
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=a,b=c],"
                            "SCRAM-SHA-512=[password=x]") == {
        "SCRAM-SHA-256": "iterations=8192,password=a,b=c",
        "SCRAM-SHA-512": "password=x"}
    assert parse_add_config("k1 = v1,k2=[v1,v2]") == {"k1": "v1", "k2": "v1,v2"}
    with pytest.raises(CommandError):
        parse_add_config("novalue")
