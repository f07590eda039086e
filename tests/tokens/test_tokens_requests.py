"""Delegation token APIs over real sockets (Kafka's DelegationTokenRequestsTest,
DelegationTokenRequestsOnPlainTextTest and DelegationTokenRequestsWithDisableTokenFeatureTest):
kchannel's Server with the token handlers installed as ``kchannel serve``
installs them, driven by kchannel's client."""
import pytest

from kchannel.client import KafkaClient
from kchannel.errors import DelegationTokenError
from kchannel.principal import KafkaPrincipal
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.server import Server
from kchannel.server.token_handlers import install_server
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.utils import now_ms

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
TOKEN_APIS = (ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
              ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN)


def _server(tmp_path, pki, secret="testKey", extra=None):
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN} required user_alice="alice-secret" user_renewer1="r1-secret" '
            'user_carol="carol-secret";',
        "log.dirs": str(tmp_path),
        "delegation.token.expiry.check.interval.ms": "3600000",
    }
    for k, v in pki.server_configs(client_auth="requested").items():
        props[f"listener.name.ssl.{k}"] = v
    if secret is not None:
        props["delegation.token.secret.key"] = secret
    props.update(extra or {})
    server = Server(props)
    service = install_server(server, server.config, props)
    server.start()
    return server, service


@pytest.fixture
def token_server(tmp_path, pki):
    server, service = _server(tmp_path, pki)
    try:
        yield server, service
    finally:
        server.shutdown()
        service.close()


@pytest.fixture
def disabled_server(tmp_path, pki):
    server, service = _server(tmp_path, pki, secret=None)
    try:
        yield server, service
    finally:
        server.shutdown()
        service.close()


def sasl_client(server, user="alice", password="alice-secret"):
    c = KafkaClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.jaas.config": f'{PLAIN} required username="{user}" '
                                         f'password="{password}";'})
    return c.connect("127.0.0.1", server.bound_port("SASL_PLAINTEXT"))


def error_of(exc_info):
    return Errors(exc_info.value.error_code)


def test_delegation_token_requests(token_server):
    """Kafka's testDelegationTokenRequests, step by step.

    Kafka: DelegationTokenRequestsTest.testDelegationTokenRequests."""
    server, service = token_server
    manager = service.manager
    with sasl_client(server) as client:
        admin = DelegationTokenAdmin(client)
        renewer1 = [KafkaPrincipal("User", "renewer1")]
        token1_created = admin.create(renewers=renewer1)
        assert len(manager.tokens()) == 1
        tokens = admin.describe()
        assert len(tokens) == 1
        token1 = tokens[0]
        assert token1 == token1_created
        assert token1.token_info.owner == KafkaPrincipal("User", "alice")
        assert token1.token_info.token_requester == KafkaPrincipal("User", "alice")

        renewer2 = [KafkaPrincipal("User", "renewer2")]
        token2 = admin.create(renewers=renewer2)
        assert {t.token_info.token_id for t in admin.describe()} == \
            {token1.token_info.token_id, token2.token_info.token_id}
        assert admin.describe(owners=renewer2) == [token2]

        before = now_ms()
        expiry = admin.renew(token1.hmac)
        assert before + 86400000 <= expiry <= now_ms() + 86400000
        renewer3 = [KafkaPrincipal("User", "renewer3")]
        token3 = admin.create(renewers=renewer3)
        described = {t.token_info.token_id: t for t in admin.describe()}
        assert described[token1.token_info.token_id].token_info.expiry_timestamp == expiry

        for t in (token1, token2, token3):
            assert admin.expire(t.hmac) <= now_ms()
        assert manager.tokens() == [] and admin.describe() == []

        with pytest.raises(DelegationTokenError) as exc:
            admin.create(renewers=[KafkaPrincipal("Group", "Renewer4")])
        assert error_of(exc) is Errors.INVALID_PRINCIPAL_TYPE
        assert exc.value.exception_name == "InvalidPrincipalTypeException"

        with pytest.raises(DelegationTokenError) as exc:
            admin.renew(token1.hmac)
        assert error_of(exc) is Errors.DELEGATION_TOKEN_NOT_FOUND

        # A short-lived token is removed by the expiry check once past its
        # max lifetime (driven here with the check's clock, not a sleep).
        token5 = admin.create(renewers=renewer1, max_lifetime_ms=1000)
        assert token5.token_info.max_timestamp - token5.token_info.issue_timestamp == 1000
        assert manager.expire_tokens(token5.token_info.max_timestamp + 1) == \
            [token5.token_info.token_id]
        assert admin.describe() == []
        with pytest.raises(DelegationTokenError) as exc:
            admin.expire(token5.hmac)
        assert error_of(exc) is Errors.DELEGATION_TOKEN_NOT_FOUND

        assert admin.describe(owners=[KafkaPrincipal("User", "Unknown")]) == []


