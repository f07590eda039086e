"""Record-batch hot loops, pure-Python twin of ``kchannel._crecords``.

Both twins expose the same names with the same behaviour:

* ``crc32c(data, crc=0)``: CRC-32C (Castagnoli) of ``data``, continuing from
  ``crc`` (Kafka's ``Crc32C``; the checksum of a v2 record batch).
* ``encode_records(records, base_timestamp)``: the records section of a v2
  batch, uncompressed.  ``records`` is a sequence of
  ``(timestamp, key, value, headers)`` with ``key``/``value`` bytes-like or
  None and ``headers`` a sequence of ``(str key, bytes-like or None)``; the
  offset delta of each record is its index.  Raises ``ValueError`` for values
  that cannot be represented.
* ``decode_records(buf, count, base_offset, base_timestamp, log_append_time)``:
  the ``count`` records that make up ``buf`` (all of it), as a list of
  ``DecodedRecord(offset, timestamp, key, value, headers)`` (a named
  tuple, ``kchannel.protocol.records.record``), ``headers`` a list of
  ``(str, bytes or None)``.  ``log_append_time`` is None, or the batch's max
  timestamp that replaces every record's own (LogAppendTime batches).  Any
  malformed input raises ``CorruptRecordError`` (Kafka's
  ``InvalidRecordException``/``CorruptRecordException``), never another
  exception.
* ``RecordReader(buf, count, base_offset, base_timestamp, log_append_time,
  cls, topic, partition, timestamp_type)``: the same records, checked the
  same way, ``read(n)`` at a time (``remaining`` left), as ``make_records``
  would build them: ``cls(topic, partition, offset, timestamp,
  timestamp_type, key, value, headers, None)`` each (``cls`` a tuple
  subclass of 9 fields: the consumer's ``ConsumerRecord``).
* ``make_records(cls, records, start, stop, topic, partition,
  timestamp_type)``: those ``cls`` records for ``records[start:stop]`` of
  ``decode_records``' output.
* ``QueuedRecord(timestamp, key, value, headers)``: a record as the producer
  queues it in a batch until it is encoded (read-only attributes of those
  names; unpacks like the ``(timestamp, key, value, headers)`` tuple the
  encoders also take).  Here a ``__slots__`` class; the compiled twin's is a
  C type the garbage collector does not track (its fields are an int, bytes
  and a tuple of str/bytes pairs: no reference cycle possible), which the
  encoders read without an attribute lookup.
* ``RecordReader.read_into(out, n)``: ``read(n)``'s records appended to the
  list ``out`` (nothing appended when it raises); returns how many.  The
  compiled twin leaves them untracked by the garbage collector until
  ``track_records(out, start)`` (a no-op here), which the caller runs, also
  when it fails, before anyone else sees the list: a consumer poll that
  gathers many small batches then sets off no collection that finds the
  first batches' records alive and promotes them to older generations.
* ``PartitionReader(buf, cls, topic, partition, check_crcs=True,
  read_committed=False, tuple_headers=False)``: every batch of one partition's fetched records
  ``buf`` (the consumer's walk of a Fetch response's records).
  ``read_into(out, n, position)`` appends up to ``n`` records of offset
  ``position`` and above to ``out`` (as ``RecordReader.read_into``, with
  its ``tuple_headers``),
  returns how many, and leaves in ``position`` the position after them:
  batches checked as ``iter_batches`` and ``RecordBatch.ensure_valid``
  (``check_crcs``) do, with the same errors; batches wholly below the
  position and control batches skipped (the position moved past control
  and empty batches); a batch cut short at the end ends the walk.  It stops
  before a batch that it leaves to the caller (legacy magic v0/v1,
  compressed, or with a producer id under ``read_committed``) and then
  says ``special = (start, end)``, the batch's span in ``buffer``; the next
  call goes on after it.  A ``CorruptRecordError`` met after records were
  appended is raised by the next call instead; after it the walk goes on
  with the next batch (a bad CRC or record) or ends (a bad batch size or
  magic).
"""
import itertools
import struct

from kchannel.errors import CorruptRecordError
from kchannel.protocol.records.record import DecodedRecord

