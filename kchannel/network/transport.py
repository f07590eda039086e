"""Transport layers: the byte pipe under a Kafka channel.

Mirrors ``org.apache.kafka.common.network.TransportLayer`` and
``PlaintextTransportLayer``.  A transport owns one non-blocking socket and
knows nothing about Kafka framing; the channel above it feeds what it reads
into its ``FrameDecoder`` and hands it size-prefixed sends to write.

Contract shared by every transport (the TLS one in ``ssl_transport`` too):

* ``finish_connect() -> bool``: completes a non-blocking ``connect``; False
  while still in progress; raises ``ChannelConnectionError`` when it failed.
* ``ready()`` / ``handshake() -> int``: ``handshake`` returns the interest ops
  (``OP_READ``/``OP_WRITE``) still needed, 0 once the transport is ready.
* ``receive_into(decoder) -> int`` the fast path: reads what is available
  now (up to an internal bound) straight into the ``FrameDecoder``'s memory
  (``decoder.writable()``, then ``decoder.commit(n)``, which the transport
  always calls once per ``writable()``, also when the read fails) and
  returns the byte count; the decoder hands complete frames out as views of
  that memory, so received bytes are never copied again.
  ``read(max_bytes) -> bytes``: what is available now (``b""`` if nothing);
  ``read_into(sink) -> int``: calls ``sink(memoryview)`` at most once with
  everything available now and returns the byte count; the memoryview is a
  shared scratch buffer, only valid during the call (``sink`` must copy).
  All raise ``ChannelConnectionError`` on EOF/reset -- but only once every
  byte received before the EOF has been delivered.
* ``write_vectored``: None, or (plaintext only, since an ``SSLObject`` needs
  contiguous data) a method ``write_vectored(buffers) -> int``: ``write`` of
  the buffers' concatenation with one gather write, so large payloads are not
  copied.
* ``defer_handshake_flush``: None where the transport has no handshake flight
  to hold back; TLS: a bool the channel sets (see ``KafkaChannel``).
* ``drained``: True when the last ``receive_into`` emptied the socket.
* ``holds_bytes``: False for a transport that never keeps bytes of its own
  (plaintext: ``has_pending_writes()`` and ``has_bytes_buffered()`` are
  always False, ``flush()`` always True), so the channel's per-request
  paths need not ask; True (the default) for any other.
* ``write(data) -> int``: consumes a prefix of ``data`` and returns its length;
  0 means "not now" (outgoing buffers full: wait for ``OP_WRITE``, ``flush()``
  and offer the rest again).  Consumed bytes belong to the transport;
  ``has_pending_writes()`` says some are not on the wire yet and ``flush()``
  pushes them (True once nothing is pending).  A send is complete when all of
  it was consumed and ``has_pending_writes()`` is False (as in Kafka's
  ``NetworkSend.completed()``).
* ``has_bytes_buffered()``: bytes that can be delivered without a readiness
  event (TLS decrypted data, or an EOF still to be reported) -- the selector
  must service such channels even if ``select`` reports nothing for them.
* ``interest_ops`` int with ``add_interest_ops``/``remove_interest_ops``;
  ``is_mute()`` is True when ``OP_READ`` is not in it (Kafka's definition).
  The transport only records interest; the selector applies it.
* ``close()`` closes the socket (TLS: best-effort close_notify first);
  ``close(detach=True)`` does the same but hands the open socket back;
  ``peer_address`` is ``(host, port)``; ``peer_certificate_der()`` /
  ``peer_subject_dn()`` are None for plaintext.
"""
import abc
import errno
import socket
import threading

from kchannel.errors import ChannelConnectionError
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.log import get_logger
from kchannel import _impl

# receive_into, run per read (compiled when built); see
# kchannel.network._netpass_py.
_netpass = _impl.load_twin("netpass")

log = get_logger("kchannel.network.transport")

# read_into (not the channel's path, which is receive_into): one recv per
# call into a large reused buffer.  The buffer is per thread, shared by every
# transport that thread serves (bytes are handed to the sink, which copies
# them, before read_into returns), so memory does not grow with the number of
# connections.
DEFAULT_READ_BUFFER_SIZE = 256 * 1024

_local = threading.local()


def _read_buffer(size):
    try:
        bufs = _local.bufs
    except AttributeError:
        bufs = _local.bufs = {}
    view = bufs.get(size)
    if view is None:
        view = bufs[size] = memoryview(bytearray(size))
    return view

# errno values that mean "the peer went away" rather than a local bug.
_DISCONNECT_ERRNOS = frozenset({
    errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ENOTCONN,
    errno.ESHUTDOWN, errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH,
    errno.ENETRESET, errno.ECONNREFUSED,
})


# (in the netpass twin, whose transport methods raise it too)
connection_error = _netpass.connection_error


