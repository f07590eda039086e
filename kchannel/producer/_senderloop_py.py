"""The per-request hot path of the producer's :class:`Sender` (its network
thread) and of the :class:`RecordAccumulator`'s Sender side.

``Sender`` derives from :class:`SenderLoop`, which holds what runs for
every pass of the network thread and every Produce request: ``run_once``,
``send_producer_data`` (the ready scan, the drain, the requests), the
drain's per-partition checks (``_can_drain``), the encoding of a request
(``_send_produce_request``), the handling of its response and the
completion of its batches.  ``RecordAccumulator.ready`` and ``.drain`` are
:func:`accumulator_ready` and :func:`accumulator_drain` here.  The
Produce request body (``produce_request_parts``) is built here too.  The
rest (retries, splitting, idempotence and transactions, shutdown) stays
in ``sender.py`` and is called through ``self``.

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel.producer._csenderloop``, where
``_csenderloop.pxd`` makes :class:`SenderLoop` an extension type whose
per-request state (client, accumulator, in-flight map, settings) are C
fields.  Pure Python runs the same code with ``__slots__``.
"""
import functools
import struct
import time as _time

from .. import errors
from ..client import RequestTimeoutError
from ..client.connection_state import ConnectionState
from ..log import get_logger
from ..protocol import messages
from ..protocol.errors import Errors, exception_for
from ..protocol.records import CompressionType, encode_batch
from ..protocol.records.batch import encode_plain_batch
from ..protocol.wire import encode_unsigned_varint
from ..utils import now_ms
from ._done_lock import DONE_LOCK

# The Sender's logger: these methods are the Sender's.
log = get_logger("kchannel.producer.sender")
# (the accumulator's, for accumulator_complete_batch)
_accumulator_log = get_logger("kchannel.producer.accumulator")

__all__ = ["SenderLoop", "AccumulatorState", "accumulator_ready", "accumulator_drain", "accumulator_complete_batch",
           "BatchState",
           "accumulator_deallocate",
           "produce_request_parts",
           "produce_request_parts_one", "encode_produce_request",
           "encode_produce_request_one", "ProduceResponseDecoder", "ProduceResult",
           "produce_response_decoder", "SequenceState"]

_PRODUCE = messages.PRODUCE.api_key
_NONE = CompressionType.NONE
_NO_ERROR = Errors.NONE
_DUPLICATE_SEQUENCE_NUMBER = Errors.DUPLICATE_SEQUENCE_NUMBER
_MESSAGE_TOO_LARGE = Errors.MESSAGE_TOO_LARGE
_UNKNOWN_SERVER_ERROR = Errors.UNKNOWN_SERVER_ERROR
_NEVER = 2 ** 31 - 1
_READY = ConnectionState.READY
# accumulator_ready's "no topic without a leader" (its callers only read it)
_NO_TOPICS = frozenset()

# Attributes bit of a transactional batch (Kafka's RecordBatch).
_TRANSACTIONAL = 0x10
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I32 = struct.Struct(">ii")
# A partition response's fixed fields: index, error code, base offset, log
# append time, log start offset (ProduceResponse v5+).
_PARTITION_V5 = struct.Struct(">ihqqq")
_PARTITION_V2 = struct.Struct(">ihqq")
# (v9+: the fixed fields, the four bytes checked one by one after them, and
# the throttle time, in one call)
_PARTITION_V9_THROTTLE = struct.Struct(">ihqqq4xi")
_FLEXIBLE_PRODUCE = 9       # ProduceRequest's first flexible version
# The ProduceResponse versions ProduceResponseDecoder reads (v12's response
# is v11's).
_FIRST_FAST_PRODUCE = 3
# The compiled twin reads a response's big-endian integers and compares its
# topic name in place (_c_be16/32/64, _c_same: see _csenderloop.pxd), not
# through Struct.unpack_from and a slice (~1,400 and ~550 instructions per
# response).  The pure twin never reads those names.
_C_READ = __name__.endswith("._csenderloop")
_LAST_FAST_PRODUCE = 12
_BYTE = [bytes((i,)) for i in range(0x80)]
_wall_time = _time.time
# The locks are taken with acquire() and release() in a try statement, not
# a with statement: compiled, a with statement looks its __enter__ and
# __exit__ up and calls __exit__ with three arguments, ~1,000 instructions
# per use more (several uses per Produce request).
_done_acquire = DONE_LOCK.acquire
_done_release = DONE_LOCK.release
# The compiled twin on CPython 3.11 takes a free lock and releases it in C
# (_c_lock_try_acquire and _c_lock_release, see _csenderloop.pxd) instead of
# calling acquire() and release(): five pairs per Produce request, ~150-870
# instructions each call.  A held lock is waited for by acquire() as before.
# The pure twin never reads those names: _C_LOCKS stays False there.
_LockType = type(DONE_LOCK)
_C_LOCKS = False
if __name__.endswith("._csenderloop"):
    _C_LOCKS = _c_lock_readable()


# -- the Produce request body ---------------------------------------------------
@functools.lru_cache(maxsize=256)
def _produce_head(version, transactional_id, acks, timeout_ms):
    """The fields before the topics, the same for every request of a
    producer."""
    flexible = version >= _FLEXIBLE_PRODUCE
    if transactional_id is None:
        head = b"\x00" if flexible else b"\xff\xff"
    else:
        tid = transactional_id.encode("utf-8")
        head = (encode_unsigned_varint(len(tid) + 1) if flexible else _I16.pack(len(tid))) + tid
    return head + _ACKS_TIMEOUT.pack(acks, timeout_ms)


