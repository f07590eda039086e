"""Server socket settings as Kafka's SocketServer applies them:

* ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections``:
  once reached, the listener stops accepting (connections wait in the listen
  backlog, as behind Kafka's blocked acceptor) until a connection closes; the
  inter-broker listener is not held back by the broker-wide limit when there
  are other listeners;
* ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``: SO_SNDBUF /
  SO_RCVBUF of accepted connections (-1 = the OS default);
* ApiVersions lists SaslHandshake and SaslAuthenticate on every listener,
  which answer ILLEGAL_SASL_STATE outside SASL authentication.

The server is polled by the test itself (no server thread), so what it has
accepted is known exactly at each step.
"""
import socket

import pytest

from kchannel.framing import FrameDecoder, encode_frame
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.server import Server
from tests.fixtures.servers import connections, poll

PLAIN = "PLAINTEXT"


def make_server(**props):
    base = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return Server(base)


class Peer:
    """A raw client connection; requests are answered only while the test
    polls the server."""

    def __init__(self, server, listener=PLAIN):
        self.server = server
        self.sock = socket.create_connection(("127.0.0.1", server.bound_port(listener)))
        self.decoder = FrameDecoder()
        self.correlation_id = 0

    def send(self, api_key, body, version):
        self.correlation_id += 1
        header = RequestHeader(int(api_key), version, self.correlation_id, "limits")
        self.sock.sendall(encode_frame(encode_request(header, body)))
        return self.correlation_id

    def request(self, api_key, body, version):
        """Send, then poll the server until the response is here."""
        correlation_id = self.send(api_key, body, version)
        self.sock.setblocking(False)
        for _ in range(2000):
            self.server.poll(5)
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                continue
            assert data, "connection closed"
            self.decoder.feed(data)
            frame = self.decoder.next_frame()
            if frame is not None:
                got, body = decode_response(frame, int(api_key), version)
                assert got == correlation_id
                return body
        raise AssertionError("no response")

    def close(self):
        self.sock.close()


def api_versions(peer):
    return peer.request(ApiKey.API_VERSIONS, {}, 0)


def test_max_connections_holds_new_connections_until_one_closes(servers):
    server = make_server(max_connections=2)
    servers.append(server)
    first, second = Peer(server), Peer(server)
    assert api_versions(first)["error_code"] == 0
    assert api_versions(second)["error_code"] == 0
    third = Peer(server)
    third.send(ApiKey.API_VERSIONS, {}, 0)
    poll(server)
    assert len(connections(server)) == 2         # the third waits in the backlog
    first.close()
    # Once the server has seen the close, the third connection is accepted
    # and its request (sent long ago) answered.
    third.correlation_id -= 1
    assert api_versions(third)["error_code"] == 0
    assert len(connections(server)) == 2
    for p in (second, third):
        p.close()


def test_listener_max_connections(servers):
    server = make_server(
        listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
           "listener.name.other.max.connections": 1})
    servers.append(server)
    assert server.listener("OTHER").max_connections == 1
    peers = [Peer(server, "OTHER"), Peer(server, "OTHER")]
    poll(server)
    assert len(connections(server, "OTHER")) == 1
    # The PLAINTEXT listener has no limit of its own.
    plain = [Peer(server) for _ in range(3)]
    for p in plain:
        assert api_versions(p)["error_code"] == 0
    assert len(connections(server, "OTHER")) == 1
    for p in peers + plain:
        p.close()


def test_inter_broker_listener_not_held_back_by_the_broker_wide_limit(servers):
    server = make_server(
        listeners="CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        max_connections=1,
        **{"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
           "inter.broker.listener.name": "REPLICATION",
           "listener.name.replication.max.connections": 3})
    servers.append(server)
    client = Peer(server, "CLIENT")
    assert api_versions(client)["error_code"] == 0
    waiting = Peer(server, "CLIENT")
    brokers = [Peer(server, "REPLICATION") for _ in range(3)]
    for b in brokers:
        assert api_versions(b)["error_code"] == 0
    extra = Peer(server, "REPLICATION")       # over its own listener limit
    poll(server)
    assert len(connections(server, "CLIENT")) == 1
    assert len(connections(server, "REPLICATION")) == 3
    for p in [client, waiting, extra] + brokers:
        p.close()


def test_unlimited_by_default(servers):
    server = make_server()
    servers.append(server)
    assert server.max_connections == 2147483647
    peers = [Peer(server) for _ in range(5)]
    for p in peers:
        assert api_versions(p)["error_code"] == 0
    assert len(connections(server)) == 5
    for p in peers:
        p.close()


def _expected_buffer(option, size):
    # What the kernel reports for ``size`` (Linux doubles it).
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, option, size)
        return s.getsockopt(socket.SOL_SOCKET, option)
    finally:
        s.close()


@pytest.mark.parametrize("sndbuf,rcvbuf", [(None, None), (65536, 32768), (200000, 300000)])
def test_socket_buffer_sizes(servers, sndbuf, rcvbuf):
    props = {}
    if sndbuf is not None:
        props["socket.send.buffer.bytes"] = sndbuf
        props["socket.receive.buffer.bytes"] = rcvbuf
    server = make_server(**props)
    servers.append(server)
    peer = Peer(server)
    assert api_versions(peer)["error_code"] == 0
    (ch,) = connections(server)
    sock = ch.transport.socket
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
        _expected_buffer(socket.SO_SNDBUF, sndbuf or 102400)
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == \
        _expected_buffer(socket.SO_RCVBUF, rcvbuf or 102400)
    peer.close()


def test_socket_buffer_os_default(servers):
    server = make_server(**{"socket.send.buffer.bytes": -1,
                            "socket.receive.buffer.bytes": -1})
    servers.append(server)
    assert (server.selector._factory.send_buffer_size,
            server.selector._factory.receive_buffer_size) == (-1, -1)
    peer = Peer(server)
    assert api_versions(peer)["error_code"] == 0
    (ch,) = connections(server)
    sock = ch.transport.socket
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) != \
        _expected_buffer(socket.SO_SNDBUF, 102400)
    peer.close()


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_sasl_apis_listed_and_answered_on_non_sasl_listeners(servers, pki, protocol):
    props = {"listeners": f"{protocol}://127.0.0.1:0"}
    if protocol == "SSL":
        props.update(pki.server_configs())
        props["security.inter.broker.protocol"] = "SSL"
        from kchannel.client import KafkaClient
        configs = {"security.protocol": "SSL", **pki.client_configs()}
    else:
        from kchannel.client import KafkaClient
        configs = {}
    server = Server(props)
    server.start()
    servers.append(server)
    host = "localhost" if protocol == "SSL" else "127.0.0.1"
    with KafkaClient(dict(configs, **{"bootstrap.servers":
                                      f"{host}:{server.bound_port(protocol)}"})).connect() as c:
        assert c.api_versions[ApiKey.SASL_HANDSHAKE] == (0, messages.SASL_HANDSHAKE.max_version)
        assert c.api_versions[ApiKey.SASL_AUTHENTICATE] == \
            (0, messages.SASL_AUTHENTICATE.max_version)
        body = c.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, version=1)
        assert (body["error_code"], body["mechanisms"]) == (int(Errors.ILLEGAL_SASL_STATE), [])
        body = c.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\x00a\x00b"}, version=2)
        assert body["error_code"] == int(Errors.ILLEGAL_SASL_STATE)
        assert body["error_message"] == \
            "SaslAuthenticate request received after successful authentication"
        # the connection stays usable
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]
