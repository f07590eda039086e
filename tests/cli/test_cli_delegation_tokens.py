"""``kchannel delegation-tokens``: kafka-delegation-tokens.sh's argument
checks (exit 2), its output for renew/expire/describe and failures (exit 1),
run in-process against a SASL_PLAINTEXT server."""
import re
import time

import pytest

from kchannel.cli import main
from kchannel.server import Server
from kchannel.server.token_handlers import install_server

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture
def server(tmp_path):
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN} required user_alice="alice-secret" user_bob="bob-secret";',
        "log.dirs": str(tmp_path),
        "delegation.token.secret.key": "cliKey",
    }
    s = Server(props)
    service = install_server(s, s.config, props)
    s.start()
    try:
        yield s
    finally:
        s.shutdown()
        service.close()


def command_config(tmp_path, user="alice", password="alice-secret"):
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN} required username="{user}" '
                    f'password="{password}";\n')
    return str(path)


def run(capsys, *args):
    code = main(["delegation-tokens", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args,message", [
    ([], "Command must include exactly one action: --create, --renew, --expire or --describe"),
    (["--create", "--describe"],
     "Command must include exactly one action: --create, --renew, --expire or --describe"),
    (["--describe", "--command-config", "x"], 'Missing required argument "[bootstrap-server]"'),
    (["--describe", "--bootstrap-server", "h:1"], 'Missing required argument "[command-config]"'),
    (["--create", "--bootstrap-server", "h:1", "--command-config", "x"],
     'Missing required argument "[max-life-time-period]"'),
    (["--renew", "--bootstrap-server", "h:1", "--command-config", "x", "--hmac", "a"],
     'Missing required argument "[renew-time-period]"'),
    (["--expire", "--bootstrap-server", "h:1", "--command-config", "x",
      "--expiry-time-period", "-1"], 'Missing required argument "[hmac]"'),
    (["--create", "--bootstrap-server", "h:1", "--command-config", "x",
      "--max-life-time-period", "-1", "--hmac", "a"],
     'Option "[create]" can\'t be used with option "[hmac]"'),
    (["--renew", "--bootstrap-server", "h:1", "--command-config", "x", "--hmac", "a",
      "--renew-time-period", "1", "--owner-principal", "User:a"],
     'Option "[renew]" can\'t be used with option "[owner-principal]"'),
    (["--describe", "--bootstrap-server", "h:1", "--command-config", "x", "--hmac", "a"],
     'Option "[describe]" can\'t be used with option "[hmac]"'),
])
def test_usage_errors(capsys, args, message):
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(message + "\n")


def test_renew_expire_describe_output(server, tmp_path, capsys):
    target = ["--bootstrap-server", f"127.0.0.1:{server.bound_port('SASL_PLAINTEXT')}",
              "--command-config", command_config(tmp_path)]
    code, out, err = run(capsys, *target, "--create", "--max-life-time-period", "-1",
                         "--renewer-principal", "User:bob", "--renewer-principal", "User:carol")
    assert code == 0, err
    assert out.startswith("Calling create token operation with renewers :[User:bob, User:carol]"
                          " , max-life-time-period :-1\nCreated delegation token with tokenId : ")
    manager = server.token_manager
    [info] = manager.tokens()
    token = manager.get_token(info.token_id)
    date = lambda ms: time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))  # noqa: E731
    row = "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s" % (
        info.token_id, token.hmac_base64, "User:alice", "User:alice", "[User:bob, User:carol]",
        date(info.issue_timestamp), date(info.expiry_timestamp), date(info.max_timestamp))
    assert out.endswith("\n\n" + row + "\n")

    hmac = token.hmac_base64
    code, out, err = run(capsys, *target, "--renew", "--hmac", hmac, "--renew-time-period",
                         "3600000")
    assert code == 0, err
    expiry = manager.get_token(info.token_id).token_info.expiry_timestamp
    assert out == (f"Calling renew token operation with hmac :{hmac} , renew-time-period "
                   f":3600000\nCompleted renew operation. New expiry date : {date(expiry)}")

    bob = ["--bootstrap-server", target[1], "--command-config",
           command_config(tmp_path, "bob", "bob-secret")]
    code, out, err = run(capsys, *bob, "--describe", "--owner-principal", "User:bob",
                         "--owner-principal", "User:nobody")
    assert code == 0, err
    assert out.startswith("Calling describe token operation for owners: [User:bob, "
                          "User:nobody]\nTotal number of tokens : 1\n")
    renewed = "%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s" % (
        info.token_id, hmac, "User:alice", "User:alice", "[User:bob, User:carol]",
        date(info.issue_timestamp), date(expiry), date(info.max_timestamp))
    assert out.endswith("\n\n" + renewed + "\n")

    code, out, err = run(capsys, *bob, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert code == 0, err
    assert re.fullmatch(rf"Calling expire token operation with hmac :{re.escape(hmac)} , "
                        r"expire-time-period :-1\nCompleted expire operation\. New expiry date "
                        r": \d{4}-\d\d-\d\dT\d\d:\d\d", out)
    assert manager.tokens() == []

    code, out, err = run(capsys, *target, "--renew", "--hmac", hmac, "--renew-time-period", "-1")
    assert code == 1
    assert out == (f"Calling renew token operation with hmac :{hmac} , renew-time-period :-1\n")
    assert err == ("org.apache.kafka.common.errors.DelegationTokenNotFoundException: "
                   "Delegation Token is not found on server.\n")


def test_failures_exit_1(server, tmp_path, capsys):
    port = server.bound_port("PLAINTEXT")
    props = tmp_path / "plain.properties"
    props.write_text("")
    code, out, err = run(capsys, "--bootstrap-server", f"127.0.0.1:{port}", "--command-config",
                         str(props), "--describe")
    assert code == 1
    assert "UnsupportedByAuthenticationException: Delegation Token requests are not allowed" in err
    code, out, err = run(capsys, "--bootstrap-server", f"127.0.0.1:{port}", "--command-config",
                         str(props), "--create", "--max-life-time-period", "-1",
                         "--renewer-principal", "nocolon")
    assert (code, err) == (1, "expected a string in format principalType:principalName but "
                              "got nocolon\n")
    code, out, err = run(capsys, "--bootstrap-server", f"127.0.0.1:{port}", "--command-config",
                         str(tmp_path / "missing.properties"), "--describe")
    assert code == 1 and "missing.properties" in err
    sasl = server.bound_port("SASL_PLAINTEXT")
    code, out, err = run(capsys, "--bootstrap-server", f"127.0.0.1:{sasl}", "--command-config",
                         command_config(tmp_path, "alice", "wrong"), "--describe")
    assert code == 1 and "SaslAuthenticationException" in err
