"""The written contract between each pure-Python twin and its compiled twin.

Each hot path exists twice (see ``kchannel._impl``): a pure module and a
Cython module built from ``kchannel_ext/<name>.pyx``, chosen at import time.
Callers must not be able to tell them apart, so their interface is written
down here once, as ``typing.Protocol`` classes:

* one ``...Module`` protocol per twin pair: its constants (with their
  values), functions and classes.  A module implements a protocol as PEP 544
  describes: its functions match the protocol's methods without ``self``.
* one protocol per class the twins export (``FrameDecoder``, ``Reader``,
  ``Writer``, ``TlsPump``).

``tests/core/test_impl_contracts.py`` holds both twins of every pair in
``CONTRACTS`` to it: the same public names, the same constant values, and
for every function and method the parameters written here (names, kinds,
defaults), read with ``inspect.signature`` from both twins (the compiled
modules are built with ``binding=True`` and ``embedsignature``, see
setup.py).  Annotations document types; they are not compared, since Cython
reports C types.  Behaviour is compared by the differential tests of each
twin (tests/protocol/test_framing.py, test_protocol_wire.py, test_records.py,
tests/network/test_tls_*.py, tests/security/test_scram.py).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, List, Optional, Protocol, Tuple, Union


# ---------------------------------------------------------------------------
# framing: kchannel._framing_py / kchannel._cframing
# ---------------------------------------------------------------------------
class FrameDecoder(Protocol):
    """Incremental, sans-I/O decoder of Kafka size-prefixed frames."""

    def __init__(self, max_size: int = 104857600) -> None: ...

    @property
    def max_size(self) -> int:
        """Largest accepted payload; settable at any time (SASL lowers it
        before authentication); a negative value raises ValueError."""

    @property
    def buffered(self) -> int:
        """Bytes held (size prefixes included) that no frame returned yet."""

    def has_partial(self) -> bool:
        """True when the buffer ends with an incomplete frame."""

    def writable(self) -> memoryview:
        """Writable view of where the next received bytes go (never a byte
        of a handed-out frame; a large frame's own buffer once its prefix is
        validated); valid until ``commit``."""

    def commit(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``writable()``
        view, which is released; ValueError outside it."""

    def feed(self, data: bytes) -> None:
        """Append received bytes (any bytes-like object); copies them."""

    def next_frame(self) -> Optional[Union[bytes, memoryview]]:
        """The next complete payload, or None: ``bytes`` (a copy) when
        shorter than ``COPY_BELOW``, else a read-only memoryview of the
        decoder's memory (never changed afterwards); InvalidReceiveError on
        a bad size prefix."""

    def frames(self) -> List[Union[bytes, memoryview]]:
        """Drain every complete payload (as ``next_frame``); on a bad size
        prefix the frames before it ride on the InvalidReceiveError as
        ``.frames``."""


class FramingModule(Protocol):
    DEFAULT_MAX_SIZE: int = 104857600
    COPY_BELOW: int = 2048
    FrameDecoder: type[FrameDecoder]

    def encode_frame(self, payload: bytes) -> bytes:
        """``payload`` prefixed with its 4-byte size."""

    def encode_frames(self, payloads: Iterable[bytes]) -> bytes:
        """The concatenated frames of every payload."""


# ---------------------------------------------------------------------------
# wire: kchannel.protocol._wire_py / kchannel._cwire
# ---------------------------------------------------------------------------
class Reader(Protocol):
    """Bounds-checked cursor over an immutable buffer; every read raises
    InvalidRequestError on truncation or an invalid length."""

    buf: bytes
    pos: int
    end: int

    def __init__(self, buf: bytes, offset: int = 0, end: Optional[int] = None) -> None: ...
    def remaining(self) -> int: ...
    def read_int8(self) -> int: ...
    def read_int16(self) -> int: ...
    def read_int32(self) -> int: ...
    def read_int64(self) -> int: ...
    def read_uint16(self) -> int: ...
    def read_uint32(self) -> int: ...
    def read_boolean(self) -> bool: ...
    def read_float64(self) -> float: ...
    def read_uuid(self) -> Any: ...
    def read_unsigned_varint(self) -> int: ...
    def read_varint(self) -> int: ...
    def read_varlong(self) -> int: ...
    def read_nullable_string(self) -> Optional[str]: ...
    def read_string(self) -> str: ...
    def read_compact_nullable_string(self) -> Optional[str]: ...
    def read_compact_string(self) -> str: ...
    def read_raw(self, n: int) -> bytes: ...
    def skip(self, n: int) -> None: ...
    def read_nullable_bytes(self) -> Optional[bytes]: ...
    def read_bytes(self) -> bytes: ...
    def read_compact_nullable_bytes(self) -> Optional[bytes]: ...
    def read_compact_bytes(self) -> bytes: ...
    def read_nullable_records(self) -> Optional[memoryview]:
        """A records field: a read-only view of the buffer, not a copy."""
    def read_compact_nullable_records(self) -> Optional[memoryview]: ...
    def read_array_length(self, min_element_size: int = 1) -> int: ...
    def read_compact_array_length(self, min_element_size: int = 1) -> int: ...
    def read_tag_header(self) -> Tuple[int, int]: ...
    def read_tagged_fields(self) -> List[Tuple[int, bytes]]: ...


