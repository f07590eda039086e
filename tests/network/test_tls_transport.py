"""SslTransportLayer over real 127.0.0.1 sockets, with both pump twins.

No Selector: a small ``selectors`` loop drives the handshake and transfers.
The loops have a generous deadline only so a regression shows up as a
failure instead of a hung test run; nothing asserts on timing.
"""
import os
import socket
import ssl
import sys
import time

import pytest

from kchannel.errors import ChannelConnectionError, SslAuthenticationError
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.network.ssl_factory import SslFactory
from kchannel.network.ssl_transport import SslTransportLayer, State
from kchannel.network.transport import PlaintextTransportLayer
from tests.fixtures.tls import (CLIENT_DN, DEADLINE_S, close_all, handshake,  # noqa: F401
                                listener, make_pair, read_error, read_until, tcp_pair,
                                transfer, wait)


# ---------------------------------------------------------------------------
# successful handshakes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_handshake_and_echo(pki, listener, impl, protocol):
    """Kafka: SslTransportLayerTest.testValidEndpointIdentificationSanDns."""
    cc = pki.client_configs()
    cc["ssl.enabled.protocols"] = protocol
    ct, st = make_pair(listener, impl, pki.server_configs(), cc)
    try:
        assert not ct.ready() and not st.ready()
        with pytest.raises(ChannelConnectionError):
            ct.write(b"too early")
        handshake(ct, st)
        assert ct.ready() and st.ready()
        assert ct.protocol() == protocol == st.protocol()
        assert ct.state in (State.READY, State.POST_HANDSHAKE)
        assert transfer(ct, st, b"ping" * 10) == b"ping" * 10
        assert transfer(st, ct, b"pong" * 10) == b"pong" * 10
        assert ct.state is State.READY and st.state is State.READY
        # The server certificate, as the client sees it.
        assert ct.peer_subject_dn() == "CN=localhost"
        assert ct.peer_certificate_der() == ssl.PEM_cert_to_DER_cert(pki.server.cert_pem)
        # No client certificate was asked for.
        assert st.peer_certificate_der() is None and st.peer_subject_dn() is None
    finally:
        close_all(ct, st)


