"""``kchannel.Consumer``: Kafka's ``KafkaConsumer`` on kchannel channels.

Single-threaded as Kafka's consumer: ``poll`` does the network I/O on the
caller's thread.  Partitions are given with ``assign``, or by the group with
``subscribe`` (:mod:`kchannel.consumer.coordinator`); with ``group.id``
offsets are committed to and read from the group coordinator (a consumer
that assigns its partitions commits with generation -1, as Kafka's does).
"""
import itertools

from kchannel import errors
from kchannel.client import RequestTimeoutError
from kchannel.client.cluster_client import ClusterClient
from kchannel.config import ClientConfig
from kchannel.consumer.config import split_consumer_configs
from kchannel.consumer.coordinator import ConsumerCoordinator
from kchannel.consumer.fetcher import Fetcher, SubscriptionState
from kchannel.log import get_logger
from kchannel.client.metadata import Metadata, TopicPartition
from kchannel.protocol import messages
from kchannel.protocol.errors import Errors, exception_for

__all__ = ["Consumer", "OffsetAndMetadata", "OffsetAndTimestamp"]

log = get_logger("kchannel.consumer")

_ids = itertools.count(1)
_LIST_OFFSETS = messages.LIST_OFFSETS.api_key
_FIND_COORDINATOR = messages.FIND_COORDINATOR.api_key
_OFFSET_COMMIT = messages.OFFSET_COMMIT.api_key
_OFFSET_FETCH = messages.OFFSET_FETCH.api_key
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_RETRIABLE = frozenset({
    Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.LEADER_NOT_AVAILABLE,
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT, Errors.NETWORK_EXCEPTION,
    Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.NOT_COORDINATOR, Errors.KAFKA_STORAGE_ERROR, Errors.LISTENER_NOT_FOUND,
    Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE,
    Errors.UNKNOWN_TOPIC_ID, Errors.INCONSISTENT_TOPIC_ID,
})
_COORDINATOR_ERRORS = frozenset({Errors.COORDINATOR_LOAD_IN_PROGRESS,
                                 Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR})


class OffsetAndMetadata:
    __slots__ = ("offset", "metadata", "leader_epoch")

    def __init__(self, offset, metadata="", leader_epoch=None):
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch

    def __eq__(self, other):
        return isinstance(other, OffsetAndMetadata) and \
            (self.offset, self.metadata) == (other.offset, other.metadata)

    def __repr__(self):
        return f"OffsetAndMetadata{{offset={self.offset}, metadata='{self.metadata}'}}"


class OffsetAndTimestamp:
    __slots__ = ("offset", "timestamp", "leader_epoch")

    def __init__(self, offset, timestamp, leader_epoch=None):
        self.offset = offset
        self.timestamp = timestamp
        self.leader_epoch = leader_epoch

    def __eq__(self, other):
        return isinstance(other, OffsetAndTimestamp) and \
            (self.offset, self.timestamp) == (other.offset, other.timestamp)

    def __repr__(self):
        return f"(timestamp={self.timestamp}, offset={self.offset})"


def _tp(tp):
    if isinstance(tp, TopicPartition):
        return tp
    topic, partition = tp
    return TopicPartition(topic, int(partition))


