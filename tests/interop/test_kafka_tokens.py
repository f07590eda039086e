"""Delegation tokens (KIP-48) end to end against Apache Kafka: the kchannel
client API (``DelegationTokenAdmin``) and ``kchannel delegation-tokens``
create, describe, renew and expire tokens on a real broker; a token Kafka
issued logs in to Kafka with SCRAM ``tokenauth=true``; a token issued by
``kchannel serve`` (another secret) is refused by Kafka.  Every answer is
checked against what kchannel's own token code computes for the same input
(same HMAC for the same secret and token id, Kafka's default lifetimes, the
same channels refused)."""
import base64
import re
import time

import pytest

from kchannel import errors
from kchannel.cli import main
from kchannel.client import KafkaClient
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.manager import allow_token_requests
from kchannel.tokens.token import create_hmac
from tests.fixtures.kafka import SCRAM_MODULE
from tests.fixtures.kafka_messages import SCRAM_FAILED
from tests.fixtures.kafka_tokens import created, expired, token_configs
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

# Kafka's defaults (delegation.token.expiry.time.ms / max.lifetime.ms).
DEFAULT_EXPIRY_MS = 24 * 3600 * 1000
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000


@pytest.fixture
def admin_client(kafka_broker):
    with KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")) as client:
        client.connect()
        yield client


def now_ms():
    return int(time.time() * 1000)


def test_create_describe_renew_expire(kafka_broker, admin_client):
    admin = DelegationTokenAdmin(admin_client)
    before = now_ms()
    token = created(admin, renewers=["User:alice"], max_lifetime_ms=3600_000)
    info = token.token_info
    assert info.owner == KafkaPrincipal("User", "admin")
    assert info.token_requester == KafkaPrincipal("User", "admin")
    assert before - 5000 <= info.issue_timestamp <= now_ms() + 5000
    # the requested max lifetime, under the broker's 7 days; the first expiry
    # is the default (1 day) capped by that maximum
    assert info.max_timestamp == info.issue_timestamp + 3600_000
    assert info.expiry_timestamp == min(info.issue_timestamp + DEFAULT_EXPIRY_MS,
                                        info.max_timestamp)
    # Kafka's HMAC is HMAC-SHA512(token id) under delegation.token.secret.key,
    # exactly what kchannel's token manager computes.
    assert token.hmac == create_hmac(info.token_id, kafka_broker.token_secret)

    described = {t.token_info.token_id: t for t in admin.describe()}
    assert info.token_id in described
    d = described[info.token_id]
    assert d.hmac == token.hmac
    assert d.token_info.renewers == [KafkaPrincipal("User", "alice")]
    assert (d.token_info.issue_timestamp, d.token_info.expiry_timestamp,
            d.token_info.max_timestamp) == (info.issue_timestamp, info.expiry_timestamp,
                                            info.max_timestamp)
    assert [t.token_info.token_id for t in admin.describe(owners=["User:admin"])
            if t.token_info.token_id == info.token_id] == [info.token_id]
    assert [t for t in admin.describe(owners=["User:nobody"])
            if t.token_info.token_id == info.token_id] == []

    # renew: now + period, never past the max timestamp
    start = now_ms()
    expiry = admin.renew(token.hmac, 60_000)
    assert start + 60_000 - 5000 <= expiry <= now_ms() + 60_000 + 5000
    assert admin.renew(token.hmac, 10 * 3600_000) == info.max_timestamp

    # expire with a period: the new expiry; with -1: gone at once
    start = now_ms()
    expiry = admin.expire(token.hmac, 30_000)
    assert start + 30_000 - 5000 <= expiry <= now_ms() + 30_000 + 5000
    expired(admin, token)
    with pytest.raises(errors.DelegationTokenError) as exc:
        admin.renew(token.hmac, -1)
    assert exc.value.error_code == Errors.DELEGATION_TOKEN_NOT_FOUND