def test_owners_renewers_and_strangers(token_server):
    """Kafka: DelegationTokenEndToEndAuthorizationWithOwnerTest.testCreateTokenForOtherUserFails,
    testDescribeTokenForOtherUserFails."""
    server, _ = token_server
    with sasl_client(server) as alice, sasl_client(server, "renewer1", "r1-secret") as renewer, \
            sasl_client(server, "carol", "carol-secret") as carol:
        token = DelegationTokenAdmin(alice).create(renewers=["User:renewer1"])
        r = DelegationTokenAdmin(renewer)
        assert r.describe() == [token]
        assert r.renew(token.hmac, 1000) <= now_ms() + 1000
        c = DelegationTokenAdmin(carol)
        assert c.describe() == []
        assert c.describe(owners=["User:alice"]) == []
        for op in (c.renew, c.expire):
            with pytest.raises(DelegationTokenError) as exc:
                op(token.hmac)
            assert error_of(exc) is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        # KIP-373: a token owned by someone else needs CREATE_TOKENS on that user.
        with pytest.raises(DelegationTokenError) as exc:
            c.create(owner="User:alice")
        assert error_of(exc) is Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        assert exc.value.exception_name == "DelegationTokenAuthorizationException"
        assert r.expire(token.hmac) <= now_ms()
        assert DelegationTokenAdmin(alice).describe() == []


def test_plaintext_and_one_way_ssl_refused(token_server, pki):
    """Kafka: DelegationTokenRequestsOnPlainTextTest.testDelegationTokenRequests."""
    server, _ = token_server
    clients = [
        KafkaClient({}).connect("127.0.0.1", server.bound_port("PLAINTEXT")),
        KafkaClient(dict(pki.client_configs(), **{"security.protocol": "SSL"}))
        .connect("127.0.0.1", server.bound_port("SSL")),
    ]
    try:
        for client in clients:
            admin = DelegationTokenAdmin(client)
            for op in (lambda: admin.create(), lambda: admin.describe(),
                       lambda: admin.renew(b"x" * 64), lambda: admin.expire(b"x" * 64)):
                with pytest.raises(DelegationTokenError) as exc:
                    op()
                assert error_of(exc) is Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
                assert exc.value.exception_name == "UnsupportedByAuthenticationException"
    finally:
        for c in clients:
            c.close()
    # Two-way SSL: the certificate's principal may use tokens.
    cfg = dict(pki.client_configs(keystore="pem"), **{"security.protocol": "SSL"})
    with KafkaClient(cfg).connect("127.0.0.1", server.bound_port("SSL")) as client:
        token = DelegationTokenAdmin(client).create()
        assert str(token.token_info.owner) == f"User:{pki.client.dn}"


