"""Server resources under hostile connections: an oversized size prefix is
refused before anything of that size is allocated, idle unauthenticated
connections expire, a slow sender does not hold up others, and a client
that never reads its responses cannot make the server buffer without bound.

Memory is measured with tracemalloc (the server runs in this process)."""
import gc
import socket
import ssl
import struct
import threading
import time
import tracemalloc

import pytest

from kchannel.client import KafkaClient
from kchannel.framing import encode_frame
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.server import Server

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
MiB = 1024 * 1024


def sasl_server(pki=None, **kw):
    listeners = ["SASL_PLAINTEXT://127.0.0.1:0"]
    configs = {"SASL_PLAINTEXT": {"sasl.enabled.mechanisms": "PLAIN"}}
    if pki is not None:
        listeners.append("SASL_SSL://127.0.0.1:0")
        configs["SASL_SSL"] = dict(pki.server_configs(), **{"sasl.enabled.mechanisms": "PLAIN"})
        listeners.append("SSL://127.0.0.1:0")
        configs["SSL"] = pki.server_configs()
    listeners.append("PLAINTEXT://127.0.0.1:0")
    s = Server(listeners=listeners, listener_configs=configs,
               jaas={"PLAIN": {"user_alice": "alice-secret"}}, **kw)
    s.start()
    return s


def plain_client(port):
    return KafkaClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.jaas.config":
                            f'{PLAIN} required username="alice" password="alice-secret";'})


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    return recv_exact(sock, struct.unpack(">i", recv_exact(sock, 4))[0])


def wait_closed(sock, timeout_s=30):
    """True once the peer closed ``sock`` (EOF or reset)."""
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def still_open(sock):
    sock.setblocking(False)
    try:
        return sock.recv(1) is None
    except (BlockingIOError, ssl.SSLWantReadError):
        return True
    except (ConnectionError, OSError):
        return False


@pytest.fixture
def server(pki):
    s = sasl_server(pki)
    yield s
    s.shutdown()


def _connect(server, listener, pki):
    raw = socket.create_connection(("127.0.0.1", server.bound_port(listener)), timeout=10)
    if listener in ("SASL_SSL", "SSL"):
        ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
        return ctx.wrap_socket(raw, server_hostname="localhost")
    return raw


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL", "PLAINTEXT", "SSL"])
def test_huge_size_prefix_refused_before_allocation(server, pki, listener):
    """2 GiB - 1 announced: SASL listeners refuse anything above
    sasl.server.max.receive.size before authentication, the others anything
    above socket.request.max.bytes; either way before allocating it."""
    limit = 524288 if listener.startswith("SASL") else 104857600
    # Control: a frame of exactly the pre-auth limit is waited for (on the
    # other listeners a small one: an accepted size may be reserved at once,
    # as Kafka's NetworkReceive allocates it).
    ok = _connect(server, listener, pki)
    ok.sendall(struct.pack(">i", limit if listener.startswith("SASL") else 1000) + b"\0" * 16)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for size in (2 ** 31 - 1, limit + 1):
            bad = _connect(server, listener, pki)
            bad.sendall(struct.pack(">i", size) + b"\0" * 16)
            assert wait_closed(bad), f"size {size} was not refused"
            bad.close()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak - base < 16 * MiB
    assert still_open(ok)
    ok.close()


def test_negative_size_prefix_refused(server, pki):
    s = _connect(server, "SASL_PLAINTEXT", pki)
    s.sendall(struct.pack(">i", -1))
    assert wait_closed(s)


