"""The decoded record, named: what ``decode_records`` and
``RecordBatch.records()`` return one of per record (both twins)."""
from typing import List, NamedTuple, Optional, Tuple

__all__ = ["DecodedRecord"]


class DecodedRecord(NamedTuple):
    """One record of a batch as decoded, before the consumer names its
    topic and partition (``ConsumerRecord``).  A tuple, so that
    ``(offset, timestamp, key, value, headers)`` unpacking keeps working."""

    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Tuple[str, Optional[bytes]]]
