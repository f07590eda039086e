"""SASL GSSAPI mechanisms against a real MIT KDC (fixture ``kdc``).

Peers: our own client/server, raw python-gssapi initiators and acceptors
speaking the JDK's token flow, and the GSSAPI code of kafka-python 3.x and
aiokafka driven in-process (the same objects they use on a socket).
"""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.peers import require_module

gssapi = require_module("gssapi")

from kchannel.errors import ConfigError, SaslAuthenticationError  # noqa: E402
from kchannel.principal import (  # noqa: E402
    DefaultKafkaPrincipalBuilder, SaslAuthenticationContext)
from kchannel.security.kerberos_rules import KerberosShortNamer  # noqa: E402
from kchannel.security.sasl import mechanism  # noqa: E402
from kchannel.security.sasl.gssapi import (  # noqa: E402
    SERVER_FAILURE_MESSAGE, GssapiSaslServer, clear_credential_cache, server_credentials)

CLIENT_CONFIGS = {"sasl.kerberos.service.name": "kafka"}


def new_client(kdc, jaas=None, host="localhost", configs=CLIENT_CONFIGS, **kw):
    return mechanism.create_client(
        "GSSAPI", jaas_options=kdc.jaas_client_options() if jaas is None else jaas,
        configs=configs, server_host=host, **kw)


def new_server(kdc, jaas=None, host="localhost"):
    return mechanism.create_server(
        "GSSAPI", jaas_options=kdc.jaas_server_options() if jaas is None else jaas,
        configs={}, server_host=host, now=0)


def drive_exchange(client, server):
    """Drive client/server as SaslAuthenticate would; returns the tokens."""
    tokens = []
    token = client.evaluate_challenge(b"")
    while True:
        tokens.append(("c", token))
        challenge = server.evaluate_response(token, 0)
        tokens.append(("s", challenge))
        if server.is_complete():
            break
        token = client.evaluate_challenge(challenge)
    return tokens


@pytest.mark.parametrize("mutual", [False, True])
def test_our_client_with_our_server(kdc, mutual):
    client = new_client(kdc, mutual_auth=mutual)
    server = new_server(kdc)
    assert client.has_initial_response()
    tokens = drive_exchange(client, server)
    assert client.is_complete() and server.is_complete()
    assert server.get_authorization_id() == "client@EXAMPLE.COM"
    assert server.get_negotiated_property("javax.security.sasl.qop") == "auth"
    assert server.get_negotiated_property("javax.security.sasl.bound.server.name") == "localhost"
    assert server.get_negotiated_property("CREDENTIAL.LIFETIME.MS") is None
    assert tokens[-1] == ("s", None)   # the server's last step sends nothing
    # Without mutual authentication (the JDK default for QOP "auth") the
    # AP-REQ is answered with the security-layer offer directly.
    assert len(tokens) == (6 if mutual else 4)
    if mutual:
        assert tokens[2] == ("c", b"")   # context complete: client sends no data


def test_second_user_from_its_keytab(kdc):
    client = new_client(kdc, jaas=kdc.jaas_client_options(kdc.user2_principal, kdc.user2_keytab))
    server = new_server(kdc)
    drive_exchange(client, server)
    assert server.get_authorization_id() == "alice@EXAMPLE.COM"


def test_ticket_cache_login(kdc, tmp_path):
    ccache = f"FILE:{tmp_path}/alice.ccache"
    kdc.kinit(kdc.user2_principal, kdc.user2_keytab, ccache)
    client = new_client(kdc, jaas={"useTicketCache": "true", "ticketCache": ccache})
    server = new_server(kdc)
    drive_exchange(client, server)
    assert server.get_authorization_id() == "alice@EXAMPLE.COM"


def test_principal_builder_maps_authorization_id(kdc):
    client, server = new_client(kdc), new_server(kdc)
    drive_exchange(client, server)
    builder = DefaultKafkaPrincipalBuilder(kerberos_short_namer=KerberosShortNamer(
        ["RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//U", "DEFAULT"], "EXAMPLE.COM"))
    ctx = SaslAuthenticationContext(mechanism="GSSAPI",
                                    authorization_id=server.get_authorization_id())
    assert str(builder.build(ctx)) == "User:CLIENT"


