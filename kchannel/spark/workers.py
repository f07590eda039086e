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

Exactly-once streaming writes (:func:`write_exactly_once`) use a
transactional producer per transactional id, cached the same way, and an
:class:`~kchannel.client.admin.Admin` per configuration to read the
micro-batch marker committed with each transaction.

A new delegation token is a new configuration: when a task takes a client
for it, the cached clients of the same cluster and settings that log in
with an older token are closed (they would only idle until evicted).

Nothing here imports pyspark; pyarrow is imported when a range is read.
"""
import os
import re
import threading
import time

from kchannel import errors
from kchannel.client.admin import Admin
from kchannel.protocol.errors import Errors
from kchannel.consumer import Consumer
from kchannel.consumer.consumer import OffsetAndMetadata
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition
from kchannel.producer import Producer

__all__ = ["checkout_consumer", "checkin_consumer", "producer_for", "connection_stats",
           "read_range", "close_all", "config_key", "write_exactly_once"]

log = get_logger("kchannel.spark")

MAX_CONFIGS = 8
IDLE_S = 540.0      # Kafka's connections.max.idle.ms (9 minutes)

_lock = threading.Lock()
_consumers = {}     # config key -> [(consumer, last_used)]
_producers = {}     # config key -> [producer, last_used]
# (config key, transactional.id) -> [producer, last_used, marker]: marker is
# the next micro-batch id this producer's last commit recorded (None: none yet)
_txn_producers = {}
_admins = {}        # config key -> [Admin, last_used]
_stats = {"consumers_created": 0, "producers_created": 0, "tasks": 0,
          "consumers_closed": 0, "producers_closed": 0, "batches_skipped": 0}
_retired_auth = [0]     # authentications of clients already closed
# Delegation tokens this process was given with its tasks: token id ->
# [latest expiry (ms) the driver reported, config key].  A renewed token keeps
# its id and gets a later expiry; a replacement is another id of the same
# cluster and settings.
_tokens = {}


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
    for cache in (_txn_producers, _admins):
        for key in list(cache):
            if now - cache[key][1] > IDLE_S:
                _close(cache.pop(key)[0], "producers_closed" if cache is _txn_producers
                       else "admins_closed")
    while len(_txn_producers) > MAX_CONFIGS:
        oldest = min(_txn_producers, key=lambda k: _txn_producers[k][1])
        _close(_txn_producers.pop(oldest)[0], "producers_closed")
    while len(_consumers) > MAX_CONFIGS:
        oldest = min(_consumers, key=lambda k: max(last for _, last in _consumers[k]))
        for c, _ in _consumers.pop(oldest):
            _close(c, "consumers_closed")
    while len(_producers) > MAX_CONFIGS:
        oldest = min(_producers, key=lambda k: _producers[k][1])
        _close(_producers.pop(oldest)[0], "producers_closed")


def _close(client, counter):
    _retired_auth[0] += _authentications(client)
    _stats[counter] = _stats.get(counter, 0) + 1
    try:
        client.close(0) if counter == "producers_closed" else client.close()
    except Exception:   # closing is best effort: the client is dropped either way
        log.debug("Closing a cached kchannel client failed", exc_info=True)


def _same_cluster(key):
    """``key`` without its login: the cluster and settings a token serves."""
    return tuple(kv for kv in key if kv[0] != "sasl.jaas.config")


def _retire_superseded_locked(key):
    """Close the cached clients of ``key``'s cluster and settings that log
    in with another delegation token than ``key``'s: the driver replaced
    that token (it may be expired or cancelled soon), so they would only
    idle until evicted."""
    token = token_id_of(dict(key))
    if token is None:
        return
    cluster = _same_cluster(key)

    def superseded(k):
        return k != key and _same_cluster(k) == cluster and token_id_of(dict(k)) not in \
            (None, token)
    for k in [k for k in _consumers if superseded(k)]:
        for c, _ in _consumers.pop(k):
            _close(c, "consumers_closed")
    for k in [k for k in _producers if superseded(k)]:
        _close(_producers.pop(k)[0], "producers_closed")
    for k in [k for k in _txn_producers if superseded(k[0])]:
        _close(_txn_producers.pop(k)[0], "producers_closed")
    for k in [k for k in _admins if superseded(k)]:
        _close(_admins.pop(k)[0], "admins_closed")


def note_token(configs, expiry_ms):
    """Record the delegation token ``configs`` log in with and its expiry as
    the driver knew it (None: no token or unknown).  Returns the latest
    expiry this process knows for that token, or None."""
    token = token_id_of(configs)
    if token is None:
        return None
    now_ms = time.time() * 1000
    with _lock:
        # Tokens long expired are forgotten (a query that replaces its token
        # every few seconds would otherwise grow this without bound).
        for t in [t for t, (e, _) in _tokens.items() if now_ms - e > IDLE_S * 1000]:
            del _tokens[t]
        entry = _tokens.get(token)
        if expiry_ms is not None:
            if entry is None:
                entry = _tokens[token] = [expiry_ms, config_key(configs)]
            else:
                entry[0] = max(entry[0], expiry_ms)
        return entry[0] if entry is not None else None


def newest_token_configs(configs, now_ms):
    """The configuration of the newest delegation token this process holds
    for ``configs``' cluster and settings that has not expired at
    ``now_ms`` and is another token than ``configs``', or None."""
    key = config_key(configs)
    cluster = _same_cluster(key)
    own = token_id_of(configs)
    with _lock:
        valid = [(e, k) for t, (e, k) in _tokens.items()
                 if t != own and e > now_ms and _same_cluster(k) == cluster]
    return dict(max(valid)[1]) if valid else None


