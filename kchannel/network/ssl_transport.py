"""SslTransportLayer: TLS over a non-blocking socket via MemoryBIO.

Mirrors ``org.apache.kafka.common.network.SslTransportLayer``: same states
(NOT_INITIALIZED, HANDSHAKE, HANDSHAKE_FAILED, POST_HANDSHAKE, READY,
CLOSING), same division of failures:

* TLS failures (untrusted certificate, host name mismatch, no common
  protocol or cipher, an alert from the peer, a peer that does not speak TLS)
  raise ``SslAuthenticationError("SSL handshake failed: <reason>")``;
  once failed, every later ``handshake()`` raises the same error.
* EOF / reset raise ``ChannelConnectionError`` -- unless bytes the peer sent
  before going away explain it with an alert, which is then reported instead
  (Kafka does the same in its handshake IOException path): a server that
  rejects our certificate sends the alert and closes; a write may hit the
  reset before the alert is read.
* TLS 1.3: the client's handshake completes before the server has checked
  the client certificate, so a rejection only arrives with the first read.
  Like Kafka, the state stays POST_HANDSHAKE until the first application
  byte arrives, and a TLS failure in that state is an authentication failure.

The byte pumping lives in ``_tlspump_py`` (see its docstring; compiled as
``kchannel.network._ctlspump``), which is the only code that calls the ``SSLObject``; this class
adds states, error translation (one place: ``_failure``) and peer identity.
The transport-layer contract is documented in ``kchannel.network.transport``.
"""
import enum
import logging
import re
import ssl

from kchannel import _impl
from kchannel.errors import ChannelConnectionError, SslAuthenticationError
from kchannel.network.ssl_principal import subject_dn_from_der
from kchannel.network.transport import TransportLayer, connection_error
from kchannel.log import get_logger

_pump = _impl.load("kchannel.network._tlspump_py", "kchannel.network._ctlspump")

log = get_logger("kchannel.network.ssl_transport")


class State(enum.Enum):
    NOT_INITIALIZED = "NOT_INITIALIZED"
    HANDSHAKE = "HANDSHAKE"
    HANDSHAKE_FAILED = "HANDSHAKE_FAILED"
    POST_HANDSHAKE = "POST_HANDSHAKE"
    READY = "READY"
    CLOSING = "CLOSING"


# The states in which the handshake is done (ready()); a tuple: ``in``
# compares enum members by identity first, where a set would hash them with
# a Python-level call.
_HANDSHAKE_DONE = (State.POST_HANDSHAKE, State.READY)

_SSL_PREFIX = re.compile(r"^\[[A-Z0-9_]+: [A-Z0-9_]+\]\s*")
_SSL_SUFFIX = re.compile(r"\s*\(_ssl\.c:\d+\)$")

# OpenSSL reasons that mean "the other side is not speaking TLS at all".
_NOT_TLS_REASONS = frozenset({
    "WRONG_VERSION_NUMBER", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST", "UNKNOWN_PROTOCOL",
    "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE",
    "WRONG_SSL_VERSION", "RECORD_LENGTH_MISMATCH", "UNEXPECTED_RECORD",
})
# Both peers speak TLS but share no enabled version.
_NO_COMMON_VERSION_REASONS = frozenset({
    "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE", "TLSV1_ALERT_PROTOCOL_VERSION",
})