def test_requested_authorization_id_is_ignored(kdc):
    """Kafka authorizes the authenticated principal, whatever authzid is sent."""
    client = new_client(kdc, authorization_id="alice@EXAMPLE.COM")
    server = new_server(kdc)
    drive_exchange(client, server)
    assert server.requested_authorization_id == "alice@EXAMPLE.COM"
    assert server.get_authorization_id() == "client@EXAMPLE.COM"


# -- raw python-gssapi peers speaking the JDK flow --------------------------------

def raw_initiator(kdc, flags=None):
    creds = gssapi.Credentials(
        name=gssapi.Name(kdc.client_principal, gssapi.NameType.kerberos_principal),
        usage="initiate", store={"client_keytab": kdc.client_keytab,
                                 "ccache": "MEMORY:test-raw-initiator"})
    return gssapi.SecurityContext(
        name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
        creds=creds, usage="initiate", flags=flags)


def test_our_server_with_raw_initiator(kdc):
    ctx = raw_initiator(kdc)            # python-gssapi default flags: mutual auth
    server = new_server(kdc)
    ap_rep = server.evaluate_response(ctx.step(), 0)
    assert ap_rep and not server.is_complete()
    assert ctx.step(ap_rep) is None and ctx.complete
    offer = ctx.unwrap(server.evaluate_response(b"", 0))
    assert offer.message == b"\x01\x01\x00\x00"     # "auth" only, maxbuf 65536
    assert not offer.encrypted
    reply = ctx.wrap(b"\x01\x00\x00\x00" + b"client@EXAMPLE.COM", False).message
    assert server.evaluate_response(reply, 0) is None
    assert server.is_complete()
    assert server.get_authorization_id() == "client@EXAMPLE.COM"


def test_our_server_rejects_unsupported_layer(kdc):
    ctx = raw_initiator(kdc)
    server = new_server(kdc)
    ctx.step(server.evaluate_response(ctx.step(), 0))
    ctx.unwrap(server.evaluate_response(b"", 0))
    reply = ctx.wrap(b"\x04\x00\x10\x00", False).message     # asks for privacy
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate_response(reply, 0)
    assert str(info.value) == SERVER_FAILURE_MESSAGE
    assert "Client selected unsupported protection: 4" in info.value.detail


def test_our_server_rejects_data_where_none_expected(kdc):
    ctx = raw_initiator(kdc)
    server = new_server(kdc)
    ctx.step(server.evaluate_response(ctx.step(), 0))
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate_response(b"\x00", 0)
    assert "Handshake expecting no response data" in info.value.detail


def test_our_client_with_raw_acceptor(kdc):
    """Our client against an acceptor doing what GssKrb5Server does."""
    acceptor = gssapi.SecurityContext(
        creds=gssapi.Credentials(usage="accept", store={"keytab": kdc.service_keytab}),
        usage="accept")
    client = new_client(kdc)
    ap_req = client.evaluate_challenge(b"")
    out = acceptor.step(ap_req)
    assert acceptor.complete and out is None      # no mutual auth requested
    assert str(acceptor.initiator_name) == "client@EXAMPLE.COM"
    offer = acceptor.wrap(b"\x07\x00\x40\x00", False).message   # server offers all layers
    reply = acceptor.unwrap(client.evaluate_challenge(offer))
    assert client.is_complete()
    assert not reply.encrypted
    # "auth" selected, maxbuf 0 (no layer), authzid = the client principal.
    assert reply.message == b"\x01\x00\x00\x00client@EXAMPLE.COM"
    with pytest.raises(SaslAuthenticationError, match="already complete"):
        client.evaluate_challenge(b"")


def test_our_client_rejects_server_without_auth_layer(kdc):
    acceptor = gssapi.SecurityContext(
        creds=gssapi.Credentials(usage="accept", store={"keytab": kdc.service_keytab}),
        usage="accept")
    client = new_client(kdc)
    acceptor.step(client.evaluate_challenge(b""))
    with pytest.raises(SaslAuthenticationError, match="No common protection layer"):
        client.evaluate_challenge(acceptor.wrap(b"\x04\x00\x40\x00", False).message)


def test_our_client_rejects_garbage_challenge(kdc):
    client = new_client(kdc, mutual_auth=True)
    client.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError, match="GSS initiate failed"):
        client.evaluate_challenge(b"not a kerberos token")