class Writer(Protocol):
    """Append-only encoder; unrepresentable values raise ValueError."""

    def __init__(self) -> None: ...
    def __len__(self) -> int: ...
    def getvalue(self) -> bytes: ...
    def write_int8(self, v: int) -> None: ...
    def write_int16(self, v: int) -> None: ...
    def write_int32(self, v: int) -> None: ...
    def write_int64(self, v: int) -> None: ...
    def write_uint16(self, v: int) -> None: ...
    def write_uint32(self, v: int) -> None: ...
    def write_boolean(self, v: bool) -> None: ...
    def write_float64(self, v: float) -> None: ...
    def write_uuid(self, v: Any) -> None: ...
    def write_unsigned_varint(self, v: int) -> None: ...
    def write_varint(self, v: int) -> None: ...
    def write_varlong(self, v: int) -> None: ...
    def write_raw(self, data: bytes) -> None: ...
    def write_string(self, s: str) -> None: ...
    def write_nullable_string(self, s: Optional[str]) -> None: ...
    def write_compact_string(self, s: str) -> None: ...
    def write_compact_nullable_string(self, s: Optional[str]) -> None: ...
    def write_bytes(self, b: bytes) -> None: ...
    def write_nullable_bytes(self, b: Optional[bytes]) -> None: ...
    def write_compact_bytes(self, b: bytes) -> None: ...
    def write_compact_nullable_bytes(self, b: Optional[bytes]) -> None: ...
    def write_array_length(self, n: int) -> None: ...
    def write_compact_array_length(self, n: int) -> None: ...
    def write_tagged_fields(self, fields: Any) -> None: ...


class WireModule(Protocol):
    Reader: type[Reader]
    Writer: type[Writer]

    def encode_unsigned_varint(self, v: int) -> bytes: ...
    def encode_varint(self, v: int) -> bytes: ...
    def encode_varlong(self, v: int) -> bytes: ...
    def size_of_unsigned_varint(self, v: int) -> int: ...

    def parse_request_header(self, payload: Any, flexible_from: Any
                             ) -> Tuple[int, int, int, Optional[str], int, int]:
        """(api_key, api_version, correlation_id, client_id, header_version,
        body_offset); InvalidRequestError for a truncated or bad header."""

    def encode_request_header(self, api_key: int, api_version: int, correlation_id: int,
                              client_id: Optional[str], header_version: int) -> bytes: ...
    def encode_response_header(self, correlation_id: int, header_version: int) -> bytes: ...
    def decode_response_header(self, payload: Any, header_version: int) -> Tuple[int, int]: ...
    def frame_message(self, prefix: bytes, correlation_id: int, tail: bytes, data: bytes
                      ) -> bytes:
        """The frame (4-byte size first) of ``prefix + correlation id (int32)
        + tail + data``; ValueError "frame payload too large" past 2 GiB."""


# ---------------------------------------------------------------------------
# tlspump: kchannel.network._tlspump_py / kchannel.network._ctlspump (the same .py compiled)
# ---------------------------------------------------------------------------
class TlsPump(Protocol):
    """Bytes mover for one TLS connection, and the only code that calls its
    ``SSLObject`` (theory of operation: kchannel.network._tlspump_py)."""

    def __init__(self, sock: Any, ssl_object: Any, incoming: Any, outgoing: Any,
                 net_buffer_size: int = 262144, app_buffer_size: int = 262144,
                 write_chunk: int = 131072) -> None: ...

    def pending_writes(self) -> int:
        """Encrypted bytes not on the wire yet."""

    def flush(self) -> bool:
        """One send of what OpenSSL produced; True once nothing is pending."""

    def write(self, data: bytes) -> int:
        """Encrypt a prefix of ``data``; its length (0: not now)."""

    def fill(self) -> int:
        """One recv into the incoming BIO: bytes read, 0 none now, -1 EOF."""

    def read_into(self, sink: Callable[[memoryview], Any], max_bytes: int = 0) -> int:
        """Decrypt what is available into ``sink``; EOFError at the end."""

    def read_into_decoder(self, decoder: Any, max_bytes: int = 0) -> int:
        """Like read_into, decrypting straight into ``decoder.writable()``
        regions (each committed, even when an error ends the call)."""

    def recv(self, max_bytes: int) -> bytes:
        """Like read_into, returning bytes (b"" if nothing now)."""

    def buffered(self) -> bool:
        """True if a read may deliver something without a readiness event."""

    @property
    def drained(self) -> bool:
        """The last read delivered everything the socket had (its last
        recv was short or found nothing; no read stopped at its limit)."""

    @property
    def eof(self) -> bool: ...

    @property
    def close_notify_received(self) -> bool: ...

    def handshake(self, flush: bool = True) -> int:
        """0 when done and flushed, else the ops (OP_READ/OP_WRITE) needed.
        ``flush=False``: a completed handshake's last flight is left for the
        caller's next ``write``/``flush`` (``pending_writes`` counts it)."""

    def raise_peer_failure(self, handshaking: bool) -> None:
        """After an I/O error: raise the ssl.SSLError the peer's last bytes
        explain (an alert), if any."""

    def version(self) -> Optional[str]: ...
    def cipher(self) -> Optional[Tuple[str, str, int]]: ...
    def peer_certificate_der(self) -> Optional[bytes]: ...

    def session(self) -> Optional[Any]:
        """The resumable ``ssl.SSLSession`` (client), or None if none yet."""

    def session_reused(self) -> bool:
        """True if the handshake resumed an earlier session."""

    def shutdown(self) -> None:
        """Queue close_notify and send it if the socket takes it now."""