class TokenExpiredError(errors.SaslAuthenticationError):
    """An executor's delegation token reached its expiry while it read (the
    message names the token already)."""


def token_expired(configs, expiry_ms):
    """The error of an executor whose delegation token reached its expiry
    while it read, naming the token (never its HMAC)."""
    token = token_id_of(configs)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expiry_ms / 1000))
    return TokenExpiredError(
        f"Delegation token {token} expired at {at} while the executor read with it, and this "
        f"executor holds no newer token of the driver's: the broker ends a token's sessions at "
        f"its expiry (KIP-368). Run the query again (the driver obtains a new token), or give "
        f"tokens a longer life (kchannel.delegationToken.maxLifetimeMs, the broker's "
        f"delegation.token.expiry.time.ms) or renew them sooner "
        f"(kchannel.delegationToken.renewalRatio).")


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
        _retire_superseded_locked(key)
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
        _retire_superseded_locked(key)
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


# Connection and security settings an Admin takes from a writer's
# configuration (the producer's own keys would only be warned about).
_ADMIN_PREFIXES = ("bootstrap.servers", "security.protocol", "ssl.", "sasl.", "client.dns.",
                   "client.id", "request.timeout.ms", "socket.", "reconnect.", "retry.",
                   "connections.max.idle.ms")
MARKER_WAIT_S = 60.0


def _admin_locked(configs, now):
    key = config_key(configs)
    entry = _admins.get(key)
    if entry is None:
        admin = Admin({k: v for k, v in configs.items() if k.startswith(_ADMIN_PREFIXES)})
        entry = _admins[key] = [admin, now]
    entry[1] = now
    return entry[0]


def committed_marker(configs, transactional_id):
    """The next micro-batch id recorded by the last committed transaction
    of ``transactional_id`` (the highest offset its group holds), or None.
    Waits while a transaction of it is being completed (Kafka answers
    UNSTABLE_OFFSET_COMMIT until its markers are written)."""
    with _lock:
        admin = _admin_locked(configs, time.monotonic())
    deadline = time.monotonic() + MARKER_WAIT_S
    while True:
        try:
            offsets = admin.list_consumer_group_offsets(transactional_id, None,
                                                        require_stable=True)
            break
        except errors.KafkaError as exc:
            if exc.error_code != Errors.UNSTABLE_OFFSET_COMMIT or \
                    time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    return max((o.offset for o in offsets.values()), default=None)


