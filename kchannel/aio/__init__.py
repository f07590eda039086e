"""asyncio clients: ``AIOProducer`` and ``AIOConsumer`` (the names of
``confluent_kafka.aio``) and ``AIOAdmin``: ``kchannel.Producer``,
``kchannel.Consumer`` and ``kchannel.Admin`` driven by the running event
loop instead of a thread.  Needs ``greenlet``
(the consumer's blocking-style code awaits the loop through it)."""
from kchannel.aio.admin import AIOAdmin
from kchannel.aio.consumer import AIOConsumer
from kchannel.aio.producer import AIOProducer

__all__ = ["AIOProducer", "AIOConsumer", "AIOAdmin"]
