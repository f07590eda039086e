"""``kchannel.Producer``: Kafka's ``KafkaProducer`` on kchannel channels.

Records are appended to a :class:`RecordAccumulator` by ``send()`` on the
caller's thread; a network thread (``kafka-producer-network-thread |
<client.id>``, the :class:`Sender`) drains batches into Produce requests over
one :class:`~kchannel.client.cluster_client.ClusterClient`, so every security
protocol and SASL mechanism of the channel layer works.
"""
import itertools
import threading
import time as _time

from kchannel import errors
from kchannel.client import RequestTimeoutError
from kchannel.client.cluster_client import ClusterClient
from kchannel.client.group_metadata import ConsumerGroupMetadata
from kchannel.client.statistics import client_statistics
from kchannel.config import ClientConfig
from kchannel.log import get_logger
from kchannel.client.metadata import Metadata, TopicPartition
from kchannel.producer.accumulator import (FutureRecordMetadata, RecordAccumulator,
                                          RECORD_OVERHEAD_EXTRA_MAX, record_body_size)
from kchannel.producer.config import serializer, split_producer_configs
from kchannel.producer.partitioner import StickyPartitioner, partition_for_key
from kchannel.producer.metrics import ProducerMetrics
from kchannel.producer.sender import Sender
from kchannel.producer.transaction_manager import State, TransactionManager
from kchannel.protocol.errors import Errors
from kchannel.protocol.records import (CompressionType, QueuedRecord, RECORD_BATCH_OVERHEAD,
                                       check_codec)
from kchannel._impl import load as _load

_appender = _load("kchannel.producer._appender_py", "kchannel._cappender")

__all__ = ["Producer", "AppendPath"]

log = get_logger("kchannel.producer")

_ids = itertools.count(1)


class AppendPath:
    """Everything the per-record path (``Appender``, both twins) may use:
    the producer hands it this, not itself, so the fast path depends on
    public, documented members only.

    * ``accumulator``: ``lock``, ``batches`` (tp -> deque of batches; a
      partition's deque, once made, stays the same object),
      ``batch_size``, ``closed`` and ``append(...)`` (a record that opens a
      batch the appender does not open itself); a batch's ``records``,
      ``sizes``, ``callbacks`` (by index, None for none), ``estimated_size`` and
      ``closed``.  To open a batch itself (``Appender._open``), as
      ``append`` opens one without waiting: ``used_memory``,
      ``buffer_memory``, ``waiters`` (appends waiting for memory),
      ``on_new_batch``, ``incomplete`` and a batch made as
      ``ProducerBatch(tp, now, allocated)`` makes it; ``wakeup_needed``
      before calling the Sender's ``wakeup``.
    * ``metadata``: ``cluster`` and ``add_topic(topic, now)``; ``time()``
      is the producer's clock (ms) for it.
    * ``partitioner``: the :class:`StickyPartitioner` (``state``, ``lock``,
      ``sticky_batch_size``, ``random``, ``partition``, ``update``); its ``lock`` is the
      accumulator's, so a record's sticky bytes are counted in the same
      critical section as its append; a topic's ``state`` list, once made,
      stays the same object.
    * ``sender``: ``fatal_error`` and ``wakeup()``.
    * ``send_slow``: Kafka's whole ``doSend`` (``Producer._send_slow``), for
      what the fast path does not take: metadata not there yet, serializers,
      values that are not bytes, invalid partitions, records too large, a
      closed or failed producer.
    * ``size_limit``, ``ignore_keys``, ``max_block_ms``: from the config;
      ``serializers``: whether a key or value serializer is set.

    The compiled appender reads a batch's and a future's fields at their
    ``__slots__`` offsets (plain slots, or its module does not import),
    and the accumulator's ``closed``, the Sender's ``fatal_error`` and the
    metadata's ``cluster`` from their objects' dicts while those stay
    plain instance attributes (a property there is read with ``getattr``).
    """

    __slots__ = ("accumulator", "metadata", "time", "partitioner", "sender", "send_slow",
                 "size_limit", "ignore_keys", "max_block_ms", "serializers")

    def __init__(self, accumulator, metadata, time, partitioner, sender, send_slow,
                 size_limit, ignore_keys, max_block_ms, serializers):
        self.accumulator = accumulator
        self.metadata = metadata
        self.time = time
        self.partitioner = partitioner
        self.sender = sender
        self.send_slow = send_slow
        self.size_limit = size_limit
        self.ignore_keys = bool(ignore_keys)
        self.max_block_ms = max_block_ms
        self.serializers = bool(serializers)


