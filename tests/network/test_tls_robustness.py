"""TLS transports fail closed on hostile bytes, and interoperate with
Python's own socket-based TLS (``ssl.SSLSocket``) as an independent peer."""
import inspect
import selectors
import socket
import ssl
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import ChannelConnectionError, SslAuthenticationError
from kchannel.network.ops import OP_READ
from kchannel.network.ssl_factory import SslFactory
from kchannel.network.ssl_transport import SslTransportLayer
from tests.fixtures.signatures import member_signature, shape

DEADLINE_S = 20.0
FAILURES = (SslAuthenticationError, ChannelConnectionError)


@pytest.fixture(scope="module")
def factories(pki):
    return (SslFactory("server", pki.server_configs()),
            SslFactory("client", pki.client_configs()))


def wait(t, ops=OP_READ, timeout=0.5):
    sel = selectors.DefaultSelector()
    sel.register(t.socket, ops)
    sel.select(timeout)
    sel.close()


def drive_handshake(*ts):
    deadline = time.monotonic() + DEADLINE_S
    todo = list(ts)
    while todo:
        assert time.monotonic() < deadline, "handshake hung"
        for t in list(todo):
            ops = t.handshake()
            if ops == 0:
                todo.remove(t)
            elif len(todo) == 1:
                wait(t, ops)