_new = tuple.__new__

__all__ = ["crc32c", "encode_records", "encode_plain_batch", "decode_records", "RecordReader",
           "PartitionReader", "make_records", "track_records", "QueuedRecord"]


class QueuedRecord:
    """One record waiting in a producer batch: ``timestamp`` (ms, int),
    ``key`` and ``value`` (bytes or None), ``headers`` (a tuple of
    ``(str, bytes or None)`` tuples)."""

    __slots__ = ("timestamp", "key", "value", "headers")

    def __init__(self, timestamp, key, value, headers):
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __iter__(self):
        return iter((self.timestamp, self.key, self.value, self.headers))

    def __repr__(self):
        return (f"QueuedRecord(timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


def _timestamp(record):
    """A record's timestamp: a QueuedRecord's (either twin's), or a tuple's
    first field."""
    return record[0] if isinstance(record, (tuple, list)) else record.timestamp


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    table = _TABLE
    c = (~crc) & 0xFFFFFFFF
    for b in memoryview(data).cast("B"):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return (~c) & 0xFFFFFFFF


# -- encoding ---------------------------------------------------------------

def _uvarint(out, v):
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint(out, v):
    if not -0x80000000 <= v <= 0x7FFFFFFF:
        raise ValueError(f"{v} does not fit in a varint")
    _uvarint(out, ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def _varlong(out, v):
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"{v} does not fit in a varlong")
    _uvarint(out, ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _bytes(v, what):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise ValueError(f"record {what} must be bytes or None, got {type(v).__name__}")


def _int64(v):
    v = int(v)
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"{v} does not fit in a varlong")
    return v


def encode_records(records, base_timestamp):
    base_timestamp = _int64(base_timestamp)
    out = bytearray()
    body = bytearray()
    for delta, record in enumerate(records):
        if type(record) is QueuedRecord:
            timestamp = record.timestamp
            key = record.key
            value = record.value
            headers = record.headers
        else:
            timestamp, key, value, headers = record
        key = _bytes(key, "key")
        value = _bytes(value, "value")
        body.clear()
        body.append(0)  # record attributes: unused, always 0
        _varlong(body, _int64(timestamp) - base_timestamp)
        _varint(body, delta)
        if key is None:
            body.append(1)  # varint -1
        else:
            _varint(body, len(key))
            body += key
        if value is None:
            body.append(1)
        else:
            _varint(body, len(value))
            body += value
        if headers:
            _varint(body, len(headers))
            for hkey, hvalue in headers:
                if not isinstance(hkey, str):
                    raise ValueError(
                        f"header key must be a str, got {type(hkey).__name__}")
                hk = hkey.encode("utf-8")
                _varint(body, len(hk))
                body += hk
                hvalue = _bytes(hvalue, "header value")
                if hvalue is None:
                    body.append(1)
                else:
                    _varint(body, len(hvalue))
                    body += hvalue
        else:
            body.append(0)
        _varint(out, len(body))
        out += body
    return bytes(out)


# The v2 batch header: base offset .. crc, then attributes .. record count
# (batch.py's _PREFIX and _AFTER_CRC).
_PREFIX = struct.Struct(">qiibI")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_BATCH_HEADER = 61


def encode_plain_batch(records, attributes, producer_id, producer_epoch, base_sequence,
                       base_offset=0, partition_leader_epoch=-1, max_timestamp=None,
                       size_hint=0):
    """One uncompressed magic v2 batch of ``records`` (non-empty), header
    and CRC included: the bytes ``batch.encode_batch`` builds.
    ``max_timestamp`` None: the records' largest; ``size_hint`` (the
    expected size) only sizes the compiled twin's buffer."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if not -0x8000 <= producer_epoch <= 0x7FFF or not -0x8000 <= attributes <= 0x7FFF:
        raise ValueError("producer epoch and attributes are int16")
    base_timestamp = _int64(_timestamp(records[0]))
    payload = encode_records(records, base_timestamp)
    if max_timestamp is None:
        max_timestamp = _int64(max(map(_timestamp, records)))
    after = _AFTER_CRC.pack(attributes, len(records) - 1, base_timestamp, max_timestamp,
                            producer_id, producer_epoch, base_sequence, len(records))
    crc = crc32c(payload, crc32c(after))
    prefix = _PREFIX.pack(base_offset, _BATCH_HEADER - 12 + len(payload),
                          partition_leader_epoch, 2, crc)
    return b"".join((prefix, after, payload))


# -- decoding ---------------------------------------------------------------

def _corrupt(msg):
    return CorruptRecordError(msg)


def decode_records(buf, count, base_offset, base_timestamp, log_append_time):
    buf = bytes(buf)
    _check_count(buf, count)
    # (Named here, not in _records: RecordReader, the consumer's path,
    # unpacks the plain tuples straight into its records.)
    return [_new(DecodedRecord, r)
            for r in _records(buf, count, base_offset, base_timestamp, log_append_time)]


def _check_count(buf, count):
    if count < 0:
        raise _corrupt(f"Found invalid record count {count} in the record batch")
    # Every record takes at least 7 bytes: refuse a hostile count before
    # allocating anything for it.
    if count > len(buf) // 7 + 1:
        raise _corrupt(f"Found invalid record count {count} in a batch of {len(buf)} bytes")


def _records(buf, count, base_offset, base_timestamp, log_append_time):
    """The records of ``buf`` one by one, then (once the ``count``-th is
    taken and the generator resumed) the check that nothing is left."""
    end = len(buf)
    pos = 0
    limit = end  # varints of a record may not run past the record

    def uvarint(limit_bits):
        nonlocal pos
        value = 0
        shift = 0
        while True:
            if pos >= limit:
                raise _corrupt("Record is truncated (varint runs past the batch)")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= limit_bits:
                raise _corrupt("Record has a varint that is too long")
        return value

    def varint():
        v = uvarint(35)
        if v > 0xFFFFFFFF:
            raise _corrupt("Record has a varint that does not fit in 32 bits")
        return (v >> 1) ^ -(v & 1)

    def varlong():
        v = uvarint(70)
        if v > 0xFFFFFFFFFFFFFFFF:
            raise _corrupt("Record has a varlong that does not fit in 64 bits")
        return (v >> 1) ^ -(v & 1)

    def blob(stop, what):
        nonlocal pos
        n = varint()
        if n < 0:
            if n == -1:
                return None
            raise _corrupt(f"Invalid negative {what} size {n}")
        if n > stop - pos:
            raise _corrupt(f"Record {what} of {n} bytes runs past the record")
        v = buf[pos:pos + n]
        pos += n
        return v

    for _ in range(count):
        size = varint()
        if size < 0 or size > end - pos:
            raise _corrupt(f"Invalid record size {size}: {end - pos} bytes left in the batch")
        start = pos
        stop = limit = pos + size
        if pos >= stop:
            raise _corrupt("Record is empty")
        pos += 1  # attributes: unused
        ts_delta = varlong()
        offset_delta = varint()
        key = blob(stop, "key")
        value = blob(stop, "value")
        nheaders = varint()
        if nheaders < 0:
            raise _corrupt(f"Found invalid number of record headers {nheaders}")
        if nheaders > (stop - pos) // 2:
            raise _corrupt(f"Found invalid number of record headers {nheaders}")
        headers = []
        for _h in range(nheaders):
            hk = blob(stop, "header key")
            if hk is None:
                raise _corrupt("Invalid negative header key size")
            headers.append((hk.decode("utf-8", "replace"), blob(stop, "header value")))
        limit = end
        if pos != stop:
            raise _corrupt(f"Invalid record size: expected to read {size} bytes in record "
                           f"payload, but instead read {pos - start}")
        timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
        if not -0x8000000000000000 <= timestamp <= 0x7FFFFFFFFFFFFFFF:
            raise _corrupt(f"Record timestamp {timestamp} overflows")
        yield (base_offset + offset_delta, timestamp, key, value, headers)
    if pos != end:
        raise _corrupt("Incorrect declared batch size, records still remaining in file")


def make_records(cls, records, start, stop, topic, partition, timestamp_type):
    """``[cls(topic, partition, offset, timestamp, timestamp_type, key, value,
    headers, None) for each of records[start:stop]]``: the consumer's
    ``ConsumerRecord`` (a named tuple ``cls``) for decoded records
    ``(offset, timestamp, key, value, headers)``, built without an
    intermediate tuple per record."""
    new = tuple.__new__
    return [new(cls, (topic, partition, offset, ts, timestamp_type, key, value, headers, None))
            for offset, ts, key, value, headers in records[start:stop]]


class RecordReader:
    """The ``count`` records of ``buf`` (as ``decode_records`` reads them,
    with the same checks and errors), ``read(n)`` at a time, as
    ``make_records`` builds them: ``cls(topic, partition, offset, timestamp,
    timestamp_type, key, value, headers, None)``, ``headers`` a list of
    ``(str, bytes or None)`` pairs, or with ``tuple_headers`` a tuple of
    them (the compiled twin then leaves records of such fields untracked by
    the garbage collector: see its ``_track_records``).  The check that the
    batch holds nothing more runs in the ``read`` that reaches ``remaining
    == 0`` (a batch of 0 records: the first ``read``).  After a
    ``CorruptRecordError`` ``remaining`` is 0 and every ``read`` raises it
    again."""

    def __init__(self, buf, count, base_offset, base_timestamp, log_append_time, cls, topic,
                 partition, timestamp_type, tuple_headers=False):
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise TypeError("cls must be a tuple subclass")
        buf = bytes(buf)
        _check_count(buf, count)
        self._it = _records(buf, count, base_offset, base_timestamp, log_append_time)
        self._fields = (cls, topic, partition, timestamp_type)
        self._tuple_headers = bool(tuple_headers)
        self._remaining = count
        self._error = None
        self._checked = False

    @property
    def remaining(self):
        """Records not read yet (0 after an error)."""
        return self._remaining

    def read(self, n):
        """The next (up to) ``n`` records, as a list."""
        if self._error is not None:
            raise self._error
        n = max(0, min(n, self._remaining))
        cls, topic, partition, ttype = self._fields
        new = tuple.__new__
        try:
            if self._tuple_headers:
                out = [new(cls, (topic, partition, offset, ts, ttype, key, value,
                                 tuple(headers), None))
                       for offset, ts, key, value, headers in itertools.islice(self._it, n)]
            else:
                out = [new(cls, (topic, partition, offset, ts, ttype, key, value, headers, None))
                       for offset, ts, key, value, headers in itertools.islice(self._it, n)]
            self._remaining -= n
            if self._remaining == 0 and not self._checked:
                self._checked = True
                for _ in self._it:
                    pass
        except CorruptRecordError as exc:
            # Where the batch went wrong is where it stays wrong.
            self._error = exc
            self._remaining = 0
            raise
        return out

    def read_into(self, out, n):
        """``read(n)``'s records appended to ``out``; returns how many."""
        records = self.read(n)
        out += records
        return len(records)


def track_records(records, start=0):
    """Nothing to do in the pure twin (see the module docstring)."""


# Batch header fields that PartitionReader reads (see batch.py's _HEADER).
_BATCH_SIZE = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12
_MIN_RECORD_OVERHEAD = 14
_BATCH_HEADER = 61
_CRC_FROM = 21
_LIMIT = 1 << 62


class PartitionReader:
    """See the module docstring: the batches of one partition's records."""

    def __init__(self, buf, cls, topic, partition, check_crcs=True, read_committed=False,
                 tuple_headers=False):
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise TypeError("cls must be a tuple subclass")
        self._buffer = buf if type(buf) is bytes else memoryview(buf).cast("B")
        self._fields = (cls, topic, partition, bool(tuple_headers))
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self._pos = 0
        self._reader = None
        self._prefix = False
        self._deferred = None
        self._position = 0
        self._special = None
        self._last_next = -1

    @property
    def position(self):
        """The position reached by the last ``read_into``: past its last
        record, or, once the walk reached the end of the records, the next
        offset of the last whole plain batch if that is further (Kafka's
        ``nextFetchOffset``: a v2 batch keeps its last offset when
        compaction removed its last records, and the next fetch must start
        after it, not inside it again)."""
        return self._position

    @property
    def special(self):
        """``(start, end)`` in ``buffer`` of the batch the last
        ``read_into`` stopped at for the caller to read, else None."""
        return self._special

    @property
    def buffer(self):
        """The records (bytes, or a memoryview of bytes)."""
        return self._buffer

    def read_into(self, out, n, position):
        start = len(out)
        self._position = position
        self._special = None
        if self._deferred is not None:
            exc, self._deferred = self._deferred, None
            raise exc
        try:
            while len(out) - start < n:
                if self._reader is not None:
                    self._read_batch(out, n - (len(out) - start))
                elif not self._next_batch():
                    if self._special is None and self._last_next > self._position:
                        self._position = self._last_next
                    break
        except CorruptRecordError as exc:
            self._reader = None
            if len(out) > start:
                self._deferred = exc
                return len(out) - start
            raise
        return len(out) - start

    def _read_batch(self, out, n):
        reader = self._reader
        if self._prefix:
            # A seek into the middle of the batch: the records before the
            # position are decoded and dropped (offsets grow in a batch).
            self._prefix = False
            while reader.remaining:
                record = reader.read(1)[0]
                if record[2] >= self._position:
                    out.append(record)
                    self._position = record[2] + 1
                    break
        elif reader.read_into(out, n):
            self._position = out[-1][2] + 1
        if not reader.remaining:
            self._reader = None

    def _next_batch(self):
        buf = self._buffer
        n = len(buf)
        while True:
            pos = self._pos
            if n - pos < _LOG_OVERHEAD:
                return False
            size = _BATCH_SIZE.unpack_from(buf, pos + 8)[0]
            if size < _MIN_RECORD_OVERHEAD:
                self._pos = n
                raise _corrupt(f"Record size {size} is less than the minimum record overhead "
                               f"({_MIN_RECORD_OVERHEAD})")
            if n - pos < 17:
                return False
            magic = buf[pos + 16]
            if magic > 2:
                self._pos = n
                raise _corrupt(f"Invalid magic found in record: {magic}")
            end = pos + _LOG_OVERHEAD + size
            if end > n:
                return False    # partial trailing batch: normal at the end of a fetch
            if magic == 2 and size + _LOG_OVERHEAD < _BATCH_HEADER:
                self._pos = n
                raise _corrupt(f"Record batch is corrupt (the size of the batch "
                               f"{size + _LOG_OVERHEAD} is less than the minimum "
                               f"{_BATCH_HEADER})")
            self._pos = end
            if magic != 2:
                self._special = (pos, end)
                return False
            (base_offset, _size, _epoch, _magic, stored, attributes, last_delta, base_ts,
             max_ts, producer_id, _pepoch, _seq, count) = _BATCH_HEAD.unpack_from(buf, pos)
            if attributes & 0x07 or (self._read_committed and producer_id >= 0) or \
                    not -_LIMIT <= base_offset <= _LIMIT:
                self._special = (pos, end)
                return False
            if self._check_crcs:
                computed = crc32c(memoryview(buf)[pos + _CRC_FROM:end])
                if computed != stored:
                    raise _corrupt(f"Record is corrupt (stored crc = {stored}, computed crc = "
                                   f"{computed})")
            next_offset = base_offset + last_delta + 1
            self._last_next = next_offset
            if next_offset <= self._position:
                continue
            if attributes & 0x20:
                self._position = max(self._position, next_offset)
                continue
            cls, topic, partition, tuple_headers = self._fields
            log_append = attributes & 0x08
            reader = RecordReader(memoryview(buf)[pos + _BATCH_HEADER:end], count, base_offset,
                                  base_ts, max_ts if log_append else None, cls, topic,
                                  partition, "LogAppendTime" if log_append else "CreateTime",
                                  tuple_headers)
            if not count:
                reader.read(0)  # checks that the batch holds nothing more
                self._position = max(self._position, next_offset)
                continue
            self._reader = reader
            self._prefix = base_offset < self._position
            return True

