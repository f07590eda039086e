"""TLS pump: moves bytes between a socket, two MemoryBIOs and an SSLObject.

One source, two twins: run as Python, and compiled by Cython in pure-Python
mode as ``kchannel.network._ctlspump`` (``_ctlspump.pxd`` beside this file
adds the C types; pick the active one through ``kchannel._impl``).  The TLS
state (handshake, alerts, records, keys) lives entirely in OpenSSL; this
module only shovels bytes.

Theory of operation
===================
::

              write(data)             read_into_decoder(decoder) / read_into(sink)
                  |                                      ^
                  v                                      |
           SSLObject.write  (encrypts)           SSLObject.read (decrypts)
                  |                                      ^
                  v                                      |
           outgoing MemoryBIO                   incoming MemoryBIO
                  |  flush(): read it whole,             ^  fill(): one recv_into
                  |  keep what send() refused            |  a reused buffer, then
                  v                                      |  BIO.write
               socket.send  ----------- TCP ---------- socket.recv_into

* The SSLObject never touches the socket.  Anything OpenSSL wants to say --
  handshake flights, alerts, NewSessionTicket or KeyUpdate replies, our
  close_notify -- appears in the outgoing BIO, possibly as a side effect of a
  *read*; so after every SSL call that can produce output we check
  ``outgoing.pending`` and flush.  Bytes the socket refuses stay in ``_out``
  (the outgoing BIO is drained whole so it never grows unbounded); while
  ``_out`` is non-empty ``write`` accepts nothing more, which is the
  backpressure the caller sees (returns 0, waits for OP_WRITE).
* Reading is demand-driven: ``SSLObject.read`` until it raises
  ``SSLWantReadError``, then one ``recv_into`` into the incoming BIO, repeat,
  until the socket has nothing more or the caller's limit is reached.  If the
  limit stops us, decrypted or undecrypted bytes may remain although the
  socket will not become readable again for them: ``buffered()`` reports
  that, so the selector services the channel without a readiness event.
  When we stop because the socket would block, OpenSSL has told us
  (SSLWantReadError) that no complete record is left, so nothing is buffered
  that could be delivered.  Once some data was delivered and the last recv
  came back short (the socket was emptied), we stop without another recv:
  it would almost always fail with EAGAIN, and small request/response
  traffic would pay a syscall and two exceptions per read for nothing.
  That knowledge outlives the call (``_drained``): a later read that finds
  decrypted or undecrypted bytes still in the BIOs (a request that came with
  the peer's handshake Finished) delivers them without a recv either.  The
  caller waits on a level-triggered readiness event whenever a read stops,
  so bytes that arrived since are announced, never missed.
* In the handshake, once our flight is on the wire OpenSSL's want for more
  is not tried against the socket: the peer's next bytes answer that flight
  and cannot be there yet, so the recv would only return EAGAIN (one per
  flight on each side); the handshake waits for OP_READ at once.
* Why batch: AES-GCM runs at GB/s, but each Python-level call (a recv, a BIO
  write, an SSLObject.read, an allocation) costs about as much as encrypting
  a few KiB.  So: one recv of up to 256 KiB rather than per-record reads;
  ``SSLObject.read`` into a preallocated buffer (``read(n)`` without a buffer
  would allocate ``n`` bytes and shrink them to one 16 KiB record each time);
  one ``SSLObject.write`` for up to 128 KiB of plaintext (OpenSSL cuts it into
  16 KiB records itself); one ``send`` of the whole outgoing BIO; and the
  decrypted bytes (up to 256 KiB) decrypted straight into the frame
  decoder's receive memory (``read_into_decoder``: ``SSLObject.read`` into
  ``decoder.writable()``, so frames are handed out without another copy)
  or handed to a sink in one call.  Measured
  on loopback, this moves TLS 1.3 bulk data as fast as ``ssl.SSLSocket``
  (OpenSSL reading and writing the socket itself, in C); what remains between
  that and TLS over two memory BIOs in one process is the kernel's socket
  copying, which no pump can avoid.
* Memory: the receive and decrypt buffers are per-thread scratch buffers
  (``shared_buffer``) -- their bytes are copied into the incoming BIO or
  handed to the sink before the call returns -- so a server with many
  connections pays for them once per thread.  What a connection keeps is
  its two BIOs (bounded by one recv and one write chunk) and, while the
  socket is full, the encrypted bytes it refused.
* EOF: a TCP FIN is passed to OpenSSL with ``incoming.write_eof()``; OpenSSL
  then either returns the data still buffered, reports close_notify (read
  returns 0 / SSLZeroReturnError) or an unclean EOF (SSLEOFError).  Either
  way the caller gets every decrypted byte first and ``EOFError`` on the
  following call.
* Errors: ``ssl.SSLError`` (handshake failures, alerts from the peer, bad
  records) and ``OSError`` from the socket propagate unchanged; the transport
  decides what they mean (authentication failure vs I/O error).  Before an
  ``SSLError`` from the handshake propagates, the alert OpenSSL queued is
  flushed best-effort so the peer learns why.  After an ``OSError`` (a reset
  while the handshake outcome is in flight) ``raise_peer_failure`` reads
  what the peer sent before it went away, so an alert can explain the reset.
* Ownership: the pump is the only code that calls the ``SSLObject`` (the
  transport asks it for the protocol, cipher, peer certificate and the
  session to resume too), so every OpenSSL call and its ``SSLWantReadError``
  handling live here.  ``SslFactory`` only creates the ``SSLObject``, with
  the cached session to resume already set.
* Renegotiation: every context comes from ``SslFactory`` with
  ``OP_NO_RENEGOTIATION`` (Kafka refuses renegotiation too); the write path
  relies on it (see ``write``).
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


class TlsPump:
    """Bytes mover for one TLS connection (see the module docstring)."""

    def __init__(self, sock, ssl_object, incoming, outgoing,
                 net_buffer_size=DEFAULT_NET_BUFFER_SIZE,
                 app_buffer_size=DEFAULT_APP_BUFFER_SIZE,
                 write_chunk=DEFAULT_WRITE_CHUNK):
        self._sock = sock
        self._ssl = ssl_object
        # The C object under the ssl.SSLObject: its read, write, pending and
        # do_handshake are one-line Python wrappers around these, a Python
        # frame per call on every record (each TLS connection makes ~30
        # such calls on each side before its first request is answered).
        self._raw = ssl_object._sslobj
        self._in = incoming
        self._outbio = outgoing
        self._net_size = net_buffer_size
        self._app_size = app_buffer_size
        self._write_chunk = write_chunk
        self._out = None        # encrypted bytes the socket has not taken
        self._out_off = 0
        self._net_eof = False   # TCP FIN seen and passed to OpenSSL
        self._eof = False       # OpenSSL reported the end (close_notify or EOF)
        self._more = False      # a read stopped at its limit
        # The last recv found the socket empty or emptied it (a short
        # read): see _read.
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
        """Encrypted bytes not on the wire yet (ours + the outgoing BIO)."""
        n = self._outbio.pending
        if self._out is not None:
            n += len(self._out) - self._out_off
        return n

    def flush(self):
        """Send what OpenSSL produced.  True once nothing is pending.

        One send per call: a partial send means the socket buffer is full,
        and asking again would only cost an EAGAIN exception.
        """
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
        """Encrypt a prefix of ``data``; returns its length (0: not now).

        Encrypts one chunk at a time and keeps going while the socket takes
        everything, so at most one chunk of ciphertext is ever held back.
        """
        # SSLObject.write never needs to read here only because renegotiation
        # is off (OP_NO_RENEGOTIATION, set by SslFactory): during a TLS 1.2
        # renegotiation SSL_write can want the peer's handshake bytes
        # (SSLWantReadError), which this path would not retry.  TLS 1.3 has no
        # renegotiation; its KeyUpdate is read and answered by the read path.
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
            self._raw.write(data)
            self.flush()
            return total
        view = memoryview(data)
        done = 0
        while done < total:
            n = total - done
            if n > chunk:
                n = chunk
            self._raw.write(view[done:done + n])
            done += n
            if not self.flush():
                break
        return done

    # ------------------------------------------------------------------
    # incoming
    # ------------------------------------------------------------------
    def _want_read(self, handshaking):
        """OpenSSL raised SSLWantReadError: send what it queued, then recv.

        What it queued (a handshake flight, the answer to a KeyUpdate) may be
        what the peer waits for before it sends more, so it goes first.  In
        the handshake nothing is read until it is all on the wire (-2: wait
        for OP_WRITE); for application data a full socket must not stop the
        reading (both peers could wait on each other's writes).  Returns
        ``fill()``'s result otherwise.
        """
        if handshaking:
            sent = self._outbio.pending
            if not self.flush():
                return -2
            if sent:
                # Our flight just went out: the peer's answer to it cannot
                # be in the socket yet (see the module docstring).
                return 0
        elif self._outbio.pending and not self._hold_flight:
            self.flush()
        return self.fill()

    def fill(self):
        """One recv into the incoming BIO: bytes read, 0 if none now, -1 EOF."""
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

    def _read(self, limit, decoder=None):
        """Decrypt up to ``limit`` bytes; returns the count.  Into the app
        scratch buffer, or with a ``decoder`` straight into its
        ``writable()`` regions (no copy afterwards): each region is
        committed once full, and whatever was decrypted into the last one is
        committed however the call ends (bytes OpenSSL handed over are gone
        from it, so they must not be lost)."""
        if self._eof:
            raise EOFError("TLS connection closed by peer")
        if limit <= 0 or limit > self._app_size:
            limit = self._app_size
        got = 0
        # True: no recv needed once something is delivered (see below);
        # from an earlier call too, as long as no recv happened since.
        drained = self._drained
        ssl_read = self._raw.read
        if decoder is None:
            region = shared_buffer("app", self._app_size)
            rlen = len(region)
        else:
            region = None
            rlen = 0
        rgot = 0                # bytes decrypted into ``region``
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
                    n = ssl_read(want, region[rgot:rgot + want] if rgot or want < rlen
                                 else region)
                except _SSLWantReadError:
                    if drained and (got or self._hold_flight):
                        # The last recv emptied the socket and its records
                        # are delivered: asking again would almost always
                        # cost an EAGAIN; anything newer will raise a
                        # readiness event.  (What OpenSSL queued is flushed
                        # after the loop.)  Nothing delivered either while
                        # the caller holds our handshake's last flight: the
                        # TLS 1.2 server's Finished, which the peer waits
                        # for before it sends anything.
                        break
                    was_eof = self._net_eof
                    r = self._want_read(False)
                    drained = self._drained
                    if r > 0:
                        continue
                    if r == 0:
                        break
                    if was_eof:
                        # OpenSSL already knows about the EOF and still
                        # wants more: treat as the end.
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
                    # close_notify received (Python reports a 0-byte read).
                    self._eof = True
                    self._close_notify = True
                    break
                got += n
                rgot += n
                if decoder is not None and rgot >= rlen:
                    region = None
                    decoder.commit(rgot)
            else:
                self._more = True
        finally:
            if decoder is not None and region is not None:
                decoder.commit(rgot)
        if self._outbio.pending and not self._hold_flight:
            self.flush()
        if self._eof:
            if got == 0:
                raise EOFError("TLS connection closed by peer")
            # Deliver the data now, report the EOF on the next call.
            self._more = True
        return got

    def read_into(self, sink, max_bytes=0):
        """Decrypt what is available (up to ``max_bytes``, 0 = buffer size)
        and pass it to ``sink`` as one memoryview, valid only during the
        call (it is a shared scratch buffer).  Returns the byte count;
        raises EOFError at the end."""
        got = self._read(max_bytes)
        if got:
            sink(shared_buffer("app", self._app_size)[:got])
        return got

    def read_into_decoder(self, decoder, max_bytes=0):
        """Like ``read_into``, but records are decrypted straight into the
        ``FrameDecoder``'s memory (``decoder.writable()`` / ``commit``):
        the bytes are written once, by OpenSSL, and framed in place."""
        return self._read(max_bytes, decoder)

    def recv(self, max_bytes):
        """Like read_into, returning a bytes object (b"" if nothing now)."""
        got = self._read(max_bytes)
        if got:
            return bytes(shared_buffer("app", self._app_size)[:got])
        return b""

    def buffered(self):
        """True if a read may deliver something without a readiness event."""
        return self._more or self._raw.pending() > 0

    @property
    def drained(self):
        """True when the last read delivered everything the socket had
        (its last recv was short or found nothing, and no read stopped at
        its limit): reading again before a readiness event would only find
        the socket empty."""
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
    def handshake(self, flush=True):
        """Drive the handshake: 0 when done and flushed, else the ops needed.

        ``flush=False``: once the handshake is done, its last flight stays in
        the outgoing BIO (``pending_writes()`` counts it) and 0 is returned;
        the caller sends it with ``flush()`` or behind its first ``write()``.

        Raises ``ssl.SSLError`` on a TLS failure (after flushing the alert
        best-effort), ``EOFError`` if the peer closed mid-handshake.
        """
        if not self._hs_done:
            if self._out is not None and not self.flush():
                return OP_WRITE
            while True:
                try:
                    self._raw.do_handshake()
                    break
                except _SSLWantReadError:
                    r = self._want_read(True)
                    if r > 0:
                        continue
                    if r == 0:
                        return OP_READ
                    if r == -2:
                        return OP_WRITE
                    # Let OpenSSL see the EOF: it may turn a truncated
                    # flight into a clearer error than a bare EOF.
                    self._replay(True)
                    raise EOFError("Connection closed by peer during TLS handshake")
                except _SSLError:
                    self._flush_quietly()
                    raise
            self._hs_done = True
            # Application data that came with the last flight is already in
            # the incoming BIO; no readiness event will announce it.
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

    def raise_peer_failure(self, handshaking):
        """After an I/O error while the handshake outcome may still be in
        flight (``handshaking``: the handshake itself; else the first reads
        of TLS 1.3, where a client certificate is checked), read whatever
        the peer sent before it went away and raise its ``ssl.SSLError``:
        an alert explains the failure better than the reset that followed it
        (Linux still delivers bytes queued before a reset).  Returns None
        when there is no such explanation.
        """
        try:
            for _ in range(64):
                if self.fill() <= 0:
                    break
        except OSError:
            pass
        self._replay(handshaking)

    def _replay(self, handshaking):
        """Let OpenSSL process what the incoming BIO holds (an EOF too) and
        raise ``ssl.SSLError`` if that shows a TLS failure; the alert it
        queued is flushed best-effort first.  Decrypted application data is
        dropped: only called when the connection is ending anyway."""
        try:
            if handshaking:
                self._raw.do_handshake()
            else:
                for _ in range(1024):
                    if not self._raw.read(16384):
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
        """Queue close_notify and send it if the socket takes it now.

        Never waits for the peer's close_notify (Kafka doesn't either).
        """
        if self._hs_done:
            try:
                self._ssl.unwrap()
            except (_SSLError, ValueError, OSError):
                # SSLWantReadError: our close_notify is queued, the peer's
                # hasn't arrived -- expected.  Others: nothing to do.
                pass
        self._flush_quietly()
