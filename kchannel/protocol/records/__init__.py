"""Kafka record batches, sans-I/O (see ``batch`` and ``compression``)."""
from kchannel.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kchannel.protocol.records.batch import (
    CURRENT_MAGIC,
    DecodedRecord,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    LegacyBatch,
    PartitionReader,
    QueuedRecord,
    RecordBatch,
    RecordReader,
    TimestampType,
    batch_at,
    crc32c,
    decode_records,
    make_records,
    encode_batch,
    encode_legacy_message,
    encode_records,
    iter_batches,
    read_records,
    track_records,
)
from kchannel.protocol.records.compression import (
    CompressionType,
    check_codec,
    codec_available,
    compress,
    decompress,
)

__all__ = [
    "CURRENT_MAGIC", "LOG_OVERHEAD", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE",
    "NO_TIMESTAMP", "RECORD_BATCH_OVERHEAD", "LegacyBatch", "RecordBatch", "TimestampType",
    "QueuedRecord",
    "DecodedRecord", "RecordReader", "crc32c", "decode_records", "make_records", "encode_batch",
    "encode_legacy_message", "encode_records",
    "iter_batches", "read_records", "track_records", "PartitionReader", "batch_at",
    "CompressionType", "check_codec",
    "codec_available",
    "compress", "decompress", "CorruptRecordError", "UnsupportedCompressionTypeError",
]