class TransportLayer(abc.ABC):
    """The interface the channel and selector use (see the module docstring),
    with socket ownership, connect completion and interest ops implemented.
    Subclasses implement the abstract methods; nothing probes for optional
    methods, so every attribute the channel reads is declared here."""

    # Optional capabilities, declared so that callers never probe for them.
    write_vectored = None
    defer_handshake_flush = None
    holds_bytes = True

    def __init__(self, sock):
        try:
            # 0.0 only once setblocking(False) ran on this socket object (the
            # selector's sockets): no second FIONBIO ioctl per connection.
            blocking = sock.gettimeout() != 0.0
        except AttributeError:
            blocking = True
        if blocking:
            sock.setblocking(False)
        self._sock = sock
        self._peer_address = None
        self._closed = False
        # Remember the peer now (accepted/connected sockets): after a reset
        # getpeername() fails, and error messages still want the address.
        self.peer_address  # noqa: B018 - caches it when connected
        # Kafka's SelectionKey interest set.  OP_READ by default: a connected
        # channel is always interested in reads unless muted.
        self.interest_ops = OP_READ
        # True when the last receive_into emptied the socket (a short read):
        # the channel stops reading for this poll (see read_frames).  Left
        # False by transports that cannot tell.
        self.drained = False

    # --- socket -----------------------------------------------------------
    @property
    def socket(self):
        return self._sock

    def fileno(self):
        return self._sock.fileno()

    @property
    def peer_address(self):
        """``(host, port)`` of the peer, or None if not (yet) connected."""
        if self._peer_address is None and not self._closed:
            try:
                self._peer_address = self._sock.getpeername()[:2]
            except OSError:
                return None
        return self._peer_address

    def is_open(self):
        return not self._closed

    def is_connected(self):
        return self.peer_address is not None

    def finish_connect(self):
        """Complete a non-blocking connect.

        Returns True once connected (then interest becomes OP_READ, as Kafka
        swaps OP_CONNECT for OP_READ), False while still in progress.
        """
        err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err not in (0, errno.EINPROGRESS, errno.EALREADY):
            raise ChannelConnectionError.for_errno(err)
        if self.peer_address is None:
            return False
        self.interest_ops = (self.interest_ops & ~OP_WRITE) | OP_READ
        return True

    # --- interest ops -----------------------------------------------------
    def add_interest_ops(self, ops):
        self.interest_ops |= ops

    def remove_interest_ops(self, ops):
        self.interest_ops &= ~ops

    def is_mute(self):
        return not (self.interest_ops & OP_READ)

    # --- handshake --------------------------------------------------------
    @abc.abstractmethod
    def ready(self):
        raise NotImplementedError

    @abc.abstractmethod
    def handshake(self):
        raise NotImplementedError

    # --- data -------------------------------------------------------------
    @abc.abstractmethod
    def read(self, max_bytes=65536):
        raise NotImplementedError

    @abc.abstractmethod
    def read_into(self, sink):
        raise NotImplementedError

    @abc.abstractmethod
    def receive_into(self, decoder):
        raise NotImplementedError

    @abc.abstractmethod
    def write(self, data):
        raise NotImplementedError

    @abc.abstractmethod
    def has_pending_writes(self):
        raise NotImplementedError

    @abc.abstractmethod
    def flush(self):
        raise NotImplementedError

    def has_bytes_buffered(self):
        return False

    # --- peer identity ----------------------------------------------------
    def peer_certificate_der(self):
        return None

    def peer_subject_dn(self):
        return None

    # --- teardown ---------------------------------------------------------
    def disconnect(self):
        """Kafka's disconnect(): stop being interested in anything."""
        self.interest_ops = 0

    def close(self, detach=False):
        """Close the transport.  ``detach=True`` leaves the socket open and
        returns it to the caller (for a lingering close: half-close it, read
        and discard what the peer still sends, then close it); otherwise the
        socket is closed and None returned."""
        if self._closed:
            return None
        self._closed = True
        self.interest_ops = 0
        if detach:
            return self._sock
        try:
            self._sock.close()
        except OSError:
            pass
        return None

    def __repr__(self):
        return f"{type(self).__name__}(peer={self._peer_address}, closed={self._closed})"


class PlaintextTransportLayer(TransportLayer):
    """Kafka's PlaintextTransportLayer: bytes straight to and from the socket."""

    # write() never keeps bytes and nothing is read ahead (see the module
    # docstring): the channel skips asking, a few calls per request.
    holds_bytes = False

    def __init__(self, sock, read_buffer_size=DEFAULT_READ_BUFFER_SIZE):
        super().__init__(sock)
        self._read_buffer_size = read_buffer_size
        self._eof = False

    def ready(self):
        return True

    def handshake(self):
        return 0

    # --- reads ------------------------------------------------------------
    # (the netpass twin's: one per read, compiled when built)
    receive_into = _netpass.receive_into

    def read_into(self, sink):
        if self._eof:
            raise ChannelConnectionError("Connection closed by peer (EOF)")
        view = _read_buffer(self._read_buffer_size)
        try:
            n = self._sock.recv_into(view)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            raise connection_error(exc, "Read failed") from exc
        if n == 0:
            self._eof = True
            raise ChannelConnectionError("Connection closed by peer (EOF)")
        sink(view[:n])
        return n

    def read(self, max_bytes=65536):
        if self._eof:
            raise ChannelConnectionError("Connection closed by peer (EOF)")
        try:
            data = self._sock.recv(max_bytes)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError as exc:
            raise connection_error(exc, "Read failed") from exc
        if not data:
            self._eof = True
            raise ChannelConnectionError("Connection closed by peer (EOF)")
        return data

    # --- writes -----------------------------------------------------------
    # (the netpass twin's: one per request written, compiled when built)
    write = _netpass.write

    write_vectored = _netpass.write_vectored

    def has_pending_writes(self):
        # write() never keeps bytes, so there is never anything to flush.
        return False

    def flush(self):
        return True

    def has_bytes_buffered(self):
        return False