# -- real Kafka client libraries (their GSSAPI code driven in-process) -------------

def test_kafka_python_gssapi_against_our_server(kdc):
    sasl = pytest.importorskip("kafka.net.sasl.gssapi",
                               reason="kafka-python 3.x GSSAPI module not installed")
    peer = sasl.SaslMechanismGSSAPI(sasl_kerberos_service_name="kafka",
                                    sasl_kerberos_domain_name="localhost")
    server = new_server(kdc)
    while not peer.is_done():
        challenge = server.evaluate_response(peer.auth_bytes(), 0)
        peer.receive(challenge if challenge is not None else b"")
    assert peer.is_authenticated() and server.is_complete()
    # kafka-python sends the service name as authzid; Kafka ignores it.
    assert server.requested_authorization_id == "kafka@localhost"
    assert server.get_authorization_id() == "client@EXAMPLE.COM"


def test_aiokafka_gssapi_against_our_server(kdc):
    conn = require_module("aiokafka.conn")
    auth = conn.SaslGSSAPIAuthenticator(loop=None, principal="kafka@localhost")
    gen = auth.authenticator_gssapi()
    server = new_server(kdc)
    token, expect_response = next(gen)
    while True:
        challenge = server.evaluate_response(token, 0)
        if not expect_response:
            break
        token, expect_response = gen.send(challenge)
    assert server.is_complete()
    assert server.get_authorization_id() == "client@EXAMPLE.COM"


# -- failures ----------------------------------------------------------------------

def test_wrong_service_principal(kdc):
    client = new_client(kdc, configs={"sasl.kerberos.service.name": "nosuchservice"})
    with pytest.raises(SaslAuthenticationError) as info:
        client.evaluate_challenge(b"")
    text = str(info.value)
    assert "GSS initiate failed" in text and "not found in Kerberos database" in text
    assert "nosuchservice/localhost" in text
    assert text.endswith("Kafka Client will go to AUTHENTICATION_FAILED state.")


def test_missing_client_keytab(kdc, tmp_path):
    jaas = kdc.jaas_client_options(keytab=str(tmp_path / "missing.keytab"))
    client = new_client(kdc, jaas=jaas)
    with pytest.raises(SaslAuthenticationError, match="missing.keytab does not exist"):
        client.evaluate_challenge(b"")


def test_principal_not_in_keytab(kdc):
    client = new_client(kdc, jaas=kdc.jaas_client_options(principal="nobody@EXAMPLE.COM"))
    with pytest.raises(SaslAuthenticationError, match="Could not login as nobody@EXAMPLE.COM"):
        client.evaluate_challenge(b"")


def test_keytab_login_needs_principal(kdc):
    jaas = {"useKeyTab": "true", "keyTab": kdc.client_keytab}
    with pytest.raises(SaslAuthenticationError, match="needs principal"):
        new_client(kdc, jaas=jaas).evaluate_challenge(b"")


def test_missing_server_keytab(kdc, tmp_path):
    jaas = dict(kdc.jaas_server_options(), keyTab=str(tmp_path / "none.keytab"))
    with pytest.raises(SaslAuthenticationError, match="none.keytab does not exist"):
        new_server(kdc, jaas=jaas)


def test_server_principal_not_in_keytab(kdc):
    clear_credential_cache()
    jaas = dict(kdc.jaas_server_options(), keyTab=kdc.client_keytab)
    with pytest.raises(SaslAuthenticationError, match="Could not login as kafka/localhost"):
        new_server(kdc, jaas=jaas)


def test_ticket_for_another_service_is_refused(kdc):
    """The broker's acceptor is bound to its own principal."""
    jaas = dict(kdc.jaas_server_options(), principal="kafka/127.0.0.1@EXAMPLE.COM")
    server = new_server(kdc, jaas=jaas, host="127.0.0.1")
    client = new_client(kdc)          # targets kafka/localhost
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate_response(client.evaluate_challenge(b""), 0)
    assert str(info.value) == SERVER_FAILURE_MESSAGE    # no GSS detail to the client
    assert "GSS initiate failed" in info.value.detail


