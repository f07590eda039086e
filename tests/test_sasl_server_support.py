"""Shared helpers for the SASL authenticator tests (no tests here).

``FrameIO`` stands in for the channel's ``AuthIO`` without sockets: inbound
bytes go through a real ``FrameDecoder`` (so size limits behave as on a
channel), outbound frames are recorded and, when two are paired, delivered
to the peer.  ``drive`` runs a client and a server authenticator against each
other until both are complete or one fails.
"""
import struct

from kchannel.errors import ChannelConnectionError
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.security.sasl import scram
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.scram_store import InMemoryScramCredentialStore

NOW = 1_700_000_000_000

USERS = {"alice": "alice-secret", "bob": "bob-secret", "us,er=1": "odd-secret"}


class FrameIO:
    def __init__(self, max_receive_size=104857600):
        self.decoder = FrameDecoder(max_receive_size)
        self.max_receive_size = max_receive_size
        self.out = []
        self.peer = None
        self.eof = False
        self.flush_ok = True
        self.listener_name = "SASL_PLAINTEXT"
        self.security_protocol = "SASL_PLAINTEXT"
        self.client_address = ("127.0.0.1", 40000)
        self.transport = None
        self.sizes_set = []

    # what tests feed in
    def feed(self, data):
        self.decoder.feed(data)

    def feed_frame(self, payload):
        self.decoder.feed(encode_frame(payload))

    def take(self):
        out, self.out = self.out, []
        return out

    # AuthIO
    def read_frame(self):
        frame = self.decoder.next_frame()
        if frame is None and self.eof:
            raise ChannelConnectionError("closed by peer")
        return frame

    def write_frame(self, payload):
        payload = bytes(payload)
        self.out.append(payload)
        if self.peer is not None:
            self.peer.feed_frame(payload)

    def write_raw(self, data):
        self.out.append(bytes(data))

    def flush(self):
        return self.flush_ok

    def has_pending_writes(self):
        return not self.flush_ok

    def set_max_receive_size(self, n):
        self.sizes_set.append(n)
        self.decoder.max_size = n


def pair():
    client_io, server_io = FrameIO(), FrameIO()
    client_io.peer, server_io.peer = server_io, client_io
    return client_io, server_io


def drive(client, client_io, server, server_io, now=NOW, max_steps=20):
    """Alternate the two state machines; returns when both are complete.
    Exceptions propagate (the caller asserts on them)."""
    for _ in range(max_steps):
        if not client.complete():
            client.authenticate(client_io, now)
        if not server.complete():
            server.authenticate(server_io, now)
        if client.complete() and server.complete():
            return
    raise AssertionError(f"no progress: client {client.state}, server {server.state}")


def request(api_key, version, body, correlation_id=1, client_id="test-client"):
    return encode_request(RequestHeader(api_key, version, correlation_id, client_id), body)


def raw_request(api_key, version, body_bytes, correlation_id=1, client_id="test-client"):
    return encode_request(RequestHeader(api_key, version, correlation_id, client_id),
                          body_bytes)


def response(payload, api_key, version):
    return decode_response(payload, api_key, version)


def scram_store(users=USERS, mechanisms=scram.MECHANISMS, iterations=4096):
    store = InMemoryScramCredentialStore()
    for user, password in users.items():
        for mech in mechanisms:
            store.put(user, mech, scram.generate_credential(mech, password, iterations))
    return store


def plain_jaas(users=USERS):
    return {f"user_{u}": p for u, p in users.items()}


def server_callbacks(store=None, token_credential=None, users=USERS):
    return ServerCallbacks.default(jaas_options=plain_jaas(users),
                                   store=store if store is not None else scram_store(users),
                                   token_credential=token_credential)


def size_prefix(n):
    return struct.pack(">i", n)