def test_default_is_tls13(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testTlsDefaults."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        handshake(ct, st)
        assert ct.protocol() == "TLSv1.3"
        assert ct.state is State.POST_HANDSHAKE  # until the first application byte
    finally:
        close_all(ct, st)


def test_client_protocol_tls12_caps_even_if_13_enabled(pki, listener, impl):
    cc = pki.client_configs()
    cc["ssl.protocol"] = "TLSv1.2"
    ct, st = make_pair(listener, impl, pki.server_configs(), cc)
    try:
        handshake(ct, st)
        assert ct.protocol() == "TLSv1.2"
    finally:
        close_all(ct, st)


@pytest.mark.parametrize("server_ks", ["pem", "inline", "pkcs12", "encrypted",
                                       "inline-encrypted"])
@pytest.mark.parametrize("client_ks", ["pem", "pkcs12", "encrypted"])
def test_keystore_forms_with_client_auth_required(pki, listener, server_ks, client_ks):
    """Kafka: SslTransportLayerTest.testClientAuthenticationRequiredValidProvided, testPemFiles."""
    from kchannel.network import _tlspump_py
    ct, st = make_pair(
        listener, _Pure(_tlspump_py),
        pki.server_configs(keystore=server_ks, client_auth="required"),
        pki.client_configs(keystore=client_ks))
    try:
        handshake(ct, st)
        assert st.peer_subject_dn() == CLIENT_DN
        assert st.peer_certificate_der() == ssl.PEM_cert_to_DER_cert(pki.client.cert_pem)
        assert transfer(ct, st, b"x" * 1000) == b"x" * 1000
    finally:
        close_all(ct, st)


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
@pytest.mark.parametrize("keystore", ["pem", "pkcs12", "inline-encrypted"])
def test_ecdsa_p256_certificates_with_client_auth_required(pki, listener, impl, protocol,
                                                          keystore):
    """ECDSA P-256 keys on both sides (RSA is covered by every other test)."""
    cc = pki.client_configs(identity=pki.ec_client, keystore=keystore)
    cc["ssl.enabled.protocols"] = protocol
    ct, st = make_pair(
        listener, impl,
        pki.server_configs(identity=pki.ec_server, keystore=keystore, client_auth="required"),
        cc)
    try:
        handshake(ct, st)
        assert ct.protocol() == protocol
        if protocol == "TLSv1.2":
            assert "ECDSA" in ct.cipher_suite()
        assert transfer(ct, st, b"x" * 1000) == b"x" * 1000
        assert transfer(st, ct, b"y" * 1000) == b"y" * 1000
        assert st.peer_subject_dn() == CLIENT_DN
        assert st.peer_certificate_der() == ssl.PEM_cert_to_DER_cert(pki.ec_client.cert_pem)
        assert ct.peer_certificate_der() == ssl.PEM_cert_to_DER_cert(pki.ec_server.cert_pem)
    finally:
        close_all(ct, st)


class _Pure:
    def __init__(self, module):
        self.tlspump = module


@pytest.mark.parametrize("truststore", ["pem", "inline", "pkcs12"])
def test_truststore_forms(pki, listener, truststore):
    from kchannel.network import _tlspump_py
    ct, st = make_pair(listener, _Pure(_tlspump_py), pki.server_configs(),
                       pki.client_configs(truststore=truststore))
    try:
        handshake(ct, st)
    finally:
        close_all(ct, st)


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_client_auth_requested(pki, listener, impl, protocol):
    """Kafka: SslTransportLayerTest.testClientAuthenticationRequestedNotProvided,
    testClientAuthenticationRequestedValidProvided."""
    sc = pki.server_configs(client_auth="requested")
    sc["ssl.enabled.protocols"] = protocol
    # Without a client certificate: accepted, anonymous.
    ct, st = make_pair(listener, impl, sc, pki.client_configs())
    try:
        handshake(ct, st)
        assert transfer(ct, st, b"hi") == b"hi"
        assert st.peer_subject_dn() is None
    finally:
        close_all(ct, st)
    # With one: its DN is available.
    ct, st = make_pair(listener, impl, sc, pki.client_configs(keystore="pem"))
    try:
        handshake(ct, st)
        assert transfer(ct, st, b"hi") == b"hi"
        assert st.peer_subject_dn() == CLIENT_DN
    finally:
        close_all(ct, st)


def test_client_auth_none_ignores_client_keystore(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testClientAuthenticationDisabledUntrustedProvided (a client
    keystore the server ignores)."""
    ct, st = make_pair(listener, impl, pki.server_configs(client_auth="none"),
                       pki.client_configs(keystore="pem"))
    try:
        handshake(ct, st)
        assert st.peer_subject_dn() is None
    finally:
        close_all(ct, st)


def test_endpoint_identification_disabled_accepts_wrong_host(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testEndpointIdentificationDisabled."""
    ct, st = make_pair(listener, impl, pki.server_configs(identity=pki.wronghost_server),
                       pki.client_configs(endpoint_identification=""))
    try:
        handshake(ct, st)
        assert ct.peer_subject_dn() == "CN=wronghost.example"
    finally:
        close_all(ct, st)


def test_ip_address_san(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testValidEndpointIdentificationSanIp."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs(),
                       peer_host="127.0.0.1")
    try:
        handshake(ct, st)
    finally:
        close_all(ct, st)


# ---------------------------------------------------------------------------
# TLS failures -> SslAuthenticationError with the reason
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("chain,reason", [
    ("leaf", "unable to get local issuer certificate"),
    ("full", "self-signed certificate in certificate chain"),
])
def test_untrusted_server_certificate(pki, listener, impl, chain, reason):
    """Kafka: SslTransportLayerTest.testPeerNotifiedOfHandshakeFailure (the server learns why from
    the alert)."""
    sc = pki.server_configs(identity=pki.untrusted_server, keystore="inline")
    if chain == "leaf":
        sc["ssl.keystore.certificate.chain"] = pki.untrusted_server.cert_pem
    ct, st = make_pair(listener, impl, sc, pki.client_configs())
    res = handshake(ct, st, expect_failure=True, close_failed=False)
    assert isinstance(res[ct], SslAuthenticationError)
    assert str(res[ct]) == f"SSL handshake failed: certificate verify failed: {reason}"
    assert res[ct].reason == "CERTIFICATE_VERIFY_FAILED"
    assert not res[ct].retriable
    # The server learns why from the alert.
    assert isinstance(res[st], SslAuthenticationError)
    assert "unknown ca" in str(res[st])
    # Failure is sticky, as in Kafka.
    with pytest.raises(SslAuthenticationError) as again:
        ct.handshake()
    assert again.value is res[ct]
    assert ct.state is State.HANDSHAKE_FAILED
    with pytest.raises(SslAuthenticationError):
        ct.read()
    close_all(ct, st)


def test_hostname_mismatch(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testInvalidEndpointIdentification."""
    ct, st = make_pair(listener, impl, pki.server_configs(identity=pki.wronghost_server),
                       pki.client_configs())
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[ct], SslAuthenticationError)
    assert str(res[ct]).startswith("SSL handshake failed: certificate verify failed: "
                                   "Hostname mismatch")
    assert "'localhost'" in str(res[ct])


def test_system_default_cas_used_without_truststore(pki, listener, impl):
    # No truststore: only the system's CAs are trusted, not the test CA.
    ct, st = make_pair(listener, impl, pki.server_configs(),
                       pki.client_configs(truststore=None))
    res = handshake(ct, st, expect_failure=True)
    assert "certificate verify failed" in str(res[ct])


def test_client_cert_required_but_missing_tls12(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testClientAuthenticationRequiredNotProvided (TLS 1.2)."""
    sc = pki.server_configs(client_auth="required")
    sc["ssl.enabled.protocols"] = "TLSv1.2"
    ct, st = make_pair(listener, impl, sc, pki.client_configs())
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[st], SslAuthenticationError)
    assert "peer did not return a certificate" in str(res[st])
    assert isinstance(res[ct], SslAuthenticationError)
    assert str(res[ct]).startswith("SSL handshake failed: ")


def test_client_cert_required_but_missing_tls13_surfaces_on_first_read(pki, listener, impl):
    """TLS 1.3: the client's handshake completes before the server has looked
    at the (absent) certificate; the rejection arrives with the first read
    and must be an authentication failure, not an I/O error.

    Kafka: SslTransportLayerTest.testClientAuthenticationRequiredNotProvided (TLS 1.3)."""
    ct, st = make_pair(listener, impl, pki.server_configs(client_auth="required"),
                       pki.client_configs())
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[st], SslAuthenticationError)
    assert "certificate" in str(res[st])
    if res[ct] is None:
        assert ct.state is State.POST_HANDSHAKE
        # A Kafka client sends its first request, then reads.
        try:
            ct.write(b"\x00\x00\x00\x04abcd")
        except SslAuthenticationError as exc:
            err = exc
        else:
            err = read_error(ct)
    else:
        err = res[ct]
    assert isinstance(err, SslAuthenticationError), err
    assert "certificate required" in str(err)
    assert ct.state is State.HANDSHAKE_FAILED
    ct.close()


def test_untrusted_client_certificate(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testClientAuthenticationRequiredUntrustedProvided."""
    ct, st = make_pair(listener, impl, pki.server_configs(client_auth="required"),
                       pki.client_configs(identity=pki.untrusted_client, keystore="pem"))
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[st], SslAuthenticationError)
    assert "certificate verify failed" in str(res[st])
    err = res[ct] if res[ct] is not None else read_error(ct)
    assert isinstance(err, SslAuthenticationError)
    assert "unknown ca" in str(err)
    ct.close()


def test_no_common_protocol(pki, listener, impl):
    """Kafka: SslVersionsTransportLayerTest.testTlsDefaults (no version in common)."""
    sc = pki.server_configs()
    sc["ssl.enabled.protocols"] = "TLSv1.3"
    cc = pki.client_configs()
    cc["ssl.enabled.protocols"] = "TLSv1.2"
    ct, st = make_pair(listener, impl, sc, cc)
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[st], SslAuthenticationError)
    assert isinstance(res[ct], SslAuthenticationError)


def test_tls12_cipher_suite_restriction(pki, listener, impl):
    sc = pki.server_configs()
    sc["ssl.cipher.suites"] = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    ct, st = make_pair(listener, impl, sc, pki.client_configs())
    try:
        handshake(ct, st)
        # No TLS 1.3 suite listed -> TLS 1.3 is off, as in Java.
        assert st.protocol() == "TLSv1.2"
        assert ct.cipher_suite() == st.cipher_suite() == "ECDHE-RSA-AES128-GCM-SHA256"
    finally:
        close_all(ct, st)


def test_no_shared_cipher(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testUnsupportedCiphers."""
    sc = pki.server_configs()
    sc["ssl.cipher.suites"] = ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
    cc = pki.client_configs()
    cc["ssl.cipher.suites"] = ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"]
    ct, st = make_pair(listener, impl, sc, cc)
    res = handshake(ct, st, expect_failure=True)
    assert isinstance(res[st], SslAuthenticationError)
    assert "no shared cipher" in str(res[st])
    assert isinstance(res[ct], SslAuthenticationError)


# ---------------------------------------------------------------------------
# wrong protocol on either side: a clear error, never a hang
# ---------------------------------------------------------------------------
def test_plaintext_client_to_tls_server(pki, listener, impl):
    c, s = tcp_pair(listener)
    st = SslTransportLayer(s, SslFactory("server", pki.server_configs()).create_engine(),
                           pump_module=impl.tlspump)
    pt = PlaintextTransportLayer(c)
    # What a Kafka client sends first: an ApiVersions request frame.
    frame = bytes.fromhex("0000001f00120003000000010009636f6e736f6c652d3100") + b"\x00" * 8
    assert pt.write(frame) == len(frame)
    res = handshake(st, expect_failure=True)
    err = res[st]
    assert isinstance(err, SslAuthenticationError)
    assert str(err).startswith("SSL handshake failed: ")
    assert "the peer may not be speaking TLS" in str(err)
    # The plaintext side gets the alert bytes and/or EOF, not silence.
    deadline = time.monotonic() + DEADLINE_S
    with pytest.raises(ChannelConnectionError):
        while time.monotonic() < deadline:
            if not pt.read():
                wait([(pt, OP_READ)])
    pt.close()


def test_tls_client_to_plaintext_server_that_closes(pki, listener, impl):
    """A Kafka plaintext listener reads the ClientHello's first 4 bytes as a
    huge frame size and drops the connection.

    Kafka: SslTransportLayerTest.testUngracefulRemoteCloseDuringHandshakeRead (the peer is a
    plaintext listener)."""
    c, s = tcp_pair(listener)
    ct = SslTransportLayer(c, SslFactory("client", pki.client_configs()).create_engine(
        "localhost"), pump_module=impl.tlspump)
    pt = PlaintextTransportLayer(s)
    assert ct.handshake() == OP_READ
    wait([(pt, OP_READ)], 5)
    head = pt.read(4)
    assert head[:1] == b"\x16"  # a TLS handshake record
    pt.close()
    res = handshake(ct, expect_failure=True)
    assert isinstance(res[ct], ChannelConnectionError)
    assert "during the TLS handshake" in str(res[ct])


def test_tls_client_to_plaintext_server_that_answers(pki, listener, impl):
    c, s = tcp_pair(listener)
    ct = SslTransportLayer(c, SslFactory("client", pki.client_configs()).create_engine(
        "localhost"), pump_module=impl.tlspump)
    pt = PlaintextTransportLayer(s)
    assert ct.handshake() == OP_READ
    # A plaintext Kafka-ish reply (size-prefixed frame).
    pt.write(b"\x00\x00\x00\x0a" + b"\x00" * 10)
    res = handshake(ct, expect_failure=True)
    assert isinstance(res[ct], SslAuthenticationError)
    assert "the peer may not be speaking TLS" in str(res[ct])
    pt.close()


# ---------------------------------------------------------------------------
# data path
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_large_transfer_both_directions(pki, listener, impl, protocol):
    """Kafka: SslTransportLayerTest.testNetReadBufferResize, testNetWriteBufferResize (buffers
    smaller than the data)."""
    cc = pki.client_configs()
    cc["ssl.enabled.protocols"] = protocol
    ct, st = make_pair(listener, impl, pki.server_configs(), cc)
    try:
        handshake(ct, st)
        data = os.urandom(3 * 1024 * 1024 + 17)
        assert transfer(ct, st, data) == data
        assert transfer(st, ct, data[::-1]) == data[::-1]
        assert not ct.has_pending_writes() and not st.has_pending_writes()
    finally:
        close_all(ct, st)


def test_small_reads_rely_on_buffered_bytes(pki, listener, impl):
    """read(max_bytes) smaller than what arrived leaves decrypted/undecrypted
    bytes inside the transport; the socket will not signal them again, so
    has_bytes_buffered() must (the transfer loop only reads again when the
    socket is readable or the transport says it has buffered bytes)."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        handshake(ct, st)
        data = os.urandom(600 * 1024)
        assert transfer(st, ct, data, read=1000) == data
        assert not ct.has_bytes_buffered()
    finally:
        close_all(ct, st)


def test_buffered_accounting_with_small_app_buffer(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testApplicationBufferResize."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs(),
                       app_buffer_size=4096)
    try:
        handshake(ct, st)
        data = os.urandom(100_000)
        sent = 0
        while sent < len(data):
            sent += st.write(memoryview(data)[sent:])
        while st.has_pending_writes():
            st.flush()
        got = bytearray()
        # Wait until the first bytes are readable, then only use
        # has_bytes_buffered() to decide whether to read again.
        first = read_until(ct, 1)
        got += first
        while ct.has_bytes_buffered():
            n = ct.read_into(got.extend)
            assert n <= 4096
        # Anything not yet received must still be in flight on the socket.
        got += read_until(ct, len(data) - len(got))
        assert bytes(got) == data
    finally:
        close_all(ct, st)


def test_app_data_with_final_handshake_flight_is_buffered(pki, impl):
    """TLS 1.3: the client can send data right after its Finished; it lands
    in the server's incoming BIO together with the Finished.  A socketpair
    makes the arrival deterministic."""
    a, b = socket.socketpair()
    cf = SslFactory("client", pki.client_configs())
    sf = SslFactory("server", pki.server_configs())
    ct = SslTransportLayer(a, cf.create_engine("localhost"), pump_module=impl.tlspump)
    st = SslTransportLayer(b, sf.create_engine(), pump_module=impl.tlspump)
    try:
        assert ct.handshake() == OP_READ          # ClientHello sent
        assert st.handshake() == OP_READ          # ServerHello..Finished sent
        assert ct.handshake() == 0                # Finished sent: client done
        assert ct.write(b"early-data") == 10      # rides right behind Finished
        assert st.handshake() == 0                # reads Finished + data at once
        assert st.has_bytes_buffered()
        got = bytearray()
        st.read_into(got.extend)
        assert bytes(got) == b"early-data"
        assert not st.has_bytes_buffered()
        assert st.state is State.READY
    finally:
        close_all(ct, st)


def test_new_session_tickets_are_consumed_silently(pki, listener, impl):
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        handshake(ct, st)
        assert ct.protocol() == "TLSv1.3"
        # The server's NewSessionTicket messages arrive after the handshake;
        # reading them yields no application bytes and no error.
        wait([(ct, OP_READ)])
        assert ct.read() == b""
        assert ct.state is State.POST_HANDSHAKE
        assert transfer(st, ct, b"after tickets") == b"after tickets"
        assert ct.state is State.READY
    finally:
        close_all(ct, st)


def test_close_sends_close_notify(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testCloseSsl."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    handshake(ct, st)
    assert transfer(ct, st, b"bye") == b"bye"
    # Let the client consume the tickets so its close is a FIN, not a reset.
    assert transfer(st, ct, b"ok") == b"ok"
    ct.close()
    assert ct.state is State.CLOSING
    err = read_error(st)
    assert isinstance(err, ChannelConnectionError)
    assert not isinstance(err, SslAuthenticationError)
    assert st.close_notify_received
    st.close()


def test_tcp_close_without_close_notify_is_eof(pki, listener, impl):
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    handshake(ct, st)
    assert transfer(st, ct, b"ok") == b"ok"
    assert transfer(ct, st, b"last words") == b"last words"
    ct.socket.close()   # no close_notify
    err = read_error(st)
    assert isinstance(err, ChannelConnectionError)
    assert not isinstance(err, SslAuthenticationError)
    assert not st.close_notify_received
    st.close()


def test_data_before_eof_is_delivered_first(pki, impl):
    a, b = socket.socketpair()
    ct = SslTransportLayer(a, SslFactory("client", pki.client_configs()).create_engine(
        "localhost"), pump_module=impl.tlspump)
    st = SslTransportLayer(b, SslFactory("server", pki.server_configs()).create_engine(),
                           pump_module=impl.tlspump)
    handshake(ct, st)
    assert ct.write(b"final") == 5
    ct.close()  # close_notify follows the data on the wire
    got = bytearray()
    assert st.read_into(got.extend) == 5
    assert bytes(got) == b"final"
    assert st.has_bytes_buffered()  # the EOF is still to be reported
    with pytest.raises(ChannelConnectionError):
        st.read_into(got.extend)
    assert st.close_notify_received
    st.close()


def test_close_is_idempotent_and_safe_mid_handshake(pki, listener, impl):
    """Kafka: SslTransportLayerTest.testGracefulRemoteCloseDuringHandshakeRead (the peer's
    side)."""
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    assert ct.handshake() == OP_READ
    ct.close()
    ct.close()
    assert not ct.is_open()
    res = handshake(st, expect_failure=True)
    assert isinstance(res[st], (ChannelConnectionError, SslAuthenticationError))


def test_renegotiation_disabled(pki):
    for mode, cfg in (("client", pki.client_configs()), ("server", pki.server_configs())):
        ctx = SslFactory(mode, cfg).context
        assert ctx.options & ssl.OP_NO_RENEGOTIATION


class _SslObjectSpy:
    """Wraps an SSLObject and records every call made from outside the pure
    pump twin (the compiled twin has no Python frames to attribute)."""

    def __init__(self, ssl_object, callers):
        self._obj = ssl_object
        self._callers = callers

    def __getattr__(self, name):
        value = getattr(self._obj, name)
        if name == "_sslobj":
            # the C object under the SSLObject, which the pump calls directly
            return _SslObjectSpy(value, self._callers)
        if not callable(value):
            return value

        def call(*args, **kwargs):
            self._callers.append((name, os.path.basename(sys._getframe(1).f_code.co_filename)))
            return value(*args, **kwargs)
        return call


def test_only_the_pump_calls_the_ssl_object(pki, listener):
    """The pump owns the SSLObject: handshake, data, peer identity, the
    alert read after a reset (TLS 1.3 client certificate refused) and close
    all reach it through the pump only."""
    from kchannel.network import _tlspump_py
    callers = []

    def pair(server_configs, client_configs):
        c, s = tcp_pair(listener)
        ce = SslFactory("client", client_configs).create_engine("localhost",
                                                                 listener.getsockname()[1])
        se = SslFactory("server", server_configs).create_engine()
        ct = SslTransportLayer(c, ce._replace(ssl_object=_SslObjectSpy(ce.ssl_object, callers)),
                               pump_module=_tlspump_py)
        st = SslTransportLayer(s, se._replace(ssl_object=_SslObjectSpy(se.ssl_object, callers)),
                               pump_module=_tlspump_py)
        return ct, st

    ct, st = pair(pki.server_configs(client_auth="required"),
                  pki.client_configs(keystore="pem"))
    handshake(ct, st)
    assert transfer(ct, st, b"ping") == b"ping"
    assert st.peer_subject_dn() == CLIENT_DN
    assert ct.protocol() == "TLSv1.3" and ct.cipher_suite()
    close_all(ct, st)
    ct, st = pair(pki.server_configs(client_auth="required"), pki.client_configs())
    res = handshake(ct, st, expect_failure=True)
    err = res[ct]
    if err is None:
        try:
            ct.write(b"\x00\x00\x00\x04abcd")
        except SslAuthenticationError as exc:
            err = exc
        else:
            err = read_error(ct)
    assert isinstance(err, SslAuthenticationError)
    close_all(ct, st)
    called = {name for name, _ in callers}
    assert {"do_handshake", "read", "write", "getpeercert", "version", "cipher"} <= called
    assert {where for _, where in callers} == {"_tlspump_py.py"}


def test_interest_ops_and_mute(pki, listener, impl):
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        assert ct.interest_ops == OP_READ and not ct.is_mute()
        ct.remove_interest_ops(OP_READ)
        assert ct.is_mute()
        ct.add_interest_ops(OP_READ | OP_WRITE)
        assert ct.interest_ops == OP_READ | OP_WRITE
        assert ct.peer_address == listener.getsockname()
    finally:
        close_all(ct, st)


def test_tls13_rejection_reported_even_when_a_write_hits_the_reset(pki, listener, impl):
    """The server rejects the client certificate, sends its alert and closes
    with the client's first request unread, so the client's TCP stack gets a
    reset.  The client's next write fails with an I/O error, yet the alert
    that arrived before the reset is what gets reported."""
    ct, st = make_pair(listener, impl, pki.server_configs(client_auth="required"),
                       pki.client_configs())
    while ct.handshake():
        st.handshake()
        wait([(ct, OP_READ)])
    assert ct.state is State.POST_HANDSHAKE
    assert ct.write(b"\x00\x00\x00\x04abcd") == 8       # the first request
    res = handshake(st, expect_failure=True)           # rejects, alert, close -> RST
    assert isinstance(res[st], SslAuthenticationError)
    wait([(ct, OP_READ)], 2)
    with pytest.raises(SslAuthenticationError) as err:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            ct.write(b"\x00" * 65536)
            wait([(ct, OP_READ)], 0.1)
    assert "certificate required" in str(err.value)
    ct.close()


class _CountingSocket(socket.socket):
    """A socket that records every ``send`` (one per TCP segment here)."""

    def send(self, data, *args):
        n = super().send(data, *args)
        self.sent.append(n)
        return n


def _counting(sock):
    s = _CountingSocket(fileno=sock.detach())
    s.sent = []
    return s


def _nothing_to_read(sock):
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def test_deferred_handshake_flush_sends_last_flight_with_first_record(pki, impl):
    """``defer_handshake_flush`` (set by KafkaChannel): the TLS 1.3 client's
    Finished leaves in the same send() as the first request, the server's
    session tickets in the same send() as the first response, and reading
    the request does not send the tickets ahead of the response."""
    a, b = socket.socketpair()
    a, b = _counting(a), _counting(b)
    cf = SslFactory("client", pki.client_configs())
    sf = SslFactory("server", pki.server_configs())
    ct = SslTransportLayer(a, cf.create_engine("localhost"), pump_module=impl.tlspump)
    st = SslTransportLayer(b, sf.create_engine(), pump_module=impl.tlspump)
    ct.defer_handshake_flush = st.defer_handshake_flush = True
    try:
        assert ct.handshake() == OP_READ          # ClientHello sent
        assert st.handshake() == OP_READ          # ServerHello..Finished sent
        assert (len(a.sent), len(b.sent)) == (1, 1)
        assert ct.handshake() == 0                # done, Finished held back
        assert ct.has_pending_writes() and len(a.sent) == 1 and _nothing_to_read(b)
        assert ct.write(b"request") == 7
        assert len(a.sent) == 2 and not ct.has_pending_writes()
        assert st.handshake() == 0                # Finished + request in one recv
        assert st.has_pending_writes()            # the session tickets, held back
        got = bytearray()
        st.read_into(got.extend)
        assert bytes(got) == b"request"
        assert len(b.sent) == 1 and st.has_pending_writes()
        assert st.write(b"response") == 8
        assert len(b.sent) == 2 and not st.has_pending_writes()
        got = bytearray()
        ct.read_into(got.extend)                  # tickets and response together
        assert bytes(got) == b"response"
        assert ct.state is State.READY and st.state is State.READY
    finally:
        close_all(ct, st)


@pytest.mark.parametrize("protocol", ["TLSv1.2", "TLSv1.3"])
def test_deferred_handshake_flush_without_a_write_needs_flush(pki, listener, impl, protocol):
    """A held flight goes out with flush() (the TLS 1.2 server's Finished is
    what its client waits for); the default transport flushes it itself."""
    cc = pki.client_configs()
    cc["ssl.enabled.protocols"] = protocol
    ct, st = make_pair(listener, impl, pki.server_configs(), cc)
    st.defer_handshake_flush = True
    try:
        results = {}
        pending = [ct, st]
        deadline = time.monotonic() + DEADLINE_S
        while pending:
            assert time.monotonic() < deadline, "handshake did not finish"
            for t in list(pending):
                ops = t.handshake()
                if ops == 0:
                    pending.remove(t)
                    if t is st:
                        # The server flushes what its handshake held back, as
                        # KafkaChannel.prepare() does.
                        results["held"] = st.has_pending_writes()
                        st.flush()
            wait([(t, OP_READ) for t in pending])
        assert results["held"]
        assert ct.protocol() == protocol == st.protocol()
        assert transfer(ct, st, b"ping") == b"ping"
        assert transfer(st, ct, b"pong") == b"pong"
    finally:
        close_all(ct, st)


class _RecvCountingSocket(_CountingSocket):
    """Records every ``send`` and counts ``recv_into`` calls and the ones
    that found nothing (EAGAIN)."""

    def recv_into(self, *args):
        self.recvs += 1
        try:
            return super().recv_into(*args)
        except BlockingIOError:
            self.empty_recvs += 1
            raise


def _recv_counting(sock):
    s = _RecvCountingSocket(fileno=sock.detach())
    s.sent = []
    s.recvs = s.empty_recvs = 0
    return s


def test_no_recv_that_can_only_find_the_socket_empty(pki, impl):
    """The pump does not ask the socket for what cannot have arrived: not
    right after sending a handshake flight (the peer's answer to it), not
    for a request that came with the peer's Finished (its recv was short:
    the socket was emptied), not after a short recv that delivered a
    response.  It still asks when it has nothing to deliver."""
    a, b = socket.socketpair()
    a, b = _recv_counting(a), _recv_counting(b)
    cf = SslFactory("client", pki.client_configs())
    sf = SslFactory("server", pki.server_configs())
    ct = SslTransportLayer(a, cf.create_engine("localhost"), pump_module=impl.tlspump)
    st = SslTransportLayer(b, sf.create_engine(), pump_module=impl.tlspump)
    ct.defer_handshake_flush = st.defer_handshake_flush = True
    try:
        assert ct.handshake() == OP_READ          # ClientHello sent, no recv
        assert a.recvs == 0
        assert st.handshake() == OP_READ          # ClientHello read, flight sent
        assert (b.recvs, b.empty_recvs) == (1, 0)
        assert ct.handshake() == 0
        assert ct.write(b"request") == 7          # with the Finished
        assert st.handshake() == 0                # Finished + request, one recv
        got = bytearray()
        assert st.read_into(got.extend) == 7      # from the BIO, no recv
        assert bytes(got) == b"request" and b.recvs == 2 and st.drained
        assert st.write(b"response") == 8
        got = bytearray()
        assert ct.read_into(got.extend) == 8      # one short recv
        assert bytes(got) == b"response" and ct.drained
        assert (a.recvs, a.empty_recvs, b.empty_recvs) == (2, 0, 0)
        # nothing to deliver: the socket is asked (and found empty)
        assert ct.read_into(got.extend) == 0
        assert (a.recvs, a.empty_recvs) == (3, 1)
    finally:
        close_all(ct, st)