def test_service_name_config():
    with pytest.raises(ConfigError, match="No serviceName defined"):
        mechanism.create_client("GSSAPI", jaas_options={}, configs={}, server_host="localhost")
    with pytest.raises(ConfigError, match="Conflicting serviceName values"):
        mechanism.create_client("GSSAPI", jaas_options={"serviceName": "a"},
                                configs={"sasl.kerberos.service.name": "b"},
                                server_host="localhost")


def test_server_complete_then_more_data(kdc):
    client, server = new_client(kdc), new_server(kdc)
    drive_exchange(client, server)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"", 0)


# -- fail closed -------------------------------------------------------------------

@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048))
def test_arbitrary_first_token_fails_closed(kdc, data):
    server = new_server(kdc)
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(data, 0)
    assert not server.is_complete()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=512))
def test_arbitrary_security_layer_reply_fails_closed(kdc, data):
    client = new_client(kdc)
    server = new_server(kdc)
    server.evaluate_response(client.evaluate_challenge(b""), 0)   # offer sent
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(data, 0)
    assert not server.is_complete()
    with pytest.raises(SaslAuthenticationError):
        server.get_authorization_id()


def test_server_mechanism_class_direct(kdc):
    creds = server_credentials(kdc.jaas_server_options(), {}, "localhost")
    server = GssapiSaslServer(creds, service="kafka")
    client = new_client(kdc)
    drive_exchange(client, server)
    assert server.get_authorization_id() == "client@EXAMPLE.COM"


def test_kdc_fixture_helpers(kdc):
    assert kdc.jaas_config().startswith("com.sun.security.auth.module.Krb5LoginModule required ")
    assert f'principal="{kdc.service_principal}"' in kdc.jaas_config(kdc.service_principal)
    assert kdc.subprocess_env({})["KRB5_CONFIG"] == kdc.krb5_conf
    with open(kdc.krb5_conf) as f:
        assert f"kdc = 127.0.0.1:{kdc.port}" in f.read()


# -- end to end over 127.0.0.1 sockets: kchannel Server with a GSSAPI listener ---------

DESCRIBE_CLUSTER = 60
GENERIC_NETWORK_FAILURE = SERVER_FAILURE_MESSAGE


def v0_only_api_versions(version):
    """A broker that predates SaslAuthenticate: raw GSSAPI tokens after SaslHandshake v0."""
    return {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        {"api_key": 3, "min_version": 0, "max_version": 12},
        {"api_key": 17, "min_version": 0, "max_version": 0},
        {"api_key": 18, "min_version": 0, "max_version": 3},
        {"api_key": 60, "min_version": 0, "max_version": 1}]}


@pytest.fixture
def gssapi_server(kdc, request):
    from kchannel.server import Server
    sasl_kwargs = getattr(request, "param", None) or {}
    server = Server(listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                    listener_configs={"SASL_PLAINTEXT": {
                        "sasl.enabled.mechanisms": "GSSAPI",
                        "sasl.kerberos.service.name": "kafka",
                        "sasl.kerberos.principal.to.local.rules":
                            "RULE:[1:$1@$0](alice@EXAMPLE.COM)s/.*/ALICE/,DEFAULT"}},
                    jaas={"GSSAPI": kdc.jaas_server_options()},
                    failed_authentication_delay_ms=0, sasl_kwargs=sasl_kwargs)
    seen = []
    server.register_handler(DESCRIBE_CLUSTER, lambda ctx: (seen.append(str(ctx.principal)), {
        "error_code": 0, "error_message": None, "cluster_id": "kc", "controller_id": 0,
        "brokers": [], "cluster_authorized_operations": 0})[1], 0, 1)
    server.start()
    server.seen_principals = seen
    try:
        yield server, server.bound_port("SASL_PLAINTEXT")
    finally:
        server.shutdown()


def kchannel_client_configs(kdc, service="kafka", principal=None, keytab=None):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": service,
            "sasl.jaas.config": kdc.jaas_config(principal, keytab)}


@pytest.mark.parametrize("gssapi_server", [None, {"api_versions_supplier": v0_only_api_versions}],
                         ids=["SaslAuthenticate", "SaslHandshake-v0-raw-tokens"],
                         indirect=True)