def test_idle_unauthenticated_connections_expire(pki):
    s = sasl_server(pki, connections_max_idle_ms=200)
    try:
        socks = []
        for _ in range(20):       # nothing sent at all
            socks.append(socket.create_connection(("127.0.0.1",
                                                   s.bound_port("SASL_PLAINTEXT"))))
        for _ in range(10):       # stopped after ApiVersions, before the handshake
            c = socket.create_connection(("127.0.0.1", s.bound_port("SASL_PLAINTEXT")))
            c.sendall(encode_frame(encode_request(RequestHeader(18, 0, 1, "idle"), {})))
            socks.append(c)
        for _ in range(10):       # half a frame
            c = socket.create_connection(("127.0.0.1", s.bound_port("SASL_PLAINTEXT")))
            c.sendall(struct.pack(">i", 100) + b"\0" * 10)
            socks.append(c)
        for _ in range(10):       # TLS listener, TCP connected, no ClientHello
            socks.append(socket.create_connection(("127.0.0.1", s.bound_port("SASL_SSL"))))
        for c in socks:
            assert wait_closed(c)
            c.close()
        deadline = time.monotonic() + 30
        while s.selector.metrics.metric("connection-count") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.selector.metrics.metric("connection-count") == 0
    finally:
        s.shutdown()


def test_slow_senders_do_not_block_others(server, pki):
    """Twenty connections dribble an ApiVersions request one byte at a time;
    meanwhile other clients authenticate and are served, and the slow
    requests are still answered once complete."""
    frame = encode_frame(encode_request(RequestHeader(18, 0, 7, "slow"), {}))
    half = threading.Event()
    go_on = threading.Event()
    answers = []
    errors = []
    started = []

    def slow():
        try:
            c = socket.create_connection(("127.0.0.1", server.bound_port("SASL_PLAINTEXT")))
            started.append(c)
            for i, b in enumerate(frame):
                c.sendall(bytes([b]))
                time.sleep(0.002)
                if i == len(frame) // 2:
                    if len(started) == 20:
                        half.set()
                    go_on.wait(60)
            c.settimeout(30)
            answers.append(decode_response(recv_frame(c), 18, 0))
            c.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=slow, daemon=True) for _ in range(20)]
    for t in threads:
        t.start()
    assert half.wait(60)
    for _ in range(5):
        with plain_client(None) as c:
            c.connect("127.0.0.1", server.bound_port("SASL_PLAINTEXT"))
            assert c.request(ApiKey.METADATA, {"topics": []}, version=1) is not None
    go_on.set()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(answers) == 20 and all(cid == 7 for cid, _ in answers)


BIG_RESPONSE_TOPICS = [{"error_code": 0, "name": f"t{i:05d}" + "x" * 200, "is_internal": False,
                        "partitions": []} for i in range(150)]    # ~32 KiB per response


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
def test_client_that_never_reads_cannot_grow_server_buffers(pki, listener):
    """A client pipelines Metadata requests (19 bytes each, ~32 KiB answers)
    and never reads.  As Kafka's broker (one response in flight per
    connection, the channel muted until it is written), the server stops
    reading that connection once its unwritten responses pile up, so TCP
    back-pressure stops the client: server memory stays bounded instead of
    growing with every request.  Once the client reads, every response
    arrives, in order."""
    s = sasl_server(pki)
    s.register_handler(ApiKey.METADATA, lambda ctx: {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": BIG_RESPONSE_TOPICS})
    n = 3000          # ~96 MiB of responses if they were all held
    c = _connect(s, listener, pki)
    try:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        reqs = [encode_frame(encode_request(RequestHeader(3, 1, i, "noread"), {"topics": []}))
                for i in range(n)]
        # All requests fit in the kernel's socket buffers: the client is
        # never blocked, only the server can decide not to read them.
        c.settimeout(10)
        sent = 0
        while sent < n:
            c.sendall(b"".join(reqs[sent:sent + 10]))
            sent += 10
        # Give the server time to read (and answer) all it is willing to.
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            time.sleep(0.05)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # Without the back-pressure the server would hold ~96 MiB here (every
        # request read, every response queued).
        assert peak - base < 24 * MiB
        # Liveness: read everything while sending the rest.
        rest = b"".join(reqs[sent:])
        sender = threading.Thread(target=lambda: c.sendall(rest), daemon=True)
        c.settimeout(60)
        sender.start()
        seen = []
        for _ in range(n):
            cid, body = decode_response(recv_frame(c), 3, 1)
            assert len(body["topics"]) == len(BIG_RESPONSE_TOPICS)
            seen.append(cid)
        sender.join(60)
        assert seen == list(range(n))
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        c.close()
        s.shutdown()