class TlsPumpModule(Protocol):
    OP_READ: int = 1
    OP_WRITE: int = 2
    DEFAULT_NET_BUFFER_SIZE: int = 262144
    DEFAULT_APP_BUFFER_SIZE: int = 262144
    DEFAULT_WRITE_CHUNK: int = 131072
    TlsPump: type[TlsPump]

    def shared_buffer(self, kind: str, size: int) -> memoryview:
        """A per-thread scratch buffer (memoryview over a bytearray)."""


# ---------------------------------------------------------------------------
# netloop: kchannel.network._netloop_py / kchannel.network._cnetloop (the same .py compiled)
# ---------------------------------------------------------------------------
class SelectorLoop(Protocol):
    """The per-poll hot path of ``kchannel.network.selector.Selector`` (its
    base class; ``Selector.__init__`` sets the state up).  The attributes
    are slots of the pure twin and C fields of the compiled one."""

    sensors: Any
    time: Callable[[], int]
    completed_receives: List[Tuple[Any, memoryview]]
    completed_sends: List[Tuple[Any, int]]
    connected: List[Any]
    newly_ready: List[Any]
    disconnected: dict
    poll_time_ms: int
    max_receives_per_channel: int
    max_read_per_channel: int

    def __init__(self) -> None: ...

    def send(self, id: Any, payload: Any, already_framed: bool = False) -> None:
        """Queue one frame on ``id`` (``Selector.send``)."""

    def flush_sends(self) -> None:
        """Write the server channels' queued sends now."""

    def write_queued(self, id: Any) -> None:
        """Write ``id``'s queued sends now."""

    def poll(self, timeout_ms: Optional[float], wait_after_flush: bool = False) -> None:
        """One poll (``Selector.poll``)."""


class NetloopModule(Protocol):
    MAX_WRITE_PER_CHANNEL_PER_POLL: int = 4194304
    SelectorLoop: type[SelectorLoop]


# ---------------------------------------------------------------------------
# netpass: kchannel.network._netpass_py / kchannel.network._cnetpass (the same .py compiled)
# ---------------------------------------------------------------------------
class NetpassModule(Protocol):
    """The network layer's methods run once per poll and channel, taken as
    methods by ``KafkaChannel`` (``read_frames``, ``settle_state``: ``ch``
    is the channel), ``PlaintextTransportLayer`` (``receive_into``,
    ``write``, ``write_vectored``: ``t``) and ``SelectorMetrics`` (``record_poll``:
    ``metrics``)."""

    def connection_error(self, exc: OSError, what: str) -> Exception:
        """The ``ChannelConnectionError`` for an ``OSError`` of a socket
        call (``kchannel.network.transport.connection_error``)."""

    def read_frames(self, ch: Any, max_frames: int = 1,
                    max_bytes: int = 1048576) -> Tuple[list, int]:
        """At most ``max_frames`` complete payloads read off the channel,
        reading at most ``max_bytes``; ``(frames, bytes_read)``."""

    def settle_state(self, ch: Any) -> Tuple[bool, bool, bool]:
        """``(has_pending_writes(), is_muted(), buffered)`` of a READY
        channel."""

    def receive_into(self, t: Any, decoder: Any) -> int:
        """One ``recv_into`` into the decoder's writable region; the bytes
        read (0: nothing to read)."""

    def write(self, t: Any, data: Any) -> int:
        """One ``send`` of ``data``; the bytes the socket took."""

    def write_vectored(self, t: Any, buffers: list) -> int:
        """One gather ``sendmsg`` of ``buffers``; the bytes the socket took."""

    def record_poll(self, metrics: Any, select_ns: int, io_ns: int, now: int,
                    bytes_read: int = 0, receives: int = 0,
                    sent: Optional[list] = None) -> None:
        """One poll's selector metrics."""


# ---------------------------------------------------------------------------
# sendqueue: kchannel.network._sendqueue_py / kchannel.network._csendqueue (the same .py compiled)
# ---------------------------------------------------------------------------
class QueuedSend(Protocol):
    """One frame queued on a channel: what is left to write (``data``), the
    size reported once written (``size``), whether it is reported
    (``report``: False for authentication frames), the bytes still to
    write before ``data`` (``head``: the size prefix, or a frame's parts
    before its large part) or None, and those after it (``tail``) or None."""

    data: Any
    size: int
    report: bool
    head: Optional[bytes]
    tail: Optional[bytes]

    def __init__(self, data: Any, size: int, report: bool,
                 head: Optional[bytes] = None, tail: Optional[bytes] = None) -> None: ...

    def __repr__(self) -> str: ...


