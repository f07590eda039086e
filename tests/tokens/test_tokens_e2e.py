"""Delegation tokens end to end over SASL_SSL with SCRAM: the
``kchannel delegation-tokens`` CLI (a subprocess) creates a token as alice, a
client logs in with the token id and HMAC (``tokenauth=true``) and is
``User:alice``, token-authenticated; token sessions cannot manage tokens;
when the token expires new logins fail and the live session ends; a server
restart keeps unexpired tokens (SQLite).  Time on the server side is driven
by a settable clock instead of sleeps."""
import os
import re
import subprocess
import sys
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import DelegationTokenError, KChannelError, SaslAuthenticationError
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.sasl.mechanism import (CREDENTIAL_LIFETIME_MS, ServerCallbacks,
                                              create_client, create_server)
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.manager import TokenManager
from kchannel.tokens.store import InMemoryTokenStore
from kchannel.utils import now_ms
from tests.fixtures.tokens import Clock, TokenServer, client_configs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = ("%-15s %-30s %-15s %-15s %-25s %-15s %-15s %-15s"
          % ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE",
             "MAXDATE"))
DATE = r"\d{4}-\d\d-\d\dT\d\d:\d\d"


def write_properties(path, configs):
    path.write_text("".join(f"{k}={v}\n" for k, v in configs.items()))
    return str(path)


def cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "kchannel", "delegation-tokens", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def whoami(client):
    client.request(int(ApiKey.DESCRIBE_CLUSTER), {"include_cluster_authorized_operations": False})


def parse_token_rows(stdout):
    """(token id, hmac, owner, requester, renewers) of each printed row."""
    rows = []
    for line in stdout.split("\n"):
        m = re.fullmatch(rf"(\S+) +(\S+) +(\S+) +(\S+) +(\[.*?\]) +({DATE}) +({DATE}) +"
                         rf"({DATE}) *", line)
        if m:
            rows.append(m.groups()[:5])
    return rows


@pytest.fixture
def token_server(tmp_path, pki):
    s = TokenServer(tmp_path, pki)
    try:
        yield s
    finally:
        s.close()


@pytest.mark.slow
def test_cli_token_login_and_expiry(token_server, pki, tmp_path):
    s = token_server
    alice_props = write_properties(tmp_path / "alice.properties",
                                   client_configs(pki, "SCRAM-SHA-256", "alice", "alice-secret"))
    target = ["--bootstrap-server", f"127.0.0.1:{s.port}", "--command-config", alice_props]
    # 60 s of server time; the test moves the server's clock past it.
    r = cli(*target, "--create", "--max-life-time-period", "60000",
            "--renewer-principal", "User:bob")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == ("Calling create token operation with renewers :[User:bob] , "
                        "max-life-time-period :60000")
    token_id = lines[1].removeprefix("Created delegation token with tokenId : ")
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", token_id)
    assert lines[2:4] == ["", HEADER] and lines[4] == ""
    [(tid, hmac_b64, owner, requester, renewers)] = parse_token_rows(r.stdout)
    assert (tid, owner, requester, renewers) == (token_id, "User:alice", "User:alice",
                                                 "[User:bob]")
    info = s.service.manager.get_token(token_id)
    assert info.hmac_base64 == hmac_b64
    assert info.token_info.max_timestamp - info.token_info.issue_timestamp == 60000

    r = cli(*target, "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Calling describe token operation for current user.\n"
                               "Total number of tokens : 1\n" + HEADER + "\n\n")
    assert [row[0] for row in parse_token_rows(r.stdout)] == [token_id]

    # Both SCRAM mechanisms accept the token; the session is alice's and
    # token-authenticated.
    for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        with KafkaClient(client_configs(pki, mech, token_id, hmac_b64, token=True)) as c:
            c.connect("127.0.0.1", s.port)
            whoami(c)
    assert s.seen == [("User:alice", True), ("User:alice", True)]

    # A token session may not manage tokens, through the API or the CLI.
    token_props = write_properties(tmp_path / "token.properties",
                                   client_configs(pki, "SCRAM-SHA-256", token_id, hmac_b64,
                                                  token=True))
    r = cli("--bootstrap-server", f"127.0.0.1:{s.port}", "--command-config", token_props,
            "--create", "--max-life-time-period", "-1")
    assert r.returncode == 1
    assert ("org.apache.kafka.common.errors.UnsupportedByAuthenticationException: Delegation "
            "Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation "
            "token authenticated channels.") in r.stderr

    live = KafkaClient(client_configs(pki, "SCRAM-SHA-256", token_id, hmac_b64, token=True))
    live.connect("127.0.0.1", s.port)
    try:
        with pytest.raises(DelegationTokenError) as exc:
            DelegationTokenAdmin(live).create()
        assert exc.value.error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        whoami(live)

        # The token's max lifetime passes.
        s.clock.advance(61000)
        with pytest.raises(KChannelError):
            whoami(live)
    finally:
        live.close()
    with pytest.raises(SaslAuthenticationError):
        KafkaClient(client_configs(pki, "SCRAM-SHA-256", token_id, hmac_b64, token=True)) \
            .connect("127.0.0.1", s.port)

    # The expiry check (every 100 ms) removes it.
    deadline = time.monotonic() + 30
    while s.service.manager.tokens() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.service.manager.tokens() == []
    r = cli(*target, "--describe", "--owner-principal", "User:alice")
    assert r.returncode == 0
    assert r.stdout.startswith("Calling describe token operation for owners: [User:alice]\n"
                               "Total number of tokens : 0\n" + HEADER)