def test_feature_disabled(disabled_server, tmp_path):
    """Kafka: DelegationTokenRequestsWithDisableTokenFeatureTest.testDelegationTokenRequests."""
    server, service = disabled_server
    assert not service.manager.enabled
    assert not (tmp_path / "delegation-tokens.db").exists()
    with sasl_client(server) as client:
        assert {k for k in TOKEN_APIS} <= set(client.api_versions)
        admin = DelegationTokenAdmin(client)
        for op in (lambda: admin.create(), lambda: admin.describe(),
                   lambda: admin.renew(b"x" * 64), lambda: admin.expire(b"x" * 64)):
            with pytest.raises(DelegationTokenError) as exc:
                op()
            assert error_of(exc) is Errors.DELEGATION_TOKEN_AUTH_DISABLED
            assert exc.value.exception_name == "DelegationTokenDisabledException"
    with KafkaClient({}).connect("127.0.0.1", server.bound_port("PLAINTEXT")) as client:
        with pytest.raises(DelegationTokenError) as exc:
            DelegationTokenAdmin(client).create()
        assert error_of(exc) is Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_every_version(token_server):
    """Every version of APIs 38-41 the codec supports from v1 on (Kafka 4
    dropped v0, KIP-896) is advertised and answered with that version's
    fields."""
    server, _ = token_server
    with sasl_client(server) as client:
        for api_key in TOKEN_APIS:
            api = messages.API[int(api_key)]
            assert client.api_versions[int(api_key)] == (1, api.max_version)
        create = messages.API[int(ApiKey.CREATE_DELEGATION_TOKEN)]
        for v in range(1, create.max_version + 1):
            body = client.request(int(ApiKey.CREATE_DELEGATION_TOKEN),
                                  {"renewers": [{"principal_type": "User",
                                                 "principal_name": "renewer1"}],
                                   "max_lifetime_ms": 60000}, version=v)
            assert body["error_code"] == 0
            assert (body["principal_type"], body["principal_name"]) == ("User", "alice")
            assert body["max_timestamp_ms"] - body["issue_timestamp_ms"] == 60000
            assert len(body["hmac"]) == 64 and len(body["token_id"]) == 22
            assert ("token_requester_principal_name" in body) == (v >= 3)
            hmac = body["hmac"]
            renew = messages.API[int(ApiKey.RENEW_DELEGATION_TOKEN)]
            for rv in range(1, renew.max_version + 1):
                r = client.request(int(ApiKey.RENEW_DELEGATION_TOKEN),
                                   {"hmac": hmac, "renew_period_ms": 1000}, version=rv)
                assert r["error_code"] == 0 and r["expiry_timestamp_ms"] > 0
            describe = messages.API[int(ApiKey.DESCRIBE_DELEGATION_TOKEN)]
            for dv in range(1, describe.max_version + 1):
                r = client.request(int(ApiKey.DESCRIBE_DELEGATION_TOKEN), {"owners": None},
                                   version=dv)
                assert r["error_code"] == 0
                mine = [t for t in r["tokens"] if t["token_id"] == body["token_id"]]
                assert len(mine) == 1 and mine[0]["hmac"] == hmac
                assert mine[0]["renewers"] == [{"principal_type": "User",
                                                "principal_name": "renewer1"}]
                assert ("token_requester_principal_name" in mine[0]) == (dv >= 3)
                r = client.request(int(ApiKey.DESCRIBE_DELEGATION_TOKEN), {"owners": []},
                                   version=dv)
                assert r == dict(r, error_code=0, tokens=[])
            expire = messages.API[int(ApiKey.EXPIRE_DELEGATION_TOKEN)]
            r = client.request(int(ApiKey.EXPIRE_DELEGATION_TOKEN),
                               {"hmac": hmac, "expiry_time_period_ms": -1},
                               version=min(v, expire.max_version))
            assert r["error_code"] == 0


def test_create_for_other_owner_needs_v3(token_server):
    server, service = token_server
    from kchannel.tokens.manager import SuperUserTokenAuthorizer
    service.manager.authorizer = SuperUserTokenAuthorizer(["User:alice"])
    with sasl_client(server) as client:
        body = client.request(int(ApiKey.CREATE_DELEGATION_TOKEN),
                              {"owner_principal_type": "User", "owner_principal_name": "bob",
                               "renewers": [], "max_lifetime_ms": -1}, version=3)
        assert body["error_code"] == 0
        assert (body["principal_name"], body["token_requester_principal_name"]) == \
            ("bob", "alice")
        token = DelegationTokenAdmin(client).create(owner="User:carol")
        assert token.token_info.owner == KafkaPrincipal("User", "carol")
        assert token.token_info.token_requester == KafkaPrincipal("User", "alice")


def test_super_users_may_create_for_others_and_see_all(tmp_path, pki):
    """Kafka:
    DelegationTokenEndToEndAuthorizationWithOwnerTest.testDescribeTokenForOtherUserPasses."""
    server, service = _server(tmp_path, pki, extra={"super.users": "User:alice;User:ops"})
    try:
        with sasl_client(server, "carol", "carol-secret") as carol, sasl_client(server) as alice:
            mine = DelegationTokenAdmin(carol).create()
            admin = DelegationTokenAdmin(alice)
            assert admin.describe() == [mine]
            for_carol = admin.create(owner="User:carol", renewers=["User:renewer1"])
            assert (str(for_carol.token_info.owner), str(for_carol.token_info.token_requester)) \
                == ("User:carol", "User:alice")
            assert {t.token_info.token_id for t in DelegationTokenAdmin(carol).describe()} == \
                {mine.token_info.token_id, for_carol.token_info.token_id}
            # Super users still cannot renew tokens they neither own nor renew.
            with pytest.raises(DelegationTokenError) as exc:
                admin.renew(mine.hmac)
            assert error_of(exc) is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    finally:
        server.shutdown()
        service.close()