class SendqueueModule(Protocol):
    """The send queue's hot functions, taken as methods by
    ``kchannel.network.channel_sends.ChannelSendQueue`` (``ch``, their
    first parameter: the channel)."""

    COALESCE_BELOW: int = 65536
    COALESCE_MAX: int = 262144
    SEPARATE_FROM: int = 8192
    SEPARATE_FROM_UNGATHERED: int = 131072
    HEAD_JOIN: int = 16380
    GATHER_MAX: int = 1048576
    GATHER_MAX_BUFFERS: int = 128
    QueuedSend: type[QueuedSend]

    def set_send(self, ch: Any, payload: Any, already_framed: bool = False) -> bool:
        """Queue one frame on the channel ``ch``; True when sends were
        already queued."""

    def write_sends(self, ch: Any, max_bytes: int = 4194304) -> List[int]:
        """Write the channel's queued sends; the sizes of those completed."""

    def gather(self, ch: Any) -> Tuple[list, int, int]:
        """Buffers for one gather write, their total size and the number of
        queued sends they cover."""

    def retire(self, ch: Any, n: int) -> None:
        """Drop ``n`` written bytes from the front of the queue."""


# ---------------------------------------------------------------------------
# clientloop: kchannel.client._clientloop_py / kchannel.client._cclientloop (the same .py compiled)
# ---------------------------------------------------------------------------
class ClientResponse(Protocol):
    """One completed (or failed) request of a ``NetworkClient``."""

    node_id: Any
    api_key: int
    api_version: int
    correlation_id: int
    body: Any
    exception: Optional[BaseException]
    request_time_ms: int
    receive_time_ms: int

    def __init__(self, node_id: Any, api_key: int, api_version: int, correlation_id: int,
                 body: Any = None, exception: Optional[BaseException] = None,
                 request_time_ms: int = 0, receive_time_ms: int = 0) -> None: ...

    @property
    def disconnected(self) -> bool:
        """True when the request failed with the connection."""

    def __repr__(self) -> str: ...


class InFlight(Protocol):
    """One request in flight on a node: its API key and version, when it
    was sent, and whether the client sent it for itself (True), for a
    caller (False) or as a forwarded raw frame ("raw")."""

    api_key: int
    version: int
    sent_ms: int
    internal: Any

    def __init__(self, api_key: int, version: int, sent_ms: int,
                 internal: Any) -> None: ...


class NodeStats(Protocol):
    """A node's request, byte and connection counters (statistics)."""

    tx: int
    txbytes: int
    rx: int
    rxbytes: int
    connects: int
    disconnects: int
    req_timeouts: int
    rtts: Any
    state_ms: int

    def __init__(self, now: int) -> None: ...


class NodeState(Protocol):
    """The base class of ``network_client._Node``: the fields of a node
    the per-request path reads (``_Node.__init__`` sets them)."""

    id: Any
    state: Any
    in_flight: Any
    api_versions: Any
    stats: Any

    def __init__(self) -> None: ...


class ClientLoop(Protocol):
    """The per-request hot path of ``kchannel.client.NetworkClient`` (its
    base class; ``NetworkClient.__init__`` sets the state up)."""

    selector: Any
    request_timeout_ms: int
    time: Callable[[], int]

    def __init__(self) -> None: ...

    def send(self, node_id: Any, api_key: int, body: Any, version: Optional[int] = None,
             expect_response: bool = True, timeout_ms: Optional[int] = None) -> int:
        """``NetworkClient.send``: the request's correlation id."""

    def poll(self, timeout_ms: Optional[float]) -> List[ClientResponse]:
        """``NetworkClient.poll``: the responses completed by one poll."""


class ClientloopModule(Protocol):
    RTT_SAMPLES: int = 1024
    ClientResponse: type[ClientResponse]
    InFlight: type[InFlight]
    NodeStats: type[NodeStats]
    NodeState: type[NodeState]
    ClientLoop: type[ClientLoop]

    def complete_responses(self, responses: list, start: int, callbacks: dict,
                           stop_key: Any) -> int:
        """``ClusterClient.poll``'s hand-out of ``responses`` from ``start``:
        each one's callback popped from ``callbacks`` and called in order;
        the index of the first response whose (node, correlation id) is
        ``stop_key``, -1 at the end."""

    def cluster_poll(self, cc: Any, timeout_ms: float, now: Optional[int] = None) -> list:
        """``ClusterClient.poll`` (``cc``: the cluster client): metadata
        upkeep, I/O, the completed requests' callbacks; the responses."""