def _txn_producer(configs, transactional_id):
    """[producer, last_used, marker] for ``transactional_id``: a cached one,
    or a new one registered with init_transactions (which fences every
    earlier producer of that id and completes its open transaction)."""
    key = (config_key(configs), transactional_id)
    now = time.monotonic()
    with _lock:
        _evict_locked(now)
        _stats["tasks"] += 1
        entry = _txn_producers.get(key)
        if entry is not None:
            entry[1] = now
            return entry
        _retire_superseded_locked(key[0])
        _stats["producers_created"] += 1
    producer = Producer(dict(configs, **{"transactional.id": transactional_id}))
    try:
        producer.init_transactions()
    except BaseException:
        with _lock:
            _close(producer, "producers_closed")
        raise
    entry = [producer, now, None]
    with _lock:
        _txn_producers[key] = entry
    return entry


def _drop_txn_producer(configs, transactional_id, entry):
    key = (config_key(configs), transactional_id)
    with _lock:
        if _txn_producers.get(key) is entry:
            del _txn_producers[key]
        _close(entry[0], "producers_closed")


def write_exactly_once(configs, transactional_id, batch_id, send_rows, drain):
    """Write one task's rows of micro-batch ``batch_id`` in one Kafka
    transaction of ``transactional_id``, exactly once across task retries,
    zombies and micro-batches replayed after a restart.

    ``send_rows(producer)`` sends the task's rows and returns (count, a
    topic written); ``drain()`` consumes them without writing.  The
    transaction carries, besides the records, a marker: the offset
    ``batch_id + 1`` committed for the consumer group named
    ``transactional_id`` (TxnOffsetCommit, on partition 0 of a topic
    written), so the records and the marker become visible together or not
    at all.  A task first reads the marker: at or past ``batch_id + 1``, this
    partition of the micro-batch is already in Kafka and nothing is written
    again.  Returns the count written, or None when skipped."""
    entry = _txn_producer(configs, transactional_id)
    done = committed_marker(configs, transactional_id)
    if entry[2] is not None and done != entry[2]:
        # Another producer committed for this id since our last commit: it
        # fenced ours.  A new one fences it in turn and completes whatever it
        # left open; the marker is read again after that.
        _drop_txn_producer(configs, transactional_id, entry)
        entry = _txn_producer(configs, transactional_id)
        done = committed_marker(configs, transactional_id)
    if done is not None and done > batch_id:
        drain()
        with _lock:
            _stats["batches_skipped"] += 1
        log.info("Micro-batch %s of %s is already in Kafka (marker %s): not written again",
                 batch_id, transactional_id, done)
        return None
    producer = entry[0]
    try:
        producer.begin_transaction()
        count, topic = send_rows(producer)
        if topic is not None:
            producer.send_offsets_to_transaction(
                {TopicPartition(topic, 0): OffsetAndMetadata(
                    batch_id + 1, f"kchannel exactly-once: micro-batch {batch_id} written")},
                transactional_id)
        producer.commit_transaction()
    except BaseException:
        # Whatever this transaction wrote is never visible to read_committed
        # readers; a producer in doubt is not reused.
        try:
            if producer._txn.in_open_transaction() and not producer._txn.has_fatal_error():
                producer.abort_transaction(10)
        except Exception:   # the producer is dropped below either way
            log.debug("Aborting the transaction of %s failed", transactional_id, exc_info=True)
        _drop_txn_producer(configs, transactional_id, entry)
        raise
    if topic is not None:
        entry[2] = batch_id + 1
    return count


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
            [p for p, _ in _producers.values()] + [e[0] for e in _txn_producers.values()]
        out = dict(_stats)
        out["pid"] = os.getpid()
        out["cached"] = len(live)
        out["authentications"] = _retired_auth[0] + sum(_authentications(c) for c in live)
        keys = list(_consumers) + list(_producers) + [k for k, _ in _txn_producers]
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
        for e in _txn_producers.values():
            _close(e[0], "producers_closed")
        _txn_producers.clear()
        for a, _ in _admins.values():
            _close(a, "admins_closed")
        _admins.clear()