class Consumer:
    """A Kafka consumer (see the module docstring).  ``configs`` and keyword
    arguments take Kafka's consumer and client keys and their librdkafka /
    kafka-python aliases."""

    def __init__(self, configs=None, **kwargs):
        configs = dict(configs or {})
        configs.update(kwargs)
        explicit_auto_commit = any(k in configs for k in ("enable.auto.commit",
                                                          "enable_auto_commit"))
        values, client_configs, extras = split_consumer_configs(configs)
        self.config = values
        self.group_id = values["group.id"]
        if not self.group_id:
            if explicit_auto_commit and values["enable.auto.commit"]:
                raise errors.ConfigError(
                    "enable.auto.commit cannot be set to true when default group id (null) "
                    "is used.", key="enable.auto.commit", value=True)
            values["enable.auto.commit"] = False
        client_cfg = ClientConfig(client_configs)
        if not client_cfg.bootstrap_addresses:
            raise errors.ConfigError("bootstrap.servers must list at least one broker",
                                     key="bootstrap.servers")
        self.client_id = client_cfg.client_id or f"consumer-{self.group_id or ''}-{next(_ids)}"
        client_configs = dict(client_configs)
        client_configs["client.id"] = self.client_id
        self.metadata = Metadata(client_cfg.bootstrap_addresses,
                                 metadata_max_age_ms=values["metadata.max.age.ms"],
                                 refresh_backoff_ms=values["retry.backoff.ms"],
                                 allow_auto_topic_creation=values["allow.auto.create.topics"],
                                 metadata_max_idle_ms=2 ** 62)
        self._client = ClusterClient(client_configs, self.metadata,
                                     metric_group_prefix="consumer",
                                     os_selector=self._new_os_selector())
        self._time = self._client.time
        self.subscriptions = SubscriptionState(values["auto.offset.reset"])
        self._fetcher = Fetcher(self._client, self.metadata, self.subscriptions, values,
                                extras.get("key_deserializer"), extras.get("value_deserializer"))
        self._coordinator = None
        self._group = None            # ConsumerCoordinator once subscribe() is used
        self._next_auto_commit = self._time() + values["auto.commit.interval.ms"]
        self._closed = False

    # -- helpers ------------------------------------------------------------------
    def _new_os_selector(self):
        """The OS selector of the consumer's connections (None: the
        Selector's own; ``kchannel.aio`` gives its event loop's)."""
        return None

    def _default_timeout_ms(self, timeout):
        return self.config["default.api.timeout.ms"] if timeout is None else int(timeout * 1000)

    def _ensure_open(self):
        if self._closed:
            raise errors.KChannelError("This consumer has already been closed.")

    def _poll_until(self, done, timeout_ms, what):
        deadline = self._time() + timeout_ms
        while not done():
            left = deadline - self._time()
            if left <= 0:
                raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before {what}")
            self._client.poll(min(left, 100))
            if self._client.fatal_error is not None:
                exc, self._client.fatal_error = self._client.fatal_error, None
                raise exc

    def _await_metadata(self, topics, timeout_ms, require_all=True):
        """Metadata with ``topics``; with ``require_all=False`` any fresh
        answer will do (a topic that does not exist stays absent)."""
        now = self._time()
        for t in topics:
            self.metadata.add_topic(t, now)
        cluster = self.metadata.cluster
        version = self.metadata.update_version

        def ready():
            c = self.metadata.cluster
            if c.is_bootstrap:
                return False
            if all(c.partition_count(t) for t in topics):
                return True
            return not require_all and self.metadata.update_version > version
        if ready():
            return cluster
        self.metadata.request_update()
        self._poll_until(ready, timeout_ms, "the topic metadata arrived")
        return self.metadata.cluster

    # -- assignment ----------------------------------------------------------------
    def subscribe(self, topics, listener=None):
        """Join ``group.id`` and consume the partitions the group gives this
        member for ``topics`` (classic protocol; eager rebalancing, or incremental
        cooperative with only ``cooperative-sticky`` configured).
        ``listener``: an object with ``on_partitions_revoked(partitions)``
        and/or ``on_partitions_assigned(partitions)`` (Kafka's
        ``ConsumerRebalanceListener``)."""
        self._ensure_open()
        self._require_group()
        if isinstance(topics, str):
            topics = [topics]
        topics = set(topics)
        if self.subscriptions.assignment and self._group is None:
            raise errors.KChannelError("Subscription to topics, partitions and pattern are "
                                       "mutually exclusive")
        if self._group is None:
            self._group = ConsumerCoordinator(self, self.config, listener)
        else:
            self._group.listener = listener
        if topics != self.subscriptions.subscription:
            self.subscriptions.subscription = topics
            self.metadata.set_topics(topics | {tp.topic for tp in self.subscriptions.assignment},
                                     self._time())
            self._group.need_join = True

    def subscription(self):
        return set(self.subscriptions.subscription)

    def assign(self, partitions):
        """Take these partitions (``TopicPartition`` or ``(topic, partition)``)."""
        self._ensure_open()
        if self._group is not None and self.subscriptions.subscription:
            raise errors.KChannelError("Subscription to topics, partitions and pattern are "
                                       "mutually exclusive")
        tps = [_tp(p) for p in partitions]
        self._fetcher.clear_buffered(set(self.subscriptions.assignment) - set(tps))
        self.subscriptions.assign(tps)
        now = self._time()
        for tp in tps:
            self.metadata.add_topic(tp.topic, now)

    def assignment(self):
        return set(self.subscriptions.assignment)

    def unsubscribe(self):
        if self._group is not None:
            self._group.leave_group(self.config["request.timeout.ms"])
            self._group = None
        self.subscriptions.subscription = set()
        self.subscriptions.assign([])
        self._fetcher.clear_buffered()

    def pause(self, partitions):
        for p in partitions:
            self.subscriptions.state(_tp(p)).paused = True
        self._fetcher.clear_buffered([_tp(p) for p in partitions])

    def resume(self, partitions):
        for p in partitions:
            self.subscriptions.state(_tp(p)).paused = False

    def paused(self):
        return {tp for tp, st in self.subscriptions.assignment.items() if st.paused}

    def seek(self, partition, offset):
        if offset < 0:
            raise ValueError(f"seek offset must not be a negative number: {offset}")
        tp = _tp(partition)
        self.subscriptions.seek(tp, int(offset))
        self._fetcher.clear_buffered([tp])

    def seek_to_beginning(self, partitions=None):
        tps = [_tp(p) for p in partitions] if partitions is not None else \
            list(self.subscriptions.assignment)
        for tp in tps:
            self.subscriptions.request_reset(tp, "earliest")
        self._fetcher.clear_buffered(tps)

    def seek_to_end(self, partitions=None):
        tps = [_tp(p) for p in partitions] if partitions is not None else \
            list(self.subscriptions.assignment)
        for tp in tps:
            self.subscriptions.request_reset(tp, "latest")
        self._fetcher.clear_buffered(tps)

    def position(self, partition, timeout=None):
        """The offset of the next record to be fetched (resolving it from
        the committed offset or ``auto.offset.reset`` if needed)."""
        tp = _tp(partition)
        st = self.subscriptions.state(tp)
        if st.position is None:
            self._update_positions(self._default_timeout_ms(timeout))
        return st.position

    # -- offsets ----------------------------------------------------------------------
    def beginning_offsets(self, partitions, timeout=None):
        tps = [_tp(p) for p in partitions]
        found = self._list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps},
                                   self._default_timeout_ms(timeout))
        return {tp: found[tp][0] for tp in tps}

    def end_offsets(self, partitions, timeout=None):
        """The offset after the last record (the high watermark, or the last
        stable offset under read_committed).  Tansu answers the last batch's
        base offset + 1 instead (a Tansu fault, see README Limitations)."""
        tps = [_tp(p) for p in partitions]
        found = self._list_offsets({tp: LATEST_TIMESTAMP for tp in tps},
                                   self._default_timeout_ms(timeout))
        return {tp: found[tp][0] for tp in tps}

    def offsets_for_times(self, timestamps, timeout=None):
        """``{tp: OffsetAndTimestamp or None}``: the earliest offset whose
        timestamp is at least the given one (ms)."""
        query = {_tp(tp): int(ts) for tp, ts in timestamps.items()}
        for tp, ts in query.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target "
                                 "time cannot be negative.")
        found = self._list_offsets(query, self._default_timeout_ms(timeout))
        return {tp: (OffsetAndTimestamp(found[tp][0], found[tp][1])
                     if found[tp][0] >= 0 else None) for tp in query}

    def _list_offsets(self, query, timeout_ms):
        """``{tp: (offset, timestamp)}`` from the partition leaders."""
        self._await_metadata({tp.topic for tp in query}, timeout_ms)
        result = {}
        pending = dict(query)
        deadline = self._time() + timeout_ms
        while pending:
            cluster = self.metadata.cluster
            by_node = {}
            for tp, ts in pending.items():
                leader = cluster.leader_for(tp)
                if leader is None:
                    self.metadata.request_update()
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            outstanding = {}
            raise_later = []
            for node, tps in by_node.items():
                if not self._client.ready(node):
                    continue
                body = {"replica_id": -1,
                        "isolation_level": 1 if self._fetcher.read_committed else 0,
                        "topics": _group(tps, lambda tp, ts: {
                            "partition_index": tp.partition, "current_leader_epoch": -1,
                            "timestamp": ts, "max_num_offsets": 1})}
                outstanding[node] = None

                def done(resp, node=node, tps=tps):
                    outstanding.pop(node, None)
                    if resp.exception is not None:
                        return
                    for topic in resp.body["topics"]:
                        for p in topic["partitions"]:
                            tp = TopicPartition(topic["name"], p["partition_index"])
                            if tp not in tps:
                                continue
                            code = p["error_code"]
                            if code == 0:
                                offset = p.get("offset", -1)
                                if "old_style_offsets" in p and p.get("old_style_offsets"):
                                    offset = p["old_style_offsets"][0]
                                result[tp] = (offset, p.get("timestamp", -1))
                                pending.pop(tp, None)
                            elif code in _RETRIABLE:
                                self.metadata.request_update()
                            else:
                                raise_later.append(exception_for(code))
                self._client.send(node, _LIST_OFFSETS, body, done)
            left = deadline - self._time()
            if left <= 0:
                raise RequestTimeoutError(
                    f"Failed to get offsets by times in {timeout_ms}ms")
            self._poll_until(lambda: not outstanding, left, "the offsets were listed")
            if raise_later:
                raise raise_later[0]
            if pending and not outstanding:
                self._client.poll(min(self.config["retry.backoff.ms"], max(left, 0)))
        return result

    def _update_positions(self, timeout_ms):
        missing = self.subscriptions.missing_positions()
        if not missing:
            return
        need_reset = [tp for tp in missing
                      if self.subscriptions.assignment[tp].reset_strategy is None]
        if need_reset and self.group_id:
            committed = self.committed(need_reset, timeout=timeout_ms / 1000)
            for tp in need_reset:
                om = committed.get(tp)
                if om is not None and om.offset >= 0:
                    self.subscriptions.seek(tp, om.offset)
        query = {}
        for tp in self.subscriptions.missing_positions():
            st = self.subscriptions.assignment[tp]
            strategy = st.reset_strategy or self.subscriptions.default_reset
            if strategy == "none":
                raise errors.KafkaError(
                    -1, "NO_OFFSET_FOR_PARTITION",
                    f"Undefined offset with no reset policy for partitions: [{tp}]")
            query[tp] = EARLIEST_TIMESTAMP if strategy == "earliest" else LATEST_TIMESTAMP
        if query:
            found = self._list_offsets(query, timeout_ms)
            for tp, (offset, _) in found.items():
                if self.subscriptions.is_assigned(tp) and \
                        self.subscriptions.assignment[tp].position is None:
                    self.subscriptions.seek(tp, offset)

    # -- poll -------------------------------------------------------------------------
    def poll(self, timeout=None):
        """Records fetched for the assigned partitions (at most
        ``max.poll.records``), waiting up to ``timeout`` seconds for some.
        The next fetches are already in flight when it returns."""
        self._ensure_open()
        group = self._group
        if not self.subscriptions.assignment and not (group and self.subscriptions.subscription):
            raise errors.KChannelError("Consumer is not subscribed to any topics or assigned "
                                       "any partitions")
        timeout_ms = 0 if timeout is None else max(0, int(timeout * 1000))
        deadline = self._time() + timeout_ms
        self._maybe_auto_commit()
        while True:
            if group is not None:
                if group.need_join:
                    group.ensure_active_group(max(deadline - self._time(),
                                                  self.config["default.api.timeout.ms"]))
                group.maybe_heartbeat(self._time())
            self._fetcher.raise_errors()
            if self.subscriptions.missing_positions():
                self._update_positions(max(deadline - self._time(),
                                           self.config["default.api.timeout.ms"]))
            records = self._fetcher.fetched_records()
            if records:
                # Pipelining: ask for more before the application works.
                self._fetcher.send_fetches(self._time())
                self._client.poll(0)
                return records
            self._fetcher.send_fetches(self._time())
            left = deadline - self._time()
            if left <= 0:
                self._client.poll(0)
                records = self._fetcher.fetched_records()
                self._fetcher.raise_errors()
                return records
            wait = min(left, self.config["fetch.max.wait.ms"] + 100)
            if group is not None:
                wait = min(wait, group.time_to_next_heartbeat(self._time()))
            self._client.poll(wait)
            if self._client.fatal_error is not None:
                exc, self._client.fatal_error = self._client.fatal_error, None
                raise exc

    # -- commits ----------------------------------------------------------------------
    def _require_group(self):
        if not self.group_id:
            raise errors.KafkaError(
                24, "INVALID_GROUP_ID",
                "To use the group management or offset commit APIs, you must provide a valid "
                "group.id in the consumer configuration.")

    def _ensure_coordinator(self, timeout_ms):
        if self._coordinator is not None and not self._client.client.connection_failed(
                self._coordinator[0]):
            return self._coordinator[0]
        self._coordinator = None
        deadline = self._time() + timeout_ms
        while self._coordinator is None:
            node = self._client.least_loaded_node()
            if node is None or not self._client.ready(node):
                self._poll_until(lambda: node is not None and self._client.is_ready(node),
                                 max(deadline - self._time(), 1), "a broker was ready")
                continue
            version = self._client.choose_version(node, _FIND_COORDINATOR)
            body = {"key": self.group_id, "key_type": 0, "coordinator_keys": [self.group_id]}
            box = {}
            self._client.send(node, _FIND_COORDINATOR, body, lambda r: box.setdefault("r", r),
                              version=version)
            self._poll_until(lambda: "r" in box, max(deadline - self._time(), 1),
                             "the group coordinator was found")
            resp = box["r"]
            if resp.exception is None:
                b = resp.body
                entry = b["coordinators"][0] if version >= 4 else b
                if entry["error_code"] == 0:
                    cid = entry["node_id"]
                    # A separate connection, as Kafka's coordinator node id.
                    coord_id = 2 ** 31 - 1 - cid
                    self._coordinator = (coord_id, entry["host"], entry["port"])
                    self._client.extra_nodes[coord_id] = (entry["host"], entry["port"])
                    break
                if entry["error_code"] not in _COORDINATOR_ERRORS:
                    raise exception_for(entry["error_code"], entry.get("error_message"))
            if self._time() >= deadline:
                raise RequestTimeoutError("Timeout expired while finding the group coordinator")
            self._client.poll(self.config["retry.backoff.ms"])
        return self._coordinator[0]

    def _coordinator_request(self, api_key, body, timeout_ms, what, request_timeout_ms=None):
        # The coordinator is found and connected within timeout_ms (the
        # caller's); request_timeout_ms (JoinGroup's rebalance timeout) only
        # lets the response to a request sent take longer, as Kafka's
        # per-request timeout does.  An unreachable cluster thus fails the
        # call after timeout_ms, not after the rebalance timeout.
        deadline = self._time() + timeout_ms
        while True:
            node = self._ensure_coordinator(max(deadline - self._time(), 1))
            if not self._client.ready(node):
                self._poll_until(lambda: self._client.is_ready(node) or
                                 self._client.client.connection_failed(node),
                                 max(deadline - self._time(), 1), what)
                if not self._client.is_ready(node):
                    self._coordinator = None
                    continue
            box = {}
            self._client.send(node, api_key, body, lambda r: box.setdefault("r", r),
                              timeout_ms=request_timeout_ms)
            if request_timeout_ms is not None:
                deadline = max(deadline, self._time() + request_timeout_ms)
            self._poll_until(lambda: "r" in box, max(deadline - self._time(), 1), what)
            resp = box["r"]
            if resp.exception is not None:
                self._coordinator = None
                if self._time() >= deadline:
                    raise resp.exception
                continue
            return resp

    def commit(self, offsets=None, timeout=None):
        """Commit ``offsets`` (``{tp: OffsetAndMetadata or int}``), by default
        the current positions, synchronously (Kafka's ``commitSync``)."""
        self._ensure_open()
        self._require_group()
        if offsets is None:
            offsets = {tp: OffsetAndMetadata(pos)
                       for tp, pos in self.subscriptions.positions().items()}
        offsets = {_tp(tp): (om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om))
                   for tp, om in offsets.items()}
        if not offsets:
            return
        timeout_ms = self._default_timeout_ms(timeout)
        generation, member = (self._group.generation_and_member() if self._group is not None
                              else (-1, ""))
        body = {"group_id": self.group_id, "generation_id_or_member_epoch": generation,
                "member_id": member, "group_instance_id": self.config["group.instance.id"]
                if self._group is not None else None, "retention_time_ms": -1,
                "topics": _group(offsets, lambda tp, om: {
                    "partition_index": tp.partition, "committed_offset": om.offset,
                    "committed_leader_epoch": -1, "committed_metadata": om.metadata or "",
                    "commit_timestamp": -1})}
        deadline = self._time() + timeout_ms
        while True:
            resp = self._coordinator_request(_OFFSET_COMMIT, body,
                                             max(deadline - self._time(), 1),
                                             "the offsets were committed")
            retry = False
            for topic in resp.body["topics"]:
                for p in topic["partitions"]:
                    code = p["error_code"]
                    if code in _COORDINATOR_ERRORS:
                        self._coordinator = None
                        retry = True
                    elif code in (Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION,
                                  Errors.UNKNOWN_MEMBER_ID) and self._group is not None:
                        self._group.need_join = True
                        raise errors.KafkaError(
                            code, "COMMIT_FAILED",
                            "Commit cannot be completed since the group has already "
                            "rebalanced and assigned the partitions to another member. This "
                            "means that the time between subsequent calls to poll() was longer "
                            "than the configured max.poll.interval.ms, which typically implies "
                            "that the poll loop is spending too much time message processing.")
                    elif code:
                        raise exception_for(code)
            if not retry:
                return
            if self._time() >= deadline:
                raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before the "
                                          "offsets were committed")
            self._client.poll(self.config["retry.backoff.ms"])

    def committed(self, partitions, timeout=None):
        """``{tp: OffsetAndMetadata or None}`` committed for the group."""
        self._ensure_open()
        self._require_group()
        tps = [_tp(p) for p in partitions]
        timeout_ms = self._default_timeout_ms(timeout)
        by_topic = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        body = {"group_id": self.group_id, "topics": topics, "require_stable": True,
                "groups": [{"group_id": self.group_id, "member_id": None, "member_epoch": -1,
                            "topics": topics}]}
        deadline = self._time() + timeout_ms
        while True:
            resp = self._coordinator_request(_OFFSET_FETCH, body,
                                             max(deadline - self._time(), 1),
                                             "the committed offsets were fetched")
            b = resp.body
            if "groups" in b and b["groups"]:
                g = b["groups"][0]
                code, topics_out = g["error_code"], g["topics"]
            else:
                code, topics_out = b.get("error_code", 0), b["topics"]
            # A group the broker is still loading (or that moved) is asked
            # again, as Kafka's consumer does; any other error is raised.
            if code not in _COORDINATOR_ERRORS or self._time() >= deadline:
                break
            self._coordinator = None
            self._client.poll(self.config["retry.backoff.ms"])
        if code:
            raise exception_for(code)
        out = {tp: None for tp in tps}
        for topic in topics_out:
            for p in topic["partitions"]:
                if p["error_code"]:
                    raise exception_for(p["error_code"])
                tp = TopicPartition(topic["name"], p["partition_index"])
                if p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(p["committed_offset"],
                                                p.get("metadata") or "")
        return out

    def _maybe_auto_commit(self):
        if not self.config["enable.auto.commit"]:
            return
        now = self._time()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config["auto.commit.interval.ms"]
        try:
            self.commit(timeout=self.config["request.timeout.ms"] / 1000)
        except errors.KChannelError as exc:
            log.warning("Asynchronous auto-commit of offsets failed: %s", exc)

    # -- close ------------------------------------------------------------------------
    def close(self, timeout=None):
        if self._closed:
            return
        try:
            if self.config["enable.auto.commit"] and self.subscriptions.positions():
                try:
                    self.commit(timeout=30 if timeout is None else timeout)
                except errors.KChannelError as exc:
                    log.warning("Failed to commit offsets on close: %s", exc)
            if self._group is not None:
                self._group.leave_group(self.config["request.timeout.ms"])
        finally:
            self._closed = True
            self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        while True:
            for record in self.poll(1.0):
                yield record


def _group(by_tp, make):
    topics = {}
    for tp, v in by_tp.items():
        topics.setdefault(tp.topic, []).append(make(tp, v))
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]

