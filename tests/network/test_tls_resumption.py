"""TLS session resumption: the client's per host:port session cache, the
server's session tickets, and kchannel.ssl.session.resumption.enable.

Real 127.0.0.1 sockets and both pump twins; ``session_reused`` is OpenSSL's
own report (``SSLObject.session_reused``) on each side.
"""
import pytest

from kchannel.errors import ConfigError, SslAuthenticationError
from kchannel.network.ssl_factory import SslFactory
from kchannel.network.ssl_transport import SslTransportLayer, State

from tests.fixtures.tls import (CLIENT_DN, close_all, handshake, listener,  # noqa: F401
                                tcp_pair, transfer)

OFF = {"kchannel.ssl.session.resumption.enable": "false"}


def connect(listener, impl, sf, cf, peer_host="localhost"):  # noqa: F811 - fixture name
    """One connection from client factory ``cf`` to server factory ``sf``:
    handshake, a round trip (the client reads the TLS 1.3 ticket with the
    server's first bytes), returns both transports (open)."""
    c, s = tcp_pair(listener)
    port = listener.getsockname()[1]
    ct = SslTransportLayer(c, cf.create_engine(peer_host, port), pump_module=impl.tlspump)
    st = SslTransportLayer(s, sf.create_engine(), pump_module=impl.tlspump)
    handshake(ct, st)
    assert transfer(ct, st, b"ping") == b"ping"
    assert transfer(st, ct, b"pong") == b"pong"
    assert ct.state is State.READY and st.state is State.READY
    return ct, st


def reused(ct, st):
    return ct.session_reused(), st.session_reused()


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_second_connection_resumes_on_both_sides(pki, listener, impl, protocol):  # noqa: F811
    sf = SslFactory("server", pki.server_configs())
    cc = pki.client_configs()   # host name verification on (https)
    cc["ssl.enabled.protocols"] = protocol
    cf = SslFactory("client", cc)
    ct, st = connect(listener, impl, sf, cf)
    assert reused(ct, st) == (False, False)
    assert ct.protocol() == protocol
    close_all(ct, st)
    assert len(cf.session_cache) == 1
    for _ in range(2):
        ct, st = connect(listener, impl, sf, cf)
        try:
            assert reused(ct, st) == (True, True)
            assert ct.protocol() == protocol
            # The server's certificate is still known after a resumption.
            assert ct.peer_subject_dn() == "CN=localhost"
        finally:
            close_all(ct, st)


def test_session_only_offered_to_the_same_host_and_port(pki, listener, impl):  # noqa: F811
    sf = SslFactory("server", pki.server_configs())
    cf = SslFactory("client", pki.client_configs())
    close_all(*connect(listener, impl, sf, cf, peer_host="localhost"))
    # Same server, another name (the certificate has IP:127.0.0.1 too): a
    # full handshake, verified against that name.
    ct, st = connect(listener, impl, sf, cf, peer_host="127.0.0.1")
    try:
        assert reused(ct, st) == (False, False)
    finally:
        close_all(ct, st)
    assert len(cf.session_cache) == 2


def test_mtls_resumed_session_keeps_the_client_principal(pki, listener, impl):  # noqa: F811
    sf = SslFactory("server", pki.server_configs(client_auth="required"))
    cf = SslFactory("client", pki.client_configs(keystore="pem"))
    ct, st = connect(listener, impl, sf, cf)
    assert st.peer_subject_dn() == CLIENT_DN
    close_all(ct, st)
    ct, st = connect(listener, impl, sf, cf)
    try:
        assert reused(ct, st) == (True, True)
        # No certificate was sent on this connection: OpenSSL restores the
        # one from the session, so the principal is the same.
        assert st.peer_subject_dn() == CLIENT_DN
        assert st.peer_certificate_der() is not None
    finally:
        close_all(ct, st)


