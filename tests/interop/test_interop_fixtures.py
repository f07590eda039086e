"""The peer fixtures themselves: ``kchannel_server`` (subprocess),
``kchannel_inprocess_server`` and the helpers they rest on."""
import signal

import pytest

from kchannel.client import KafkaClient
from kchannel.config import load_properties
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.peers import free_ports, properties_text

pytestmark = [pytest.mark.interop]


def test_properties_text_round_trips(tmp_path):
    props = {"a": "plain", "b": "with = and : inside", "c": "C:\\path\\file",
             "d": " leading space", "e": "line1\nline2", "key with space": "x",
             "sasl.jaas.config": 'M required user_a="b";'}
    path = tmp_path / "p.properties"
    path.write_text(properties_text(props))
    assert dict(load_properties(str(path))) == props


def test_free_ports_are_distinct():
    ports = free_ports(20)
    assert len(set(ports)) == 20


@pytest.mark.slow
def test_subprocess_server_ephemeral_ports(kchannel_server):
    srv = kchannel_server({"listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                           "advertised.listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                           "node.id": "12"})
    assert set(srv.listeners) == {"PLAINTEXT", "OTHER"}
    assert srv.port("PLAINTEXT") != srv.port("OTHER")
    assert srv.node_id == 12 and srv.cluster_id
    for name in ("PLAINTEXT", "OTHER"):
        with KafkaClient({"bootstrap.servers": srv.bootstrap(name)}).connect() as c:
            md = c.request(ApiKey.METADATA, {"topics": []})
        # an advertised port 0 is the bound port
        assert (md["brokers"][0]["port"], md["cluster_id"]) == (srv.port(name), srv.cluster_id)


@pytest.mark.slow
def test_subprocess_server_sigint_exits_0(kchannel_server):
    srv = kchannel_server({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert srv.stop(signal.SIGINT) == 0
    assert "Received SIGINT; shutting down" in srv.log()


@pytest.mark.slow
def test_subprocess_server_bad_config_is_reported(tmp_path):
    from tests.fixtures.peers import start_kchannel_server
    with pytest.raises(RuntimeError, match="connections.max.idle.ms"):
        start_kchannel_server(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                         "connections.max.idle.ms": "soon"}, timeout=30)


def test_inprocess_server(kchannel_inprocess_server):
    srv = kchannel_inprocess_server({"listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "4"})
    with KafkaClient({"bootstrap.servers": srv.bootstrap()}).connect() as c:
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 4


@pytest.mark.slow
def test_sigterm_with_clients_connected(kchannel_server, pki):
    """SIGTERM while a TLS client is connected, one is half-way through its
    handshake and one has sent half a frame: clean exit 0, and the connected
    client sees the connection close."""
    import socket
    import time
    from kchannel import errors
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
             "advertised.listeners": "PLAINTEXT://127.0.0.1:0,SSL://localhost:0"}
    for k, v in pki.server_configs().items():
        props[f"listener.name.ssl.{k}"] = v
    srv = kchannel_server(props)
    client = KafkaClient({"bootstrap.servers": srv.bootstrap("SSL", "localhost"),
                          "security.protocol": "SSL", "request.timeout.ms": 5000,
                          **pki.client_configs()}).connect()
    half_tls = socket.create_connection(("127.0.0.1", srv.port("SSL")))
    half_tls.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    half_frame = socket.create_connection(("127.0.0.1", srv.port("PLAINTEXT")))
    half_frame.sendall(b"\x00\x00\x00\x40\x00\x03")
    try:
        started = time.monotonic()
        assert srv.stop() == 0, srv.log()
        assert time.monotonic() - started < 10
        with pytest.raises(errors.KChannelError):
            client.request(ApiKey.METADATA, {"topics": []})
    finally:
        client.close()
        half_tls.close()
        half_frame.close()
