"""Kafka's producer ``Sender``: the network thread that drains the
accumulator into Produce requests, retries what can be retried, and keeps
the idempotent producer's id and sequence numbers (the part of Kafka's
``TransactionManager`` that idempotence needs).

Ordering with retries: with idempotence a partition whose batch must be
retried takes no new batch until its in-flight batches have all come back;
retried batches go back in sequence order, so the broker sees the sequences
it expects and drops any duplicate of a batch it had already written.
With ``max.in.flight.requests.per.connection=1`` a partition is muted while
one of its batches is in flight (Kafka's ``guaranteeMessageOrder``).

A sequence gap (a batch sent and then failed for good) or a broker that lost
the producer's state bumps the epoch (KIP-360, see
:mod:`kchannel.producer.idempotence`); a batch of several records rejected
with MESSAGE_TOO_LARGE is split into smaller batches (at most ``batch.size``) and sent
again (Kafka's ``splitAndReenqueue``).
"""

from kchannel import _impl, errors
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import (INVALID_METADATA_ERRORS, RETRIABLE_ERRORS, Errors,
                                      exception_for)
from kchannel.producer.idempotence import ProducerSequences
from kchannel.producer.transaction_manager import State
from kchannel.protocol.records import CompressionType

__all__ = ["Sender", "RETRIABLE_ERRORS", "INVALID_METADATA_ERRORS", "encode_produce_request",
           "encode_produce_request_one", "produce_request_parts", "produce_request_parts_one"]

log = get_logger("kchannel.producer.sender")

_INIT_PRODUCER_ID = messages.INIT_PRODUCER_ID.api_key
_FATAL_ERROR, _ABORTABLE_ERROR, _ABORTING_TRANSACTION = (
    State.FATAL_ERROR, State.ABORTABLE_ERROR, State.ABORTING_TRANSACTION)

# The per-pass and per-request path (run_once, the ready scan and drain, the
# Produce request and its response): a twin, compiled when built.
_senderloop = _impl.load_twin("senderloop")
SenderLoop = _senderloop.SenderLoop
produce_request_parts = _senderloop.produce_request_parts
produce_request_parts_one = _senderloop.produce_request_parts_one
encode_produce_request = _senderloop.encode_produce_request
encode_produce_request_one = _senderloop.encode_produce_request_one
produce_response_decoder = _senderloop.produce_response_decoder
_PRODUCE = messages.PRODUCE.api_key


# RETRIABLE_ERRORS (Java's RetriableException) and INVALID_METADATA_ERRORS
# (also InvalidMetadataException: refresh metadata) come from
# kchannel.protocol.errors, the one definition the consumer shares.


