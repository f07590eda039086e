"""Producer id, epoch and per-partition sequence numbers of an idempotent
producer, with KIP-360's epoch bump: the idempotent part of Kafka's
``TransactionManager`` and its ``TxnPartitionMap``.  Sans-I/O: the Sender
asks and tells, this keeps the books.

Why an epoch bump: a batch that was sent with a sequence number and then
failed for good (too large, retries or delivery.timeout.ms exhausted) leaves
a gap the broker will never see filled, so every later batch of that
partition would fail with OUT_OF_ORDER_SEQUENCE_NUMBER; and a broker that
lost the producer's state answers UNKNOWN_PRODUCER_ID.  The way out (Java's
``requestEpochBumpForPartition``/``bumpIdempotentProducerEpoch``) is a new
epoch of the same producer id: a broker takes a higher epoch starting at
sequence 0, so the affected partitions restart their sequences from 0 and
their batches still waiting (retries) are renumbered in order.  As Java, the
idempotent producer bumps its epoch locally; only an exhausted epoch
(32767) takes a new producer id (InitProducerId).  Unlike Java, the bump
waits until the partitions concerned have nothing in flight, so no response
to a request sent under the old epoch can come back after its batches were
renumbered.  And until the broker acknowledged a partition's first batch
of an epoch, that partition has one batch in flight (``first_unacked``): a
broker with no state for a producer takes any sequence, so a second batch
could be written before a first one that is then refused and retried.
Once a batch of the producer id was written to the partition, a new epoch
(an epoch bump) does not wait so: the broker then takes the epoch only
from sequence 0; nor does a transaction under transaction version 2, whose
first batches the broker verifies and refuses unless they start at 0.

The transactional producer reuses the books (``assign``, ``acked``,
``is_next_sequence``, ``request_epoch_bump``, ``bump_epoch``); its bump
goes through InitProducerId with the current id and epoch instead of
``bump_epoch``'s local increment, then calls ``set_producer_id``.
"""
from kchannel._impl import load_twin
from kchannel.log import get_logger

_senderloop = load_twin("senderloop")

__all__ = ["ProducerSequences", "MAX_EPOCH"]

log = get_logger("kchannel.producer.idempotence")

MAX_EPOCH = 32767      # Short.MAX_VALUE: the epoch is an int16


class ProducerSequences(_senderloop.SequenceState):
    # The fields (producer_id, producer_epoch, _next, _last_acked,
    # _started, bump_partitions, first_sequence_checked) and the per-batch
    # methods (assign, first_unacked, acked) are SequenceState's, in the
    # Sender's twin: compiled there, the Sender calls them as C calls.
    __slots__ = ()

    def has_producer_id(self):
        return self.producer_id >= 0

    def set_producer_id(self, producer_id, epoch):
        """A new producer id and epoch (InitProducerId): every partition
        starts again from sequence 0 with its next new batch."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        log.info("ProducerId set to %d with epoch %d", producer_id, epoch)

    def is_next_sequence(self, tp, sequence):
        """Whether ``sequence`` follows the last acknowledged one (a batch
        that is not the next one failed OUT_OF_ORDER_SEQUENCE_NUMBER only
        because an earlier batch has not been written yet)."""
        return self._last_acked.get(tp, -1) + 1 == sequence

    def is_current(self, batch):
        return (batch.producer_id, batch.producer_epoch) == \
            (self.producer_id, self.producer_epoch)

    def request_epoch_bump(self, tp):
        if tp not in self.bump_partitions:
            log.info("Requesting an epoch bump of producer %d for partition %s-%s",
                     self.producer_id, tp.topic, tp.partition)
            self.bump_partitions.add(tp)

    def bump_epoch(self, restart):
        """Bump the epoch (KIP-360) for the partitions that asked for it;
        ``restart(tp, producer_id, epoch)`` renumbers that partition's
        waiting batches from sequence 0 and returns the next sequence.
        Returns False when the epoch is exhausted: the producer id is reset
        and the caller must get a new one (InitProducerId)."""
        partitions, self.bump_partitions = self.bump_partitions, set()
        if self.producer_epoch >= MAX_EPOCH:
            log.info("Epoch of producer %d exhausted, resetting the producer id",
                     self.producer_id)
            self.producer_id = -1
            self.producer_epoch = -1
            self._next.clear()
            self._last_acked.clear()
            self._started.clear()
            # Kept: bumped (renumbered) once the new producer id is there.
            self.bump_partitions = partitions
            return False
        self.set_producer_id(self.producer_id, self.producer_epoch + 1)
        current = (self.producer_id, self.producer_epoch)
        for tp in partitions:
            self._next[tp] = restart(tp, self.producer_id, self.producer_epoch)
            self._started[tp] = current
            self._last_acked.pop(tp, None)
        return True