def test_wrong_hmac_and_unknown_token_fail(token_server, pki):
    s = token_server
    with KafkaClient(client_configs(pki, "SCRAM-SHA-256", "alice", "alice-secret")) as c:
        c.connect("127.0.0.1", s.port)
        token = DelegationTokenAdmin(c).create()
    tid = token.token_info.token_id
    other = TokenManager("another-secret").create_token("User:alice", now=now_ms())
    import base64
    for user, password in ((tid, base64.b64encode(other.hmac).decode()),
                           ("unknownTokenId00000000", token.hmac_base64),
                           (tid, token.hmac_base64[:-4] + "AAA=")):
        with pytest.raises(SaslAuthenticationError):
            KafkaClient(client_configs(pki, "SCRAM-SHA-256", user, password, token=True)) \
                .connect("127.0.0.1", s.port)
    # Without tokenauth=true the token id is just an unknown user.
    with pytest.raises(SaslAuthenticationError):
        KafkaClient(client_configs(pki, "SCRAM-SHA-256", tid, token.hmac_base64)) \
            .connect("127.0.0.1", s.port)


def test_explicit_expire_ends_new_logins(token_server, pki):
    s = token_server
    with KafkaClient(client_configs(pki, "SCRAM-SHA-256", "alice", "alice-secret")) as c:
        c.connect("127.0.0.1", s.port)
        admin = DelegationTokenAdmin(c)
        token = admin.create()
        cfg = client_configs(pki, "SCRAM-SHA-512", token.token_info.token_id, token.hmac_base64,
                             token=True)
        with KafkaClient(cfg) as t:
            t.connect("127.0.0.1", s.port)
        admin.expire(token.hmac, -1)
        with pytest.raises(SaslAuthenticationError):
            KafkaClient(cfg).connect("127.0.0.1", s.port)


def test_restart_keeps_unexpired_tokens(tmp_path, pki):
    clock = Clock()
    s = TokenServer(tmp_path, pki, clock)
    try:
        with KafkaClient(client_configs(pki, "SCRAM-SHA-256", "alice", "alice-secret")) as c:
            c.connect("127.0.0.1", s.port)
            admin = DelegationTokenAdmin(c)
            keep = admin.create(renewers=["User:bob"])
            short = admin.create(max_lifetime_ms=1000)
    finally:
        s.close()
    clock.advance(5000)
    s = TokenServer(tmp_path, pki, clock)
    try:
        ids = {t.token_id for t in s.service.manager.tokens()}
        assert keep.token_info.token_id in ids
        with KafkaClient(client_configs(pki, "SCRAM-SHA-256", keep.token_info.token_id,
                                        keep.hmac_base64, token=True)) as t:
            t.connect("127.0.0.1", s.port)
            whoami(t)
        assert s.seen == [("User:alice", True)]
        with pytest.raises(SaslAuthenticationError):
            KafkaClient(client_configs(pki, "SCRAM-SHA-256", short.token_info.token_id,
                                       short.hmac_base64, token=True)).connect("127.0.0.1", s.port)
        with KafkaClient(client_configs(pki, "SCRAM-SHA-256", "alice", "alice-secret")) as c:
            c.connect("127.0.0.1", s.port)
            [described] = DelegationTokenAdmin(c).describe()
            assert described == keep
    finally:
        s.close()


# ---------------------------------------------------------- sans-I/O bytes

def test_token_client_first_message_bytes():
    mech = create_client("SCRAM-SHA-256", jaas_options={
        "username": "tokenId_ABCDEFGHIJKLMN", "password": "hmacb64==", "tokenauth": "true"},
        nonce="fyko+d2lbbFgONRv9qkxdawL")
    assert mech.evaluate_challenge(b"") == \
        b"n,,n=tokenId_ABCDEFGHIJKLMN,r=fyko+d2lbbFgONRv9qkxdawL,tokenauth=true"
    plain = create_client("SCRAM-SHA-256", jaas_options={"username": "u", "password": "p"},
                          nonce="abc")
    assert plain.evaluate_challenge(b"") == b"n,,n=u,r=abc"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_token_scram_exchange_sans_io(mechanism):
    manager = TokenManager("k", store=InMemoryTokenStore())
    now = 1_700_000_000_000
    token = manager.create_token("User:alice", max_lifetime_ms=60000, now=now)
    import base64
    client = create_client(mechanism, jaas_options={
        "username": token.token_id, "password": base64.b64encode(token.hmac).decode(),
        "tokenauth": "true"})
    server = create_server(mechanism, callbacks=ServerCallbacks(
        token_credential=manager.token_credential), now=now)
    msg = client.evaluate_challenge(b"")
    while not server.is_complete():
        challenge = server.evaluate_response(msg, now)
        msg = client.evaluate_challenge(challenge)
    assert client.is_complete()
    assert server.get_authorization_id() == "alice"
    assert server.token_authenticated
    assert server.get_negotiated_property(CREDENTIAL_LIFETIME_MS) == now + 60000
    # Past its expiry the same token is refused.
    late = create_server(mechanism, callbacks=ServerCallbacks(
        token_credential=manager.token_credential), now=now + 60001)
    client = create_client(mechanism, jaas_options={
        "username": token.token_id, "password": base64.b64encode(token.hmac).decode(),
        "tokenauth": "true"})
    challenge = late.evaluate_response(client.evaluate_challenge(b""), now + 60001)
    with pytest.raises(SaslAuthenticationError):
        late.evaluate_response(client.evaluate_challenge(challenge), now + 60001)
