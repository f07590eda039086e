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
from kchannel.log import get_logger

__all__ = ["ProducerSequences", "MAX_EPOCH"]

log = get_logger("kchannel.producer.idempotence")

MAX_EPOCH = 32767      # Short.MAX_VALUE: the epoch is an int16


class ProducerSequences:
    __slots__ = ("producer_id", "producer_epoch", "_next", "_last_acked", "_started",
                 "bump_partitions", "first_sequence_checked")

    def __init__(self):
        self.producer_id = -1
        self.producer_epoch = -1
        self._next = {}           # tp -> next sequence to assign
        self._last_acked = {}     # tp -> last acknowledged sequence
        self._started = {}        # tp -> (producer id, epoch) its sequences count under
        self.bump_partitions = set()  # partitions waiting for an epoch bump
        # Set by the transaction manager for a transaction under transaction
        # version 2: the broker verifies each partition's first batch of the
        # transaction and refuses one that does not start at sequence 0 even
        # where it holds no state for the producer (Kafka 4's
        # ProducerAppendInfo.checkSequence), so no batch need wait.
        self.first_sequence_checked = False

    def has_producer_id(self):
        return self.producer_id >= 0

    def set_producer_id(self, producer_id, epoch):
        """A new producer id and epoch (InitProducerId): every partition
        starts again from sequence 0 with its next new batch."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        log.info("ProducerId set to %d with epoch %d", producer_id, epoch)

    def assign(self, tp, batch, in_flight):
        """Give a new batch its producer id, epoch and sequence; False when
        it must wait: its partition's sequences count under an older epoch
        and batches of that epoch are still in flight (Java's
        ``shouldStopDrainBatchesForPartition``), or a bump is pending."""
        if tp in self.bump_partitions:
            return False
        current = (self.producer_id, self.producer_epoch)
        started = self._started.get(tp)
        if started != current:
            if in_flight:
                return False
            self._started[tp] = current
            self._next[tp] = 0
            if started is not None and started[0] == self.producer_id and \
                    tp in self._last_acked:
                # The broker holds this producer's state for the partition
                # (a batch of an earlier epoch was written): it takes a new
                # epoch only from sequence 0, so the epoch's batches may go
                # together (-1: nothing acknowledged yet in this epoch).
                # Every transaction under transaction version 2 starts an
                # epoch; its first batch going alone cost a round trip each.
                self._last_acked[tp] = -1
            else:
                self._last_acked.pop(tp, None)
        elif in_flight and tp not in self._last_acked and not self.first_sequence_checked:
            return False        # first_unacked, inline (a call per batch)
        seq = self._next[tp]
        batch.producer_id = self.producer_id
        batch.producer_epoch = self.producer_epoch
        batch.base_sequence = seq
        self._next[tp] = (seq + len(batch.records)) & 0x7FFFFFFF
        return True

    def first_unacked(self, tp, in_flight):
        """Whether a batch of ``tp`` must wait because nothing of the
        epoch is written yet while a batch is in flight: a broker with no
        state for this producer id takes any sequence number, so a second
        batch could be written before a first one that is then rejected
        (too large, say) and sent again, out of order.  Not when a batch of
        an earlier epoch of the same producer id was written (``assign``):
        then the broker refuses a new epoch's batch that does not start at
        sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER, retried behind the
        first, as Kafka's), nor under transaction version 2
        (``first_sequence_checked``)."""
        return bool(in_flight) and tp not in self._last_acked and \
            not self.first_sequence_checked

    def acked(self, batch):
        """A batch was written: its last sequence is acknowledged."""
        tp = batch.tp
        if self._started.get(tp) == (batch.producer_id, batch.producer_epoch):
            last = (batch.base_sequence + len(batch.records) - 1) & 0x7FFFFFFF
            if last > self._last_acked.get(tp, -1):
                self._last_acked[tp] = last

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
