"""The TLS server transport against librdkafka (confluent-kafka), whose TLS
client is its own OpenSSL build driven through socket BIOs: a real Kafka
client's handshake, mutual TLS and failure alerts."""
import selectors
import socket
import threading
import time

import pytest

from kchannel.errors import ChannelConnectionError, SslAuthenticationError
from kchannel.network.ops import OP_READ
from kchannel.network.ssl_factory import SslFactory
from kchannel.network.ssl_transport import SslTransportLayer

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka not installed")
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.interop]

DEADLINE_S = 30.0


class OneShotTlsServer:
    """Accepts one connection, completes the TLS handshake and reads the
    first Kafka frame; records the outcome."""

    def __init__(self, server_configs, impl):
        self.factory = SslFactory("server", server_configs)
        self.impl = impl
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4)
        self.port = self.ls.getsockname()[1]
        self.result = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        try:
            self.ls.settimeout(DEADLINE_S)
            sock, _ = self.ls.accept()
            t = SslTransportLayer(sock, self.factory.create_engine(),
                                  pump_module=self.impl.tlspump)
            deadline = time.monotonic() + DEADLINE_S
            sel.register(sock, OP_READ)
            try:
                while True:
                    ops = t.handshake()
                    if ops == 0:
                        break
                    sel.modify(sock, ops)
                    sel.select(0.5)
                    if time.monotonic() > deadline:
                        raise TimeoutError("handshake")
                self.result["protocol"] = t.protocol()
                self.result["dn"] = t.peer_subject_dn()
                buf = bytearray()
                sel.modify(sock, OP_READ)
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    if t.read_into(buf.extend) == 0 and not t.has_bytes_buffered():
                        sel.select(0.5)
                    if time.monotonic() > deadline:
                        raise TimeoutError("first frame")
                size = int.from_bytes(buf[:4], "big")
                frame = bytes(buf[4:4 + size])
                self.result["api_key"] = int.from_bytes(frame[:2], "big", signed=True)
                client_id_len = int.from_bytes(frame[8:10], "big", signed=True)
                self.result["client_id"] = frame[10:10 + client_id_len].decode()
            except (SslAuthenticationError, ChannelConnectionError) as exc:
                self.result["error"] = exc
            finally:
                t.close()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.result["unexpected"] = exc
        finally:
            sel.close()
            self.ls.close()

    def join(self):
        self.thread.join(DEADLINE_S + 5)
        assert not self.thread.is_alive()
        assert "unexpected" not in self.result, self.result["unexpected"]
        return self.result


def _poke(port, extra):
    """Make librdkafka connect (and give up quickly)."""
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
            "client.id": "rdkafka-interop", "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000}
    conf.update(extra)
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=2)
    except confluent_kafka.KafkaException:
        pass


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_librdkafka_mutual_tls(pki, impl, version):
    sc = pki.server_configs(client_auth="required")
    sc["ssl.enabled.protocols"] = version
    server = OneShotTlsServer(sc, impl)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path,
                        "ssl.certificate.location": pki.client.cert_path,
                        "ssl.key.location": pki.client.encrypted_key_path,
                        "ssl.key.password": pki.client.key_password,
                        "ssl.endpoint.identification.algorithm": "https"})
    res = server.join()
    assert "error" not in res, res["error"]
    assert res["protocol"] == version
    assert res["dn"] == "CN=client,OU=Eng,O=Example,C=US"
    assert res["api_key"] == 18  # ApiVersions: the first thing a Kafka client says
    assert res["client_id"] == "rdkafka-interop"


class _Active:
    from kchannel.network import ssl_transport as _st
    tlspump = _st._pump


def test_librdkafka_rejects_untrusted_server(pki):
    server = OneShotTlsServer(pki.server_configs(identity=pki.untrusted_server), _Active)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path})
    res = server.join()
    assert isinstance(res.get("error"), SslAuthenticationError)
    assert "unknown ca" in str(res["error"]) or "certificate" in str(res["error"])


def test_librdkafka_without_client_cert_when_required(pki):
    server = OneShotTlsServer(pki.server_configs(client_auth="required"), _Active)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path})
    res = server.join()
    assert isinstance(res.get("error"), SslAuthenticationError)
    assert "certificate" in str(res["error"])
