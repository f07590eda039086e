"""Kafka record batches (magic v2) and legacy message sets (magic v0/v1).

Sans-I/O: bytes in, values out.  Writing uses magic v2 only, as every
broker since 0.11 accepts.  Reading follows Kafka's consumer
(``ByteBufferLogInputStream``, ``DefaultRecordBatch``, ``LegacyRecord``):

* a trailing batch cut short by the fetch size limit is ignored (it is
  fetched again from its own offset next time);
* a batch whose declared size is below the minimum, whose magic is unknown or
  whose CRC does not match raises ``CorruptRecordError`` (CRC checks can be
  turned off, as ``check.crcs=false``);
* records inside a batch that do not add up to the declared sizes raise
  ``CorruptRecordError`` too: nothing is silently dropped;
* control batches (transaction markers) are skipped by ``read_records``;
  the batch objects still say ``is_control`` for callers that want them.
"""
import enum
import operator
import struct
import zlib

from kchannel._impl import load as _load
from kchannel.errors import CorruptRecordError
from kchannel.protocol.records.compression import CompressionType, compress, decompress
from kchannel.protocol.records.record import DecodedRecord

_twin = _load("kchannel.protocol.records._records_py", "kchannel._crecords")
crc32c = _twin.crc32c
encode_records = _twin.encode_records
encode_plain_batch = _twin.encode_plain_batch
decode_records = _twin.decode_records
RecordReader = _twin.RecordReader
make_records = _twin.make_records
track_records = _twin.track_records

__all__ = [
    "TimestampType", "RecordBatch", "LegacyBatch", "DecodedRecord", "encode_batch",
    "iter_batches",
    "read_records", "crc32c", "encode_records", "decode_records", "RecordReader",
    "track_records",
    "RECORD_BATCH_OVERHEAD", "LOG_OVERHEAD", "NO_TIMESTAMP", "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "CURRENT_MAGIC",
]

LOG_OVERHEAD = 12            # offset (8) + size (4)
RECORD_BATCH_OVERHEAD = 61   # v2 batch header
HEADER_SIZE_UP_TO_MAGIC = 17
MAGIC_OFFSET = 16
CURRENT_MAGIC = 2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
# Legacy message overheads (crc, magic, attributes, [timestamp], key and
# value lengths) and Kafka's minimum for any entry's size field.
_LEGACY_OVERHEAD = {0: 14, 1: 22}
MIN_RECORD_OVERHEAD = 14

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiibI")        # base offset .. crc
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record count
_CRC_START = 21                          # attributes: first byte under the CRC
_ENTRY = struct.Struct(">qi")
_LEGACY_V0 = struct.Struct(">Ibb")
_LEGACY_V1 = struct.Struct(">Ibbq")
_I32 = struct.Struct(">i")


class TimestampType(enum.IntEnum):
    """Kafka's TimestampType (``CreateTime`` / ``LogAppendTime``)."""
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    def __str__(self):
        return _TIMESTAMP_TYPE_NAMES[self._value_]


# (A module constant: the consumer names every batch's timestamp type.)
_TIMESTAMP_TYPE_NAMES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