def test_kchannel_client_and_server_end_to_end(kdc, gssapi_server):
    from kchannel.client import KafkaClient
    server, port = gssapi_server
    for principal, keytab, expected in ((None, None, "User:client"),
                                        (kdc.user2_principal, kdc.user2_keytab, "User:ALICE")):
        with KafkaClient(kchannel_client_configs(kdc, principal=principal, keytab=keytab)) as c:
            c.connect("localhost", port)
            assert c.request(DESCRIBE_CLUSTER, {}, version=0)["cluster_id"] == "kc"
        assert server.seen_principals[-1] == expected


def test_kchannel_client_wrong_service_name_end_to_end(kdc, gssapi_server):
    from kchannel.client import KafkaClient
    _, port = gssapi_server
    c = KafkaClient(kchannel_client_configs(kdc, service="nosuchservice"))
    with pytest.raises(SaslAuthenticationError, match="not found in Kerberos database"):
        c.connect("localhost", port)
    c.close()


def test_ticket_for_other_host_refused_end_to_end(kdc, gssapi_server):
    """Connecting by IP asks for kafka/127.0.0.1, a principal the broker's
    acceptor (kafka/localhost) does not hold: refused with Kafka's message."""
    from kchannel.client import KafkaClient
    _, port = gssapi_server
    c = KafkaClient(kchannel_client_configs(kdc))
    with pytest.raises(SaslAuthenticationError) as info:
        c.connect("127.0.0.1", port)
    c.close()
    assert GENERIC_NETWORK_FAILURE in str(info.value)


@pytest.mark.slow
@pytest.mark.interop
def test_kafka_python_end_to_end(kdc, gssapi_server):
    kafka = require_module("kafka", "kafka-python")
    server, port = gssapi_server
    admin = kafka.KafkaAdminClient(
        bootstrap_servers=f"localhost:{port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka",
        sasl_kerberos_domain_name="localhost", bootstrap_timeout_ms=15000)
    try:
        assert admin.describe_cluster()["cluster_id"] == "kc"
    finally:
        admin.close()
    assert server.seen_principals == ["User:client"]


@pytest.mark.slow
@pytest.mark.interop
def test_aiokafka_end_to_end(kdc, gssapi_server):
    require_module("aiokafka")
    import asyncio

    from aiokafka.client import AIOKafkaClient
    _, port = gssapi_server

    async def run_client():
        client = AIOKafkaClient(
            bootstrap_servers=f"localhost:{port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka",
            sasl_kerberos_domain_name="localhost")
        try:
            await client.bootstrap()
            return [b.nodeId for b in client.cluster.brokers()]
        finally:
            await client.close()

    assert asyncio.run(run_client()) == [0]


LEGACY_PROBE = """
import sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers="localhost:%s" % sys.argv[1],
                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                         sasl_kerberos_service_name="kafka", sasl_kerberos_domain_name="localhost",
                         api_version=(1, 0, 0), request_timeout_ms=15000)
print("BROKERS", [b["node_id"] for b in admin.describe_cluster()["brokers"]])
admin.close()
"""


@pytest.mark.slow
@pytest.mark.interop
def test_debian_kafka_python_2_legacy_end_to_end(kdc, gssapi_server):
    """Debian's python3-kafka 2.0.2: SaslHandshake v0 then raw GSSAPI tokens."""
    import os
    import subprocess
    python = "/usr/bin/python3"
    probe = subprocess.run([python, "-c", "import kafka, gssapi; print(kafka.__version__)"],
                           capture_output=True, text=True) if os.path.exists(python) else None
    if probe is None or probe.returncode != 0:
        pytest.skip("Debian python3-kafka with python3-gssapi is not installed")
    _, port = gssapi_server
    result = subprocess.run([python, "-c", LEGACY_PROBE, str(port)],
                            env=kdc.subprocess_env({"PATH": "/usr/bin:/bin"}),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "BROKERS [0]" in result.stdout


def test_replayed_ap_req_is_refused(kdc):
    """An AP-REQ captured on the wire cannot open a second session."""
    ap_req = new_client(kdc).evaluate_challenge(b"")
    new_server(kdc).evaluate_response(ap_req, 0)
    replay = new_server(kdc)
    with pytest.raises(SaslAuthenticationError) as info:
        replay.evaluate_response(ap_req, 0)
    assert "replay" in info.value.detail.lower()
    assert not replay.is_complete()
