"""A SASL_SSL SCRAM-SHA-512 connection between kchannel's client and server
(both in this process, over loopback) makes no ``recv`` that can only find
its socket empty: none right after sending a TLS handshake flight or a
request (the peer's answer to it cannot be there yet), none for what came in
with a recv that emptied the socket, none once the authenticator has taken
what a readiness event announced.  Each would cost a syscall and an
exception (one per round trip on each side before); the readiness events
still bring every byte.  Runs with the active twins (KCHANNEL_NO_EXTENSIONS
selects the pure ones).  Also: a NetworkClient's poll in a storm of
connections asks only the channels that became READY."""
import socket

import pytest

from kchannel.client import KafkaClient
from kchannel.security.sasl.scram_store import (
    InMemoryScramCredentialStore, credential_from_password)
from kchannel.server import Server

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_EMPTY = []   # one entry per recv_into that found nothing (EAGAIN)


class _CountingSocket(socket.socket):
    def recv_into(self, *args):
        try:
            return super().recv_into(*args)
        except BlockingIOError:
            _EMPTY.append(1)
            raise


@pytest.fixture
def server(pki, tmp_path):
    store = InMemoryScramCredentialStore()
    store.put("bench", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "secret"))
    props = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "inter.broker.listener.name": "SASL_SSL",
        "log.dirs": str(tmp_path),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }
    props.update(pki.server_configs())
    s = Server(props, sasl_kwargs={"scram_store": store})
    s.start()
    try:
        yield s
    finally:
        s.shutdown()


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_sasl_ssl_scram_connection_reads_no_empty_socket(pki, server, monkeypatch, protocol):
    # every socket made from here on (the client's, the server's accepted
    # ones) counts its empty reads
    monkeypatch.setattr(socket, "socket", _CountingSocket)
    cfg = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
           "sasl.jaas.config": f'{SCRAM_MODULE} required username="bench" password="secret";',
           "ssl.enabled.protocols": protocol}
    cfg.update(pki.client_configs())
    del _EMPTY[:]
    for _ in range(3):
        client = KafkaClient(cfg)
        try:
            client.connect("localhost", server.bound_port("SASL_SSL"))
            assert _EMPTY == []
        finally:
            client.close()


def test_storm_poll_asks_only_channels_that_became_ready():
    """NetworkClient.poll starts ApiVersions on the channels the selector
    names as newly READY instead of asking every connecting node after
    every poll (O(nodes) per poll in a storm); every node gets READY."""
    from kchannel.client import ConnectionState, NetworkClient
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=1)
    s.start()
    net = NetworkClient({})
    asked = []
    real = net.selector.is_channel_ready

    def counting(id):
        asked.append(id)
        return real(id)

    net.selector.is_channel_ready = counting
    try:
        port = s.bound_port("PLAINTEXT")
        n = 40
        for i in range(n):
            net.connect(i, "127.0.0.1", port)
        pending = set(range(n))
        for _ in range(2000):
            if not pending:
                break
            net.poll(50)
            pending = {i for i in pending if net.connection_state(i) is not ConnectionState.READY}
        assert not pending
        assert sorted(asked) == list(range(n))
    finally:
        net.close()
        s.shutdown()