class RecordBatch:
    """One magic v2 batch read from a buffer.  The header fields are plain
    attributes; ``records()`` decompresses and decodes the records (a list of
    ``DecodedRecord(offset, timestamp, key, value, headers)``)."""

    __slots__ = ("base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
                 "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "record_count",
                 "_buf", "_start", "_end")

    def __init__(self, buf, start, end):
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
         self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
         self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
         self.record_count) = _HEADER.unpack_from(buf, start)
        self._buf = buf
        self._start = start
        self._end = end

    @property
    def size_in_bytes(self):
        return self._end - self._start

    @property
    def compression_type(self):
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self):
        return (TimestampType.LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK
                else TimestampType.CREATE_TIME)

    @property
    def is_transactional(self):
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self):
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.last_offset + 1

    def compute_checksum(self):
        buf = self._buf
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        return crc32c(buf[self._start + _CRC_START:self._end])

    def is_valid(self):
        return (self.size_in_bytes >= RECORD_BATCH_OVERHEAD
                and self.crc == self.compute_checksum())

    def ensure_valid(self):
        size = self._end - self._start
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size of the batch {size} is "
                f"less than the minimum {RECORD_BATCH_OVERHEAD})")
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})")

    def _payload(self):
        ctype = self.compression_type
        if ctype:
            return decompress(ctype, self._buf[self._start + RECORD_BATCH_OVERHEAD:self._end], 2)
        # A view, not a copy: the decoder copies each key and value out.
        return memoryview(self._buf)[self._start + RECORD_BATCH_OVERHEAD:self._end]

    def _log_append_time(self):
        """The batch's max timestamp when it is LogAppendTime (every record
        then carries it), else None."""
        return self.max_timestamp if self.attributes & _TIMESTAMP_TYPE_MASK else None

    def records(self):
        return decode_records(self._payload(), self.record_count, self.base_offset,
                              self.base_timestamp, self._log_append_time())

    def reader(self, cls, topic, partition, timestamp_type=None, tuple_headers=False):
        """A :class:`RecordReader` of the records, as ``make_records(cls,
        ...)`` builds them: ``cls(topic, partition, offset, timestamp,
        timestamp_type, key, value, headers, None)``, ``read(n)`` at a time;
        ``timestamp_type`` by default the name of the batch's own;
        ``tuple_headers``: headers as a tuple of pairs, not a list."""
        attributes = self.attributes
        if timestamp_type is None:
            timestamp_type = "LogAppendTime" if attributes & _TIMESTAMP_TYPE_MASK \
                else "CreateTime"
        if attributes & _COMPRESSION_MASK:
            payload = self._payload()
        else:
            # (_payload and _log_append_time inlined: the consumer opens
            # a reader per batch, dozens a poll at Kafka's default 16 KiB.)
            payload = self._buf
            if type(payload) is not memoryview:
                payload = memoryview(payload)
            payload = payload[self._start + RECORD_BATCH_OVERHEAD:self._end]
        return RecordReader(payload, self.record_count, self.base_offset, self.base_timestamp,
                            self.max_timestamp if attributes & _TIMESTAMP_TYPE_MASK else None,
                            cls, topic, partition, timestamp_type, tuple_headers)

    def __repr__(self):
        return (f"RecordBatch(magic=2, offsets={self.base_offset}-{self.last_offset}, "
                f"count={self.record_count}, compression={self.compression_type}, "
                f"producer_id={self.producer_id}, control={self.is_control}, "
                f"transactional={self.is_transactional})")


