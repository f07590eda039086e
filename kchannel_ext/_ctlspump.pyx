# cython: language_level=3, boundscheck=False, wraparound=False
"""TLS pump, compiled twin of ``kchannel.network._tlspump_py``.

Same interface and the same logic line for line; the theory of operation
(what flows where, when the outgoing BIO is flushed, why reads and writes are
batched) is documented in the pure twin's module docstring.  Compiling it
removes the interpreter overhead of the loops and attribute lookups; the
expensive work (syscalls, OpenSSL, copies) is the same in both twins.
"""
import ssl
import threading

OP_READ = 1
OP_WRITE = 2

DEFAULT_NET_BUFFER_SIZE = 256 * 1024
DEFAULT_APP_BUFFER_SIZE = 256 * 1024
DEFAULT_WRITE_CHUNK = 128 * 1024

_local = threading.local()


def shared_buffer(kind, size):
    """A per-thread scratch buffer (memoryview over a bytearray).

    The receive and decrypt buffers are only used within one call -- bytes
    are copied into the incoming BIO, or handed to the sink, before the call
    returns -- so every connection served by a thread shares the same ones:
    memory stays O(threads), not O(connections), with buffers large enough
    for few syscalls.
    """
    try:
        bufs = _local.bufs
    except AttributeError:
        bufs = _local.bufs = {}
    key = (kind, size)
    view = bufs.get(key)
    if view is None:
        view = bufs[key] = memoryview(bytearray(size))
    return view


_SSLWantReadError = ssl.SSLWantReadError
_SSLError = ssl.SSLError
_SSLZeroReturnError = ssl.SSLZeroReturnError
_SSLEOFError = ssl.SSLEOFError


