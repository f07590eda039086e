"""Kafka consumer on kchannel channels (``kchannel.Consumer``)."""
from kchannel.consumer.consumer import Consumer, OffsetAndMetadata, OffsetAndTimestamp
from kchannel.consumer.fetcher import ConsumerRecord

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp"]
