"""TLS pump throughput, compiled vs pure twin.

    python -m pytest benchmarks/bench_tls.py --benchmark-group-by=func

Two ``TlsPump`` of the same twin over a non-blocking ``socketpair`` in this
thread (TLS 1.3 between the test PKI's client and server contexts):

* ``test_bulk``: the client pump ``write``s payloads of ``size`` bytes while
  the server pump ``read_into``s a counting sink, alternating whenever the
  socket is full, for about 8 MiB per round.  Both directions' pumping,
  encryption and decryption run in one thread, so the figure is the whole
  cost of moving the bytes once.
* ``test_ping_pong``: 100-byte writes answered by 100-byte writes, one
  at a time: the per-call overhead of the pump (flush, fill, SSL calls),
  where the interpreter matters most.

The handshake (OpenSSL-bound in both twins) is done once per test.
"""
import socket
import ssl

import pytest

SIZES = {"100B": 100, "16KiB": 16384, "1MiB": 1 << 20}
ROUND_BYTES = 8 << 20
PING = 100
PINGS = 2000


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    from tests.fixtures.certs import make_pki
    pki = make_pki(str(tmp_path_factory.mktemp("pki")))
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(pki.server.cert_path, pki.server.key_path)
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(pki.ca.cert_path)
    return sctx, cctx


@pytest.fixture
def pumps(twin, contexts):
    mod = twin("tlspump")
    sctx, cctx = contexts
    a, b = socket.socketpair()
    for s in (a, b):
        s.setblocking(False)
    pairs = []
    for sock, ctx, server_side in ((a, cctx, False), (b, sctx, True)):
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        if server_side:
            obj = ctx.wrap_bio(inc, out, server_side=True)
        else:
            obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
        pairs.append(mod.TlsPump(sock, obj, inc, out))
    client, server = pairs
    for _ in range(100):
        if not (client.handshake() | server.handshake()):
            break
    else:
        raise AssertionError("TLS handshake did not complete")
    # TLS 1.3 session tickets: let the client take them in before measuring
    server.write(b"x")
    while not client.read_into(lambda v: None):
        server.flush()
    yield client, server
    for s in (a, b):
        s.close()


@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def size(request):
    return SIZES[request.param]


def _drain(pump, count):
    def sink(view):
        count[0] += len(view)
    while pump.read_into(sink):
        pass


def test_bulk(benchmark, pumps, size):
    client, server = pumps
    payload = b"\xab" * size
    n = max(4, ROUND_BYTES // size)
    total = n * size
    count = [0]

    def sink(view):
        count[0] += len(view)

    def run():
        count[0] = 0
        for _ in range(n):
            view = memoryview(payload)
            while view:
                k = client.write(view)
                view = view[k:]
                if not k or client.pending_writes():
                    # socket full: let the reader make room
                    while server.read_into(sink):
                        pass
                    client.flush()
        while client.pending_writes():
            client.flush()
            while server.read_into(sink):
                pass
        while count[0] < total:
            if not server.read_into(sink):
                break
        return count[0]

    assert benchmark(run) == total
    benchmark.extra_info["bytes_per_round"] = total


def test_ping_pong(benchmark, pumps):
    client, server = pumps
    ping = b"p" * PING
    got = [0]

    def sink(view):
        got[0] += len(view)

    def run():
        for _ in range(PINGS):
            for src, dst in ((client, server), (server, client)):
                src.write(ping)
                got[0] = 0
                while got[0] < PING:
                    if not dst.read_into(sink):
                        src.flush()
        return PINGS

    assert benchmark(run) == PINGS