@pytest.mark.parametrize("side", ["client", "server"])
def test_disabled_on_either_side_means_full_handshakes(pki, listener, impl, side):  # noqa: F811
    sc, cc = pki.server_configs(), pki.client_configs()
    (cc if side == "client" else sc).update(OFF)
    sf, cf = SslFactory("server", sc), SslFactory("client", cc)
    if side == "client":
        assert cf.session_cache is None
    else:
        assert sf.context.num_tickets == 0
    for _ in range(3):
        ct, st = connect(listener, impl, sf, cf)
        try:
            assert reused(ct, st) == (False, False)
        finally:
            close_all(ct, st)
    if side == "server":
        # No ticket arrived, so nothing resumable was kept.
        assert len(cf.session_cache) == 0


def test_server_one_ticket_per_handshake(pki):
    assert SslFactory("server", pki.server_configs()).context.num_tickets == 1


def test_session_unknown_to_a_new_server_falls_back_to_a_full_handshake(pki, listener, impl):  # noqa: F811
    cf = SslFactory("client", pki.client_configs())
    close_all(*connect(listener, impl, SslFactory("server", pki.server_configs()), cf))
    # A restarted server has new ticket keys: the ticket is refused quietly.
    ct, st = connect(listener, impl, SslFactory("server", pki.server_configs()), cf)
    try:
        assert reused(ct, st) == (False, False)
    finally:
        close_all(ct, st)


def test_failed_handshake_drops_the_cached_session(pki, listener, impl):  # noqa: F811
    cf = SslFactory("client", pki.client_configs())
    close_all(*connect(listener, impl, SslFactory("server", pki.server_configs()), cf))
    assert len(cf.session_cache) == 1
    bad = SslFactory("server", pki.server_configs(identity=pki.untrusted_server))
    c, s = tcp_pair(listener)
    ct = SslTransportLayer(c, cf.create_engine("localhost", listener.getsockname()[1]),
                           pump_module=impl.tlspump)
    st = SslTransportLayer(s, bad.create_engine(), pump_module=impl.tlspump)
    results = handshake(ct, st, expect_failure=True)
    close_all(ct, st)
    assert isinstance(results[ct], SslAuthenticationError)
    assert len(cf.session_cache) == 0


@pytest.mark.parametrize("value", ["yes", "1", ""])
def test_invalid_value_is_refused_naming_the_key(pki, value):
    with pytest.raises(ConfigError, match="kchannel.ssl.session.resumption.enable"):
        SslFactory("client", dict(pki.client_configs(),
                                  **{"kchannel.ssl.session.resumption.enable": value}))


def test_a_fresh_cached_session_is_not_taken_again(pki, listener, impl):  # noqa: F811
    sf = SslFactory("server", pki.server_configs())
    cf = SslFactory("client", pki.client_configs())
    port = listener.getsockname()[1]
    close_all(*connect(listener, impl, sf, cf))
    first = cf.session_cache.get("localhost", port)
    assert first is not None and first.has_ticket
    close_all(*connect(listener, impl, sf, cf))
    assert cf.session_cache.get("localhost", port) is first


class _Session:
    """Stands in for ssl.SSLSession where only its lifetime matters."""
    timeout = 100


def test_session_cache_lifetime_and_bound():
    from kchannel.network.ssl_factory import SessionCache
    cache = SessionCache(maxsize=2)
    s = _Session()
    assert cache.wants("h", 1, now=0)
    cache.put("h", 1, s, now=0)
    assert not cache.wants("h", 1, now=49) and cache.get("h", 1, now=49) is s
    assert cache.wants("h", 1, now=50)          # half its lifetime used: retake
    assert cache.get("h", 1, now=99) is s
    assert cache.get("h", 1, now=100) is None   # expired: never offered
    assert cache.get("h", 2, now=0) is None     # another port
    cache.put("h", 2, s, now=0)
    cache.put("h", 3, s, now=0)
    assert len(cache) == 2 and cache.get("h", 1, now=0) is None
    cache.invalidate("h", 2)
    assert len(cache) == 1