def test_renew_by_a_non_renewer_is_refused(kafka_broker, admin_client):
    token = created(DelegationTokenAdmin(admin_client), max_lifetime_ms=3600_000)
    with KafkaClient(kafka_broker.client_configs("SASL_PLAINTEXT", "PLAIN",
                                                 user="alice")) as alice:
        alice.connect()
        with pytest.raises(errors.DelegationTokenError) as exc:
            DelegationTokenAdmin(alice).renew(token.hmac, -1)
    assert exc.value.error_code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    DelegationTokenAdmin(admin_client).expire(token.hmac, -1)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_token_login_to_kafka(kafka_broker, admin_client, mechanism):
    """A token Kafka issued logs in (SCRAM, tokenauth=true) as its owner; on
    that token-authenticated connection Kafka refuses token requests, as
    kchannel's allow_token_requests says."""
    admin = DelegationTokenAdmin(admin_client)
    token = created(admin, max_lifetime_ms=3600_000)
    try:
        with KafkaClient(token_configs(kafka_broker, token, "SASL_SSL", mechanism)) as client:
            client.connect()
            md = client.request(ApiKey.METADATA, {"topics": []})
            assert md["cluster_id"] == kafka_broker.cluster_id
            with pytest.raises(errors.DelegationTokenError) as exc:
                DelegationTokenAdmin(client).create()
            assert exc.value.error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert exc.value.exception_name == "UnsupportedByAuthenticationException"
        token_principal = KafkaPrincipal("User", "admin", token_authenticated=True)
        assert not allow_token_requests(token_principal, "SASL_SSL")
    finally:
        expired(admin, token)
    # expired (removed) tokens no longer log in
    with KafkaClient(token_configs(kafka_broker, token, "SASL_SSL", mechanism)) as client:
        with pytest.raises(errors.SaslAuthenticationError) as exc:
            client.connect()
    assert str(exc.value) == SCRAM_FAILED.format(mechanism)


@pytest.mark.parametrize("listener,allowed", [
    ("PLAINTEXT", False), ("SSL", False), ("MTLS", True), ("SASL_PLAINTEXT", True)])
def test_which_channels_may_ask_for_tokens(kafka_broker, listener, allowed):
    """KafkaApis.allowTokenRequests: not on PLAINTEXT, not on one-way SSL
    (anonymous); two-way SSL and SASL may.  kchannel's server decides the
    same for the same principal and protocol."""
    mechanism = "PLAIN" if listener.startswith("SASL") else None
    with KafkaClient(kafka_broker.client_configs(listener, mechanism)) as client:
        client.connect()
        admin = DelegationTokenAdmin(client)
        if allowed:
            token = created(admin, max_lifetime_ms=60_000)
            expired(admin, token)
            owner = token.token_info.owner
        else:
            with pytest.raises(errors.DelegationTokenError) as exc:
                admin.create()
            assert exc.value.error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            owner = KafkaPrincipal("User", "ANONYMOUS")
    if listener == "MTLS":
        assert owner == KafkaPrincipal("User", kafka_broker.pki.client.dn)
    protocol = kafka_broker.security_protocol(listener)
    assert allow_token_requests(owner, protocol) is allowed


