"""Kafka consumer on kchannel channels (``kchannel.Consumer``)."""
from kchannel.consumer.consumer import Consumer, OffsetAndMetadata, OffsetAndTimestamp
from kchannel.consumer.fetcher import ConsumerRecord
from kchannel.client.group_metadata import ConsumerGroupMetadata

__all__ = ["Consumer", "ConsumerGroupMetadata", "ConsumerRecord", "OffsetAndMetadata",
           "OffsetAndTimestamp"]
