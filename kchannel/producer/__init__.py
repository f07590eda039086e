"""Kafka producer on kchannel channels (``kchannel.Producer``)."""
from kchannel.producer.accumulator import FutureRecordMetadata, RecordMetadata
from kchannel.producer.producer import Producer

__all__ = ["Producer", "FutureRecordMetadata", "RecordMetadata"]
