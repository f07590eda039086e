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