def test_kchannel_serve_token_is_refused_by_kafka(kafka_broker, kchannel_inprocess_server):
    """A token issued by a kchannel server (its own secret) means nothing to
    Kafka: the SCRAM login fails as any unknown token does."""
    serve = kchannel_inprocess_server({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="admin-secret";',
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            f"{SCRAM_MODULE} required;",
        "delegation.token.secret.key": "kchannel-serve-secret",
    })
    configs = {"bootstrap.servers": serve.bootstrap("SASL_PLAINTEXT"),
               "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                   'required username="admin" password="admin-secret";'}
    with KafkaClient(configs) as client:
        client.connect()
        token = DelegationTokenAdmin(client).create(max_lifetime_ms=3600_000)
    assert token.hmac == create_hmac(token.token_info.token_id, "kchannel-serve-secret")
    with KafkaClient(token_configs(kafka_broker, token)) as client:
        with pytest.raises(errors.SaslAuthenticationError) as exc:
            client.connect()
    assert str(exc.value) == SCRAM_FAILED.format("SCRAM-SHA-256")


# ---------------------------------------------------- kchannel delegation-tokens
def tokens_main(capsys, *args):
    code = main(["delegation-tokens", *args])
    out, err = capsys.readouterr()
    return code, out, err


TOKEN_LINE = re.compile(r"^(\S+)\s+(\S+)\s+(User:\S+)\s+(User:\S+)\s+(\[.*?\])\s+"
                        r"(\S+)\s+(\S+)\s+(\S+)\s*$")


def test_cli_against_kafka(kafka_broker, admin_client, tmp_path, capsys):
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-256")
    props = kafka_broker.write_client_properties(tmp_path / "admin.properties", configs)
    common = ["--bootstrap-server", configs["bootstrap.servers"], "--command-config", props]

    code, out, err = tokens_main(capsys, "--create", *common, "--max-life-time-period", "-1",
                                 "--renewer-principal", "User:alice")
    assert code == 0, err
    m = re.search(r"Created delegation token with tokenId : (\S+)", out)
    assert m, out
    token_id = m.group(1)
    rows = [TOKEN_LINE.match(l) for l in out.splitlines()]
    row = next(r for r in rows if r and r.group(1) == token_id)
    hmac = row.group(2)
    assert base64.b64decode(hmac) == create_hmac(token_id, kafka_broker.token_secret)
    assert (row.group(3), row.group(4), row.group(5)) == ("User:admin", "User:admin",
                                                          "[User:alice]")
    admin = DelegationTokenAdmin(admin_client)
    wait_until(lambda: token_id in {t.token_info.token_id for t in admin.describe()})

    code, out, err = tokens_main(capsys, "--describe", *common, "--owner-principal", "User:admin")
    assert code == 0, err
    assert any(r and r.group(1) == token_id and r.group(2) == hmac
               for r in map(TOKEN_LINE.match, out.splitlines())), out

    code, out, err = tokens_main(capsys, "--renew", *common, "--hmac", hmac,
                                 "--renew-time-period", "-1")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("Completed renew operation. New expiry date : "), out

    code, out, err = tokens_main(capsys, "--expire", *common, "--hmac", hmac,
                                 "--expiry-time-period", "-1")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("Completed expire operation. New expiry date : "), out
    wait_until(lambda: token_id not in {t.token_info.token_id for t in admin.describe()})

    code, out, err = tokens_main(capsys, "--renew", *common, "--hmac", hmac,
                                 "--renew-time-period", "-1")
    assert code == 1
    assert "DelegationTokenNotFoundException" in err, err


@pytest.mark.slow
def test_cli_describe_prints_what_kafkas_tool_prints(kafka_broker, admin_client, tmp_path,
                                                     capsys):
    """Same broker, same token: ``kchannel delegation-tokens --describe`` and
    Kafka's DelegationTokenCommand print the same lines (dates in local
    time, as both format them)."""
    token = created(DelegationTokenAdmin(admin_client), renewers=["User:alice"],
                    max_lifetime_ms=3600_000)
    try:
        configs = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-512")
        props = kafka_broker.write_client_properties(tmp_path / "admin.properties", configs)
        args = ["--describe", "--bootstrap-server", configs["bootstrap.servers"],
                "--command-config", props, "--owner-principal", "User:admin"]
        java = kafka_broker.run_java("org.apache.kafka.tools.DelegationTokenCommand", *args)
        assert java.returncode == 0, java.stderr
        code, out, err = tokens_main(capsys, *args)
        assert code == 0, err

        def mine(text):
            return [l.split() for l in text.splitlines()
                    if l.startswith(token.token_info.token_id) or l.startswith("TOKENID")]
        assert mine(out) == mine(java.stdout)
        assert len(mine(out)) == 2
    finally:
        DelegationTokenAdmin(admin_client).expire(token.hmac, -1)


def test_token_rules_match_kchannels_token_manager(kafka_broker, admin_client):
    """A sequence of token operations by different users, run on Kafka and,
    in lock step (Kafka's timestamps as the clock), on kchannel's
    TokenManager with the broker's secret: the same error codes, owners,
    HMACs and timestamps.  kchannel's manager gets ``super.users=User:admin``
    (it has no ACL authorizer; Kafka without one allows everything)."""
    from kchannel.tokens.manager import SuperUserTokenAuthorizer, TokenManager
    users = {}
    for name in ("alice", "bob"):
        c = KafkaClient(kafka_broker.client_configs("SASL_PLAINTEXT", "PLAIN", user=name))
        users[name] = DelegationTokenAdmin(c.connect())
    admin = DelegationTokenAdmin(admin_client)
    ids = []
    model = TokenManager(kafka_broker.token_secret,
                         authorizer=SuperUserTokenAuthorizer("User:admin"),
                         token_id_factory=lambda: ids.pop(0))
    ADMIN, ALICE, BOB = (KafkaPrincipal("User", n) for n in ("admin", "alice", "bob"))

    def kafka_code(call):
        try:
            return Errors.NONE, call()
        except errors.DelegationTokenError as exc:
            return Errors(exc.error_code), None

    token = token2 = None
    try:
        # admin's token, renewable by alice, asking for more than the broker's max
        token = created(admin, renewers=["User:alice"], max_lifetime_ms=30 * 24 * 3600_000)
        info = token.token_info
        ids.append(info.token_id)
        mine = model.create_token(ADMIN, renewers=[ALICE], max_lifetime_ms=30 * 24 * 3600_000,
                                  now=info.issue_timestamp)
        assert (mine.error, mine.token_id, mine.hmac, mine.owner, mine.token_requester,
                mine.expiry_timestamp, mine.max_timestamp) == (
            Errors.NONE, info.token_id, token.hmac, info.owner, info.token_requester,
            info.expiry_timestamp, info.max_timestamp)
        assert info.max_timestamp == info.issue_timestamp + DEFAULT_MAX_LIFETIME_MS

        # bob may neither renew nor expire it; alice may renew, capped at
        # delegation.token.expiry.time.ms by the KRaft controller
        now = now_ms()
        code, _ = kafka_code(lambda: users["bob"].renew(token.hmac, 3600_000))
        assert code == model.renew_token(BOB, token.hmac, 3600_000, now=now)[0]
        assert code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        code, _ = kafka_code(lambda: users["bob"].expire(token.hmac, 60_000))
        assert code == model.expire_token(BOB, token.hmac, 60_000, now=now)[0]
        assert code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        before = now_ms()
        code, expiry = kafka_code(lambda: users["alice"].renew(token.hmac, 2 * DEFAULT_EXPIRY_MS))
        after = now_ms()
        error, model_expiry = model.renew_token(ALICE, token.hmac, 2 * DEFAULT_EXPIRY_MS,
                                                now=expiry - DEFAULT_EXPIRY_MS)
        assert (code, expiry) == (error, model_expiry)
        assert before + DEFAULT_EXPIRY_MS <= expiry <= after + DEFAULT_EXPIRY_MS

        # admin creates a token for alice (KIP-373): owner alice, requester admin
        token2 = created(admin, owner="User:alice", max_lifetime_ms=3600_000)
        ids.append(token2.token_info.token_id)
        mine2 = model.create_token(ADMIN, owner=ALICE, max_lifetime_ms=3600_000,
                                   now=token2.token_info.issue_timestamp)
        assert (mine2.owner, mine2.token_requester, mine2.hmac) == (
            token2.token_info.owner, token2.token_info.token_requester, token2.hmac)
        assert token2.token_info.owner == ALICE
        assert token2.token_info.token_requester == ADMIN
        # alice (owner) may expire it, the requester admin may not renew it
        code, _ = kafka_code(lambda: admin.renew(token2.hmac, -1))
        assert code == model.renew_token(ADMIN, token2.hmac, -1, now=now_ms())[0]
        assert code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH

        # what each user sees: Kafka without an authorizer shows every token
        # to everyone; kchannel shows one's own and renewable tokens only
        # (README, Delegation tokens: a documented difference)
        mine_ids = {info.token_id, token2.token_info.token_id}
        for who, principal in (("alice", ALICE), ("bob", BOB)):
            seen = {t.token_info.token_id for t in users[who].describe()} & mine_ids
            assert seen == mine_ids
            error, listed = model.describe_tokens(principal)
            modelled = {t.token_info.token_id for t in listed} & mine_ids
            assert modelled == (mine_ids if who == "alice" else set())
    finally:
        for t, owner in ((token, admin), (token2, users["alice"])):
            if t is not None:
                expired(owner, t)
        for name in users:
            users[name].client.close()