class Producer:
    """A Kafka producer.

    ``configs`` (and keyword arguments, kafka-python style) take Kafka's
    producer keys (``acks``, ``linger.ms``, ``batch.size``,
    ``compression.type``, ``enable.idempotence``...), the client keys
    (``bootstrap.servers``, ``security.protocol``, ``sasl.*``, ``ssl.*``)
    and the librdkafka / kafka-python aliases of both.
    """

    def __init__(self, configs=None, **kwargs):
        configs = dict(configs or {})
        configs.update(kwargs)
        values, client_configs, extras = split_producer_configs(configs)
        self.config = values
        ctype = CompressionType.for_name(values["compression.type"])
        check_codec(ctype)
        client_cfg = ClientConfig(client_configs)
        if not client_cfg.bootstrap_addresses:
            raise errors.ConfigError("bootstrap.servers must list at least one broker",
                                     key="bootstrap.servers")
        self.client_id = client_cfg.client_id or f"producer-{next(_ids)}"
        client_configs = dict(client_configs)
        client_configs["client.id"] = self.client_id
        self._key_serializer = extras.get("key_serializer")
        self._value_serializer = extras.get("value_serializer")
        self.metadata = Metadata(client_cfg.bootstrap_addresses,
                                 metadata_max_age_ms=values["metadata.max.age.ms"],
                                 refresh_backoff_ms=values["retry.backoff.ms"],
                                 refresh_backoff_max_ms=values["retry.backoff.max.ms"],
                                 allow_auto_topic_creation=True,
                                 metadata_max_idle_ms=values["metadata.max.idle.ms"])
        self._metadata_cond = threading.Condition()
        self.metadata.add_listener(self._on_metadata)
        self._client = ClusterClient(client_configs, self.metadata,
                                     metric_group_prefix="producer",
                                     os_selector=self._new_os_selector())
        self._time = self._client.time
        self.accumulator = RecordAccumulator(
            values["batch.size"], values["linger.ms"], values["retry.backoff.ms"],
            values["retry.backoff.max.ms"], values["delivery.timeout.ms"],
            values["buffer.memory"], self._time)
        self._sensors = ProducerMetrics(self._client.client.metrics, self.client_id,
                                        in_flight=self._client.in_flight_count)
        self._sender = Sender(self._client, self.accumulator, self.metadata, values, self._time,
                              self._sensors)
        self._partitioner = StickyPartitioner(values["batch.size"], lock=self.accumulator.lock)
        self._size_limit = min(values["max.request.size"], values["buffer.memory"])
        self._closed = False
        self.append_path = AppendPath(
            self.accumulator, self.metadata, self._time, self._partitioner, self._sender,
            self._send_slow, self._size_limit, values["partitioner.ignore.keys"],
            values["max.block.ms"],
            self._key_serializer is not None or self._value_serializer is not None)
        self._appender = _appender.Appender(self.append_path)
        self._txn = None
        if values["transactional.id"] is not None:
            self._txn = TransactionManager(values["transactional.id"],
                                           values["transaction.timeout.ms"],
                                           values["retry.backoff.ms"], self._client,
                                           self._sender)
            self._sender.txn = self._txn
            # Every record joins the transaction (Kafka's maybeAddPartition),
            # checked when its batch opens: every batch of a transaction is
            # opened inside it (commit and abort close the open ones, see
            # _close_open_batches), so a record joining a batch is already
            # in.  Per record, this check cost a Python call each.
            self.accumulator.on_new_batch = self._txn.maybe_add_partition
        # The per-record path is the appender's (compiled twin when built):
        # binding it on the instance saves a Python call per record.
        self.send = self._appender.send
        self._statistics = client_statistics(self, "producer", values, extras)
        self._start_io()
        log.debug("Kafka producer started")

    # -- I/O driver (kchannel.aio drives the same parts from an event loop) ------
    def _new_os_selector(self):
        """The OS selector of the producer's connections (None: the
        Selector's own)."""
        return None

    def _start_io(self):
        """Start the network thread that runs the Sender."""
        self._thread = threading.Thread(
            target=self._sender.run, name=f"kafka-producer-network-thread | {self.client_id}",
            daemon=True)
        self._thread.start()

    # -- metadata ---------------------------------------------------------------
    def _on_metadata(self, cluster):
        with self._metadata_cond:
            self._metadata_cond.notify_all()

    def _wait_on_metadata(self, topic, partition, max_wait_ms):
        start = self._time()
        self.metadata.add_topic(topic, start)
        cluster = self.metadata.cluster
        count = cluster.partition_count(topic)
        if count and (partition is None or partition < count):
            return cluster, 0
        return self._wait_for_topic(topic, partition, max_wait_ms, start, count)

    def _wait_for_topic(self, topic, partition, max_wait_ms, start, count):
        began = _time.monotonic_ns()
        while True:
            self.metadata.add_topic(topic, self._time())
            self.metadata.request_update()
            self._sender.wakeup_now()
            elapsed = self._time() - start
            left = max_wait_ms - elapsed
            if left <= 0:
                if count and partition is not None and partition >= count:
                    raise RequestTimeoutError(
                        f"Partition {partition} of topic {topic} with partition count {count} "
                        f"is not present in metadata after {max_wait_ms} ms.")
                raise RequestTimeoutError(
                    f"Topic {topic} not present in metadata after {max_wait_ms} ms.")
            with self._metadata_cond:
                if self.metadata.fatal_error is None:
                    self._metadata_cond.wait(min(left, 100) / 1000.0)
            # An authentication failure ends the wait at once, as Kafka's
            # ProducerMetadata.awaitUpdate: retrying the same credentials
            # until max.block.ms would fail the same way, only later.
            self.metadata.maybe_raise_fatal_error()
            cluster = self.metadata.cluster
            self._check_topic_metadata(topic, cluster)
            count = cluster.partition_count(topic)
            if count and (partition is None or partition < count):
                self._sensors.metadata_wait_time.record(_time.monotonic_ns() - began)
                return cluster, self._time() - start

    def metrics(self):
        """``{MetricName: value}`` of every metric of this producer (Kafka's
        ``metrics()``): ``producer-metrics`` and its selector's."""
        return self._client.client.metrics.metrics()

    def _check_topic_metadata(self, topic, cluster):
        """Raise what ends a wait for ``topic``'s metadata early."""
        if topic in cluster.unauthorized_topics:
            raise errors.KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED,
                                    "TOPIC_AUTHORIZATION_FAILED",
                                    f"Not authorized to access topics: [{topic}]")
        if topic in cluster.invalid_topics:
            raise errors.KafkaError(Errors.INVALID_TOPIC_EXCEPTION, "INVALID_TOPIC_EXCEPTION",
                                    f"Invalid topics: [{topic}]")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error

    def partitions_for(self, topic):
        """The topic's partitions (``PartitionInfo``), waiting up to
        ``max.block.ms`` for metadata (Kafka's ``partitionsFor``)."""
        cluster, _ = self._wait_on_metadata(topic, None, self.config["max.block.ms"])
        return cluster.partitions_for_topic(topic)

    # -- send -------------------------------------------------------------------------
    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None, callback=None):
        """Send one record; returns a :class:`FutureRecordMetadata`.

        ``callback(record_metadata, exception)`` runs on the network thread
        when the record is acknowledged or fails (Kafka's ``Callback``).
        Errors about this record (too large, serialization) fail the future
        and the callback, as Kafka's ``send`` does; a closed producer or
        metadata not available within ``max.block.ms`` raise."""
        # Instances bind ``send`` straight to the appender (see __init__);
        # this is reached only through ``Producer.send(p, ...)``.
        return self._appender.send(topic, value, key, headers, partition, timestamp_ms,
                                   callback)

    # -- transactions ----------------------------------------------------------------
    def _require_transactional(self, operation):
        if self._txn is None:
            raise errors.IllegalStateError(
                f"Cannot use transactional methods without enabling transactions by setting "
                f"the transactional.id configuration property ({operation})")
        if self._closed:
            raise errors.IllegalStateError(
                "Cannot perform operation after producer has been closed")

    def _wait(self, result, timeout):
        if timeout is None:
            timeout = self.config["max.block.ms"] / 1000.0
        self._sender.wakeup_now()
        result.wait(timeout)

    def init_transactions(self, timeout=None):
        """Register ``transactional.id`` with its coordinator (Kafka's
        ``initTransactions``): fences any earlier producer with the same id
        and completes its open transaction.  Once, before the first
        transaction; waits up to ``timeout`` seconds (default
        ``max.block.ms``), after which calling it again waits for the same
        request."""
        self._require_transactional("initTransactions")
        began = _time.monotonic_ns()
        self._wait(self._txn.initialize_transactions(), timeout)
        self._sensors.txn_init_time.record(_time.monotonic_ns() - began)

    def begin_transaction(self):
        """Start a transaction: the records sent and offsets given until
        ``commit_transaction()`` or ``abort_transaction()`` are written
        atomically (Kafka's ``beginTransaction``)."""
        self._require_transactional("beginTransaction")
        began = _time.monotonic_ns()
        self._txn.begin_transaction()
        self._sensors.txn_begin_time.record(_time.monotonic_ns() - began)

    def send_offsets_to_transaction(self, offsets, group_metadata, timeout=None):
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata or offset},
        the next offsets to read) for the consumer group of
        ``group_metadata`` (``consumer.group_metadata()``) with this
        transaction: they are committed if and only if it commits (Kafka's
        ``sendOffsetsToTransaction``).  A group id string is taken as the
        metadata of a consumer outside any generation."""
        self._require_transactional("sendOffsetsToTransaction")
        group_metadata = ConsumerGroupMetadata.coerce(group_metadata)
        if not offsets:
            return
        began = _time.monotonic_ns()
        self._wait(self._txn.send_offsets_to_transaction(offsets, group_metadata), timeout)
        self._sensors.txn_send_offsets_time.record(_time.monotonic_ns() - began)

    def commit_transaction(self, timeout=None):
        """Send every buffered record, then commit the transaction (Kafka's
        ``commitTransaction``).  An abortable error (a record failed)
        raises here; ``abort_transaction()`` then starts over.  Waits up to
        ``timeout`` seconds (default ``max.block.ms``)."""
        self._require_transactional("commitTransaction")
        began = _time.monotonic_ns()
        self.accumulator.begin_flush()
        try:
            result = self._txn.begin_commit()
            self._close_open_batches()
            self._wait(result, timeout)
        finally:
            self.accumulator.end_flush()
        self._sensors.txn_commit_time.record(_time.monotonic_ns() - began)

    def abort_transaction(self, timeout=None):
        """Abort the transaction: records not sent yet fail with
        TransactionAbortedError, the ones written are never visible to
        read_committed consumers (Kafka's ``abortTransaction``)."""
        self._require_transactional("abortTransaction")
        began = _time.monotonic_ns()
        result = self._txn.begin_abort()
        self._close_open_batches()
        self._wait(result, timeout)
        self._sensors.txn_abort_time.record(_time.monotonic_ns() - began)

    def _close_open_batches(self):
        """Once a transaction is completing, no record joins its batches:
        a later ``send()`` opens a new batch, where the transaction manager
        refuses it (accumulator.on_new_batch) as Kafka's send refuses a
        record outside a transaction."""
        acc = self.accumulator
        with acc.lock:
            for dq in acc.batches.values():
                if dq:
                    dq[-1].closed = True

    def _send_slow(self, topic, value=None, key=None, headers=None, partition=None,
                   timestamp_ms=None, callback=None):
        """Kafka's ``doSend``: every record the appender's fast path does
        not take (see ``kchannel.producer._appender_py``)."""
        if self._closed:
            raise errors.KChannelError("Cannot perform operation after producer has been closed")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        txn = self._txn
        if txn is not None and txn.state is not State.IN_TRANSACTION:
            # At once, not after a wait for metadata (the per-batch check
            # in the accumulator comes after it).
            txn.check_send_allowed()
        config = self.config
        max_block = config["max.block.ms"]
        cluster, waited = self._wait_on_metadata(topic, partition, max_block)
        remaining = max_block - waited if waited else max_block
        # bytes is the common case: no serializer call for it
        if key is None or (type(key) is bytes and self._key_serializer is None):
            key_bytes = key
        else:
            key_bytes = serializer(key, config["key.serializer"], self._key_serializer, "key")
        if value is None or (type(value) is bytes and self._value_serializer is None):
            value_bytes = value
        else:
            value_bytes = serializer(value, config["value.serializer"],
                                     self._value_serializer, "value")
        if headers:
            # A tuple of tuples, as the fast path builds it (the garbage
            # collector untracks such headers; see _appender_py).
            headers = tuple([(k, serializer(v, None, None, "header value"))
                             for k, v in headers])
        else:
            headers = ()
        # Exact but for the offset and timestamp deltas and the length,
        # which the accumulator adds for the batch the record joins; the
        # upper bound (``size``) checks the size limits, as Kafka's.
        body = record_body_size(key_bytes, value_bytes, headers)
        size = body + RECORD_OVERHEAD_EXTRA_MAX
        count = cluster.partition_count(topic)
        sticky = False
        if partition is not None:
            if not 0 <= partition < count:
                raise ValueError(f"Invalid partition given with record: {partition} is not in "
                                 f"the range [0...{count}].")
        elif key_bytes is not None and not config["partitioner.ignore.keys"]:
            partition = partition_for_key(key_bytes, count)
        else:
            partition = self._partitioner.partition(topic, cluster)
            sticky = True
        if timestamp_ms is None:
            timestamp_ms = int(_time.time() * 1000)
        ks = len(key_bytes) if key_bytes is not None else -1
        vs = len(value_bytes) if value_bytes is not None else -1
        error = self._check_size(size + RECORD_BATCH_OVERHEAD) \
            if size + RECORD_BATCH_OVERHEAD > self._size_limit else None
        tp = TopicPartition(topic, partition)
        if error is not None:
            future = FutureRecordMetadata(failed=error)
            if callback is not None:
                callback(None, error)
            return future
        future, full, new_batch = self.accumulator.append(
            tp, QueuedRecord(timestamp_ms, key_bytes, value_bytes, headers), body, callback,
            ks, vs, remaining)
        if sticky:
            self._partitioner.update(topic, partition, size, cluster)
        if full or new_batch:
            self._sender.wakeup()
        return future

    def _check_size(self, size):
        if size > self.config["max.request.size"]:
            return errors.KafkaError(
                Errors.MESSAGE_TOO_LARGE, "MESSAGE_TOO_LARGE",
                f"The message is {size} bytes when serialized which is larger than "
                f"{self.config['max.request.size']}, which is the value of the "
                f"max.request.size configuration.")
        if size > self.config["buffer.memory"]:
            return errors.KafkaError(
                Errors.MESSAGE_TOO_LARGE, "MESSAGE_TOO_LARGE",
                f"The message is {size} bytes when serialized which is larger than the total "
                f"memory buffer you have configured with the buffer.memory configuration.")
        return None

    # -- flush / close -------------------------------------------------------------
    def poll(self, timeout=0):
        """librdkafka's ``poll()``: serves the statistics callback
        (``stats_cb`` every ``statistics.interval.ms``) in this thread;
        delivery results are the futures of :meth:`send`.  Returns 0."""
        self._statistics.maybe_emit()
        return 0

    def flush(self, timeout=None):
        """Send everything buffered now and wait until every record sent so
        far is acknowledged or failed.  ``timeout`` (seconds, optional)
        raises ``RequestTimeoutError`` when it passes first."""
        self._statistics.maybe_emit()
        began = _time.monotonic_ns()
        deadline = None if timeout is None else _time.monotonic() + timeout
        self.accumulator.begin_flush()
        try:
            self._sender.wakeup_now()
            with self.accumulator.memory:
                while self.accumulator.incomplete:
                    if deadline is None:
                        self.accumulator.memory.wait(0.1)
                        continue
                    left = deadline - _time.monotonic()
                    if left <= 0:
                        raise RequestTimeoutError(
                            f"Flush did not complete within {timeout} s: "
                            f"{len(self.accumulator.incomplete)} batch(es) still pending")
                    self.accumulator.memory.wait(min(left, 0.1))
                    if not self._thread.is_alive():
                        break
        finally:
            self.accumulator.end_flush()
        self._sensors.flush_time.record(_time.monotonic_ns() - began)

    def close(self, timeout=None):
        """Close the producer: with no ``timeout`` (Kafka's ``close()``)
        wait until every buffered record is sent; with ``timeout`` seconds
        wait at most that long, then fail what is left ("Producer is closed
        forcefully."); ``timeout=0`` fails it at once."""
        if self._closed and not self._thread.is_alive():
            return
        self._closed = True
        log.info("Closing the Kafka producer with timeoutMillis = %s ms.",
                 "9223372036854775807" if timeout is None else int(timeout * 1000))
        if timeout is not None and timeout <= 0:
            self._sender.force_close = True
        self._sender.running = False
        self.accumulator.close()
        self._sender.wakeup_now()
        if threading.current_thread() is self._thread:
            log.warning("Overriding close timeout to 0 ms to avoid a deadlock from the "
                        "producer's own thread")
            self._sender.force_close = True
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close = True
            self._sender.wakeup_now()
            self._thread.join()
        log.debug("Kafka producer has been closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self.close(0)
        except Exception:
            pass

