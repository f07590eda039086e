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
* ``RecordReader.read_into(out, n)``: ``read(n)``'s records appended to the
  list ``out`` (nothing appended when it raises); returns how many.  The
  compiled twin leaves them untracked by the garbage collector until
  ``track_records(out, start)`` (a no-op here), which the caller runs, also
  when it fails, before anyone else sees the list: a consumer poll that
  gathers many small batches then sets off no collection that finds the
  first batches' records alive and promotes them to older generations.
"""
import itertools
import operator
import struct

from kchannel.errors import CorruptRecordError
from kchannel.protocol.records.record import DecodedRecord

_new = tuple.__new__

__all__ = ["crc32c", "encode_records", "encode_plain_batch", "decode_records", "RecordReader",
           "make_records", "track_records"]


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
    for delta, (timestamp, key, value, headers) in enumerate(records):
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
_first = operator.itemgetter(0)


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
    base_timestamp = _int64(records[0][0])
    payload = encode_records(records, base_timestamp)
    if max_timestamp is None:
        max_timestamp = _int64(max(map(_first, records)))
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