cdef class TlsPump:
    """Bytes mover for one TLS connection (see the pure twin's docstring)."""

    cdef object _sock
    cdef object _ssl
    cdef object _in
    cdef object _outbio
    cdef Py_ssize_t _net_size
    cdef Py_ssize_t _app_size
    cdef Py_ssize_t _write_chunk
    cdef object _out
    cdef Py_ssize_t _out_off
    cdef bint _net_eof
    cdef bint _eof
    cdef bint _more
    cdef bint _drained
    cdef bint _hs_done
    cdef bint _close_notify
    cdef bint _hold_flight

    def __init__(self, sock, ssl_object, incoming, outgoing,
                 Py_ssize_t net_buffer_size=DEFAULT_NET_BUFFER_SIZE,
                 Py_ssize_t app_buffer_size=DEFAULT_APP_BUFFER_SIZE,
                 Py_ssize_t write_chunk=DEFAULT_WRITE_CHUNK):
        self._sock = sock
        self._ssl = ssl_object
        self._in = incoming
        self._outbio = outgoing
        self._net_size = net_buffer_size
        self._app_size = app_buffer_size
        self._write_chunk = write_chunk
        self._out = None
        self._out_off = 0
        self._net_eof = False
        self._eof = False
        self._more = False
        # The last recv found the socket empty or emptied it: see _read.
        self._drained = False
        self._hs_done = False
        self._close_notify = False
        # handshake(flush=False) left its last flight in the outgoing BIO
        # for the caller's next write()/flush(): reads must not send it
        # on their own (cleared by flush()).
        self._hold_flight = False

    # ------------------------------------------------------------------
    # outgoing
    # ------------------------------------------------------------------
    def pending_writes(self):
        cdef Py_ssize_t n = self._outbio.pending
        if self._out is not None:
            n += len(self._out) - self._out_off
        return n

    cpdef bint flush(self) except -1:
        cdef Py_ssize_t off, n
        self._hold_flight = False
        if self._outbio.pending:
            data = self._outbio.read()
            if self._out is None:
                self._out = data
                self._out_off = 0
            else:
                self._out = self._out[self._out_off:] + data
                self._out_off = 0
        out = self._out
        if out is None:
            return True
        off = self._out_off
        try:
            if off:
                n = self._sock.send(memoryview(out)[off:])
            else:
                n = self._sock.send(out)
        except (BlockingIOError, InterruptedError):
            return False
        off += n
        if off >= len(out):
            self._out = None
            self._out_off = 0
            return True
        self._out_off = off
        return False

    def write(self, data):
        cdef Py_ssize_t total, chunk, done, n
        # Relies on renegotiation being off: see the pure twin's write().
        # Only ciphertext already handed to the socket's queue (``_out``)
        # holds a write back; records OpenSSL queued in the outgoing BIO (a
        # handshake's last flight left by ``handshake(flush=False)``, a
        # KeyUpdate answer) are sent together with this data by the flush
        # below, in one segment.
        if self._out is not None:
            if not self.flush():
                return 0
        total = len(data)
        if total == 0:
            return 0
        chunk = self._write_chunk
        if total <= chunk:
            self._ssl.write(data)
            self.flush()
            return total
        view = memoryview(data)
        done = 0
        while done < total:
            n = total - done
            if n > chunk:
                n = chunk
            self._ssl.write(view[done:done + n])
            done += n
            if not self.flush():
                break
        return done

    # ------------------------------------------------------------------
    # incoming
    # ------------------------------------------------------------------
    cdef Py_ssize_t _want_read(self, bint handshaking) except -3:
        # See the pure twin: flush what OpenSSL queued, then one recv; -2:
        # (handshake only) the socket did not take our output; 0 without a
        # recv once our flight went out (the answer cannot be there yet).
        cdef Py_ssize_t sent
        if handshaking:
            sent = self._outbio.pending
            if not self.flush():
                return -2
            if sent:
                return 0
        elif self._outbio.pending and not self._hold_flight:
            self.flush()
        return self.fill()

    cpdef Py_ssize_t fill(self) except -2:
        cdef Py_ssize_t n
        if self._net_eof:
            return -1
        nview = shared_buffer("net", self._net_size)
        try:
            n = self._sock.recv_into(nview)
        except (BlockingIOError, InterruptedError):
            self._drained = True
            return 0
        if n == 0:
            self._net_eof = True
            self._in.write_eof()
            return -1
        self._in.write(nview[:n])
        self._drained = n < self._net_size
        return n

    cdef Py_ssize_t _read(self, Py_ssize_t limit, object decoder) except -1:
        # See the pure twin: into the app scratch buffer, or (decoder not
        # None) straight into decoder.writable() regions, each committed
        # once full and the last one however the call ends.
        cdef Py_ssize_t got = 0, n, r, want
        cdef Py_ssize_t rlen = 0, rgot = 0
        cdef bint was_eof
        # from an earlier call too, as long as no recv happened since
        cdef bint drained = self._drained
        cdef bint direct = decoder is not None
        if self._eof:
            raise EOFError("TLS connection closed by peer")
        if limit <= 0 or limit > self._app_size:
            limit = self._app_size
        ssl_read = self._ssl.read
        if direct:
            region = None
        else:
            region = shared_buffer("app", self._app_size)
            rlen = len(region)
        self._more = False
        try:
            while got < limit:
                if region is None:
                    region = decoder.writable()
                    rlen = len(region)
                    rgot = 0
                want = rlen - rgot
                if want > limit - got:
                    want = limit - got
                try:
                    if rgot or want < rlen:
                        n = ssl_read(want, region[rgot:rgot + want])
                    else:
                        n = ssl_read(want, region)
                except _SSLWantReadError:
                    if drained and (got or self._hold_flight):
                        # The last recv emptied the socket and its records are
                        # delivered: asking again would almost always cost an
                        # EAGAIN; anything newer will raise a readiness event.
                        # (What OpenSSL queued is flushed after the loop.)
                        # Nothing delivered either while the caller holds
                        # our last handshake flight (see the pure twin).
                        break
                    was_eof = self._net_eof
                    r = self._want_read(False)
                    drained = self._drained
                    if r > 0:
                        continue
                    if r == 0:
                        break
                    if was_eof:
                        self._eof = True
                        break
                    continue
                except _SSLZeroReturnError:
                    self._eof = True
                    self._close_notify = True
                    break
                except _SSLEOFError:
                    self._eof = True
                    break
                if n == 0:
                    # close_notify received (Python reports it as a 0-byte read).
                    self._eof = True
                    self._close_notify = True
                    break
                got += n
                rgot += n
                if direct and rgot >= rlen:
                    region = None
                    decoder.commit(rgot)
            else:
                self._more = True
        finally:
            if direct and region is not None:
                decoder.commit(rgot)
        if self._outbio.pending and not self._hold_flight:
            self.flush()
        if self._eof:
            if got == 0:
                raise EOFError("TLS connection closed by peer")
            self._more = True
        return got

    def read_into(self, sink, Py_ssize_t max_bytes=0):
        cdef Py_ssize_t got = self._read(max_bytes, None)
        if got:
            sink(shared_buffer("app", self._app_size)[:got])
        return got

    def read_into_decoder(self, decoder, Py_ssize_t max_bytes=0):
        """Decrypt straight into ``decoder.writable()`` regions (see the
        pure twin); returns the byte count, EOFError at the end."""
        return self._read(max_bytes, decoder)

    def recv(self, Py_ssize_t max_bytes):
        cdef Py_ssize_t got = self._read(max_bytes, None)
        if got:
            return bytes(shared_buffer("app", self._app_size)[:got])
        return b""

    def buffered(self):
        return self._more or self._ssl.pending() > 0

    @property
    def drained(self):
        """True when the last read delivered everything the socket had
        (see the pure twin)."""
        return self._drained and not self._more

    @property
    def eof(self):
        return self._eof

    @property
    def close_notify_received(self):
        """True if the peer ended the TLS session with close_notify (rather
        than just closing the TCP connection)."""
        return self._close_notify

    # ------------------------------------------------------------------
    # handshake / shutdown
    # ------------------------------------------------------------------
    def handshake(self, bint flush=True):
        cdef Py_ssize_t r
        if not self._hs_done:
            if self._out is not None and not self.flush():
                return OP_WRITE
            while True:
                try:
                    self._ssl.do_handshake()
                    break
                except _SSLWantReadError:
                    r = self._want_read(True)
                    if r > 0:
                        continue
                    if r == 0:
                        return OP_READ
                    if r == -2:
                        return OP_WRITE
                    self._replay(True)
                    raise EOFError("Connection closed by peer during TLS handshake")
                except _SSLError:
                    self._flush_quietly()
                    raise
            self._hs_done = True
            self._more = self._in.pending > 0
        if not flush:
            # The caller sends the last flight itself, typically behind its
            # first record: write() encrypts into the same outgoing BIO and
            # one send() carries both.  Until then reads leave it alone (a
            # server reading the request that came with the client's
            # Finished would otherwise send its session tickets first).
            self._hold_flight = self._outbio.pending > 0
            return 0
        if not self.flush():
            return OP_WRITE
        return 0

    def raise_peer_failure(self, bint handshaking):
        """After an I/O error while the handshake outcome may still be in
        flight, raise the ``ssl.SSLError`` the peer's last bytes explain
        (see the pure twin); None when there is none."""
        try:
            for _ in range(64):
                if self.fill() <= 0:
                    break
        except OSError:
            pass
        self._replay(handshaking)

    def _replay(self, bint handshaking):
        try:
            if handshaking:
                self._ssl.do_handshake()
            else:
                for _ in range(1024):
                    if not self._ssl.read(16384):
                        break
        except (_SSLWantReadError, _SSLZeroReturnError, _SSLEOFError):
            pass
        except _SSLError:
            self._flush_quietly()
            raise
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------
    # negotiated parameters
    # ------------------------------------------------------------------
    def version(self):
        """Negotiated protocol, e.g. "TLSv1.3" (None before the handshake)."""
        return self._ssl.version()

    def cipher(self):
        """``(name, protocol, bits)`` of the negotiated cipher, or None."""
        return self._ssl.cipher()

    def peer_certificate_der(self):
        """DER of the peer's leaf certificate, None if it sent none; raises
        ValueError before the handshake is done."""
        return self._ssl.getpeercert(binary_form=True)

    def session(self):
        """The ``ssl.SSLSession`` to resume later (client side), or None.

        TLS 1.3 issues tickets after the handshake, so a session taken right
        after it is not resumable yet: only one that ``has_ticket`` (TLS 1.3)
        or carries a session id (TLS 1.2) is returned."""
        sess = self._ssl.session
        if sess is None:
            return None
        if sess.has_ticket or (self._ssl.version() != "TLSv1.3" and sess.id):
            return sess
        return None

    def session_reused(self):
        """True if the handshake resumed an earlier session."""
        return self._ssl.session_reused

    def _flush_quietly(self):
        try:
            self.flush()
        except OSError:
            pass

    def shutdown(self):
        if self._hs_done:
            try:
                self._ssl.unwrap()
            except (_SSLError, ValueError, OSError):
                pass
        self._flush_quietly()
