"""Record-batch compression codecs, as Kafka's ``CompressionType``.

gzip comes with Python (zlib).  snappy, lz4 and zstd come from ``cramjam``
(one library for all three, with binary wheels everywhere), a dependency of
kchannel; in an installation that lacks it anyway, asking for one of them
raises ``UnsupportedCompressionTypeError`` saying what to install.

Framing is what Kafka's Java client writes and reads:

* snappy: xerial's ``SnappyOutputStream`` framing (magic header, then
  length-prefixed raw snappy blocks of at most 32 KiB); raw unframed snappy
  (as librdkafka writes) is read too, as xerial's ``SnappyInputStream`` does;
* lz4: the LZ4 frame format with independent 64 KiB blocks and no checksums,
  as ``KafkaLZ4BlockOutputStream`` writes; any standard frame is read.  Magic
  v0 message sets carry the header checksum computed the old, broken way
  (over the magic number too), which is accepted for them as Kafka does;
* zstd: a standard zstd frame (level 3, Kafka's default).
"""
import enum
import struct
import zlib

from kchannel.errors import CorruptRecordError, UnsupportedCompressionTypeError

__all__ = ["CompressionType", "compress", "decompress", "codec_available",
           "check_codec"]


class CompressionType(enum.IntEnum):
    """Kafka's compression ids (the low three bits of batch attributes)."""
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def name_lower(self):
        return self.name.lower()

    @classmethod
    def for_name(cls, name):
        """``compression.type`` value -> CompressionType (Kafka's
        ``CompressionType.forName``)."""
        if isinstance(name, CompressionType):
            return name
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise ValueError(f"Unknown compression name: {name}") from None


try:  # pragma: no cover - depends on the installation
    import cramjam as _cramjam
except ImportError:  # pragma: no cover
    _cramjam = None


def codec_available(ctype):
    ctype = CompressionType(ctype)
    if ctype in (CompressionType.NONE, CompressionType.GZIP):
        return True
    return _cramjam is not None


def check_codec(ctype):
    """Raise ``UnsupportedCompressionTypeError`` when ``ctype`` cannot be used
    in this installation, naming what to install."""
    ctype = CompressionType(ctype)
    if not codec_available(ctype):
        raise UnsupportedCompressionTypeError(
            f"compression type {ctype.name.lower()} needs cramjam, a dependency of kchannel "
            "that is missing from this installation: pip install cramjam")


# -- gzip ---------------------------------------------------------------------

def _gzip_compress(data, level):
    c = zlib.compressobj(6 if level is None or level < 0 else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data):
    d = zlib.decompressobj(31)
    out = d.decompress(data)
    if not d.eof:
        raise CorruptRecordError("Truncated gzip data in a compressed record batch")
    return out


# -- snappy (xerial framing) ---------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data):
    out = [_XERIAL_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(_cramjam.snappy.compress_raw(bytes(view[i:i + _XERIAL_BLOCK])))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data):
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(_cramjam.snappy.decompress_raw(data))
    if len(data) < 16:
        raise CorruptRecordError("Truncated xerial snappy header")
    pos = 16
    out = []
    n = len(data)
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("Truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or size > n - pos:
            raise CorruptRecordError(f"Invalid xerial snappy block length {size}")
        out.append(bytes(_cramjam.snappy.decompress_raw(data[pos:pos + size])))
        pos += size
    return b"".join(out)


# -- lz4 (frame format) -----------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_small(data, seed=0):
    """XXH32 of fewer than 16 bytes (the LZ4 frame header checksum)."""
    n = len(data)
    if n >= 16:
        raise ValueError("xxh32_small takes fewer than 16 bytes")
    h = (seed + _P5 + n) & _M32
    i = 0
    while i + 4 <= n:
        h = (h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (h + data[i] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# FLG: version 01, independent blocks; BD: 64 KiB blocks (KafkaLZ4BlockOutputStream).
_LZ4_DESCRIPTOR = bytes((0x60, 0x40))
_LZ4_HEADER = _LZ4_MAGIC + _LZ4_DESCRIPTOR + bytes(((xxh32_small(_LZ4_DESCRIPTOR) >> 8) & 0xFF,))


def _lz4_compress(data):
    out = [_LZ4_HEADER]
    view = memoryview(data)
    for i in range(0, len(data), _LZ4_BLOCK):
        raw = bytes(view[i:i + _LZ4_BLOCK])
        block = bytes(_cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            # Incompressible: stored as is, flagged by the high bit (as Java).
            out.append(struct.pack("<I", len(raw) | 0x80000000))
            out.append(raw)
        else:
            out.append(struct.pack("<I", len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def _lz4_fix_legacy_header(data):
    # Kafka before 0.10 (magic 0) computed the header checksum over the magic
    # number and the descriptor; recompute it the standard way.
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        return data
    flg = data[4]
    desc_len = 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(data) < 4 + desc_len + 1:
        return data
    desc = data[4:4 + desc_len]
    hc = (xxh32_small(desc) >> 8) & 0xFF
    return data[:4 + desc_len] + bytes((hc,)) + data[4 + desc_len + 1:]


def _lz4_decompress(data, magic):
    if magic == 0:
        data = _lz4_fix_legacy_header(data)
    return bytes(_cramjam.lz4.decompress(data))


# -- zstd ---------------------------------------------------------------------------

def _zstd_compress(data, level):
    return bytes(_cramjam.zstd.compress(data, level=3 if level is None else level))


def _zstd_decompress(data):
    return bytes(_cramjam.zstd.decompress(data))


# -- dispatch ---------------------------------------------------------------------

def compress(ctype, data, level=None):
    """Compress the records section ``data`` with ``ctype``."""
    ctype = CompressionType(ctype)
    if ctype is CompressionType.NONE:
        return bytes(data)
    check_codec(ctype)
    if ctype is CompressionType.GZIP:
        return _gzip_compress(data, level)
    if ctype is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if ctype is CompressionType.LZ4:
        return _lz4_compress(data)
    return _zstd_compress(data, level)


def decompress(ctype, data, magic=2):
    """Decompress a batch's records section.  Malformed data raises
    ``CorruptRecordError``; an unknown codec id too (Kafka's
    ``CompressionType.forId`` fails the batch); a codec that is not installed
    raises ``UnsupportedCompressionTypeError``."""
    try:
        ctype = CompressionType(ctype)
    except ValueError:
        raise CorruptRecordError(f"Unknown compression type id: {ctype}") from None
    if ctype is CompressionType.NONE:
        return bytes(data)
    check_codec(ctype)
    data = bytes(data)
    try:
        if ctype is CompressionType.GZIP:
            return _gzip_decompress(data)
        if ctype is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if ctype is CompressionType.LZ4:
            return _lz4_decompress(data, magic)
        return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # zlib.error, cramjam.DecompressionError, ...
        raise CorruptRecordError(
            f"Could not decompress a {ctype.name.lower()} record batch: {exc}") from None