# ---------------------------------------------------------------------------
# scram: kchannel.security.sasl._scram_py / kchannel._cscram
# ---------------------------------------------------------------------------
class ScramModule(Protocol):
    def pbkdf2_hmac(self, hash_name: str, password: bytes, salt: bytes,
                    iterations: int) -> bytes:
        """Hi(password, salt, iterations) of RFC 5802 ("sha256"/"sha512")."""

    def base36(self, data: bytes, shift: int = 0) -> str:
        """Base 36 of ``int.from_bytes(data, "big") >> shift`` (<= 64
        bytes, shift 0-7): SCRAM salts and nonces."""

    def secure_random_string(self) -> str:
        """Kafka's ``ScramFormatter.secureRandomString``: 130 random bits in
        base 36 (a nonce)."""


# ---------------------------------------------------------------------------
# records: kchannel.protocol.records._records_py / kchannel._crecords
# ---------------------------------------------------------------------------
# (timestamp, key, value, headers) in, (offset, timestamp, key, value,
# headers) out; headers are (str, bytes or None) pairs.
Header = Tuple[str, Optional[bytes]]


class RecordReader(Protocol):
    """A batch's records ``read(n)`` at a time, as ``cls(topic, partition,
    offset, timestamp, timestamp_type, key, value, headers, None)``."""

    def __init__(self, buf: bytes, count: int, base_offset: int, base_timestamp: int,
                 log_append_time: Optional[int], cls: type, topic: str, partition: int,
                 timestamp_type: str, tuple_headers: bool = False) -> None:
        """``tuple_headers``: each record's headers a tuple of pairs
        rather than a list."""

    @property
    def remaining(self) -> int:
        """Records not read yet (0 after an error)."""

    def read(self, n: int) -> List[Any]:
        """The next (up to) ``n`` records; CorruptRecordError otherwise."""

    def read_into(self, out: List[Any], n: int) -> int:
        """``read(n)``'s records appended to ``out`` (none when it raises),
        possibly untracked by the garbage collector until
        ``track_records(out, start)``; returns how many."""


class PartitionReader(Protocol):
    """Every batch of one partition's fetched records, walked for the
    consumer (see ``kchannel.protocol.records._records_py``)."""

    def __init__(self, buf: bytes, cls: type, topic: str, partition: int,
                 check_crcs: bool = True, read_committed: bool = False,
                 tuple_headers: bool = False) -> None: ...

    @property
    def position(self) -> int:
        """The position reached by the last ``read_into``: past its last
        record, or, when it reached the end of the records, the next offset
        of the last whole plain batch if further (Kafka's nextFetchOffset)."""

    @property
    def special(self) -> Optional[Tuple[int, int]]:
        """The span in ``buffer`` of a batch left to the caller, else None."""

    @property
    def buffer(self) -> Any:
        """The records (bytes, or a memoryview of bytes)."""

    def read_into(self, out: List[Any], n: int, position: int) -> int:
        """Up to ``n`` records at ``position`` and after appended to ``out``
        (possibly untracked until ``track_records``); returns how many."""


class QueuedRecord(Protocol):
    """A record waiting in a producer batch (read-only fields; unpacks as
    ``(timestamp, key, value, headers)``)."""

    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Tuple[Header, ...]

    def __init__(self, timestamp: int, key: Optional[bytes], value: Optional[bytes],
                 headers: Tuple[Header, ...]) -> None: ...


class RecordsModule(Protocol):
    RecordReader: type[RecordReader]
    PartitionReader: type[PartitionReader]
    QueuedRecord: type[QueuedRecord]

    def crc32c(self, data: bytes, crc: int = 0) -> int:
        """CRC-32C (Castagnoli) of ``data``, continuing from ``crc``."""

    def encode_records(self, records: Iterable[Tuple[int, Optional[bytes], Optional[bytes],
                                                     Iterable[Header]]],
                       base_timestamp: int) -> bytes:
        """The records section of an uncompressed v2 batch."""

    def encode_plain_batch(self, records: List[Tuple[int, Optional[bytes], Optional[bytes],
                                                    Iterable[Header]]],
                           attributes: int, producer_id: int, producer_epoch: int,
                           base_sequence: int, base_offset: int = 0,
                           partition_leader_epoch: int = -1,
                           max_timestamp: Optional[int] = None, size_hint: int = 0) -> bytes:
        """One whole uncompressed magic v2 batch (header, CRC-32C, records)
        of non-empty ``records``; ``size_hint`` only sizes a buffer."""

    def decode_records(self, buf: bytes, count: int, base_offset: int, base_timestamp: int,
                       log_append_time: Optional[int]
                       ) -> List[Tuple[int, int, Optional[bytes], Optional[bytes],
                                       List[Header]]]:
        """The ``count`` records of ``buf``; CorruptRecordError otherwise."""

    def make_records(self, cls: type, records: List[Any], start: int, stop: int, topic: str,
                     partition: int, timestamp_type: str) -> List[Any]:
        """``cls(topic, partition, offset, timestamp, timestamp_type, key,
        value, headers, None)`` per decoded record of records[start:stop]."""

    def track_records(self, records: List[Any], start: int = 0) -> None:
        """Tracks ``records[start:]`` that ``RecordReader.read_into`` left
        untracked by the garbage collector (the pure twin: nothing to do)."""