_TIMESTAMP_TYPES = {"CreateTime": 0, "LogAppendTime": 1}
BATCH_ROWS = 8192


def read_range(configs, arrow_schema, topic, partition, start, end, include_headers,
               poll_timeout_ms, fail_on_data_loss, token_expiry_ms=None):
    """Yield ``pyarrow.RecordBatch`` es of Spark's Kafka schema for offsets
    ``[start, end)`` of one partition, on a cached consumer.

    Executor consumers run with ``auto.offset.reset=none`` (as Spark's): an
    offset no longer in the log (deleted by retention since the query was
    planned) raises OFFSET_OUT_OF_RANGE instead of silently moving the
    position, and is reported as data loss (``failOnDataLoss``).

    ``token_expiry_ms``: the expiry of the delegation token ``configs`` log
    in with, as the driver knew it.  Past it, Kafka still accepts a login
    with the token (until it purges expired tokens, hourly by default) but
    grants a session of 0 ms and closes the connection at its next request,
    so the consumer would reconnect in a loop and return nothing until
    ``pollTimeoutMs``.  A read that stalls past the expiry while its
    consumer logs in afresh goes on with the newest unexpired token of the
    same cluster this process holds, or fails at once naming the token
    (:func:`token_expired`).  A renewed token is not stalled: the client
    re-authenticates (KIP-368) and the broker grants the renewed expiry."""
    # pyarrow comes with pyspark, an optional dependency: only executors need it.
    import pyarrow as pa
    tp = TopicPartition(topic, partition)
    expiry = note_token(configs, token_expiry_ms)
    consumer = checkout_consumer(configs)
    clean = False
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        cols = _new_cols(include_headers)
        last_progress = time.monotonic()
        logins = _authentications(consumer)
        position = start
        while position < end:
            try:
                records = consumer.poll(min(1.0, poll_timeout_ms / 1000))
            except errors.AuthenticationError:
                # (a re-authentication refused near the token's expiry)
                if expiry is None or time.time() * 1000 < expiry - 5000:
                    raise
                records, logins = None, -1
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
                logins = _authentications(consumer)
                for r in records:
                    if r.offset >= end:
                        break
                    _append(cols, r, include_headers)
                if len(cols[0]) >= BATCH_ROWS:
                    yield _batch(pa, arrow_schema, cols, include_headers)
                    cols = _new_cols(include_headers)
            elif expiry is not None:
                now_ms = time.time() * 1000
                expiry = note_token(configs, None) or expiry    # (renewed meanwhile?)
                if now_ms >= expiry and _authentications(consumer) != logins:
                    # Stalled past the token's expiry while logging in
                    # afresh: the broker is ending every session at once.
                    newer = newest_token_configs(configs, now_ms)
                    if newer is None:
                        raise token_expired(configs, expiry)
                    log.info("Delegation token %s expired while reading %s-%s; going on "
                             "with token %s", token_id_of(configs), tp.topic, tp.partition,
                             token_id_of(newer))
                    position = consumer.position(tp)
                    checkin_consumer(configs, consumer, False)
                    configs, consumer = newer, None
                    expiry = note_token(configs, None) or expiry
                    consumer = checkout_consumer(configs)
                    consumer.assign([tp])
                    consumer.seek(tp, position)
                    logins = _authentications(consumer)
                    last_progress = time.monotonic()
                    continue
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
        if consumer is not None:
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