def ssl_reason_text(exc):
    """OpenSSL's message without the ``[SSL: X]`` prefix and source suffix:
    e.g. "certificate verify failed: unable to get local issuer certificate"."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else str(exc)
    text = _SSL_SUFFIX.sub("", _SSL_PREFIX.sub("", text))
    if not text and exc.reason:
        text = exc.reason.lower().replace("_", " ")
    return text


class SslTransportLayer(TransportLayer):
    """TLS transport for client or server mode (``engine.mode``)."""

    # True: a handshake() that completes leaves the last flight unsent
    # (has_pending_writes() is then true) for the owner to send with its
    # first write() or a flush().  KafkaChannel sets it: the TLS 1.3 client's
    # Finished then travels with the ApiVersions request, the server's
    # session tickets with the ApiVersions response.
    defer_handshake_flush = False

    def __init__(self, sock, engine, channel_id=None, pump_module=None, **pump_options):
        """``engine``: an ``SslEngine`` from ``SslFactory.create_engine``.
        ``pump_module`` selects a pump twin (tests); default: the active one.
        ``pump_options``: buffer sizes, see ``TlsPump``."""
        super().__init__(sock)
        self.engine = engine
        self.channel_id = channel_id
        self._pump = (pump_module or _pump).TlsPump(
            sock, engine.ssl_object, engine.incoming, engine.outgoing, **pump_options)
        self.state = State.NOT_INITIALIZED
        self._handshake_exc = None
        self._peer_der = None
        self._peer_dn = None
        self._peer_dn_done = False

    @classmethod
    def create(cls, channel_id, sock, engine):
        """Kafka's ``SslTransportLayer.create(channelId, key, sslEngine, ...)``."""
        return cls(sock, engine, channel_id=channel_id)

    @property
    def mode(self):
        return self.engine.mode

    # --- handshake --------------------------------------------------------
    def ready(self):
        return self.state in _HANDSHAKE_DONE

    def handshake(self):
        """Advance the TLS handshake; returns the ops still needed (0 = done)."""
        state = self.state
        if state is State.HANDSHAKE_FAILED:
            raise self._handshake_exc
        if state is State.POST_HANDSHAKE or state is State.READY:
            return 0
        if state is State.CLOSING:
            raise ChannelConnectionError("Channel is in closing state")
        if state is State.NOT_INITIALIZED:
            self.state = State.HANDSHAKE
        try:
            ops = self._pump.handshake(not self.defer_handshake_flush)
        except (EOFError, OSError) as exc:
            raise self._failure(exc, "I/O error during the TLS handshake") from exc
        if ops:
            return ops
        version = self._pump.version()
        if version == "TLSv1.3":
            self.state = State.POST_HANDSHAKE
        else:
            self.state = State.READY
            if self.engine.session_cache is not None:
                self._keep_session()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("SSL handshake completed successfully with peer %s (%s, %s, %s mode)",
                      self.peer_address, version, (self._pump.cipher() or ("?",))[0],
                      self.mode)
        return 0

    def _failure(self, exc, io_error_text):
        """The one translation of a pump exception into what the transport
        raises; ``io_error_text`` describes the operation for an I/O error.

        * ``ssl.SSLError`` during the handshake, or in TLS 1.3's
          POST_HANDSHAKE state: an authentication failure (see
          ``_handshake_failure``); once application data flowed, a broken
          connection (Kafka's SSLException is an IOException).
        * ``EOFError``: the peer closed.
        * Any other ``OSError``: an I/O error, unless bytes the peer sent
          before it went away explain it with an alert.
        """
        state = self.state
        if isinstance(exc, ssl.SSLError):
            if state is State.HANDSHAKE or state is State.POST_HANDSHAKE:
                return self._handshake_failure(
                    exc, post_handshake=state is State.POST_HANDSHAKE)
            return ChannelConnectionError(f"TLS error: {ssl_reason_text(exc)}")
        if isinstance(exc, EOFError):
            if state is State.HANDSHAKE:
                return ChannelConnectionError(
                    "Connection closed by peer during the TLS handshake (the peer may not "
                    "be a TLS endpoint, or it rejected this connection)")
            return ChannelConnectionError("Connection closed by peer (EOF)")
        self._maybe_raise_ssl_failure()
        return connection_error(exc, io_error_text)

    def _handshake_failure(self, exc, post_handshake=False):
        """Record a TLS failure and return the SslAuthenticationError."""
        text = ssl_reason_text(exc)
        if (exc.reason or "") in _NOT_TLS_REASONS:
            text += " (the peer may not be speaking TLS)"
        elif (exc.reason or "") in _NO_COMMON_VERSION_REASONS:
            text += " (no TLS version in common with the peer: check ssl.enabled.protocols)"
        prefix = ("Failed to process post-handshake messages" if post_handshake
                  else "SSL handshake failed")
        err = SslAuthenticationError(f"{prefix}: {text}", reason=exc.reason or text)
        engine = self.engine
        if engine.session_cache is not None:
            # As Java invalidates a session whose handshake failed: the next
            # connection starts afresh.
            engine.session_cache.invalidate(engine.peer_host, engine.peer_port)
        self._handshake_exc = err
        self.state = State.HANDSHAKE_FAILED
        # DEBUG: the selector logs the single WARNING line for the closed
        # connection, carrying this error's message.
        log.debug("%s with peer %s (%s mode): %s", prefix, self.peer_address, self.mode, text)
        return err

    def _maybe_raise_ssl_failure(self):
        """After an I/O error while the handshake outcome may still be in
        flight, read whatever the peer sent before it went away: an alert
        explains the failure better than the reset that followed it (Linux
        still delivers bytes queued before a reset)."""
        if self.state not in (State.HANDSHAKE, State.POST_HANDSHAKE):
            return
        try:
            self._pump.raise_peer_failure(self.state is State.HANDSHAKE)
        except ssl.SSLError as exc:
            raise self._handshake_failure(
                exc, post_handshake=self.state is State.POST_HANDSHAKE) from exc

    # --- reads ------------------------------------------------------------
    def _check_readable(self):
        if self.state is State.HANDSHAKE_FAILED:
            raise self._handshake_exc
        if self.state not in _HANDSHAKE_DONE:     # (not self.ready(), inlined)
            raise ChannelConnectionError(f"Read before the TLS handshake completed "
                                         f"(state {self.state.name})")

    def receive_into(self, decoder):
        """Decrypt what is available straight into the decoder's memory."""
        self._check_readable()
        try:
            n = self._pump.read_into_decoder(decoder, 0)
        except (EOFError, OSError) as exc:
            raise self._failure(exc, "Read failed") from exc
        if n and self.state is State.POST_HANDSHAKE:
            self._first_data()
        return n

    def read_into(self, sink):
        self._check_readable()
        try:
            n = self._pump.read_into(sink, 0)
        except (EOFError, OSError) as exc:
            raise self._failure(exc, "Read failed") from exc
        if n and self.state is State.POST_HANDSHAKE:
            self._first_data()
        return n

    def read(self, max_bytes=65536):
        self._check_readable()
        try:
            data = self._pump.recv(max_bytes)
        except (EOFError, OSError) as exc:
            raise self._failure(exc, "Read failed") from exc
        if data and self.state is State.POST_HANDSHAKE:
            self._first_data()
        return data

    def _first_data(self):
        """TLS 1.3: the first application bytes arrived, so the handshake
        outcome is settled and the server's session ticket (sent before any
        data) has been read: the session can be kept for resumption."""
        self.state = State.READY
        if self.engine.session_cache is not None:
            self._keep_session()

    def _keep_session(self):
        engine = self.engine
        cache = engine.session_cache
        if cache.wants(engine.peer_host, engine.peer_port):
            session = self._pump.session()
            if session is not None:
                cache.put(engine.peer_host, engine.peer_port, session)

    def session_reused(self):
        """True if this connection's handshake resumed an earlier session."""
        return self._pump.session_reused()

    def has_bytes_buffered(self):
        # (self.ready(), inlined: asked after every set-up step)
        return self.state in _HANDSHAKE_DONE and self._pump.buffered()

    @property
    def drained(self):
        """True when the last read emptied the socket and left nothing
        decryptable behind (see ``TransportLayer.drained``): the channel
        stops reading for this poll instead of meeting an EAGAIN."""
        return self._pump.drained

    @drained.setter
    def drained(self, value):
        # TransportLayer.__init__ initialises the attribute; the pump knows.
        pass

    @property
    def close_notify_received(self):
        """True once the peer closed the TLS session cleanly (close_notify)."""
        return self._pump.close_notify_received

    # --- writes -----------------------------------------------------------
    def write(self, data):
        if self.state is State.HANDSHAKE_FAILED:
            raise self._handshake_exc
        if self.state not in _HANDSHAKE_DONE:     # (not self.ready(), inlined)
            raise ChannelConnectionError(f"Write before the TLS handshake completed "
                                         f"(state {self.state.name})")
        try:
            return self._pump.write(data)
        except (EOFError, OSError) as exc:
            raise self._failure(exc, "Write failed") from exc

    def has_pending_writes(self):
        return self._pump.pending_writes() > 0

    def flush(self):
        try:
            return self._pump.flush()
        except OSError as exc:
            raise self._failure(exc, "Write failed") from exc

    # --- peer identity ----------------------------------------------------
    def peer_certificate_der(self):
        """DER of the peer's leaf certificate (None if it sent none)."""
        if self._peer_der is None and self.ready():
            try:
                self._peer_der = self._pump.peer_certificate_der()
            except ValueError:
                return None
        return self._peer_der

    def peer_subject_dn(self):
        """The peer certificate's subject as Java's X500Principal.getName()."""
        if not self._peer_dn_done:
            der = self.peer_certificate_der()
            if der is None:
                return None
            self._peer_dn = subject_dn_from_der(der)
            self._peer_dn_done = True
        return self._peer_dn

    def protocol(self):
        """Negotiated protocol, e.g. "TLSv1.3" (None before the handshake)."""
        return self._pump.version()

    def cipher_suite(self):
        c = self._pump.cipher()
        return c[0] if c else None

    # --- teardown ---------------------------------------------------------
    def close(self, detach=False):
        if self._closed:
            return None
        prev = self.state
        self.state = State.CLOSING
        if prev in (State.POST_HANDSHAKE, State.READY):
            # Best effort, never blocks: queue close_notify and send it if
            # the socket takes it right now.
            try:
                self._pump.shutdown()
            except Exception:  # noqa: BLE001 - closing must not raise
                pass
        return super().close(detach)

    def __repr__(self):
        return (f"SslTransportLayer(mode={self.mode}, state={self.state.name}, "
                f"peer={self._peer_address})")