# ---------------------------------------------------------------------------
# partitioner: kchannel.producer._partitioner_py / kchannel._cpartitioner
# ---------------------------------------------------------------------------
class PartitionerModule(Protocol):
    """Kafka's murmur2 key hash and the default partitioner's choice."""

    def murmur2(self, data: bytes) -> int:
        """``Utils.murmur2``: a signed 32-bit int."""

    def partition_for_key(self, key: bytes, num_partitions: int) -> int:
        """``toPositive(murmur2(key)) % num_partitions``; ValueError if
        ``num_partitions`` is not positive."""


# ---------------------------------------------------------------------------
# appender: kchannel.producer._appender_py / kchannel._cappender
# ---------------------------------------------------------------------------
class Appender(Protocol):
    """The producer's per-record path: ``send`` has ``Producer.send``'s
    signature; it uses only the producer's ``AppendPath`` (``path``), and
    records it does not take go to ``path.send_slow``."""

    def __init__(self, path: Any) -> None: ...

    def send(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
             headers: Any = None, partition: Optional[int] = None,
             timestamp_ms: Optional[int] = None, callback: Any = None) -> Any:
        """Append one record; its ``FutureRecordMetadata``."""


class AppenderModule(Protocol):
    Appender: type[Appender]

    def track_batch(self, batch: Any) -> None:
        """Put a batch back on the garbage collector's lists (the compiled
        twin takes a batch opened without a callback off them) before a
        callback or a done callback is attached to it."""

    def run_callbacks(self, callbacks: list, topic: str, partition: int, base_offset: int,
                      log_append_time: int, records: list, sizes: list) -> None:
        """The callbacks of an acknowledged batch (by record index, None for
        a record without one), in
        record order, each with its record's ``RecordMetadata``; one that
        raises is logged and the next ones still run."""


# ---------------------------------------------------------------------------
# senderloop: kchannel.producer._senderloop_py / kchannel.producer._csenderloop
# (the same .py compiled)
# ---------------------------------------------------------------------------
class SenderLoop(Protocol):
    """The per-pass and per-request path of the producer's ``Sender`` (its
    base class; ``Sender.__init__`` sets the state up)."""

    client: Any
    accumulator: Any
    metadata: Any
    time: Callable[[], int]
    acks: int
    max_request_size: int
    request_timeout_ms: int
    max_in_flight: int
    idempotent: bool
    compression: Any
    guarantee_order: bool
    running: bool
    force_close: bool
    fatal_error: Optional[BaseException]
    sequences: Any
    in_flight: Any
    retrying: Any
    sensors: Any
    txn: Any
    transactional_id: Optional[str]

    def __init__(self) -> None: ...

    def response_decoder(self, version: int, generic: Any) -> Any:
        """The ProduceResponse decoder the Sender registers: this twin's
        ``produce_response_decoder(version, generic)``."""

    def run_once(self) -> None:
        """One pass of the network thread: send what is ready, poll."""

    def send_producer_data(self, now: int) -> int:
        """Drain ready batches into Produce requests; the poll timeout (ms)."""


class AccumulatorState(Protocol):
    """The base class of ``RecordAccumulator``: the state its Sender side
    reads per pass and per request (``RecordAccumulator.__init__`` sets it
    up)."""

    batches: dict
    lock: Any
    memory: Any
    muted: set
    linger_ms: int
    batch_size: int
    delivery_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    flushes_in_progress: int
    expiry_due: bool

    def __init__(self) -> None: ...


class BatchState(Protocol):
    """The base class of ``ProducerBatch``: the fields only the Sender's
    side uses per request (``ProducerBatch.__init__`` sets them)."""

    encoded: Any
    producer_id: int
    producer_epoch: int
    base_sequence: int
    attempts: int
    event: Any
    done_callbacks: Any
    parent: Any
    retry: bool

    def __init__(self) -> None: ...


class SequenceState(Protocol):
    """The base class of ``ProducerSequences`` (an idempotent producer's
    books): its fields and the per-batch methods the Sender calls."""

    producer_id: int
    producer_epoch: int
    bump_partitions: set
    first_sequence_checked: bool

    def __init__(self) -> None: ...

    def assign(self, tp: Any, batch: Any, in_flight: Any) -> bool:
        """Give a new batch its producer id, epoch and sequence; False when
        it must wait."""

    def first_unacked(self, tp: Any, in_flight: Any) -> bool:
        """Whether a batch of ``tp`` must wait for the epoch's first batch
        to be acknowledged."""

    def acked(self, batch: Any) -> None:
        """A batch was written: its last sequence is acknowledged."""


class ProduceResult(Protocol):
    """The producer's usual ProduceResponse (one topic, one partition, no
    record errors, no message, no tagged fields) as its fields."""

    version: int
    name: str
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    throttle_time_ms: int

    def __init__(self, version: int, name: str, index: int, error_code: int, base_offset: int,
                 log_append_time_ms: int, log_start_offset: int,
                 throttle_time_ms: int) -> None: ...

    def as_body(self) -> dict:
        """The schema codec's dict of the same response."""