def run_until_failure(step):
    """Call step() until it raises; returns the exception (must be one of
    FAILURES: anything else propagates and fails the test)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        assert time.monotonic() < deadline, "no failure: hung on hostile input"
        try:
            step()
        except FAILURES as exc:
            return exc


HYP = settings(max_examples=60, deadline=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


@HYP
@given(junk=st.one_of(
    st.binary(min_size=1, max_size=600),
    # Plausible TLS record headers followed by junk.
    st.builds(lambda t, v, body: bytes([t, 3, v]) + len(body).to_bytes(2, "big") + body,
              st.sampled_from([20, 21, 22, 23, 24]), st.integers(0, 4),
              st.binary(max_size=300)),
))
def test_server_handshake_fails_closed_on_any_bytes(factories, impl, junk):
    sf, _ = factories
    a, b = socket.socketpair()
    server = SslTransportLayer(b, sf.create_engine(), pump_module=impl.tlspump)
    a.sendall(junk)
    a.close()

    def step():
        if server.handshake():
            wait(server)
    err = run_until_failure(step)
    assert not server.ready()
    server.close()
    assert isinstance(err, FAILURES)


@HYP
@given(junk=st.binary(min_size=1, max_size=600))
def test_client_handshake_fails_closed_on_any_bytes(factories, impl, junk):
    _, cf = factories
    a, b = socket.socketpair()
    client = SslTransportLayer(a, cf.create_engine("localhost"), pump_module=impl.tlspump)
    assert client.handshake() == OP_READ
    b.sendall(junk)
    b.close()

    def step():
        if client.handshake():
            wait(client)
    run_until_failure(step)
    assert not client.ready()
    client.close()


@HYP
@given(junk=st.one_of(
    st.binary(min_size=1, max_size=600),
    st.builds(lambda body: b"\x17\x03\x03" + len(body).to_bytes(2, "big") + body,
              st.binary(min_size=1, max_size=300)),
))
def test_injected_bytes_after_handshake_never_become_data(factories, impl, junk):
    sf, cf = factories
    a, b = socket.socketpair()
    client = SslTransportLayer(a, cf.create_engine("localhost"), pump_module=impl.tlspump)
    server = SslTransportLayer(b, sf.create_engine(), pump_module=impl.tlspump)
    drive_handshake(client, server)
    # An attacker on the wire appends bytes after the client's records.
    a.sendall(junk)
    a.shutdown(socket.SHUT_WR)
    got = bytearray()

    def step():
        if server.read_into(got.extend) == 0 and not server.has_bytes_buffered():
            wait(server)
    run_until_failure(step)
    assert got == b""
    client.close()
    server.close()


# ---------------------------------------------------------------------------
# interop with ssl.SSLSocket (OpenSSL's socket BIO path, blocking, a thread)
# ---------------------------------------------------------------------------
def _echo_server(ctx, ls, result):
    try:
        conn, _ = ls.accept()
        with ctx.wrap_socket(conn, server_side=True) as tls:
            data = b""
            while not data.endswith(b"\n"):
                chunk = tls.recv(65536)
                if not chunk:
                    break
                data += chunk
            tls.sendall(data.upper())
            result["peer"] = tls.getpeercert()
            result["version"] = tls.version()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        result["error"] = exc


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_client_transport_against_sslsocket_server(pki, impl, version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.server.chain_path, pki.server.key_path)
    ctx.load_verify_locations(pki.ca.cert_path)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.maximum_version = getattr(ssl.TLSVersion, version.replace(".", "_"))
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    result = {}
    th = threading.Thread(target=_echo_server, args=(ctx, ls, result), daemon=True)
    th.start()
    sock = socket.create_connection(ls.getsockname())
    cf = SslFactory("client", pki.client_configs(keystore="pkcs12"))
    client = SslTransportLayer(sock, cf.create_engine("localhost"), pump_module=impl.tlspump)
    try:
        drive_handshake(client)
        assert client.protocol() == version
        msg = b"hello from kchannel " * 1000 + b"\n"
        sent = 0
        while sent < len(msg):
            sent += client.write(memoryview(msg)[sent:])
        while client.has_pending_writes():
            client.flush()
        got = bytearray()
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(msg):
            assert time.monotonic() < deadline
            if client.read_into(got.extend) == 0:
                wait(client)
        assert bytes(got) == msg.upper()
        th.join(DEADLINE_S)
        assert "error" not in result, result.get("error")
        assert dict(x[0] for x in result["peer"]["subject"])["commonName"] == "client"
    finally:
        client.close()
        ls.close()


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_server_transport_against_sslsocket_client(pki, impl, version):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    result = {}

    def client_thread():
        try:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(pki.ca.cert_path)
            ctx.load_cert_chain(pki.client.chain_path, pki.client.key_path)
            ctx.maximum_version = getattr(ssl.TLSVersion, version.replace(".", "_"))
            with socket.create_connection(ls.getsockname()) as raw, \
                    ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"ping\n")
                result["reply"] = tls.recv(100)
                result["version"] = tls.version()
        except Exception as exc:  # noqa: BLE001
            result["error"] = exc

    th = threading.Thread(target=client_thread, daemon=True)
    th.start()
    sock, _ = ls.accept()
    sf = SslFactory("server", pki.server_configs(client_auth="required"))
    server = SslTransportLayer(sock, sf.create_engine(), pump_module=impl.tlspump)
    try:
        drive_handshake(server)
        assert server.peer_subject_dn() == "CN=client,OU=Eng,O=Example,C=US"
        got = bytearray()
        deadline = time.monotonic() + DEADLINE_S
        while not got.endswith(b"\n"):
            assert time.monotonic() < deadline
            if server.read_into(got.extend) == 0:
                wait(server)
        assert bytes(got) == b"ping\n"
        server.write(b"PONG")
        while server.has_pending_writes():
            server.flush()
        th.join(DEADLINE_S)
        assert "error" not in result, result.get("error")
        assert result["reply"] == b"PONG" and result["version"] == version
    finally:
        server.close()
        ls.close()


def test_pump_twins_have_the_same_interface(impl_pair):
    pure, compiled = impl_pair
    p, c = pure.tlspump, compiled.tlspump

    def public(obj):
        return {n for n in dir(obj) if not n.startswith("_")}

    assert public(p.TlsPump) == public(c.TlsPump)
    for name in ("OP_READ", "OP_WRITE", "DEFAULT_NET_BUFFER_SIZE", "DEFAULT_APP_BUFFER_SIZE",
                 "DEFAULT_WRITE_CHUNK"):
        assert getattr(p, name) == getattr(c, name)
    assert callable(p.shared_buffer) and callable(c.shared_buffer)
    # More than names: every method's parameters and defaults (the full
    # contract check of all twins is tests/core/test_impl_contracts.py).
    assert shape(inspect.signature(p.shared_buffer)) == shape(inspect.signature(c.shared_buffer))
    for name in sorted(public(p.TlsPump) | {"__init__"}):
        ps, cs = inspect.getattr_static(p.TlsPump, name), inspect.getattr_static(c.TlsPump, name)
        assert callable(ps) == callable(cs), name
        if callable(ps):
            assert (shape(member_signature(p.TlsPump, name))
                    == shape(member_signature(c.TlsPump, name))), name