@functools.lru_cache(maxsize=1024)
def _string(name, flexible):
    raw = name.encode("utf-8")
    return (encode_unsigned_varint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


@functools.lru_cache(maxsize=256)
def _one_partition_head(version, transactional_id, acks, timeout_ms, topic):
    """Everything before the partition index of a request for one
    partition of one topic."""
    flexible = version >= _FLEXIBLE_PRODUCE
    one = b"\x02" if flexible else b"\x00\x00\x00\x01"       # an array of 1
    return (_produce_head(version, transactional_id, acks, timeout_ms) + one
            + _string(topic, flexible) + one)


def produce_request_parts_one(version, transactional_id, acks, timeout_ms, topic, partition,
                              records):
    """The body of a ProduceRequest for one partition of one topic (a
    producer's request per batch to a single-partition leader) as a tuple of
    parts, ``records`` among them as it is: the request encoder joins them
    behind the header in one copy (see ``request_encoder``).  The fields
    before the partition come from a cache."""
    return _one_partition_parts(
        version, _one_partition_head(version, transactional_id, acks, timeout_ms, topic),
        partition, records)


def _one_partition_parts(version, head, partition, records):
    """produce_request_parts_one's parts after ``head`` (its
    _one_partition_head)."""
    if version >= _FLEXIBLE_PRODUCE:
        n = len(records) + 1
        size = encode_unsigned_varint(n) if n >= 0x80 else _BYTE[n]
        # records, the partition's, topic's and request's tagged fields
        return (head, _I32.pack(partition) + size, records, b"\x00\x00\x00")
    return (head, _I32_I32.pack(partition, len(records)), records)


def _one_partition_records(version, head, records):
    """_one_partition_parts' parts with the partition index at the end of
    ``head`` (the same bytes joined)."""
    if version >= _FLEXIBLE_PRODUCE:
        n = len(records) + 1
        size = encode_unsigned_varint(n) if n >= 0x80 else _BYTE[n]
        return (head, size, records, b"\x00\x00\x00")
    return (head, _I32.pack(len(records)), records)


def encode_produce_request_one(version, transactional_id, acks, timeout_ms, topic, partition,
                               records):
    """``encode_produce_request`` for one partition of one topic."""
    return b"".join(produce_request_parts_one(version, transactional_id, acks, timeout_ms,
                                              topic, partition, records))


def encode_produce_request(version, transactional_id, acks, timeout_ms, topics):
    """The body of a ProduceRequest (v3 to v12) as the schema codec writes
    it, built directly from ``topics`` ({name: [(partition, records
    bytes)]}): a request per batch sent is on the producer's hot path, and
    the generic codec's walk over dicts cost more than the few fields it
    has (tests/producer check the bytes against the codec's)."""
    return b"".join(produce_request_parts(version, transactional_id, acks, timeout_ms, topics))


def produce_request_parts(version, transactional_id, acks, timeout_ms, topics):
    """``encode_produce_request`` as a tuple of parts (the records as they
    are), for the request encoder to join behind the header in one copy."""
    if len(topics) == 1:
        for name, partitions in topics.items():
            if len(partitions) == 1:
                index, records = partitions[0]
                return produce_request_parts_one(version, transactional_id, acks,
                                                 timeout_ms, name, index, records)
    flexible = version >= _FLEXIBLE_PRODUCE
    out = [_produce_head(version, transactional_id, acks, timeout_ms),
           encode_unsigned_varint(len(topics) + 1) if flexible else _I32.pack(len(topics))]
    for name, partitions in topics.items():
        out.append(_string(name, flexible))
        out.append(encode_unsigned_varint(len(partitions) + 1) if flexible
                   else _I32.pack(len(partitions)))
        for index, records in partitions:
            if flexible:
                # index, records' compact length, records, tagged fields
                out.append(_I32.pack(index) + encode_unsigned_varint(len(records) + 1))
                out.append(records)
                out.append(b"\x00")
            else:
                out.append(_I32_I32.pack(index, len(records)))
                out.append(records)
        if flexible:
            out.append(b"\x00")           # the topic's tagged fields
    if flexible:
        out.append(b"\x00")               # the request's tagged fields
    return tuple(out)


# -- the Produce response ---------------------------------------------------------
class ProduceResult:
    """The producer's usual ProduceResponse (one topic, one partition, no
    record errors, no error message, no current leader, no node endpoints,
    no tagged fields) as its fields, what :class:`ProduceResponseDecoder`
    returns for it instead of the codec's dict tree: building that tree,
    freeing it and reading it back cost the Sender ~8 k instructions per
    request, this object a fraction of it.  ``as_body()`` gives the codec's
    dict (tests/producer compare both, field by field, for every
    version)."""

    __slots__ = ("version", "name", "index", "error_code", "base_offset", "log_append_time_ms",
                 "log_start_offset", "throttle_time_ms")

    def __init__(self, version, name, index, error_code, base_offset, log_append_time_ms,
                 log_start_offset, throttle_time_ms):
        # (the decoder sets the fields of a __new__ instance: no call with
        # eight arguments per response)
        self.version = version
        self.name = name
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.throttle_time_ms = throttle_time_ms

    def as_body(self):
        """The dict the schema codec decodes for this response."""
        partition, body = _templates(self.version)
        partition["index"] = self.index
        partition["error_code"] = self.error_code
        partition["base_offset"] = self.base_offset
        partition["log_append_time_ms"] = self.log_append_time_ms
        if self.version >= 5:
            partition["log_start_offset"] = self.log_start_offset
        if self.version >= 8:
            partition["record_errors"] = []
        body["responses"] = [{"name": self.name, "partition_responses": [partition]}]
        body["throttle_time_ms"] = self.throttle_time_ms
        if self.version >= 10:
            body["node_endpoints"] = []
        return body

    def __repr__(self):
        return f"ProduceResult({self.as_body()!r})"


class ProduceResponseDecoder:
    """``payload -> body`` for ProduceResponse ``version`` (3 to 12): a
    :class:`ProduceResult` when the response is the producer's usual one
    (one topic, one partition, no record errors, no error message, no
    tagged fields), read directly; any other response goes to ``generic``
    (the schema codec's decoder, the correlation id included in
    ``payload``), whose dict it returns.  A response per batch sent is on
    the producer's hot path: the schema codec's generated walk cost more
    than the sender's own work per request, and its dict tree more than
    the Sender reads of it (tests/producer compare both forms with the
    codec's dict for every version)."""

    __slots__ = ("version", "generic", "_name_raw", "_name")

    def __init__(self, version, generic):
        self.version = version
        self.generic = generic
        # The last topic name read, as bytes and str (a producer's
        # responses name the same topic again and again).
        self._name_raw = None
        self._name = None

    def __call__(self, payload):
        body = self._fast(payload)
        if body is None:
            return self.generic(payload)
        return body

    def _fast(self, payload):
        # A receive is a read-only memoryview of the receive buffer: its
        # slices and comparisons cost more than one copy of these ~60 bytes.
        # (``data``: bytes, whose items the compiled twin reads as C values;
        # see _csenderloop.pxd)
        data = payload if type(payload) is bytes else bytes(payload)
        version = self.version
        n = len(data)
        if version >= _FLEXIBLE_PRODUCE:
            # header's tagged fields (empty), one topic
            if n < 8 or data[4] != 0 or data[5] != 2:
                return None
            size = data[6]            # compact string: length + 1
            if size == 0 or size >= 0x80:
                return None
            pos = 6 + size
            # one partition; fixed fields; no record errors (compact array
            # of 0), null message, no tagged fields; topic's tagged fields;
            # throttle time; the response's tagged fields: the end
            if n != pos + 1 + 30 + 3 + 1 + 4 + 1 or data[pos] != 2 or \
                    data[pos + 31] != 1 or data[pos + 32] != 0 or \
                    data[pos + 33] != 0 or data[pos + 34] != 0 or data[n - 1] != 0:
                return None
            if _C_READ:
                index = _c_be32(data, pos + 1)
                code = _c_be16(data, pos + 5)
                base = _c_be64(data, pos + 7)
                append_time = _c_be64(data, pos + 15)
                start = _c_be64(data, pos + 23)
                throttle = _c_be32(data, pos + 35)
                if _c_same(data, 7, pos, self._name_raw):
                    raw = self._name_raw
                else:
                    raw = data[7:pos]
            else:
                raw = data[7:pos]
                index, code, base, append_time, start, throttle = \
                    _PARTITION_V9_THROTTLE.unpack_from(data, pos + 1)
        else:
            if n < 10 or data[4:8] != b"\x00\x00\x00\x01":
                return None
            size = (data[8] << 8) | data[9]
            if size >= 0x8000:
                return None
            pos = 10 + size
            raw = data[10:pos]
            fixed = 30 if version >= 5 else 22
            extra = 6 if version >= 8 else 0        # empty record errors, null message
            if n != pos + 4 + fixed + extra + 4 or data[pos:pos + 4] != b"\x00\x00\x00\x01":
                return None
            if version >= 5:
                index, code, base, append_time, start = _PARTITION_V5.unpack_from(data,
                                                                                   pos + 4)
            else:
                index, code, base, append_time = _PARTITION_V2.unpack_from(data, pos + 4)
                start = -1
            if extra and data[pos + 4 + fixed:pos + 4 + fixed + 6] != \
                    b"\x00\x00\x00\x00\xff\xff":
                return None
            throttle = _I32.unpack_from(data, n - 4)[0]
        if raw is not self._name_raw and raw != self._name_raw:
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
            self._name_raw = raw
            self._name = name
        result = ProduceResult.__new__(ProduceResult)
        result.version = version
        result.name = self._name
        result.index = index
        result.error_code = code
        result.base_offset = base
        result.log_append_time_ms = append_time
        result.log_start_offset = start
        result.throttle_time_ms = throttle
        return result


def _templates(version):
    """The partition response's and the response's dicts as the codec
    decodes them for ``version`` (3 to 12), keys in its order, values to
    be set."""
    partition = {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1}
    if version >= 5:
        partition["log_start_offset"] = -1
    if version >= 8:
        partition["record_errors"] = None
        partition["error_message"] = None
    if version >= 10:
        partition["current_leader"] = None
    body = {"responses": None, "throttle_time_ms": 0}
    if version >= 10:
        body["node_endpoints"] = None
    return partition, body


def produce_response_decoder(version, generic):
    """The decoder of ProduceResponse ``version`` the Sender registers with
    its client (``NetworkClient.add_response_decoder``): a
    :class:`ProduceResponseDecoder` for the versions whose layout it reads
    (3 to 12), ``generic`` itself for any other."""
    if _FIRST_FAST_PRODUCE <= version <= _LAST_FAST_PRODUCE:
        return ProduceResponseDecoder(version, generic)
    return generic


# -- the accumulator's Sender side ------------------------------------------------
class AccumulatorState:
    """The base class of :class:`RecordAccumulator`: the state the Sender's
    side (``accumulator_ready``, ``accumulator_drain``,
    ``accumulator_deallocate``, ``SenderLoop``) reads per pass and per
    request, C fields of the compiled twin (``_csenderloop.pxd``): a read
    there is a load instead of a generic attribute lookup (~200
    instructions each, ~20 per Produce request).  ``RecordAccumulator``
    sets them; the attributes the application thread's appender reads from
    the accumulator's ``__dict__`` (``closed``, ``wakeup_needed``,
    ``used_memory``, ``buffer_memory``, ``waiters``, ``on_new_batch``,
    ``incomplete``: see ``kchannel._cappender``) stay instance attributes;
    ``_instance_dict`` is that ``__dict__`` itself, for the Sender side's
    reads and writes of them (a dict item each, no generic lookup);
    ``_lock_acquire`` and ``_lock_release`` are ``lock``'s bound methods
    (the lock is never replaced)."""

    __slots__ = ("__dict__", "__weakref__",
                 "batches", "lock", "memory", "muted", "linger_ms", "batch_size",
                 "delivery_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms",
                 "flushes_in_progress", "_drain_index", "_memory_waiters", "expiry_due",
                 "_instance_dict", "_lock_acquire", "_lock_release",
                 "_scan", "_scan_leaders", "_scan_size")

    def __init__(self):
        # (RecordAccumulator.__init__ sets the state up; nothing to do here)
        pass




class BatchState:
    """The base class of :class:`ProducerBatch`: the fields only the
    Sender's side reads and writes per Produce request (the encoded bytes,
    the producer id, epoch and base sequence it is encoded with, the
    attempts, and what completing it reads: the event, the done callbacks,
    the split parent), C fields of the compiled twin (``_csenderloop.pxd``):
    ~15 generic attribute accesses on the batch per request (~150-300
    instructions each) become loads and stores.  The fields the appender
    twins fill or read at their slot offsets (``kchannel._cappender``,
    ``kchannel._caiosend``) stay ``ProducerBatch``'s own ``__slots__``.
    ``ProducerBatch.__init__`` sets every field; the compiled twin's
    ``__cinit__`` gives the same values to a batch made without it (the
    compiled appender's, by the type's ``tp_new``)."""

    __slots__ = ("encoded", "producer_id", "producer_epoch", "base_sequence", "attempts",
                 "event", "done_callbacks", "parent", "retry")

    def __init__(self):
        # (ProducerBatch.__init__ sets the fields; nothing to do here)
        pass

    def __cinit__(self, *args, **kwargs):
        # (compiled twin only: pure Python never calls it)
        self.encoded = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.attempts = 0
        self.event = None
        self.done_callbacks = None
        self.parent = None
        self.retry = False


class SequenceState:
    """The base class of :class:`kchannel.producer.idempotence.ProducerSequences`:
    its books (producer id and epoch, per partition the next sequence, the
    last acknowledged one and the (producer id, epoch) its sequences count
    under, the partitions waiting for an epoch bump) and the three methods
    the Sender calls per batch (``assign`` in the drain, ``acked`` per
    acknowledged batch, ``first_unacked``).  Here, not in ``idempotence``,
    to be compiled: the compiled twin holds the books in C fields and the
    Sender calls the methods as C calls: ~1,900 instructions each per
    Produce request where the interpreted methods cost ~4,400 (callgrind,
    an idempotent producer's request of 15 1 KiB records; idempotence is
    the default).  The rest of the bookkeeping (epoch bumps, producer id
    changes) stays in ``ProducerSequences``, which reads and writes the
    same fields as attributes."""

    __slots__ = ("producer_id", "producer_epoch", "_next", "_last_acked", "_started",
                 "bump_partitions", "first_sequence_checked")

    def __init__(self):
        self.producer_id = -1
        self.producer_epoch = -1
        self._next = {}           # tp -> next sequence to assign
        self._last_acked = {}     # tp -> last acknowledged sequence
        self._started = {}        # tp -> (producer id, epoch) its sequences count under
        self.bump_partitions = set()  # partitions waiting for an epoch bump
        # Set by the transaction manager for a transaction under transaction
        # version 2: the broker verifies each partition's first batch of the
        # transaction and refuses one that does not start at sequence 0 even
        # where it holds no state for the producer (Kafka 4's
        # ProducerAppendInfo.checkSequence), so no batch need wait.
        self.first_sequence_checked = False

    def assign(self, tp, batch, in_flight):
        """Give a new batch its producer id, epoch and sequence; False when
        it must wait: its partition's sequences count under an older epoch
        and batches of that epoch are still in flight (Java's
        ``shouldStopDrainBatchesForPartition``), or a bump is pending."""
        # (an empty set is not searched: a TopicPartition's hash is
        # computed per lookup)
        if self.bump_partitions and tp in self.bump_partitions:
            return False
        producer_id = self.producer_id
        producer_epoch = self.producer_epoch
        started = self._started.get(tp)
        # (started != (producer_id, producer_epoch), without the tuple per
        # batch: ``started`` is None or such a pair)
        if started is None or started[0] != producer_id or started[1] != producer_epoch:
            if in_flight:
                return False
            self._started[tp] = (producer_id, producer_epoch)
            self._next[tp] = 0
            if started is not None and started[0] == producer_id and \
                    tp in self._last_acked:
                # The broker holds this producer's state for the partition
                # (a batch of an earlier epoch was written): it takes a new
                # epoch only from sequence 0, so the epoch's batches may go
                # together (-1: nothing acknowledged yet in this epoch).
                # Every transaction under transaction version 2 starts an
                # epoch; its first batch going alone cost a round trip each.
                self._last_acked[tp] = -1
            else:
                self._last_acked.pop(tp, None)
        elif in_flight and tp not in self._last_acked and not self.first_sequence_checked:
            return False        # first_unacked, inline (a call per batch)
        # (a C integer once compiled: sequences are int32)
        seq = self._next[tp]
        batch.producer_id = producer_id
        batch.producer_epoch = producer_epoch
        batch.base_sequence = seq
        self._next[tp] = (seq + len(_batch_records(batch))) & 0x7FFFFFFF
        return True

    def first_unacked(self, tp, in_flight):
        """Whether a batch of ``tp`` must wait because nothing of the
        epoch is written yet while a batch is in flight: a broker with no
        state for this producer id takes any sequence number, so a second
        batch could be written before a first one that is then rejected
        (too large, say) and sent again, out of order.  Not when a batch of
        an earlier epoch of the same producer id was written (``assign``):
        then the broker refuses a new epoch's batch that does not start at
        sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER, retried behind the
        first, as Kafka's), nor under transaction version 2
        (``first_sequence_checked``)."""
        return bool(in_flight) and tp not in self._last_acked and \
            not self.first_sequence_checked

    def acked(self, batch):
        """A batch was written: its last sequence is acknowledged."""
        tp = _batch_tp(batch)
        started = self._started.get(tp)
        # (started == (batch.producer_id, batch.producer_epoch), without
        # the tuple per batch)
        if started is not None and started[0] == batch.producer_id and \
                started[1] == batch.producer_epoch:
            # (C integers once compiled: sequences are int32)
            seq = batch.base_sequence
            last = (seq + len(_batch_records(batch)) - 1) & 0x7FFFFFFF
            acked = self._last_acked.get(tp, -1)
            if last > acked:
                self._last_acked[tp] = last


# (the compiled twin's: the batch type whose slots the Sender's side reads
# and writes at their offsets (_c_slot_* , see _csenderloop.pxd), resolved by
# _batch_slots for the first batch met; False: that type's are not plain
# object slots; None: not yet resolved, or the pure twin, which never reads
# the offsets: _C_SLOTS stays False there)
_slots_type = None
_S_CALLBACKS = _S_DONE_FLAG = _S_BASE_OFFSET = _S_LOG_APPEND_TIME = _S_EXCEPTION = -1
_S_TP = _S_CREATED = _S_CLOSED = _S_ESTIMATED = _S_DRAINED = _S_RECORDS = _S_ALLOCATED = -1
_C_SLOTS = __name__.endswith("._csenderloop")
_SLOT_NAMES = ("callbacks", "done_flag", "base_offset", "log_append_time", "exception", "tp",
               "created_ms", "closed", "estimated_size", "drained_ms", "records", "allocated")


def _batch_slots(cls):
    """(compiled twin only) Resolve the offsets of ``cls``'s slots the
    Sender's side reads and writes; False when one is not a plain object
    slot of its own."""
    global _slots_type, _S_CALLBACKS, _S_DONE_FLAG, _S_BASE_OFFSET, _S_LOG_APPEND_TIME, \
        _S_EXCEPTION, _S_TP, _S_CREATED, _S_CLOSED, _S_ESTIMATED, _S_DRAINED, _S_RECORDS, \
        _S_ALLOCATED
    offsets = []
    for name in _SLOT_NAMES:
        offset = _c_slot_offset(cls, name)
        if offset < 0:
            _slots_type = False
            return
        offsets.append(offset)
    (_S_CALLBACKS, _S_DONE_FLAG, _S_BASE_OFFSET, _S_LOG_APPEND_TIME, _S_EXCEPTION, _S_TP,
     _S_CREATED, _S_CLOSED, _S_ESTIMATED, _S_DRAINED, _S_RECORDS, _S_ALLOCATED) = offsets
    _slots_type = cls


def _in_place(batch):
    """Whether ``batch``'s slots are read and written at their offsets
    (compiled twin, a batch of the type resolved; the offsets resolved for
    the first batch met: ProducerBatch does not exist yet when this module
    is imported)."""
    if _C_SLOTS and _slots_type is None:
        _batch_slots(type(batch))
    return _C_SLOTS and type(batch) is _slots_type


def _batch_tp(b):
    """``b.tp`` (compiled: at its slot offset, see _batch_slots)."""
    if _C_SLOTS and type(b) is _slots_type:
        return _c_slot_value(b, _S_TP)
    return b.tp


def _batch_records(b):
    """``b.records`` (compiled: at its slot offset, see _batch_slots)."""
    if _C_SLOTS and type(b) is _slots_type:
        return _c_slot_value(b, _S_RECORDS)
    return b.records


def accumulator_complete_batch(acc, batch, base_offset, log_append_time):
    """``batch.complete(base_offset, log_append_time)`` and then
    ``acc.deallocate(batch)`` (Kafka's order: a flush() woken by the last
    deallocation returns with every record's callback run), in one call:
    the Sender's per acknowledged batch (``RecordAccumulator.complete_batch``).
    The usual batch (no record callbacks, not part of a split, not yet
    done) is completed here, ProducerBatch.complete's steps inline (keep
    them equal to the method): one interpreted call per Produce request
    less on the network thread.  The memory goes back through the
    accumulator's own ``deallocate`` (accumulator_deallocate), the one
    place that releases it."""
    try:
        # (compiled: the slots at their offsets, see _batch_slots; a done flag other than False itself takes
        # batch.complete, which does the same for the usual batch)
        in_place = _in_place(batch)
        if in_place:
            usual = _c_slot_is(batch, _S_CALLBACKS, None) and batch.parent is None and \
                _c_slot_is(batch, _S_DONE_FLAG, False)
        else:
            usual = batch.callbacks is None and batch.parent is None and not batch.done_flag
        if not usual:
            batch.complete(base_offset, log_append_time)
        else:
            offset = -1 if base_offset is None else base_offset
            append_time = -1 if log_append_time is None else log_append_time
            if in_place:
                _c_slot_put(batch, _S_BASE_OFFSET, offset)
                _c_slot_put(batch, _S_LOG_APPEND_TIME, append_time)
                _c_slot_put(batch, _S_EXCEPTION, None)
            else:
                batch.base_offset = offset
                batch.log_append_time = append_time
                batch.exception = None
            if not (_C_LOCKS and _c_lock_try_acquire(DONE_LOCK)):
                _done_acquire()
            try:
                if in_place:
                    _c_slot_put(batch, _S_DONE_FLAG, True)
                else:
                    batch.done_flag = True
                done_callbacks = batch.done_callbacks
                batch.done_callbacks = None
                event = batch.event
            finally:
                if not (_C_LOCKS and _c_lock_release(DONE_LOCK)):
                    _done_release()
            if event is not None:
                event.set()
            if done_callbacks:
                for fn, future in done_callbacks:
                    try:
                        fn(future)
                    except Exception:
                        _accumulator_log.exception("Error in a done callback of a record future")
    finally:
        accumulator_deallocate(acc, batch)


def accumulator_deallocate(acc, batch):
    """``RecordAccumulator.deallocate``: the batch's memory back to the
    budget, the one place that releases it (a method of the accumulator
    compiled with the Sender's side: an interpreted call per Produce
    request was ~5,000 instructions of the network thread)."""
    # (``incomplete`` and ``used_memory`` live in the instance dict, where
    # the appender reads them: read and written there directly, a typed set
    # and dict once compiled, instead of two generic attribute reads and a
    # generic write through the class's MRO per request)
    state = acc._instance_dict
    incomplete = state["incomplete"]
    # (acc.lock.acquire and .release, bound once: no method lookup per call)
    release = acc._lock_release
    lock = acc.lock
    # (in C when free, see _C_LOCKS; the lock is never replaced)
    c_lock = _C_LOCKS and type(lock) is _LockType
    if not (c_lock and _c_lock_try_acquire(lock)):
        acc._lock_acquire()
    try:
        incomplete.discard(batch)
        # (compiled: the allocated slot at its offset, see _batch_slots)
        if _C_SLOTS and type(batch) is _slots_type:
            state["used_memory"] = state["used_memory"] - _c_slot_value(batch, _S_ALLOCATED)
            _c_slot_put(batch, _S_ALLOCATED, 0)
        else:
            state["used_memory"] = state["used_memory"] - batch.allocated
            batch.allocated = 0
        # Its encoded bytes go back with its memory (Kafka's deallocate
        # returns the batch's buffer to the pool): the application may
        # keep a done batch alive for long through its records' futures
        # (only its records and sizes are read then, for RecordMetadata),
        # and ~batch.size bytes per batch kept made the heap grow by as
        # much per batch sent, every page of it faulted in.
        batch.encoded = None
        if acc._memory_waiters:
            acc._signal_first_waiter()
        # flush() waits on ``memory`` until no batch is incomplete: it
        # is woken when the last one completes, not per batch (a wake-up
        # per batch cost both threads a switch and a pass of the wait
        # loop, per batch.size bytes, to find batches still pending).
        if acc.flushes_in_progress and not incomplete:
            acc.memory.notify_all()
    finally:
        if not (c_lock and _c_lock_release(lock)):
            release()


def leader_scan(acc, leaders):
    """``acc.batches`` as a list of ``(partition, deque, leader id or
    None)`` in its order, ``leaders`` a cluster's ``leaders``: what the ready
    scan and the drain walk (under the accumulator's lock), remade only
    when the cluster (a new Metadata response: Cluster never changes its
    ``leaders``, and the list holds it, so ``is`` cannot match a new one) or
    the partitions (``batches`` only gains keys, each with its deque for
    good) changed: a ``leaders.get(tp)`` per partition and scan hashed a
    TopicPartition and compared it with the cluster's own key (~500
    instructions; a scan or two and a drain per Produce request)."""
    batches = acc.batches
    if leaders is acc._scan_leaders and len(batches) == acc._scan_size:
        return acc._scan
    scan = [(tp, dq, leaders.get(tp)) for tp, dq in batches.items()]
    acc._scan = scan
    acc._scan_leaders = leaders
    acc._scan_size = len(batches)
    return scan


def accumulator_ready(acc, cluster, now):
    """``(ready leader ids, ms until the next check, topics whose leader
    is unknown)`` (Kafka's ``RecordAccumulator.ready``)."""
    ready = set()
    next_check = _NEVER
    # (made when a topic without a leader is met: none, usually)
    unknown = None
    linger = acc.linger_ms
    batch_size = acc.batch_size
    expire_before = now - acc.delivery_timeout_ms
    expiry_due = False
    muted = acc.muted
    # cluster.leader_for(tp)'s answers, read without a call per partition
    leaders = cluster.leaders
    # (acc.lock.acquire and .release, bound once: no method lookup per call)
    release = acc._lock_release
    lock = acc.lock
    # (in C when free, see _C_LOCKS; the lock is never replaced)
    c_lock = _C_LOCKS and type(lock) is _LockType
    if not (c_lock and _c_lock_try_acquire(lock)):
        acc._lock_acquire()
    try:
        # Always sendable: memory exhausted (appends wait), closing, flushing.
        # (waiters and closed: instance dict items, see _instance_dict)
        state = acc._instance_dict
        hurry = state["waiters"] > 0 or state["closed"] or acc.flushes_in_progress > 0
        # (leaders.get(tp) per partition, kept: see leader_scan)
        for tp, dq, leader in leader_scan(acc, leaders):
            if not dq:
                continue
            batch = dq[0]
            # (compiled: the batch's slots read at their offsets, see
            # _batch_slots)
            in_place = _in_place(batch)
            if in_place:
                created_ms = _c_slot_value(batch, _S_CREATED)
            else:
                created_ms = batch.created_ms
            if created_ms <= expire_before:
                expiry_due = True
            if leader is None:
                if unknown is None:
                    unknown = set()
                unknown.add(tp.topic)
                continue
            # (an empty set is not searched: a TopicPartition's hash is
            # computed per lookup, ~130 instructions)
            if (ready and leader in ready) or (muted and tp in muted):
                continue
            attempts = batch.attempts
            if attempts > 0:
                backoff = acc.retry_backoff(attempts)
                waited = now - batch.last_attempt_ms
                backing_off = waited < backoff
                time_to_wait = backoff if backing_off else linger
            elif hurry:
                # (sendable: what the test below answers, without the
                # arithmetic on the millisecond clock's big ints)
                ready.add(leader)
                continue
            else:
                backing_off = False
                waited = now - created_ms
                time_to_wait = linger
            if not backing_off:
                if hurry or waited >= time_to_wait or len(dq) > 1:
                    ready.add(leader)
                    continue
                # (batch.is_full(batch_size), inline)
                if in_place:
                    full = _c_slot_value(batch, _S_CLOSED) or \
                        _c_slot_value(batch, _S_ESTIMATED) >= batch_size
                else:
                    full = batch.closed or batch.estimated_size >= batch_size
                if full:
                    ready.add(leader)
                    continue
            wait = time_to_wait - waited
            if wait < 0:
                wait = 0
            if wait < next_check:
                next_check = wait
        state["wakeup_needed"] = True
        acc.expiry_due = expiry_due
    finally:
        if not (c_lock and _c_lock_release(lock)):
            release()
    return ready, next_check, _NO_TOPICS if unknown is None else unknown


def accumulator_drain(acc, cluster, nodes, max_size, now, can_drain):
    """``{node: [batches]}``: per ready node at most one batch per
    partition, up to ``max_size`` bytes (estimated) per request.
    ``can_drain(tp, batch)`` vetoes a partition (muted, in retry); None:
    none is vetoed; a :class:`SenderLoop`: its ``_can_drain`` does."""
    out = {}
    muted = acc.muted
    leaders = cluster.leaders     # (cluster.leader_for's answers)
    # (acc.lock.acquire and .release, bound once: no method lookup per call)
    release = acc._lock_release
    lock = acc.lock
    # (in C when free, see _C_LOCKS; the lock is never replaced)
    c_lock = _C_LOCKS and type(lock) is _LockType
    if not (c_lock and _c_lock_try_acquire(lock)):
        acc._lock_acquire()
    try:
        by_node = {}
        # (leaders.get(tp) per partition, kept: see leader_scan; by node
        # the scan's (partition, deque, leader) entries: no batches[tp]
        # below)
        for entry in leader_scan(acc, leaders):
            if entry[1] and entry[2] in nodes:
                leader = entry[2]
                tps = by_node.get(leader)
                if tps is None:
                    by_node[leader] = [entry]
                else:
                    tps.append(entry)
        acc._drain_index += 1
        drain_index = acc._drain_index
        for node in nodes:
            tps = by_node.get(node)
            if not tps:
                continue
            if len(tps) > 1:
                start = drain_index % len(tps)
                tps = tps[start:] + tps[:start]
            size = 0
            ready = []
            for tp, dq, _ in tps:
                if muted and tp in muted:      # (see accumulator_ready)
                    continue
                batch = dq[0]
                if batch.attempts > 0 and \
                        now - batch.last_attempt_ms < acc.retry_backoff(batch.attempts):
                    continue
                if can_drain is not None:
                    if isinstance(can_drain, SenderLoop):
                        # The Sender's own check (send_producer_data
                        # passes the Sender): a C call once compiled,
                        # where its bound method was a Python call per
                        # partition drained.
                        sender = can_drain
                        if not sender._can_drain(tp, batch):
                            continue
                    # (a SenderLoop of the other twin: its bound method)
                    elif not getattr(can_drain, "_can_drain", can_drain)(tp, batch):
                        continue
                # (compiled: the batch's slots at their offsets, see
                # _batch_slots)
                in_place = _in_place(batch)
                if in_place:
                    estimated = _c_slot_value(batch, _S_ESTIMATED)
                else:
                    estimated = batch.estimated_size
                if ready and size + estimated > max_size:
                    break
                dq.popleft()
                if in_place:
                    _c_slot_put(batch, _S_CLOSED, True)
                    _c_slot_put(batch, _S_DRAINED, now)
                else:
                    batch.closed = True
                    batch.drained_ms = now
                size += estimated
                ready.append(batch)
            if ready:
                out[node] = ready
    finally:
        if not (c_lock and _c_lock_release(lock)):
            release()
    return out


def _add_in_flight(in_flight, b):
    """A batch drained joins its partition's batches in flight (the
    Sender's ``in_flight``: {tp: [batches]}, a partition's list kept once
    made)."""
    # (compiled: the batch's tp slot at its offset, see _batch_slots)
    if _C_SLOTS and type(b) is _slots_type:
        tp = _c_slot_value(b, _S_TP)
    else:
        tp = b.tp
    flight = in_flight.get(tp)
    if flight is None:
        in_flight[tp] = [b]
    else:
        flight.append(b)


def _can_send_more(state, max_in_flight):
    """ClusterClient.can_send_more of the node whose network client state
    is ``state`` (None: unknown)."""
    return state is not None and state.state is _READY and len(state.in_flight) < max_in_flight


def _error_message(p):
    """A failed partition response's message, its record errors appended."""
    message = p.get("error_message")
    record_errors = p.get("record_errors") or ()
    if record_errors:
        detail = "; ".join(f"record {e['batch_index']}: "
                           f"{e.get('batch_index_error_message')}"
                           for e in record_errors)
        message = f"{message or ''} ({detail})".strip()
    return message


# _queued_behind's "ask the ready scan"
_UNSURE = object()


class _ProduceCallback:
    """The completion of one Produce request: its batches by partition
    (a callable object instead of a closure: no cell per request)."""

    __slots__ = ("sender", "batches")

    def __init__(self, sender, batches):
        self.sender = sender
        self.batches = batches

    def __call__(self, resp):
        self.sender._handle_produce_response(resp, self.batches)


class SenderLoop:
    """The hot path of :class:`kchannel.producer.sender.Sender` (its base
    class; see the module docstring).  Not used on its own:
    ``Sender.__init__`` sets up the state these methods use."""

    # The state read per pass and per request: slots here, C fields of the
    # compiled twin (_csenderloop.pxd declares the same names); __dict__
    # holds the rest.
    __slots__ = ("__dict__", "__weakref__",
                 "client", "accumulator", "metadata", "time", "acks", "max_request_size",
                 "request_timeout_ms", "max_in_flight", "idempotent", "compression",
                 "guarantee_order", "running", "force_close", "fatal_error", "sequences",
                 "in_flight", "retrying", "sensors", "txn", "transactional_id",
                 "_batch_stats", "_response_stats", "_produce_versions", "_produce_version",
                 "_head", "_head_version", "_head_tp")

    def __init__(self):
        # (Sender.__init__ sets the state up; nothing to do here)
        pass

    def response_decoder(self, version, generic):
        """The ProduceResponse decoder this twin's
        ``_handle_produce_response`` reads (:func:`produce_response_decoder`
        of the same module): a Sender registers its own, so a Sender on one
        twin never gets the other twin's ProduceResult."""
        return produce_response_decoder(version, generic)

    # -- one pass of the network thread ----------------------------------------
    def run_once(self):
        t = self.time     # self.time(), the default clock's call inlined
        now = int(_wall_time() * 1000) if t is now_ms else t()
        fatal = self.fatal_error or self.client.fatal_error
        if fatal is not None:
            self.client.fatal_error = None
            self._fail_undrained(fatal)
        txn = self.txn
        if txn is not None and self._run_transactional(txn, now):
            return
        if self.idempotent:
            # A transactional producer's epoch moves with its transactions
            # (the TransactionManager), never by this client-side bump.
            if txn is None and self.sequences.bump_partitions:
                self._maybe_bump_epoch()
            if self.sequences.producer_id < 0:
                self.accumulator.wakeup_needed = True
                if self.fatal_error is None and txn is None:
                    self._maybe_init_producer_id(now)
                self.client.poll(min(self.retry_backoff_ms, 100), now)
                return
        timeout = self.send_producer_data(now)
        if txn is not None:
            # A queued transactional request may be due before that (a
            # retry's back-off, a coordinator lookup).
            limit = txn.poll_timeout(now)
            if limit is not None:
                timeout = min(timeout, limit)
        self.client.poll(timeout, now)
        # Until the next ready() scan this thread is awake and will see
        # every append: appends need not wake it (see Sender.wakeup).
        self.accumulator.wakeup_needed = False

    def _can_drain(self, tp, batch):
        if self.txn is not None and not self.txn.send_allowed(tp):
            return False      # not (yet) added to the transaction
        flight = self.in_flight.get(tp)
        if self.guarantee_order and flight:
            return False
        if self.idempotent:
            # (a SequenceState: assign and first_unacked are C calls once
            # compiled, see _csenderloop.pxd)
            sequences = self.sequences
            # (an empty set is not searched: a TopicPartition's hash is
            # computed per lookup)
            if sequences.bump_partitions and tp in sequences.bump_partitions:
                return False
            if self.retrying and tp in self.retrying:
                if flight:
                    return False
                self.retrying.discard(tp)
            if batch.base_sequence < 0:       # not batch.has_sequence()
                return sequences.assign(tp, batch, flight)
            if sequences.first_unacked(tp, flight):
                return False
        return True

    # -- produce ------------------------------------------------------------------
    def send_producer_data(self, now):
        cluster = self.metadata.cluster
        accumulator = self.accumulator
        client = self.client
        max_in_flight = self.max_in_flight
        in_flight = self.in_flight
        # (None when _can_drain would allow every partition: no
        # transaction, no idempotence, no ordering by muting; a call per
        # partition drained less; else this Sender, whose _can_drain the
        # drain calls)
        can_drain = (None if self.txn is None and not self.idempotent and not self.guarantee_order
                     else self)
        ready, next_check, unknown = accumulator_ready(accumulator, cluster, now)
        if unknown:
            for topic in unknown:
                self.metadata.add_topic(topic, now)
            self.metadata.request_update()
        not_ready_timeout = _NEVER
        # (the network client's nodes: client.can_send_more and
        # ready_to_send read inline, no call per node and request)
        nodes = client._nodes
        # (the nodes to leave out, discarded after the walk: no copy of the
        # set per pass)
        not_ready = None
        for node in ready:
            # client.ready_to_send(node, now, max_in_flight): ready(node,
            # now) and can_send_more(node, max_in_flight); ready() only for
            # a node not READY (it may start connecting)
            state = nodes.get(node)
            if state is not None and state.state is _READY:
                if len(state.in_flight) < max_in_flight:
                    continue
            else:
                client.ready(node, now)
            if not_ready is None:
                not_ready = [node]
            else:
                not_ready.append(node)
            not_ready_timeout = min(not_ready_timeout,
                                    max(client.connection_delay(node, now), 0))
        if not_ready is not None:
            for node in not_ready:
                ready.discard(node)
        if ready:
            drained = accumulator_drain(accumulator, cluster, ready, self.max_request_size,
                                        now, can_drain)
        else:
            # (what a drain of no node does: only the rotation moves on)
            accumulator._drain_index += 1
            drained = {}
        sent = bool(drained)
        for batches in drained.values():
            for b in batches:
                _add_in_flight(in_flight, b)
        # The ready() scan above saw whether any is due: no second scan of
        # every partition under the lock per pass for none.
        if accumulator.expiry_due:
            for b in accumulator.expired_batches(now):
                self._fail_batch(b, RequestTimeoutError(
                    f"Expiring {b.record_count} record(s) for {b.tp.topic}-{b.tp.partition}:"
                    f"{now - b.created_ms} ms has passed since batch creation"))
        for node, batches in drained.items():
            self._send_produce_request(node, batches, now)
        # A request takes one batch per partition (Kafka's drain).  When
        # more batches are ready behind those just sent (an application
        # filling batches faster than one pass of this loop), send them now,
        # up to max.in.flight.requests.per.connection, instead of after a
        # poll each: the same requests in the same order, for one pass of
        # the loop's fixed cost (poll, ready, expiry) instead of one each.
        # (a C loop once compiled: no range object per pass)
        extra = max_in_flight - 1
        for _more_pass in range(extra):
            # (one look at the partitions just drained: usually nothing
            # more is queued)
            more = self._queued_behind(drained, nodes, max_in_flight)
            if more is None:
                break
            if more is _UNSURE:
                # (client.can_send_more(n, max_in_flight) inline)
                open_nodes = [n for n in drained if _can_send_more(nodes.get(n), max_in_flight)]
                more, _, _ = accumulator_ready(accumulator, cluster, now)
                more.intersection_update(open_nodes)
            if not more:
                break
            drained = accumulator_drain(accumulator, cluster, more, self.max_request_size,
                                        now, can_drain)
            for node, batches in drained.items():
                for b in batches:
                    _add_in_flight(in_flight, b)
                self._send_produce_request(node, batches, now)
        timeout = min(next_check, not_ready_timeout)
        if sent:
            # More may be sendable at once (Kafka polls with 0 while nodes
            # are ready): then poll with 0.  Otherwise the poll that writes
            # this pass's requests waits (for a response, linger, or an
            # append's wakeup: the scan below sets wakeup_needed again), as
            # a poll with 0 returned only for the next pass to find nothing
            # to send and wait then: a pass of this loop (~50 us of CPU) per
            # Produce request for nothing.  Not when every ready batch was
            # held back either (_can_drain: a partition's first batch of an
            # epoch in flight, ordering, a partition not yet in the
            # transaction): what lets it go is a response, which ends the
            # poll anyway; polling with 0 meanwhile was a busy loop (a
            # thousand passes per transaction under transaction.version 2,
            # whose every transaction starts a new epoch).
            again, again_check, _ = accumulator_ready(accumulator, cluster, now)
            timeout = min(timeout, again_check)
            for node in again:
                state = nodes.get(node)
                if state is None or state.state is not _READY:
                    client.ready(node, now)       # (what ready_to_send does then)
                elif len(state.in_flight) < max_in_flight and \
                        not self._all_held_back(cluster, node):
                    timeout = 0
                    break
        return max(0, min(timeout, _NEVER))

    def _all_held_back(self, cluster, node):
        """Whether every partition of ``node`` with a batch waiting must
        wait for a response first (a read without the lock: a stale answer
        costs one pass of the loop or waits for a response that was coming
        anyway)."""
        if not self.idempotent:
            return False
        in_flight = self.in_flight
        first_unacked = self.sequences.first_unacked
        for tp, dq in list(self.accumulator.batches.items()):
            if dq and cluster.leaders.get(tp) == node:
                flight = in_flight.get(tp)
                if not flight or not first_unacked(tp, flight):
                    return False
        return True

    def _queued_behind(self, drained, nodes, max_in_flight):
        """After a pass's requests (``drained``: {node: batches sent}):
        None when no partition just drained has another full batch waiting
        (a stale answer only defers it to the next pass); else the nodes that can take another
        request now (``nodes``: the network client's) if the ready scan
        would find each of them ready, which this tells without one (a
        pass's further request at the defaults: a scan of every partition
        under the lock per request): each has a partition just drained
        whose next batch is full or has one behind it, not muted and never
        tried (no back-off to wait for; its leader is the node it was
        drained for, the pass's cluster being the same); _UNSURE when some
        node is not known ready that way, for the scan to decide.  (A read
        without the lock: appends only make batches readier.)"""
        acc = self.accumulator
        batches = acc.batches
        size = acc.batch_size
        muted = acc.muted
        queued = False
        sure = set()
        unsure = False
        for node, sent in drained.items():
            can_send = _can_send_more(nodes.get(node), max_in_flight)
            known = False
            for b in sent:
                # (compiled: the batches' slots at their offsets, see
                # _batch_slots)
                if _C_SLOTS and type(b) is _slots_type:
                    tp = _c_slot_value(b, _S_TP)
                else:
                    tp = b.tp
                dq = batches.get(tp)
                if not dq:
                    continue
                head = dq[0]
                # (head.is_full(size), inline)
                if len(dq) > 1:
                    full = True
                elif _C_SLOTS and type(head) is _slots_type:
                    full = _c_slot_value(head, _S_CLOSED) or \
                        _c_slot_value(head, _S_ESTIMATED) >= size
                else:
                    full = head.closed or head.estimated_size >= size
                if full:
                    queued = True
                    # (an empty set is not searched, see accumulator_ready)
                    if not (muted and tp in muted) and head.attempts == 0:
                        known = True
                        break
            if can_send:
                if known:
                    sure.add(node)
                else:
                    unsure = True
        if not queued:
            return None
        return _UNSURE if unsure else sure

    def _encode(self, batch):
        if batch.encoded is None:
            if self.compression == _NONE:
                # The common case, header and CRC included in one call.
                # (compiled: the batch's slots at their offsets, see
                # _batch_slots)
                if _C_SLOTS and type(batch) is _slots_type:
                    records = _c_slot_value(batch, _S_RECORDS)
                    estimated = _c_slot_value(batch, _S_ESTIMATED)
                else:
                    records = batch.records
                    estimated = batch.estimated_size
                batch.encoded = encode_plain_batch(
                    records, _TRANSACTIONAL if self.txn is not None else 0,
                    batch.producer_id, batch.producer_epoch, batch.base_sequence, 0, -1,
                    None, estimated)
                return batch.encoded
            batch.encoded = encode_batch(
                batch.records, compression=self.compression, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                is_transactional=self.txn is not None, compression_level=self.compression_level)
        return batch.encoded

    def _send_produce_request(self, node, batches, now):
        # (one partition's batch per leader, the usual request at the
        # defaults, is encoded by produce_request_parts' one-partition path)
        sendable = {}
        for b in batches:
            try:
                self._encode(b)
            except Exception as exc:  # an unencodable value, a missing codec
                self._remove_in_flight(b)
                self._fail_batch(b, exc)
                continue
            # (compiled: the tp slot at its offset, see _batch_slots)
            if _C_SLOTS and type(b) is _slots_type:
                sendable[_c_slot_value(b, _S_TP)] = b
            else:
                sendable[b.tp] = b
        if not sendable:
            return
        if self.sensors is not None:
            # Kafka's updateProduceRequestMetrics: per batch.
            # (each sensor's record(), which updates its stats in C once
            # compiled; the sensors typed, see _csenderloop.pxd: a C call
            # each, where a bound method's was a Python call)
            records_sent, batch_size = self._batch_stats
            for b in sendable.values():
                if _C_SLOTS and type(b) is _slots_type:
                    count = len(_c_slot_value(b, _S_RECORDS))
                else:
                    count = len(b.records)
                for sensor in records_sent:
                    sensor.record(count, now)
                size = len(b.encoded)
                for sensor in batch_size:
                    sensor.record(size, now)
        client = self.client
        network = client.client
        try:
            # client.choose_version(node, _PRODUCE), reused while the node's
            # ApiVersions answer (its map, held here: "is" cannot match a
            # new one) is the same: a call less per request.  (``state``: the
            # network client's _Node, a NodeState whose fields the compiled
            # twin reads as C fields, see _csenderloop.pxd)
            state = network._nodes.get(node)
            versions = state.api_versions if state is not None else None
            if versions is not None and versions is self._produce_versions:
                version = self._produce_version
            else:
                version = network.choose_version(node, _PRODUCE)
                self._produce_versions = versions
                self._produce_version = version
            # Transaction version 1 must not send Produce v12+, which would
            # add the partitions to the transaction itself (KIP-890).
            if self.txn is not None:
                limit = self.txn.produce_max_version()
                if limit is not None:
                    version = min(version, limit)
            if len(sendable) == 1:
                # One partition's batch, the usual request at the defaults:
                # produce_request_parts' one-partition parts, the fields
                # before the partition kept from this Sender's last request
                # (the same version and topic, usually; the transactional
                # id, acks and timeout are the Sender's own) instead of
                # their cache's five-field key built and hashed per request.
                # (the partition's index kept with them: the same partition
                # again, usually, at the defaults' one partition per leader)
                for tp, b in sendable.items():
                    if version != self._head_version or tp != self._head_tp:
                        self._head = _one_partition_head(
                            version, self.transactional_id, self.acks,
                            self.request_timeout_ms, tp.topic) + _I32.pack(tp.partition)
                        self._head_version = version
                        self._head_tp = tp
                    body = _one_partition_records(version, self._head, b.encoded)
            else:
                # {topic: [(partition, records)]}, topics and partitions in
                # the order of the batches (made only for a request of
                # several batches)
                by_topic = {}
                for tp, b in sendable.items():
                    parts = by_topic.get(tp.topic)
                    if parts is None:
                        by_topic[tp.topic] = [(tp.partition, b.encoded)]
                    else:
                        parts.append((tp.partition, b.encoded))
                body = produce_request_parts(version, self.transactional_id, self.acks,
                                             self.request_timeout_ms, by_topic)
            if self.acks == 0:
                client.send(node, _PRODUCE, body, None, version=version,
                            expect_response=False)
                for b in sendable.values():
                    self._remove_in_flight(b)
                    self._complete(b, -1, None)
                return
            # client.send(node, _PRODUCE, body, callback, version=version):
            # the network client's send and the cluster client's callback
            # map written here, positionally (the cluster client's wrapper
            # and its keyword calls were two calls per request).  (The
            # network client's send: a C call of its cpdef method once
            # compiled; an override set on the instance still takes it.)
            corr = network.send(node, _PRODUCE, body, version)
            # _ProduceCallback(self, sendable) without the __init__ call
            # (as the client's InFlight: a C-field object made directly)
            callback = _ProduceCallback.__new__(_ProduceCallback)
            callback.sender = self
            callback.batches = sendable
            client._callbacks[(node, corr)] = callback
        except errors.KChannelError as exc:
            # Not sendable (version, connection gone): retry like a lost request.
            for b in sendable.values():
                self._complete_or_retry(b, exc, None, now)

    def _handle_produce_response(self, resp, batches):
        if resp.exception is None:
            # (the time the poll read the response, as Kafka's Sender
            # takes the time in the response's callback: a clock read less
            # per request)
            now = resp.receive_time_ms
        else:
            now = self.time()
            log.debug("Produce request to node %s failed: %s", resp.node_id, resp.exception)
            self.metadata.request_update()
            for b in batches.values():
                self._complete_or_retry(b, resp.exception, None, now)
            return
        body = resp.body
        # (the usual response: a ProduceResult, see ProduceResponseDecoder;
        # any other: the codec's dict)
        result = body if type(body) is ProduceResult else None
        if self.sensors is not None:
            latency, throttle = self._response_stats
            value = resp.receive_time_ms - resp.request_time_ms
            for sensor in latency:
                sensor.record(value, now)
            if result is not None:
                value = result.throttle_time_ms
            else:
                value = body.get("throttle_time_ms") or 0
            for sensor in throttle:
                sensor.record(value, now)
        if result is not None:
            # one partition answered
            batch = batches.get((result.name, result.index))
            if batch is not None:
                self._partition_response(batch, result.error_code, result.base_offset,
                                         result.log_append_time_ms, None, now)
                if len(batches) == 1:
                    return
            self._missing(batches, None if batch is None else {batch.tp}, now)
            return
        # The partitions answered: a set for a request of several batches;
        # for one (the usual request), whether it was answered.
        seen = set() if len(batches) > 1 else None
        answered = False
        for topic in body.get("responses") or ():
            name = topic["name"]
            for p in topic["partition_responses"]:
                batch = batches.get((name, p["index"]))
                if batch is None:
                    continue
                if seen is None:
                    answered = True
                else:
                    seen.add(batch.tp)
                self._partition_response(batch, p["error_code"], p["base_offset"],
                                         p.get("log_append_time_ms", -1), p, now)
        missing = (not answered) if seen is None else len(seen) < len(batches)
        if missing:
            self._missing(batches, seen, now)

    def _partition_response(self, batch, code, base_offset, log_append_time, p, now):
        """A partition's answer to a Produce request: ``batch`` completed,
        split or retried; ``p`` the codec's partition dict (its error
        message and record errors), None for a :class:`ProduceResult`
        (none of either)."""
        if code == _NO_ERROR or code == _DUPLICATE_SEQUENCE_NUMBER:
            # self._remove_in_flight(batch), inline
            flight = self.in_flight.get(_batch_tp(batch))
            if flight:
                if flight[0] is batch:
                    del flight[0]
                elif batch in flight:
                    flight.remove(batch)
            if self.idempotent:
                # (a SequenceState: a C call once compiled)
                sequences = self.sequences
                sequences.acked(batch)
            self._complete(batch, base_offset, log_append_time)
            return
        if code == _MESSAGE_TOO_LARGE and len(batch.records) > 1 and not batch.done_flag:
            self._split(batch, now)
            return
        self._complete_or_retry(batch, exception_for(code, None if p is None else _error_message(p)),
                                code, now)

    def _missing(self, batches, seen, now):
        """The batches of ``batches`` whose partition the response did not
        answer (the partitions of ``seen``, None: none of them)."""
        for tp, b in batches.items():
            if seen is None or tp not in seen:
                self._complete_or_retry(b, errors.KafkaError(
                    _UNKNOWN_SERVER_ERROR, "UNKNOWN_SERVER_ERROR",
                    f"The produce response did not include partition "
                    f"{tp.topic}-{tp.partition}"), None, now)

    def _remove_in_flight(self, batch):
        flight = self.in_flight.get(_batch_tp(batch))
        if flight:
            if flight[0] is batch:
                # The usual case: the oldest batch of the partition.
                del flight[0]
            elif batch in flight:
                flight.remove(batch)

    def _complete(self, batch, base_offset, log_append_time):
        # Kafka's order (completeBatch, then deallocate): the futures and
        # callbacks first, so a flush() woken by the last deallocation
        # returns with every record's callback run; one call for both.
        accumulator_complete_batch(self.accumulator, batch, base_offset, log_append_time)
