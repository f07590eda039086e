"""Per-process caches of kchannel clients for Spark's Python workers.

Spark reuses a Python worker process for many tasks
(``spark.python.worker.reuse``, default true), so module-level state lives
across tasks and jobs.  A task takes a ready, authenticated
:class:`~kchannel.Consumer` (or shares the worker's
:class:`~kchannel.Producer`) keyed by its client configuration - cluster,
security settings and credential (a new delegation token is a new key) -
instead of opening and authenticating connections of its own, so N tasks on
a worker cost one login per broker.

A consumer goes back to the cache only when its task read its range to the
end; a task that fails or is cancelled mid-request closes the consumer it
held, so no half-read fetch is ever handed to the next task.  The cache is
bounded (``MAX_CONFIGS`` configurations; the least recently used is closed)
and a client idle longer than ``IDLE_S`` is closed on the next checkout.

Nothing here imports pyspark; pyarrow is imported when a range is read.
"""
import os
import re
import threading
import time

from kchannel import errors
from kchannel.protocol.errors import Errors
from kchannel.consumer import Consumer
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition
from kchannel.producer import Producer

__all__ = ["checkout_consumer", "checkin_consumer", "producer_for", "connection_stats",
           "read_range", "close_all", "config_key"]

log = get_logger("kchannel.spark")

MAX_CONFIGS = 8
IDLE_S = 540.0      # Kafka's connections.max.idle.ms (9 minutes)

_lock = threading.Lock()
_consumers = {}     # config key -> [(consumer, last_used)]
_producers = {}     # config key -> [producer, last_used]
_stats = {"consumers_created": 0, "producers_created": 0, "tasks": 0,
          "consumers_closed": 0, "producers_closed": 0}
_retired_auth = [0]     # authentications of clients already closed


def config_key(configs):
    return tuple(sorted((str(k), str(v)) for k, v in configs.items()))


def _evict_locked(now):
    for cache in (_consumers,):
        for key in list(cache):
            entries = cache[key]
            keep = []
            for c, last in entries:
                if now - last > IDLE_S:
                    _close(c, "consumers_closed")
                else:
                    keep.append((c, last))
            if keep:
                cache[key] = keep
            else:
                del cache[key]
    for key in list(_producers):
        p, last = _producers[key]
        if now - last > IDLE_S:
            del _producers[key]
            _close(p, "producers_closed")
    while len(_consumers) > MAX_CONFIGS:
        oldest = min(_consumers, key=lambda k: max(last for _, last in _consumers[k]))
        for c, _ in _consumers.pop(oldest):
            _close(c, "consumers_closed")
    while len(_producers) > MAX_CONFIGS:
        oldest = min(_producers, key=lambda k: _producers[k][1])
        _close(_producers.pop(oldest)[0], "producers_closed")


def _close(client, counter):
    _retired_auth[0] += _authentications(client)
    _stats[counter] += 1
    try:
        client.close(0) if counter == "producers_closed" else client.close()
    except Exception:   # closing is best effort: the client is dropped either way
        log.debug("Closing a cached kchannel client failed", exc_info=True)


def checkout_consumer(configs):
    """A cached consumer for ``configs`` (a new one when none is idle)."""
    key = config_key(configs)
    now = time.monotonic()
    with _lock:
        _evict_locked(now)
        _stats["tasks"] += 1
        entries = _consumers.get(key)
        if entries:
            return entries.pop()[0]
        _stats["consumers_created"] += 1
    return Consumer(dict(configs))


def checkin_consumer(configs, consumer, clean):
    """Give ``consumer`` back after a task; ``clean`` False (the task failed
    or stopped mid-read) closes it instead."""
    if not clean:
        with _lock:
            _close(consumer, "consumers_closed")
        return
    try:
        consumer.unsubscribe()
    except Exception:
        with _lock:
            _close(consumer, "consumers_closed")
        return
    with _lock:
        _consumers.setdefault(config_key(configs), []).append((consumer, time.monotonic()))


def producer_for(configs):
    """The worker's producer for ``configs``, shared by every task
    (``Producer.send`` is thread-safe and the producer is Kafka's unit of
    connection reuse)."""
    key = config_key(configs)
    now = time.monotonic()
    with _lock:
        _evict_locked(now)
        _stats["tasks"] += 1
        entry = _producers.get(key)
        if entry is not None:
            entry[1] = now
            return entry[0]
        _stats["producers_created"] += 1
        producer = Producer(dict(configs))
        _producers[key] = [producer, now]
        return producer


def drop_producer(configs, producer):
    """Close and forget ``producer`` (after a fatal error)."""
    with _lock:
        entry = _producers.get(config_key(configs))
        if entry is not None and entry[0] is producer:
            del _producers[config_key(configs)]
        _close(producer, "producers_closed")


def _authentications(client):
    """Successful authentications of a kchannel client's connections
    (Kafka's ``successful-authentication-total`` client metric)."""
    try:
        metrics = client._client.client.metrics
        total = 0.0
        for name, value in metrics.metrics().items():
            if name.name == "successful-authentication-total":
                total += value
        return int(total)
    except AttributeError:
        return 0


