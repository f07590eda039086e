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
import collections
import functools
import struct

from kchannel import errors
from kchannel.client import RequestTimeoutError
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import (INVALID_METADATA_ERRORS, RETRIABLE_ERRORS, Errors,
                                      exception_for)
from kchannel.producer.idempotence import ProducerSequences
from kchannel.protocol.records import CompressionType, encode_batch
from kchannel.protocol.records.batch import encode_plain_batch
from kchannel.protocol.wire import encode_unsigned_varint

__all__ = ["Sender", "RETRIABLE_ERRORS", "INVALID_METADATA_ERRORS", "encode_produce_request",
           "encode_produce_request_one", "produce_request_parts", "produce_request_parts_one"]

log = get_logger("kchannel.producer.sender")

_PRODUCE = messages.PRODUCE.api_key
_INIT_PRODUCER_ID = messages.INIT_PRODUCER_ID.api_key

# Attributes bit of a transactional batch (Kafka's RecordBatch).
_TRANSACTIONAL = 0x10
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I32 = struct.Struct(">ii")
_FLEXIBLE_PRODUCE = 9       # ProduceRequest's first flexible version
_BYTE = [bytes((i,)) for i in range(0x80)]


@functools.lru_cache(maxsize=256)
def _produce_head(version, transactional_id, acks, timeout_ms):
    """The fields before the topics, the same for every request of a
    producer."""
    flexible = version >= _FLEXIBLE_PRODUCE
    if transactional_id is None:
        head = b"\x00" if flexible else b"\xff\xff"
    else:
        tid = transactional_id.encode("utf-8")
        head = (encode_unsigned_varint(len(tid) + 1) if flexible else _I16.pack(len(tid))) + tid
    return head + _ACKS_TIMEOUT.pack(acks, timeout_ms)