class Sender(SenderLoop):
    def __init__(self, client, accumulator, metadata, values, time, sensors=None):
        self.client = client
        # A response per batch sent: read directly in its usual shape.
        # (this Sender's twin's decoder: its ProduceResult is the one the
        # twin's _handle_produce_response reads)
        client.client.add_response_decoder(_PRODUCE, self.response_decoder)
        self.accumulator = accumulator
        self.metadata = metadata
        self.time = time
        self.acks = values["acks"]
        self.max_request_size = values["max.request.size"]
        self.request_timeout_ms = values["request.timeout.ms"]
        self.retries = values["retries"]
        self.max_in_flight = values["max.in.flight.requests.per.connection"]
        self.delivery_timeout_ms = values["delivery.timeout.ms"]
        self.retry_backoff_ms = values["retry.backoff.ms"]
        self.transaction_timeout_ms = values["transaction.timeout.ms"]
        self.idempotent = values["enable.idempotence"]
        self.compression = CompressionType.for_name(values["compression.type"])
        self.compression_level = {
            CompressionType.GZIP: values["compression.gzip.level"],
            CompressionType.LZ4: values["compression.lz4.level"],
            CompressionType.ZSTD: values["compression.zstd.level"],
        }.get(self.compression)
        self.guarantee_order = self.max_in_flight == 1
        self.running = True
        self.force_close = False
        self.fatal_error = None
        self.sequences = ProducerSequences()
        self._pid_in_flight = False
        self._pid_next_attempt_ms = 0
        # tp -> batches in flight (a plain dict, a C field of the compiled
        # twin: its get() per batch drained, answered and removed is a C
        # lookup, where a defaultdict's was a method call, ~440 instructions)
        self.in_flight = {}
        self.retrying = set()                             # idempotent tps with a retry pending
        self.metadata_wait_ms = 0
        # The Produce version last chosen and the node's ApiVersions map it
        # was chosen for (see _send_produce_request).
        self._produce_versions = None
        self._produce_version = None
        # The Produce request's fields up to the partition index for a
        # request of one partition, and the version and partition they are
        # for.
        self._head = None
        self._head_version = None
        self._head_tp = None
        self.sensors = sensors        # ProducerMetrics, or None
        if sensors is not None:
            # What records per batch sent and per response: each sensor (a
            # list of one), whose record updates all its stats (in C,
            # compiled: cheaper than a call per stat, see
            # benchmarks/metrics_cost.py; a C call from the compiled
            # senderloop, which reads them as Sensors).
            self._batch_stats = ([sensors.records_sent], [sensors.batch_size])
            self._response_stats = ([sensors.request_latency], [sensors.throttle_time])
        # The TransactionManager of a producer with a transactional.id: it
        # sets producer_id and producer_epoch (reset_producer_id).
        self.txn = None
        self.transactional_id = values["transactional.id"]

    # -- thread -----------------------------------------------------------------
    def run(self):
        log.debug("Starting Kafka producer I/O thread.")
        while self.running:
            self._run_safely()
        log.debug("Beginning shutdown of Kafka producer I/O thread, sending remaining records.")
        self._abort_on_shutdown()
        while self.shutdown_pending():
            self._run_safely()
        self.finish_shutdown()
        log.debug("Shutdown of Kafka producer I/O thread has completed.")

    def shutdown_pending(self):
        """True while a closing producer still has records to send or
        acknowledgements to wait for (and is not closing forcefully)."""
        return not self.force_close and (self.accumulator.has_undrained()
                                         or self.client.in_flight_count() > 0
                                         or (self.txn is not None and self.txn.has_pending()))

    def _abort_on_shutdown(self):
        """Kafka's Sender: a graceful close aborts the transaction under way
        (its records would otherwise wait for transaction.timeout.ms)."""
        txn = self.txn
        if txn is None or self.force_close or not txn.in_open_transaction():
            return
        log.info("Aborting incomplete transaction due to shutdown")
        try:
            txn.begin_abort()
        except errors.KChannelError as exc:
            log.warning("Could not abort the transaction on close: %s", exc)

    def finish_shutdown(self):
        """The end of a close: a forced one fails what is left; the
        connections are closed."""
        if self.force_close:
            exc = errors.KafkaError(Errors.UNKNOWN_SERVER_ERROR, "PRODUCER_CLOSED",
                                     "Producer is closed forcefully.")
            self._fail_all(exc)
        try:
            self.client.close()
        except Exception:
            log.exception("Failed to close network client")

    def _run_safely(self):
        try:
            self.run_once()
        except Exception:
            log.exception("Uncaught error in kafka producer I/O thread: ")

    def _run_transactional(self, txn, now):
        """Kafka's maybeSendAndPollTransactionalRequest: True when this pass
        only polls (a transactional request in flight, or a fatal error).
        Run at every pass of the loop: the state is read once here, not
        through a call per check (has_fatal_error, has_error, is_aborting:
        three Python calls per pass, ~30 per transaction, for the common
        answer "inside a transaction, no error")."""
        state = txn.state
        if state is _FATAL_ERROR:
            if self.accumulator.has_undrained():
                self._fail_undrained(txn.last_error)
            self.client.poll(self.retry_backoff_ms, now)
            return True
        if (state is _ABORTABLE_ERROR or state is _ABORTING_TRANSACTION) and \
                self.accumulator.has_undrained():
            # What was not sent yet of an aborted transaction never will be.
            self._fail_undrained(txn.last_error or errors.TransactionAbortedError(
                "Failing batch since transaction was aborted"))
        if txn.run(now, self.accumulator.has_incomplete):
            self.client.poll(self.retry_backoff_ms, now)
            return True
        return False

    def reset_producer_id(self, producer_id, epoch):
        """A new producer id or epoch (from the TransactionManager): every
        partition's sequence starts again at 0."""
        self.sequences.set_producer_id(producer_id, epoch)
        # A new epoch renumbers every partition: nothing waits for a bump.
        self.sequences.bump_partitions.clear()

    def wakeup(self):
        """Kafka's ``Sender.wakeup`` as ``send()`` calls it, when a record
        opened or filled a batch: wakes the network thread only if it may
        be asleep without having seen that batch, i.e. between the end of
        its last ready() scan and the return of its poll.  An append after
        the poll returned is seen by the next scan anyway; waking the
        thread then cost a syscall on each side and a GIL hand-over per
        batch.  (The scan sets the flag under the accumulator's lock, which
        the append held before reading it, so no batch is missed.)

        One wakeup is enough until that scan: the flag is cleared with it.
        The woken poll returns, and the next scan sees every append made
        before its locked section (appends after it find the flag it sets
        again), so the further batches an application opens meanwhile (a
        transaction's 1000 records open 7: the network thread cannot take
        the GIL until the application waits) need no wakeup; each went
        through ClusterClient, Selector and the waker's coalescing before,
        three Python calls for nothing."""
        acc = self.accumulator
        if acc.wakeup_needed:
            acc.wakeup_needed = False
            self.client.wakeup()

    def wakeup_now(self):
        """Wake the network thread unconditionally (close, flush, metadata
        waits: what they change is not all seen by the ready() scan)."""
        self.client.wakeup()

    @property
    def producer_id(self):
        return self.sequences.producer_id

    @property
    def producer_epoch(self):
        return self.sequences.producer_epoch

    # -- idempotence ------------------------------------------------------------
    def _maybe_init_producer_id(self, now):
        if self._pid_in_flight or now < self._pid_next_attempt_ms:
            return
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            return
        body = {"transactional_id": None, "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        try:
            self.client.send(node, _INIT_PRODUCER_ID, body, self._handle_init_producer_id)
        except errors.UnsupportedVersionError as exc:
            self.fatal_error = exc
            return
        self._pid_in_flight = True

    def _handle_init_producer_id(self, resp):
        self._pid_in_flight = False
        now = self.time()
        if resp.exception is not None:
            self._pid_next_attempt_ms = now + self.retry_backoff_ms
            return
        code = resp.body["error_code"]
        if code == 0:
            self.sequences.set_producer_id(resp.body["producer_id"], resp.body["producer_epoch"])
        elif code in RETRIABLE_ERRORS:
            self._pid_next_attempt_ms = now + self.retry_backoff_ms
        else:
            self.fatal_error = exception_for(code)
            log.error("InitProducerId failed: %s", self.fatal_error)

    def _maybe_bump_epoch(self):
        """KIP-360: once the partitions that asked for an epoch bump have
        nothing in flight, bump the epoch and renumber their waiting batches
        from sequence 0."""
        if any(self.in_flight.get(tp) for tp in self.sequences.bump_partitions):
            return
        if not self.sequences.has_producer_id():
            return      # InitProducerId first; bumped (renumbered) after it
        for tp in self.sequences.bump_partitions:
            self.retrying.discard(tp)
        self.sequences.bump_epoch(self.accumulator.restart_sequences)

    def _split(self, batch, now):
        """Kafka's Sender.completeBatch on MESSAGE_TOO_LARGE: split the
        batch into smaller ones, back at the head of the partition
        in order with the same sequences (attempts are not counted)."""
        self._remove_in_flight(batch)
        n = self.accumulator.split_and_reenqueue(batch, now)
        log.warning("Got error produce response in correlation id with %d records on "
                    "topic-partition %s-%s, splitting and retrying (%d attempts left). "
                    "Error: MESSAGE_TOO_LARGE", batch.record_count, batch.tp.topic,
                    batch.tp.partition, self.retries - batch.attempts)
        log.debug("Split a batch of %d records into %d", batch.record_count, n)
        if self.idempotent:
            # Batches sent after it fail OUT_OF_ORDER_SEQUENCE_NUMBER; they
            # come back behind the split ones.
            self.retrying.add(batch.tp)
        if self.sensors is not None:
            self.sensors.batch_split.record(1, now)

    def _can_retry(self, batch, exc, code, now):
        if batch.attempts >= self.retries:
            return False
        if now - batch.created_ms >= self.delivery_timeout_ms:
            return False
        if code is None:
            return getattr(exc, "retriable", False) or isinstance(exc, errors.KafkaConnectionError)
        if code == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER and self.idempotent:
            # Java's TransactionManager.canRetry: a batch that is not the
            # next one waits for the earlier ones; the next one failing
            # means a gap in the sequences: bump the epoch and retry.
            if self.sequences.is_current(batch) and \
                    self.sequences.is_next_sequence(batch.tp, batch.base_sequence):
                self.sequences.request_epoch_bump(batch.tp)
            return True
        if code == Errors.UNKNOWN_PRODUCER_ID and self.idempotent:
            # The broker lost the producer's state: a new epoch from
            # sequence 0.
            if self.sequences.is_current(batch):
                self.sequences.request_epoch_bump(batch.tp)
            return True
        return code in RETRIABLE_ERRORS

    def _complete_or_retry(self, batch, exc, code, now):
        self._remove_in_flight(batch)
        if self.running or not self.force_close:
            if self._can_retry(batch, exc, code, now):
                log.warning("Got error produce response on topic-partition %s-%s, retrying "
                            "(%d attempts left). Error: %s", batch.tp.topic, batch.tp.partition,
                            self.retries - batch.attempts - 1,
                            getattr(exc, "name", None) or type(exc).__name__)
                if code is None or code in INVALID_METADATA_ERRORS:
                    self.metadata.request_update()
                if self.idempotent:
                    self.retrying.add(batch.tp)
                if self.sensors is not None:
                    self.sensors.record_retries.record(batch.record_count, now)
                self.accumulator.reenqueue(batch, now)
                return
        if code in INVALID_METADATA_ERRORS:
            self.metadata.request_update()
        self._fail_batch(batch, exc)

    def _fail_batch(self, batch, exc):
        if self.sensors is not None:
            self.sensors.record_errors.record(batch.record_count)
        if self.txn is not None:
            self.txn.handle_failed_batch(exc)
        elif self.idempotent and batch.has_sequence() and not self.force_close and \
                self.sequences.is_current(batch):
            # Its sequences will never be written: the partition's later
            # batches need a new epoch (Java's handleFailedBatch).
            self.sequences.request_epoch_bump(batch.tp)
        try:
            batch.complete(None, None, exc)
        finally:
            self.accumulator.deallocate(batch)

    def _fail_undrained(self, exc):
        self.accumulator.abort_undrained(exc)

    def _fail_all(self, exc):
        self._fail_undrained(exc)
        for tp, flight in list(self.in_flight.items()):
            for b in list(flight):
                self._fail_batch(b, exc)
            flight.clear()
        for b in self.accumulator.incomplete_batches():
            self._fail_batch(b, exc)