def token_id_of(configs):
    """The delegation token id an executor configuration logs in with, or None."""
    jaas = str(configs.get("sasl.jaas.config", ""))
    if 'tokenauth="true"' not in jaas:
        return None
    m = re.search(r'username="((?:[^"\\]|\\.)*)"', jaas)
    return m.group(1) if m else None


def connection_stats():
    """This process's cache: ``pid``, ``tasks`` served, clients created and
    closed, ``cached`` clients, ``authentications`` (successful logins of
    every client this process ever created, live or closed) and
    ``token_ids`` (comma-separated ids of the delegation tokens its cached
    clients log in with)."""
    with _lock:
        live = [c for entries in _consumers.values() for c, _ in entries] + \
            [p for p, _ in _producers.values()]
        out = dict(_stats)
        out["pid"] = os.getpid()
        out["cached"] = len(live)
        out["authentications"] = _retired_auth[0] + sum(_authentications(c) for c in live)
        keys = list(_consumers) + list(_producers)
    # Token ids are not secrets (the HMAC is): they show which token this
    # worker's cached clients log in with.
    out["token_ids"] = ",".join(sorted({t for t in (token_id_of(dict(k)) for k in keys) if t}))
    return out


def close_all():
    with _lock:
        for entries in _consumers.values():
            for c, _ in entries:
                _close(c, "consumers_closed")
        _consumers.clear()
        for p, _ in _producers.values():
            _close(p, "producers_closed")
        _producers.clear()


_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
BATCH_ROWS = 8192


def read_range(configs, arrow_schema, topic, partition, start, end, include_headers,
               poll_timeout_ms, fail_on_data_loss):
    """Yield ``pyarrow.RecordBatch`` es of Spark's Kafka schema for offsets
    ``[start, end)`` of one partition, on a cached consumer.

    Executor consumers run with ``auto.offset.reset=none`` (as Spark's): an
    offset no longer in the log (deleted by retention since the query was
    planned) raises OFFSET_OUT_OF_RANGE instead of silently moving the
    position, and is reported as data loss (``failOnDataLoss``)."""
    # pyarrow comes with pyspark, an optional dependency: only executors need it.
    import pyarrow as pa
    tp = TopicPartition(topic, partition)
    consumer = checkout_consumer(configs)
    clean = False
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        cols = _new_cols(include_headers)
        last_progress = time.monotonic()
        position = start
        while position < end:
            try:
                records = consumer.poll(min(1.0, poll_timeout_ms / 1000))
            except errors.KafkaError as exc:
                if exc.error_code != Errors.OFFSET_OUT_OF_RANGE:
                    raise
                _lost(fail_on_data_loss,
                      f"Cannot fetch offset {position} of {tp.topic}-{tp.partition}: {exc}. "
                      "Some data may have been lost because they are not available in Kafka "
                      "any more; either the data was aged out by Kafka or the topic may have "
                      "been deleted before all the data in the topic was processed.", exc)
                break
            if records:
                last_progress = time.monotonic()
                for r in records:
                    if r.offset >= end:
                        break
                    _append(cols, r, include_headers)
                if len(cols[0]) >= BATCH_ROWS:
                    yield _batch(pa, arrow_schema, cols, include_headers)
                    cols = _new_cols(include_headers)
            position = consumer.position(tp)
            if position < end and time.monotonic() - last_progress > poll_timeout_ms / 1000:
                _lost(fail_on_data_loss,
                      f"Cannot fetch records in [{position}, {end}) of {tp.topic}-"
                      f"{tp.partition} within {poll_timeout_ms} ms "
                      "(kafkaConsumer.pollTimeoutMs): some data may have been lost, or the "
                      "broker is unreachable.")
                break
        if cols[0]:
            yield _batch(pa, arrow_schema, cols, include_headers)
        # A consumer that stopped early may have a reset or fetch pending: not reused.
        clean = position >= end
    finally:
        checkin_consumer(configs, consumer, clean)


def _lost(fail, message, cause=None):
    if fail:
        raise errors.KChannelError(
            message + " If you want your query to continue in spite of it, set the source "
            "option \"failOnDataLoss\" to \"false\".") from cause
    log.warning("%s Skipped (failOnDataLoss=false).", message)


def _new_cols(include_headers):
    return [[] for _ in range(8 if include_headers else 7)]


def _append(cols, r, include_headers):
    cols[0].append(r.key)
    cols[1].append(r.value)
    cols[2].append(r.topic)
    cols[3].append(r.partition)
    cols[4].append(r.offset)
    cols[5].append(r.timestamp * 1000)
    cols[6].append(_TIMESTAMP_TYPES.get(r.timestamp_type, -1)
                   if isinstance(r.timestamp_type, str) else int(r.timestamp_type))
    if include_headers:
        cols[7].append([(k.decode("utf-8") if isinstance(k, (bytes, bytearray)) else k, v)
                        for k, v in (r.headers or ())])


def _batch(pa, schema, cols, include_headers):
    arrays = [pa.array(col, type=schema.field(i).type) for i, col in enumerate(cols)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