class ProduceResponseDecoder(Protocol):
    """``decoder(payload) -> body`` of ProduceResponse ``version`` (3 to
    12): a ``ProduceResult`` for the producer's usual response, read
    directly; the schema codec's dict (``generic``'s) for any other."""

    version: int
    generic: Callable[[Any], dict]

    def __init__(self, version: int, generic: Callable[[Any], dict]) -> None: ...

    def __call__(self, payload: Any) -> Any: ...


class SenderloopModule(Protocol):
    SenderLoop: type[SenderLoop]
    AccumulatorState: type[AccumulatorState]
    BatchState: type[BatchState]
    SequenceState: type[SequenceState]
    ProduceResponseDecoder: type[ProduceResponseDecoder]
    ProduceResult: type[ProduceResult]

    def produce_response_decoder(self, version: int,
                                 generic: Callable[[Any], dict]) -> Callable[[Any], Any]:
        """The Produce response decoder the Sender registers with its client
        (a ``ProduceResponseDecoder``, or ``generic`` for other versions)."""

    def accumulator_ready(self, acc: Any, cluster: Any, now: int) -> Tuple[set, int, set]:
        """``RecordAccumulator.ready``."""

    def accumulator_drain(self, acc: Any, cluster: Any, nodes: Any, max_size: int, now: int,
                          can_drain: Optional[Callable[[Any, Any], bool]]) -> dict:
        """``RecordAccumulator.drain``; ``can_drain``: None, a callable
        ``(tp, batch) -> bool``, or a ``SenderLoop`` (its ``_can_drain``)."""

    def accumulator_complete_batch(self, acc: Any, batch: Any, base_offset: Optional[int],
                                   log_append_time: Optional[int]) -> None:
        """``RecordAccumulator.complete_batch``: ``batch.complete`` and then
        ``acc.deallocate(batch)``."""

    def accumulator_deallocate(self, acc: Any, batch: Any) -> None:
        """``RecordAccumulator.deallocate``: the batch's memory back."""

    def produce_request_parts(self, version: int, transactional_id: Optional[str], acks: int,
                              timeout_ms: int, topics: dict) -> tuple:
        """A ProduceRequest body as a tuple of parts."""

    def produce_request_parts_one(self, version: int, transactional_id: Optional[str],
                                  acks: int, timeout_ms: int, topic: str, partition: int,
                                  records: Any) -> tuple:
        """``produce_request_parts`` for one partition of one topic."""

    def encode_produce_request(self, version: int, transactional_id: Optional[str], acks: int,
                               timeout_ms: int, topics: dict) -> bytes:
        """A ProduceRequest body."""

    def encode_produce_request_one(self, version: int, transactional_id: Optional[str],
                                   acks: int, timeout_ms: int, topic: str, partition: int,
                                   records: Any) -> bytes:
        """``encode_produce_request`` for one partition of one topic."""


# ---------------------------------------------------------------------------
# looppass: kchannel.aio._looppass_py / kchannel.aio._clooppass (the same .py compiled)
# ---------------------------------------------------------------------------
class LooppassModule(Protocol):
    """``kchannel.aio._loop.LoopSelector``'s ``select`` and ``_event``
    (``on_event``), taken as its methods (``sel``: the selector), and the
    helpers ``_loop`` shares with them."""

    def select(self, sel: Any, timeout: Optional[float] = None) -> list:
        """The (key, events) pairs the loop reported since the last call;
        waits on the loop in a bridged greenlet with nothing to report."""

    def on_event(self, sel: Any, fd: int, mask: int) -> None:
        """The loop's reader/writer callback for ``fd``."""

    def wake_after(self, sel: Any, waiter: Any, timeout: Optional[float]) -> None:
        """Ends ``waiter`` after ``timeout`` s with the selector's one timer."""

    def done(self, fut: Any) -> None:
        """Sets ``fut``'s result (None) unless it is done."""


# ---------------------------------------------------------------------------
# aiosend: kchannel.aio._aiosend_py / kchannel._caiosend
# ---------------------------------------------------------------------------
class SendBase(Protocol):
    """AIOProducer's base class, holding its ``send``."""

    def __init__(self) -> None: ...

    def send(self, /, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
             headers: Any = None) -> Any:
        """``AIOProducer.send``: an awaitable (a coroutine for asyncio) of
        the record's ``FutureRecordMetadata``."""