@functools.lru_cache(maxsize=1024)
def _string(name, flexible):
    raw = name.encode("utf-8")
    return (encode_unsigned_varint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


@functools.lru_cache(maxsize=256)
def _one_partition_head(version, transactional_id, acks, timeout_ms, topic):
    """Everything before the partition index of a request for one
    partition of one topic."""
    flexible = version >= _FLEXIBLE_PRODUCE
    one = b"\x02" if flexible else b"\x00\x00\x00\x01"       # an array of 1
    return (_produce_head(version, transactional_id, acks, timeout_ms) + one
            + _string(topic, flexible) + one)


def produce_request_parts_one(version, transactional_id, acks, timeout_ms, topic, partition,
                              records):
    """The body of a ProduceRequest for one partition of one topic (a
    producer's request per batch to a single-partition leader) as a tuple of
    parts, ``records`` among them as it is: the request encoder joins them
    behind the header in one copy (see ``request_encoder``).  The fields
    before the partition come from a cache."""
    head = _one_partition_head(version, transactional_id, acks, timeout_ms, topic)
    if version >= _FLEXIBLE_PRODUCE:
        n = len(records) + 1
        size = encode_unsigned_varint(n) if n >= 0x80 else _BYTE[n]
        # records, the partition's, topic's and request's tagged fields
        return (head, _I32.pack(partition) + size, records, b"\x00\x00\x00")
    return (head, _I32_I32.pack(partition, len(records)), records)


def encode_produce_request_one(version, transactional_id, acks, timeout_ms, topic, partition,
                               records):
    """``encode_produce_request`` for one partition of one topic."""
    return b"".join(produce_request_parts_one(version, transactional_id, acks, timeout_ms,
                                              topic, partition, records))


def encode_produce_request(version, transactional_id, acks, timeout_ms, topics):
    """The body of a ProduceRequest (v3 to v12) as the schema codec writes
    it, built directly from ``topics`` ({name: [(partition, records
    bytes)]}): a request per batch sent is on the producer's hot path, and
    the generic codec's walk over dicts cost more than the few fields it
    has (tests/producer check the bytes against the codec's)."""
    return b"".join(produce_request_parts(version, transactional_id, acks, timeout_ms, topics))


def produce_request_parts(version, transactional_id, acks, timeout_ms, topics):
    """``encode_produce_request`` as a tuple of parts (the records as they
    are), for the request encoder to join behind the header in one copy."""
    if len(topics) == 1:
        for name, partitions in topics.items():
            if len(partitions) == 1:
                index, records = partitions[0]
                return produce_request_parts_one(version, transactional_id, acks,
                                                 timeout_ms, name, index, records)
    flexible = version >= _FLEXIBLE_PRODUCE
    out = [_produce_head(version, transactional_id, acks, timeout_ms),
           encode_unsigned_varint(len(topics) + 1) if flexible else _I32.pack(len(topics))]
    for name, partitions in topics.items():
        out.append(_string(name, flexible))
        out.append(encode_unsigned_varint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
        for index, records in partitions:
            if flexible:
                # index, records' compact length, records, tagged fields
                out.append(_I32.pack(index) + encode_unsigned_varint(len(records) + 1))
                out.append(records)
                out.append(b"\x00")
            else:
                out.append(_I32_I32.pack(index, len(records)))
                out.append(records)
        if flexible:
            out.append(b"\x00")           # the topic's tagged fields
    if flexible:
        out.append(b"\x00")               # the request's tagged fields
    return tuple(out)


# RETRIABLE_ERRORS (Java's RetriableException) and INVALID_METADATA_ERRORS
# (also InvalidMetadataException: refresh metadata) come from
# kchannel.protocol.errors, the one definition the consumer shares.


class Sender:
    def __init__(self, client, accumulator, metadata, values, time, sensors=None):
        self.client = client
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
        self.in_flight = collections.defaultdict(list)   # tp -> batches in flight
        self.retrying = set()                             # idempotent tps with a retry pending
        self.metadata_wait_ms = 0
        self.sensors = sensors        # ProducerMetrics, or None
        if sensors is not None:
            # The stats recorded per batch sent and per response, called
            # straight: a call per stat, without a Sensor.record call per
            # sensor and value on top (four per request).
            self._batch_stats = (sensors.records_sent.recorders(),
                                 sensors.batch_size.recorders())
            self._response_stats = (sensors.request_latency.recorders(),
                                    sensors.throttle_time.recorders())
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

    def run_once(self):
        now = self.time()
        fatal = self.fatal_error or self.client.fatal_error
        if fatal is not None:
            self.client.fatal_error = None
            self._fail_undrained(fatal)
        txn = self.txn
        if txn is not None and self._run_transactional(txn, now):
            return
        # A transactional producer's epoch moves with its transactions (the
        # TransactionManager), never by this client-side bump.
        if self.idempotent and txn is None and self.sequences.bump_partitions:
            self._maybe_bump_epoch()
        if self.idempotent and self.producer_id < 0:
            self.accumulator.wakeup_needed = True
            if self.fatal_error is None and txn is None:
                self._maybe_init_producer_id(now)
            self.client.poll(min(self.retry_backoff_ms, 100), now)
            return
        timeout = self.send_producer_data(now)
        if txn is not None:
            # A queued transactional request may be due before that (a
            # retry's back-off, a coordinator lookup).
            limit = txn.poll_timeout(now)
            if limit is not None:
                timeout = min(timeout, limit)
        self.client.poll(timeout, now)
        # Until the next ready() scan this thread is awake and will see
        # every append: appends need not wake it (see wakeup).
        self.accumulator.wakeup_needed = False

    def _run_transactional(self, txn, now):
        """Kafka's maybeSendAndPollTransactionalRequest: True when this pass
        only polls (a transactional request in flight, or a fatal error)."""
        if txn.has_fatal_error():
            if self.accumulator.has_undrained():
                self._fail_undrained(txn.last_error)
            self.client.poll(self.retry_backoff_ms, now)
            return True
        if (txn.has_error() or txn.is_aborting()) and self.accumulator.has_undrained():
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
        the append held before reading it, so no batch is missed.)"""
        if self.accumulator.wakeup_needed:
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

    def _can_drain(self, tp, batch):
        if self.txn is not None and not self.txn.send_allowed(tp):
            return False      # not (yet) added to the transaction
        flight = self.in_flight.get(tp)
        if self.guarantee_order and flight:
            return False
        if self.idempotent:
            if tp in self.sequences.bump_partitions:
                return False
            if tp in self.retrying:
                if flight:
                    return False
                self.retrying.discard(tp)
            if not batch.has_sequence():
                return self.sequences.assign(tp, batch, flight)
            if self.sequences.first_unacked(tp, flight):
                return False
        return True

    # -- produce ------------------------------------------------------------------
    def send_producer_data(self, now):
        cluster = self.metadata.cluster
        ready, next_check, unknown = self.accumulator.ready(cluster, now)
        if unknown:
            for topic in unknown:
                self.metadata.add_topic(topic, now)
            self.metadata.request_update()
        not_ready_timeout = 2 ** 31 - 1
        for node in list(ready):
            if not self.client.ready(node, now) or \
                    not self.client.can_send_more(node, self.max_in_flight):
                ready.discard(node)
                not_ready_timeout = min(not_ready_timeout,
                                        max(self.client.connection_delay(node, now), 0))
        drained = self.accumulator.drain(cluster, ready, self.max_request_size, now,
                                         self._can_drain)
        sent = bool(drained)
        for batches in drained.values():
            for b in batches:
                self.in_flight[b.tp].append(b)
        # The ready() scan above saw whether any is due: no second scan of
        # every partition under the lock per pass for none.
        for b in self.accumulator.expired_batches(now) if self.accumulator.expiry_due else ():
            self._fail_batch(b, RequestTimeoutError(
                f"Expiring {b.record_count} record(s) for {b.tp.topic}-{b.tp.partition}:"
                f"{now - b.created_ms} ms has passed since batch creation"))
        for node, batches in drained.items():
            self._send_produce_request(node, batches, now)
        # A request takes one batch per partition (Kafka's drain).  When
        # more batches are ready behind those just sent (an application
        # filling batches faster than one pass of this loop), send them now,
        # up to max.in.flight.requests.per.connection, instead of after a
        # poll each: the same requests in the same order, for one pass of
        # the loop's fixed cost (poll, ready, expiry) instead of one each.
        for _ in range(self.max_in_flight - 1):
            nodes = [n for n in drained if self.client.can_send_more(n, self.max_in_flight)]
            if not nodes or not self._more_queued(drained):
                break
            more, _, _ = self.accumulator.ready(cluster, now)
            more.intersection_update(nodes)
            if not more:
                break
            drained = self.accumulator.drain(cluster, more, self.max_request_size, now,
                                             self._can_drain)
            for node, batches in drained.items():
                for b in batches:
                    self.in_flight[b.tp].append(b)
                self._send_produce_request(node, batches, now)
        timeout = min(next_check, not_ready_timeout)
        if sent:
            # More may be sendable at once (Kafka polls with 0 while nodes
            # are ready): then poll with 0.  Otherwise the poll that writes
            # this pass's requests waits (for a response, linger, or an
            # append's wakeup: the scan below sets wakeup_needed again), as
            # a poll with 0 returned only for the next pass to find nothing
            # to send and wait then: a pass of this loop (~50 us of CPU) per
            # Produce request for nothing.  Not when every ready batch was
            # held back either (_can_drain: a partition's first batch of an
            # epoch in flight, ordering, a partition not yet in the
            # transaction): what lets it go is a response, which ends the
            # poll anyway; polling with 0 meanwhile was a busy loop (a
            # thousand passes per transaction under transaction.version 2,
            # whose every transaction starts a new epoch).
            again, again_check, _ = self.accumulator.ready(cluster, now)
            timeout = min(timeout, again_check)
            for node in again:
                if self.client.ready(node, now) and \
                        self.client.can_send_more(node, self.max_in_flight) and \
                        not self._all_held_back(cluster, node):
                    timeout = 0
                    break
        return max(0, min(timeout, 2 ** 31 - 1))

    def _all_held_back(self, cluster, node):
        """Whether every partition of ``node`` with a batch waiting must
        wait for a response first (a read without the lock: a stale answer
        costs one pass of the loop or waits for a response that was coming
        anyway)."""
        if not self.idempotent:
            return False
        in_flight = self.in_flight
        first_unacked = self.sequences.first_unacked
        for tp, dq in list(self.accumulator.batches.items()):
            if dq and cluster.leader_for(tp) == node:
                flight = in_flight.get(tp)
                if not flight or not first_unacked(tp, flight):
                    return False
        return True

    def _more_queued(self, drained):
        """Whether a partition just drained has another full batch waiting
        (a read without the lock: a stale answer only defers it to the next
        pass)."""
        batches = self.accumulator.batches
        size = self.accumulator.batch_size
        for sent in drained.values():
            for b in sent:
                dq = batches.get(b.tp)
                if dq and (len(dq) > 1 or dq[0].is_full(size)):
                    return True
        return False

    def _encode(self, batch):
        if batch.encoded is None:
            if self.compression == CompressionType.NONE:
                # The common case, header and CRC included in one call.
                batch.encoded = encode_plain_batch(
                    batch.records, _TRANSACTIONAL if self.txn is not None else 0,
                    batch.producer_id, batch.producer_epoch, batch.base_sequence, 0, -1,
                    None, batch.estimated_size)
                return batch.encoded
            batch.encoded = encode_batch(
                batch.records, compression=self.compression, producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                is_transactional=self.txn is not None, compression_level=self.compression_level)
        return batch.encoded

    def _send_produce_request(self, node, batches, now):
        # (one partition's batch per leader, the usual request at the
        # defaults, is encoded by produce_request_parts' one-partition path)
        by_topic = collections.defaultdict(list)
        sendable = {}
        for b in batches:
            try:
                records = self._encode(b)
            except Exception as exc:  # an unencodable value, a missing codec
                self._remove_in_flight(b)
                self._fail_batch(b, exc)
                continue
            by_topic[b.tp.topic].append((b.tp.partition, records))
            sendable[b.tp] = b
        if not sendable:
            return
        if self.sensors is not None:
            # Kafka's updateProduceRequestMetrics: per batch.
            records_sent, batch_size = self._batch_stats
            for b in sendable.values():
                for record in records_sent:
                    record(b.record_count, now)
                size = len(b.encoded)
                for record in batch_size:
                    record(size, now)
        try:
            version = self.client.choose_version(node, _PRODUCE)
            # Transaction version 1 must not send Produce v12+, which would
            # add the partitions to the transaction itself (KIP-890).
            if self.txn is not None:
                limit = self.txn.produce_max_version()
                if limit is not None:
                    version = min(version, limit)
            body = produce_request_parts(version, self.transactional_id, self.acks,
                                         self.request_timeout_ms, by_topic)
            if self.acks == 0:
                self.client.send(node, _PRODUCE, body, None, version=version,
                                 expect_response=False)
                for b in sendable.values():
                    self._remove_in_flight(b)
                    self._complete(b, -1, None)
                return
            self.client.send(node, _PRODUCE, body,
                             lambda resp: self._handle_produce_response(resp, sendable),
                             version=version)
        except errors.KChannelError as exc:
            # Not sendable (version, connection gone): retry like a lost request.
            for b in sendable.values():
                self._complete_or_retry(b, exc, None, now)

    def _handle_produce_response(self, resp, batches):
        now = self.time()
        if resp.exception is not None:
            log.debug("Produce request to node %s failed: %s", resp.node_id, resp.exception)
            self.metadata.request_update()
            for b in batches.values():
                self._complete_or_retry(b, resp.exception, None, now)
            return
        if self.sensors is not None:
            latency, throttle = self._response_stats
            value = resp.receive_time_ms - resp.request_time_ms
            for record in latency:
                record(value, now)
            value = resp.body.get("throttle_time_ms") or 0
            for record in throttle:
                record(value, now)
        seen = set()
        for topic in resp.body.get("responses") or ():
            name = topic["name"]
            for p in topic["partition_responses"]:
                batch = batches.get((name, p["index"]))
                if batch is None:
                    continue
                seen.add(batch.tp)
                code = p["error_code"]
                if code == 0 or code == Errors.DUPLICATE_SEQUENCE_NUMBER:
                    self._remove_in_flight(batch)
                    if self.idempotent:
                        self.sequences.acked(batch)
                    self._complete(batch, p["base_offset"], p.get("log_append_time_ms", -1))
                    continue
                if code == Errors.MESSAGE_TOO_LARGE and batch.record_count > 1 and \
                        not batch.done_flag:
                    self._split(batch, now)
                    continue
                message = p.get("error_message")
                record_errors = p.get("record_errors") or ()
                if record_errors:
                    detail = "; ".join(f"record {e['batch_index']}: "
                                       f"{e.get('batch_index_error_message')}"
                                       for e in record_errors)
                    message = f"{message or ''} ({detail})".strip()
                self._complete_or_retry(batch, exception_for(code, message), code, now)
        for tp, b in batches.items():
            if tp not in seen:
                self._complete_or_retry(b, errors.KafkaError(
                    Errors.UNKNOWN_SERVER_ERROR, "UNKNOWN_SERVER_ERROR",
                    f"The produce response did not include partition {tp.topic}-{tp.partition}"),
                    None, now)

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

    def _remove_in_flight(self, batch):
        flight = self.in_flight.get(batch.tp)
        if flight and batch in flight:
            flight.remove(batch)

    def _complete(self, batch, base_offset, log_append_time):
        # Kafka's order (completeBatch, then deallocate): the futures and
        # callbacks first, so a flush() woken by the last deallocation
        # returns with every record's callback run.
        try:
            batch.complete(base_offset, log_append_time)
        finally:
            self.accumulator.deallocate(batch)

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