class LegacyBatch:
    """One magic v0/v1 message-set entry: a single record, or a compressed
    wrapper whose value holds the inner messages.  Same interface as
    :class:`RecordBatch`."""

    __slots__ = ("offset", "magic", "crc", "attributes", "timestamp", "key", "value",
                 "_buf", "_start", "_end", "_msg")

    producer_id = NO_PRODUCER_ID
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    is_transactional = False
    is_control = False

    def __init__(self, buf, start, end):
        self._buf = buf
        self._start = start
        self._end = end
        self._msg = start + LOG_OVERHEAD
        self.offset = _ENTRY.unpack_from(buf, start)[0]
        self.magic = buf[start + MAGIC_OFFSET]
        overhead = _LEGACY_OVERHEAD[self.magic]
        if end - self._msg < overhead:
            raise CorruptRecordError(
                f"Record size {end - self._msg} is less than the minimum record overhead "
                f"({overhead})")
        if self.magic == 0:
            self.crc, _, self.attributes = _LEGACY_V0.unpack_from(buf, self._msg)
            self.timestamp = NO_TIMESTAMP
            pos = self._msg + 6
        else:
            self.crc, _, self.attributes, self.timestamp = _LEGACY_V1.unpack_from(
                buf, self._msg)
            pos = self._msg + 14
        self.key, pos = _legacy_bytes(buf, pos, end, "key")
        self.value, pos = _legacy_bytes(buf, pos, end, "value")
        if pos != end:
            raise CorruptRecordError("Invalid legacy record: trailing bytes after the value")

    base_offset = property(lambda self: self._base_offset())
    last_offset = property(lambda self: self.offset)

    @property
    def next_offset(self):
        return self.offset + 1

    @property
    def size_in_bytes(self):
        return self._end - self._start

    @property
    def compression_type(self):
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self):
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return (TimestampType.LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK
                else TimestampType.CREATE_TIME)

    @property
    def record_count(self):
        return len(self.records())

    def reader(self, cls, topic, partition, timestamp_type=None, tuple_headers=False):
        """As :meth:`RecordBatch.reader` (the records are decoded at once)."""
        if timestamp_type is None:
            timestamp_type = str(self.timestamp_type)
        records = self.records()
        if tuple_headers:
            # (Legacy records have no headers.)
            records = [r._replace(headers=()) for r in records]
        return _ListReader(make_records(cls, records, 0, len(records), topic, partition,
                                        timestamp_type))

    def _base_offset(self):
        if not self.compression_type:
            return self.offset
        return self.records()[0].offset

    def compute_checksum(self):
        return zlib.crc32(memoryview(self._buf)[self._msg + 4:self._end]) & 0xFFFFFFFF

    def is_valid(self):
        return self.crc == self.compute_checksum()

    def ensure_valid(self):
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})")

    def records(self, check_crcs=True):
        ctype = self.compression_type
        if not ctype:
            return [DecodedRecord(self.offset, self.timestamp, self.key, self.value, [])]
        if self.value is None:
            raise CorruptRecordError("Compressed legacy message has a null value")
        inner = decompress(ctype, self.value, self.magic)
        entries = []
        pos = 0
        n = len(inner)
        while pos < n:
            if n - pos < LOG_OVERHEAD:
                raise CorruptRecordError("Truncated message set inside a compressed message")
            size = _ENTRY.unpack_from(inner, pos)[1]
            if size < MIN_RECORD_OVERHEAD or size > n - pos - LOG_OVERHEAD:
                raise CorruptRecordError(
                    f"Invalid message size {size} inside a compressed message")
            if inner[pos + MAGIC_OFFSET] not in (0, 1):
                raise CorruptRecordError(
                    f"Invalid magic {inner[pos + MAGIC_OFFSET]} inside a compressed message")
            entry = LegacyBatch(inner, pos, pos + LOG_OVERHEAD + size)
            if check_crcs:
                entry.ensure_valid()
            if entry.compression_type:
                raise CorruptRecordError("Compressed messages must not be nested")
            entries.append(entry)
            pos += LOG_OVERHEAD + size
        if not entries:
            raise CorruptRecordError("Found a compressed message with no inner messages")
        out = []
        log_append = (self.magic == 1 and self.attributes & _TIMESTAMP_TYPE_MASK)
        if self.magic == 1:
            # Inner offsets are relative; the wrapper carries the absolute
            # offset of the last inner message.
            shift = self.offset - entries[-1].offset
        else:
            shift = 0
        for e in entries:
            ts = self.timestamp if log_append else e.timestamp
            out.append(DecodedRecord(e.offset + shift, ts, e.key, e.value, []))
        return out

    def __repr__(self):
        return (f"LegacyBatch(magic={self.magic}, offset={self.offset}, "
                f"compression={self.compression_type})")


class _ListReader:
    """:class:`RecordReader`'s interface over records already made."""

    __slots__ = ("_records", "_index")

    def __init__(self, records):
        self._records = records
        self._index = 0

    @property
    def remaining(self):
        return len(self._records) - self._index

    def read(self, n):
        i = self._index
        self._index = min(len(self._records), i + max(0, n))
        return self._records[i:self._index]

    def read_into(self, out, n):
        records = self.read(n)
        out += records
        return len(records)


def _legacy_bytes(buf, pos, end, what):
    if end - pos < 4:
        raise CorruptRecordError(f"Truncated legacy record {what} length")
    n = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise CorruptRecordError(f"Invalid legacy record {what} length {n}")
    if n > end - pos:
        raise CorruptRecordError(f"Legacy record {what} of {n} bytes runs past the record")
    return bytes(buf[pos:pos + n]), pos + n