class AiosendModule(Protocol):
    """(Both raise and catch the pure twin's ``_MetadataNeeded``.)"""

    SendBase: type[SendBase]

    def send(self, producer: Any, topic: str, value: Optional[bytes] = None,
             key: Optional[bytes] = None, partition: Optional[int] = None,
             timestamp_ms: Optional[int] = None, headers: Any = None) -> Any:
        """``AIOProducer.send`` (the method): an awaitable (a coroutine
        for asyncio) of the record's ``FutureRecordMetadata``."""

    def future_await(self, future: Any) -> Any:
        """``FutureRecordMetadata.__await__``: the iterator an await of
        ``future`` runs, ending with its RecordMetadata or its error."""

    def send_method(self, cls: type) -> Any:
        """``SendBase.send`` to be set as ``cls``'s ``send`` (``cls`` a
        subclass of SendBase; TypeError otherwise): the compiled twin's is
        its C function's method descriptor made for ``cls``."""

    def bind_send(self, producer: Any) -> Any:
        """Once, from ``AIOProducer.__init__``: a SendBase's ``send`` made
        ready to read ``producer``'s parts (the compiled twin fills its C
        fields), None; any other producer's ``send`` bound once (the
        compiled twin), or None where ``send(producer, ...)`` is as good
        (the pure twin)."""

    def install_await(self) -> None:
        """Install ``future_await`` as every FutureRecordMetadata's await
        (the compiled twin; the pure twin leaves the method's own)."""


# ---------------------------------------------------------------------------
# metrics: kchannel._metrics_py / kchannel._cmetrics (the same .py compiled)
# ---------------------------------------------------------------------------
class Sample(Protocol):
    """One window of a sampled stat: ``start`` (ms), ``value``, ``count``."""

    start: float
    value: float
    count: int

    def __init__(self, start: float, value: float, count: int = 0) -> None: ...

    def __repr__(self) -> str: ...

    def __eq__(self, other: Any) -> bool: ...


class Stat(Protocol):
    """What a sensor records into."""

    def __init__(self) -> None: ...

    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class Rate(Protocol):
    config: Any
    count: bool
    per_ns: bool

    def __init__(self, config: Any = None, count: bool = False,
                 per_ns: bool = False) -> None: ...

    @staticmethod
    def view_of(stat: Any, count: bool = False, per_ns: bool = False) -> "Rate":
        """A Rate measured from ``stat``'s samples, never recorded itself."""
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class Avg(Protocol):
    config: Any

    def __init__(self, config: Any = None) -> None: ...
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class Max(Protocol):
    config: Any

    def __init__(self, config: Any = None) -> None: ...
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class CumulativeSum(Protocol):
    total: float

    def __init__(self, initial: float = 0.0) -> None: ...
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class CumulativeSumCount(Protocol):
    total: float
    count: int

    def __init__(self, initial: float = 0.0) -> None: ...

    def count_view(self) -> Any:
        """The CumulativeCount of the same records."""
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class CumulativeCount(Protocol):
    total: float

    def __init__(self, initial: float = 0.0) -> None: ...
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class Value(Protocol):
    value: float

    def __init__(self) -> None: ...
    def record(self, value: float, now: float) -> None:
        """One value at ``now`` (ms)."""

    def record_many(self, values: Any, now: float) -> None:
        """``record(v, now)`` for each of ``values``, in order."""

    def measure(self, now: float) -> float:
        """The metric's value at ``now``."""


class Sensor(Protocol):
    """Records a value into every stat added to it, then into its parents."""

    registry: Any
    name: str
    parents: list

    def __init__(self, registry: Any, name: str, parents: Any = ()) -> None: ...

    def add(self, metric_name: Any, stat: Any) -> "Sensor":
        """Register ``stat`` under ``metric_name`` and record into it."""

    def add_view(self, metric_name: Any, stat: Any) -> "Sensor":
        """Register ``stat`` under ``metric_name`` without recording into it."""

    def add_meter(self, group: str, base: str, description: str = "", tags: Any = None,
                  count: bool = False) -> "Sensor":
        """Kafka's Meter: ``<base>-rate`` and ``<base>-total``."""

    def recorders(self) -> list:
        """The bound ``record`` of every stat (the live list)."""

    def record(self, value: float = 1.0, now: Optional[float] = None) -> None:
        """``value`` into every stat, then into the parents."""

    def record_many(self, values: Any, now: Optional[float] = None) -> None:
        """``record(v, now)`` for each of ``values``."""


class MetricsModule(Protocol):
    Sample: type[Sample]
    Stat: type[Stat]
    Rate: type[Rate]
    Avg: type[Avg]
    Max: type[Max]
    CumulativeSum: type[CumulativeSum]
    CumulativeSumCount: type[CumulativeSumCount]
    CumulativeCount: type[CumulativeCount]
    Value: type[Value]
    Sensor: type[Sensor]

    def one_by_one(self, stat: Any) -> Callable[[Any, float], None]:
        """A ``record_many(values, now)`` recording each value into ``stat``."""


# Twin name (as in kchannel._impl.TWINS) -> its module protocol.
CONTRACTS = {
    "framing": FramingModule,
    "wire": WireModule,
    "tlspump": TlsPumpModule,
    "netloop": NetloopModule,
    "sendqueue": SendqueueModule,
    "netpass": NetpassModule,
    "clientloop": ClientloopModule,
    "scram": ScramModule,
    "records": RecordsModule,
    "partitioner": PartitionerModule,
    "appender": AppenderModule,
    "senderloop": SenderloopModule,
    "aiosend": AiosendModule,
    "looppass": LooppassModule,
    "metrics": MetricsModule,
}
