"""GSSAPI end to end against the private MIT KDC (fixture ``kdc``): kchannel
client and server, SaslHandshake v0 and v1, SASL_PLAINTEXT and SASL_SSL, the
0.9-era raw-token client (no SaslHandshake) and principal-to-local mapping."""
import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError, UnsupportedSaslMechanismError
from kchannel.principal import KafkaPrincipal
from kchannel.server import Server

from tests.fixtures.sasl_servers import Clock, v0_only_api_versions, wait_metric

METADATA = 3


def start(kdc, protocol="SASL_PLAINTEXT", pki=None, mechanisms="GSSAPI", extra=None,
          **kw):
    configs = {"sasl.enabled.mechanisms": mechanisms,
               "sasl.kerberos.service.name": kdc.service_name}
    if protocol == "SASL_SSL":
        configs.update(pki.server_configs())
    configs.update(extra or {})
    server = Server(listeners=[f"{protocol}://127.0.0.1:0"], listener_configs={protocol: configs},
                    jaas={"GSSAPI": kdc.jaas_server_options(), "PLAIN": {"user_a": "b"}},
                    failed_authentication_delay_ms=0, **kw)
    server.start()
    seen = []
    server.register_handler(METADATA, lambda ctx: (seen.append(ctx.principal), {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []})[1])
    return server, server.bound_port(protocol), seen


def client_configs(kdc, protocol="SASL_PLAINTEXT", pki=None, **jaas_kw):
    c = {"security.protocol": protocol, "sasl.mechanism": "GSSAPI",
         "sasl.kerberos.service.name": kdc.service_name,
         "sasl.jaas.config": kdc.jaas_config(**jaas_kw)}
    if protocol == "SASL_SSL":
        c.update(pki.client_configs(endpoint_identification=""))
    return c


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("handshake_version", [0, 1])
def test_gssapi_matrix(kdc, pki, servers, protocol, handshake_version):
    kw = {} if handshake_version else {
        "sasl_kwargs": {"api_versions_supplier": v0_only_api_versions}}
    server, port, seen = start(kdc, protocol, pki, **kw)
    servers.append(server)
    # The service principal is kafka/localhost: address the broker by name.
    with KafkaClient(client_configs(kdc, protocol, pki)) as client:
        client.connect("localhost", port)
        ch = client.selector.channel(client.node_id)
        assert ch.authenticator.sasl_handshake_version == handshake_version
        client.request(METADATA, {"topics": []}, version=1)
    # DEFAULT principal-to-local rule: client@EXAMPLE.COM -> client.
    assert seen == [KafkaPrincipal("User", "client")]
    assert wait_metric(server, "successful-authentication-total", 1) == 1


def test_gssapi_client_without_handshake(kdc, servers):
    """A 0.9 client sends its first GSSAPI token with no Kafka header."""
    server, port, seen = start(kdc, mechanisms="PLAIN,GSSAPI")
    servers.append(server)
    with KafkaClient(client_configs(kdc),
                     sasl_kwargs={"handshake_request_enable": False}) as client:
        client.connect("localhost", port)
        client.request(METADATA, {"topics": []}, version=1)
    assert seen == [KafkaPrincipal("User", "client")]


def test_raw_gssapi_token_refused_when_gssapi_disabled(kdc, servers):
    server, port, _ = start(kdc, mechanisms="PLAIN")
    servers.append(server)
    client = KafkaClient(client_configs(kdc), sasl_kwargs={"handshake_request_enable": False})
    with pytest.raises(Exception) as err:
        client.connect("localhost", port)
    client.close()
    assert not isinstance(err.value, AssertionError)
    assert wait_metric(server, "failed-authentication-total", 1) == 1


def test_principal_to_local_rules(kdc, servers):
    rules = "RULE:[1:$1@$0](client@EXAMPLE.COM)s/.*/mapped-client/,DEFAULT"
    server, port, seen = start(kdc, extra={"sasl.kerberos.principal.to.local.rules": rules})
    servers.append(server)
    with KafkaClient(client_configs(kdc)) as client:
        client.connect("localhost", port)
        client.request(METADATA, {"topics": []}, version=1)
    assert seen == [KafkaPrincipal("User", "mapped-client")]


def test_second_user(kdc, servers):
    server, port, seen = start(kdc)
    servers.append(server)
    with KafkaClient(client_configs(kdc, principal=kdc.user2_principal,
                                    keytab=kdc.user2_keytab)) as client:
        client.connect("localhost", port)
        client.request(METADATA, {"topics": []}, version=1)
    assert seen == [KafkaPrincipal("User", "alice")]


def test_gssapi_not_enabled(kdc, servers):
    server, port, _ = start(kdc, mechanisms="PLAIN")
    servers.append(server)
    client = KafkaClient(client_configs(kdc))
    with pytest.raises(UnsupportedSaslMechanismError):
        client.connect("localhost", port)
    client.close()


def test_gssapi_reauthentication(kdc, servers):
    from kchannel.utils import now_ms
    clock = Clock()
    server, port, seen = start(kdc, extra={"connections.max.reauth.ms": "60000"}, time=clock)
    servers.append(server)
    with KafkaClient(client_configs(kdc), time=clock) as client:
        client.connect("localhost", port)
        at = client.selector.channel(client.node_id).authenticator.client_session_reauth_ms()
        clock.offset += at - now_ms() + 10
        client.request(METADATA, {"topics": []}, version=1)
    assert wait_metric(server, "successful-reauthentication-total", 1) == 1
    assert seen == [KafkaPrincipal("User", "client")]


def test_wrong_keytab_fails_as_authentication_error(kdc, servers, tmp_path):
    server, port, _ = start(kdc)
    servers.append(server)
    client = KafkaClient(client_configs(kdc, keytab=str(tmp_path / "missing.keytab")))
    with pytest.raises(SaslAuthenticationError):
        client.connect("localhost", port)
    client.close()