def iter_batches(buf, max_message_size=0x7FFFFFFF):
    """Yield the batches of ``buf`` (a fetch response's records): a
    :class:`RecordBatch` per v2 batch, a :class:`LegacyBatch` per v0/v1 entry.

    As Kafka's ``ByteBufferLogInputStream``: stops quietly at a trailing
    batch that is incomplete, raises ``CorruptRecordError`` for a size below
    the minimum or above ``max_message_size`` and for an unknown magic.  CRCs
    are not checked here (``ensure_valid()``; ``read_records`` does)."""
    if buf is None:
        return
    if isinstance(buf, memoryview):
        # A view of the response frame (wire readers hand records fields
        # out so): v2 batches read from it in place, no copy.
        buf = buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    elif not isinstance(buf, bytes):
        buf = bytes(buf)
    pos = 0
    n = len(buf)
    while n - pos >= LOG_OVERHEAD:
        size = _ENTRY.unpack_from(buf, pos)[1]
        if size < MIN_RECORD_OVERHEAD:
            raise CorruptRecordError(
                f"Record size {size} is less than the minimum record overhead "
                f"({MIN_RECORD_OVERHEAD})")
        if size > max_message_size:
            raise CorruptRecordError(
                f"Record size {size} exceeds the largest allowable message size "
                f"({max_message_size}).")
        if n - pos < HEADER_SIZE_UP_TO_MAGIC:
            return
        magic = buf[pos + MAGIC_OFFSET]
        if magic > CURRENT_MAGIC:
            raise CorruptRecordError(f"Invalid magic found in record: {magic}")
        end = pos + LOG_OVERHEAD + size
        if end > n:
            return  # partial trailing batch: normal at the end of a fetch
        if magic == 2:
            if size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"Record batch is corrupt (the size of the batch {size + LOG_OVERHEAD} "
                    f"is less than the minimum {RECORD_BATCH_OVERHEAD})")
            yield RecordBatch(buf, pos, end)
        else:
            # Legacy entries hand their key and value out as they are
            # sliced: from bytes, so that they are bytes.
            if isinstance(buf, memoryview):
                yield LegacyBatch(bytes(buf[pos:end]), 0, end - pos)
            else:
                yield LegacyBatch(buf, pos, end)
        pos = end


def read_records(buf, check_crcs=True, skip_control=True):
    """Every data record of ``buf`` in order, as
    ``(offset, timestamp, key, value, headers)`` tuples; control batches are
    skipped as Kafka's consumer does."""
    out = []
    for batch in iter_batches(buf):
        if check_crcs:
            batch.ensure_valid()
        if skip_control and batch.is_control:
            continue
        out.extend(batch.records())
    return out


_first = operator.itemgetter(0)


def encode_batch(records, base_offset=0, compression=CompressionType.NONE,
                 timestamp_type=TimestampType.CREATE_TIME, producer_id=NO_PRODUCER_ID,
                 producer_epoch=NO_PRODUCER_EPOCH, base_sequence=NO_SEQUENCE,
                 is_transactional=False, is_control=False,
                 partition_leader_epoch=NO_PARTITION_LEADER_EPOCH, compression_level=None,
                 max_timestamp=None):
    """Encode one magic v2 batch of ``records`` (a non-empty sequence of
    ``(timestamp, key, value, headers)``): the bytes Kafka's
    ``MemoryRecordsBuilder`` writes for them."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    ctype = CompressionType(compression)
    attributes = int(ctype)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    if not ctype:
        # Header, records and CRC in one pass and one buffer (the
        # producer's path for every uncompressed batch).
        return encode_plain_batch(records, attributes, producer_id, producer_epoch,
                                  base_sequence, base_offset, partition_leader_epoch,
                                  max_timestamp)
    base_timestamp = int(records[0][0])
    if max_timestamp is None:
        # C-level max over the first field (a batch has hundreds of records).
        max_timestamp = int(max(map(_first, records)))
    payload = encode_records(records, base_timestamp)
    payload = compress(ctype, payload, compression_level)
    after = _AFTER_CRC.pack(attributes, len(records) - 1, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence, len(records))
    crc = crc32c(payload, crc32c(after))
    prefix = _PREFIX.pack(base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
                          partition_leader_epoch, CURRENT_MAGIC, crc)
    return b"".join((prefix, after, payload))


def encode_legacy_message(offset, key, value, magic=1, timestamp=NO_TIMESTAMP,
                          attributes=0):
    """One magic v0/v1 message-set entry (for tests of the legacy reader and
    for wrapping compressed inner sets); kchannel never produces these."""
    body = bytearray()
    body += struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for blob in (key, value):
        if blob is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(blob)) + bytes(blob)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    msg = struct.pack(">I", crc) + bytes(body)
    return _ENTRY.pack(offset, len(msg)) + msg
