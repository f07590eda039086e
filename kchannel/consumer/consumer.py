"""``kchannel.Consumer``: Kafka's ``KafkaConsumer`` on kchannel channels.

Single-threaded as Kafka's consumer: ``poll`` does the network I/O on the
caller's thread.  Partitions are given with ``assign``, or by the group with
``subscribe`` (:mod:`kchannel.consumer.coordinator`); with ``group.id``
offsets are committed to and read from the group coordinator (a consumer
that assigns its partitions commits with generation -1, as Kafka's does).
"""
import itertools

from kchannel import errors
from kchannel.client import ClientResponse, ExponentialBackoff, RequestTimeoutError
from kchannel.client.cluster_client import ClusterClient
from kchannel.client.group_metadata import ConsumerGroupMetadata
from kchannel.client.statistics import client_statistics
from kchannel.config import ClientConfig
from kchannel.consumer.config import split_consumer_configs
from kchannel.consumer.coordinator import ConsumerCoordinator
from kchannel.consumer.fetcher import Fetcher, SubscriptionState
from kchannel.consumer.membership import ConsumerMembershipManager
from kchannel.consumer.metrics import ConsumerMetrics
from kchannel.log import get_logger
from kchannel.client.metadata import Metadata, TopicPartition
from kchannel.protocol import messages
from kchannel.protocol.errors import COORDINATOR_ERRORS, RETRIABLE_ERRORS, Errors, exception_for

__all__ = ["Consumer", "OffsetAndMetadata", "OffsetAndTimestamp"]

log = get_logger("kchannel.consumer")

_ids = itertools.count(1)
_LIST_OFFSETS = messages.LIST_OFFSETS.api_key
_FIND_COORDINATOR = messages.FIND_COORDINATOR.api_key
_OFFSET_COMMIT = messages.OFFSET_COMMIT.api_key
_OFFSET_FETCH = messages.OFFSET_FETCH.api_key
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# Kafka's AbstractCoordinator: the coordinator moved (or the request to it
# timed out on the broker): find it again.  COORDINATOR_LOAD_IN_PROGRESS only
# waits (the coordinator is the right one, still loading the group).
_MOVED_COORDINATOR_ERRORS = (COORDINATOR_ERRORS - {Errors.COORDINATOR_LOAD_IN_PROGRESS}) | \
    {Errors.REQUEST_TIMED_OUT}
# CommonClientConfigs' retry back-off: doubling, +/-20 % jitter.
_RETRY_BACKOFF_EXP_BASE = 2
_RETRY_BACKOFF_JITTER = 0.2


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
                                 refresh_backoff_max_ms=values["retry.backoff.max.ms"],
                                 allow_auto_topic_creation=values["allow.auto.create.topics"],
                                 metadata_max_idle_ms=2 ** 62)
        self._client = ClusterClient(client_configs, self.metadata,
                                     metric_group_prefix="consumer",
                                     os_selector=self._new_os_selector())
        self._time = self._client.time
        self.subscriptions = SubscriptionState(values["auto.offset.reset"])
        self.sensors = ConsumerMetrics(
            self._client.client.metrics, self.client_id,
            assigned=lambda: len(self.subscriptions.assignment),
            last_heartbeat_ms=lambda: (self._group.last_heartbeat_ms or None)
            if self._group is not None else None)
        self._statistics = client_statistics(self, "consumer", values, extras)
        self._fetcher = Fetcher(self._client, self.metadata, self.subscriptions, values,
                                extras.get("key_deserializer"), extras.get("value_deserializer"),
                                sensors=self.sensors)
        self._coordinator = None      # (node id, host, port) of the group coordinator
        self._lookup = None           # the FindCoordinator in flight: {"node", "version", "r"}
        self._next_lookup_ms = 0      # no FindCoordinator before (retry back-off)
        # Failed attempts at the coordinator since it last answered: the
        # retry back-off grows from retry.backoff.ms to retry.backoff.max.ms.
        self._coordinator_attempts = 0
        self._retry_backoff = ExponentialBackoff(
            values["retry.backoff.ms"], _RETRY_BACKOFF_EXP_BASE,
            max(values["retry.backoff.ms"], values["retry.backoff.max.ms"]),
            _RETRY_BACKOFF_JITTER)
        self._offset_fetch = None     # (partitions, box) of an OffsetFetch poll() still awaits
        self._resetting = set()       # partitions whose ListOffsets (for a position) is in flight
        self._commit_in_flight = False   # an auto-commit sent by poll()
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
            manager = ConsumerMembershipManager if self.config["group.protocol"] == "consumer" \
                else ConsumerCoordinator
            self._group = manager(self, self.config, listener)
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
        if not tps:
            self._close_fetch_sessions()
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
        self._close_fetch_sessions()

    def _close_fetch_sessions(self, wait_ms=0):
        """Close the fetch sessions (KIP-227) on the brokers, waiting up to
        ``wait_ms`` for their answers, except those queued behind a fetch
        still in flight (a long poll away: the broker evicts a session it
        is not told to close in time)."""
        if not self._fetcher.close_sessions() or not self._fetcher.closing:
            self._client.poll(0, self._time())      # sends them
            return
        deadline = self._time() + wait_ms
        while True:
            now = self._time()
            self._client.poll(max(0, min(deadline - now, 50)), now)
            if self._time() >= deadline or not self._fetcher.closing:
                break

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

    def _list_offsets(self, query, timeout_ms, partial=False, on_found=None):
        """``{tp: (offset, timestamp)}`` from the partition leaders.  A
        leader that cannot be reached (or answers a retriable error) has its
        partitions asked again after a metadata refresh, which may name
        another leader; what live leaders answered is kept.  When
        ``timeout_ms`` runs out: with ``partial`` the offsets found so far,
        else RequestTimeoutError (Kafka's message).  ``on_found(tp, offset,
        timestamp asked)`` is called for every answer, also one that comes after this call
        returned (its partitions stay in ``self._resetting`` until then)."""
        deadline = self._time() + timeout_ms
        try:
            self._await_metadata({tp.topic for tp in query}, timeout_ms)
        except RequestTimeoutError:
            if partial:
                return {}
            raise
        result = {}
        pending = dict(query)
        raise_later = []
        outstanding = {}          # node -> its partitions, while its request is in flight
        while pending:
            cluster = self.metadata.cluster
            now = self._time()
            by_node = {}
            asked = {tp for tps in outstanding.values() for tp in tps}
            for tp, ts in pending.items():
                if tp in asked or (partial and tp in self._resetting):
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    self.metadata.request_update()
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            for node, tps in by_node.items():
                if node in outstanding:
                    continue
                if not self._client.ready(node, now):
                    if self._client.client.connection_failed(node):
                        # The leader may have died: the metadata may name
                        # another one (Kafka refreshes on every disconnect).
                        self.metadata.request_update()
                    continue
                body = {"replica_id": -1,
                        "isolation_level": 1 if self._fetcher.read_committed else 0,
                        "topics": _group(tps, lambda tp, ts: {
                            "partition_index": tp.partition, "current_leader_epoch": -1,
                            "timestamp": ts, "max_num_offsets": 1})}
                outstanding[node] = tps

                def done(resp, node=node, tps=tps):
                    outstanding.pop(node, None)
                    if on_found is not None:
                        self._resetting.difference_update(tps)
                    if resp.exception is not None:
                        self.metadata.request_update()
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
                                if on_found is not None:
                                    on_found(tp, offset, tps[tp])
                            elif code in RETRIABLE_ERRORS:
                                self.metadata.request_update()
                            else:
                                raise_later.append(exception_for(code))
                try:
                    self._client.send(node, _LIST_OFFSETS, body, done)
                except errors.KChannelError as exc:
                    # (the connection went away since ready())
                    log.debug("ListOffsets to node %s not sent: %s", node, exc)
                    outstanding.pop(node, None)
                    continue
                if on_found is not None:
                    self._resetting.update(tps)
            if raise_later:
                raise raise_later[0]
            if not pending:
                break
            left = deadline - self._time()
            if left <= 0:
                if partial:
                    return result
                raise RequestTimeoutError(f"Failed to get offsets by times in {timeout_ms}ms")
            # Until an answer (or a failure) comes, or the metadata or a
            # connection changes: then the partitions left are asked again.
            self._client.poll(min(left, self.config["retry.backoff.ms"] if not outstanding
                                  else 100))
            self._raise_fatal()
            if raise_later:
                raise raise_later[0]
        return result

    def _raise_fatal(self):
        if self._client.fatal_error is not None:
            exc, self._client.fatal_error = self._client.fatal_error, None
            raise exc

    def _update_positions(self, timeout_ms, partial=False):
        """Positions for the partitions that have none: the committed offset,
        else ``auto.offset.reset``.  With ``partial`` (from ``poll``) what is
        found within ``timeout_ms`` is used and the rest is left for the next
        call, as Kafka's consumer resets positions asynchronously."""
        missing = self.subscriptions.missing_positions()
        if not missing:
            return
        deadline = self._time() + timeout_ms
        need_reset = [tp for tp in missing
                      if self.subscriptions.assignment[tp].reset_strategy is None]
        if need_reset and self.group_id:
            if partial:
                committed = self._poll_committed(need_reset, timeout_ms)
                if committed is None:
                    return
            else:
                committed = self.committed(need_reset, timeout=timeout_ms / 1000)
            for tp in need_reset:
                om = committed.get(tp)
                if om is not None and om.offset >= 0 and self.subscriptions.is_assigned(tp) \
                        and self.subscriptions.assignment[tp].position is None:
                    self.subscriptions.seek(tp, om.offset)
        query = {}
        for tp in self.subscriptions.missing_positions():
            st = self.subscriptions.assignment[tp]
            strategy = st.reset_strategy or self.subscriptions.default_reset
            if strategy == "none":
                raise errors.KafkaError(
                    Errors.UNKNOWN_SERVER_ERROR, "NO_OFFSET_FOR_PARTITION",
                    f"Undefined offset with no reset policy for partitions: [{tp}]")
            query[tp] = EARLIEST_TIMESTAMP if strategy == "earliest" else LATEST_TIMESTAMP
        if query:
            self._list_offsets(query, max(deadline - self._time(), 0), partial=partial,
                               on_found=self._reset_position)

    def _reset_position(self, tp, offset, asked):
        """A ListOffsets answer for a partition without a position, used if
        the partition still wants what was asked (no seek since)."""
        st = self.subscriptions.assignment.get(tp)
        if st is None or st.position is not None:
            return
        strategy = st.reset_strategy or self.subscriptions.default_reset
        if asked == (EARLIEST_TIMESTAMP if strategy == "earliest" else LATEST_TIMESTAMP):
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
        self._statistics.maybe_emit()
        if group is not None:
            group.poll_started(self._time())
        self._maybe_auto_commit()
        while True:
            # Nothing here waits past the deadline (Kafka's poll timer): a
            # join, an OffsetFetch or a ListOffsets still under way is
            # carried on by the next poll, and the partitions that have a
            # position are fetched meanwhile.
            if group is not None:
                if group.need_join:
                    group.ensure_active_group(max(deadline - self._time(), 0))
                group.maybe_heartbeat(self._time())
            self._fetcher.raise_errors()
            if self.subscriptions.missing_positions():
                self._update_positions(0, partial=True)
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
                Errors.INVALID_GROUP_ID, "INVALID_GROUP_ID",
                "To use the group management or offset commit APIs, you must provide a valid "
                "group.id in the consumer configuration.")

    # The group coordinator, as Kafka's AbstractCoordinator finds it: a
    # FindCoordinator to the least loaded node (another one when a node
    # cannot be reached), the coordinator marked unknown (and found again)
    # when its connection fails or it answers that it moved, and every new
    # attempt after the retry back-off (retry.backoff.ms doubling up to
    # retry.backoff.max.ms while the attempts fail).
    def _retry_backoff_ms(self):
        ms = self._retry_backoff.backoff(self._coordinator_attempts)
        self._coordinator_attempts += 1
        return ms

    def _mark_coordinator_unknown(self, cause):
        now = self._time()
        coordinator, self._coordinator = self._coordinator, None
        if coordinator is not None:
            log.info("Group coordinator %s:%s (id: %s rack: null) is unavailable or invalid due "
                     "to cause: %s. Rediscovery will be attempted.", coordinator[1],
                     coordinator[2], coordinator[0], cause)
            # As Kafka: no request stays in flight to the old coordinator.
            self._client.client.disconnect(coordinator[0])
        self._next_lookup_ms = max(self._next_lookup_ms, now + self._retry_backoff_ms())

    def _coordinator_answered(self):
        """A coordinator request succeeded: back-offs start over."""
        self._coordinator_attempts = 0

    def _poll_coordinator(self, now):
        """One non-blocking step towards a usable coordinator: its node id
        when it is known and its connection is ready, else None (a lookup
        or a connection is under way or backing off; the caller polls)."""
        coordinator = self._coordinator
        if coordinator is not None:
            node = coordinator[0]
            if self._client.ready(node, now):
                return node
            if self._client.client.connection_failed(node) and \
                    self._client.client.is_blacked_out(node, now):
                self._mark_coordinator_unknown(self._client.client.connection_exception(node)
                                               or "the connection failed")
            return None
        box = self._lookup
        if box is not None:
            if "r" in box:
                self._lookup = None
                self._handle_find_coordinator(box, now)
            return None
        if now < self._next_lookup_ms:
            return None
        node = self._client.least_loaded_node(now)
        if node is None:
            # Every broker is backing off (Kafka's NoAvailableBrokersException).
            self._next_lookup_ms = now + self._retry_backoff_ms()
            return None
        if not self._client.ready(node, now):
            return None       # connecting; the next step may pick another node
        version = self._client.choose_version(node, _FIND_COORDINATOR)
        body = {"key": self.group_id, "key_type": 0, "coordinator_keys": [self.group_id]}
        box = {"node": node, "version": version}
        log.debug("Sending FindCoordinator request to broker %s", node)
        self._client.send(node, _FIND_COORDINATOR, body, lambda r: box.setdefault("r", r),
                          version=version)
        self._lookup = box
        return None

    def _handle_find_coordinator(self, box, now):
        resp = box["r"]
        if resp.exception is not None:
            log.debug("FindCoordinator request to node %s failed: %s", box["node"],
                      resp.exception)
            self._next_lookup_ms = now + self._retry_backoff_ms()
            return
        b = resp.body
        entry = b["coordinators"][0] if box["version"] >= 4 else b
        code = entry["error_code"]
        if code == 0:
            # A connection of its own, as Kafka's coordinator node id.
            coord_id = 2 ** 31 - 1 - entry["node_id"]
            self._coordinator = (coord_id, entry["host"], entry["port"])
            self._client.extra_nodes[coord_id] = (entry["host"], entry["port"])
            log.info("Discovered group coordinator %s:%s (id: %s rack: null)", entry["host"],
                     entry["port"], coord_id)
            if self._client.client.connection_failed(coord_id) and \
                    self._client.client.authentication_exception(coord_id) is None:
                # The lookup was this attempt's back-off: connect now rather
                # than after the reconnect back-off of the connection this
                # consumer closed when it last marked the coordinator unknown.
                self._client.client.close(coord_id)
            self._client.ready(coord_id, now)
            return
        if code in RETRIABLE_ERRORS:
            log.debug("Group coordinator lookup failed: %s", exception_for(code))
            self._next_lookup_ms = now + self._retry_backoff_ms()
            return
        raise exception_for(code, entry.get("error_message"))

    def _wait_step(self, deadline):
        """Poll the network for one step of a bounded wait; False when the
        deadline has passed."""
        now = self._time()
        left = deadline - now
        if left <= 0:
            return False
        wait = 100
        if self._coordinator is None and self._lookup is None and self._next_lookup_ms > now:
            wait = self._next_lookup_ms - now
        self._client.poll(max(0, min(left, wait)))
        self._raise_fatal()
        return True

    def _ensure_coordinator(self, timeout_ms):
        """The coordinator's node id once it is known and connected; raises
        RequestTimeoutError when ``timeout_ms`` runs out first."""
        deadline = self._time() + timeout_ms
        while True:
            node = self._poll_coordinator(self._time())
            if node is not None:
                return node
            if not self._wait_step(deadline):
                raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before the "
                                          "group coordinator was found")

    def _send_to_coordinator(self, node, api_key, body, request_timeout_ms=None):
        """Send to the coordinator; the box gets its response ("r"), or a
        failed one when it could not be sent."""
        box = {}
        try:
            self._client.send(node, api_key, body, lambda r: box.setdefault("r", r),
                              timeout_ms=request_timeout_ms)
        except errors.UnsupportedVersionError:
            raise
        except errors.KChannelError as exc:   # (the connection went away since ready())
            box["r"] = ClientResponse(node, api_key, -1, -1, None, exc)
        return box

    def _coordinator_request(self, api_key, body, timeout_ms, what, request_timeout_ms=None,
                             box=None):
        """Send to the coordinator (finding it, and again after a failure)
        and wait for the answer; raises RequestTimeoutError after
        ``timeout_ms``.  ``box``: a request already in flight to wait for."""
        deadline = self._time() + timeout_ms
        while True:
            if box is None:
                left = deadline - self._time()
                if left <= 0:
                    raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before {what}")
                try:
                    node = self._ensure_coordinator(left)
                except RequestTimeoutError:
                    raise RequestTimeoutError(
                        f"Timeout of {timeout_ms}ms expired before {what}") from None
                box = self._send_to_coordinator(node, api_key, body, request_timeout_ms)
                if request_timeout_ms is not None:
                    # The coordinator is found within timeout_ms (the
                    # caller's); the response may take request_timeout_ms,
                    # as Kafka's per-request timeout.
                    deadline = max(deadline, self._time() + request_timeout_ms)
            while "r" not in box:
                if not self._wait_step(deadline):
                    raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before {what}")
            resp = box["r"]
            if resp.exception is None:
                return resp
            box = None
            if self._coordinator is not None and resp.node_id == self._coordinator[0]:
                self._mark_coordinator_unknown(resp.exception)

    def commit(self, offsets=None, timeout=None):
        """Commit ``offsets`` (``{tp: OffsetAndMetadata or int}``), by default
        the current positions, synchronously (Kafka's ``commitSync``).
        Retriable errors (the coordinator moved, is loading or cannot be
        reached) are retried within ``timeout``."""
        self._ensure_open()
        self._require_group()
        if offsets is None:
            offsets = {tp: OffsetAndMetadata(pos)
                       for tp, pos in self.subscriptions.positions().items()}
        offsets = {_tp(tp): (om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om))
                   for tp, om in offsets.items()}
        if not offsets:
            return
        if self._group is not None and self._group.rebalance_in_progress():
            # Kafka's sendOffsetCommitRequest: no generation to commit with.
            raise _rebalance_in_progress()
        timeout_ms = self._default_timeout_ms(timeout)
        what = f"successfully committing offsets {_offsets_text(offsets)}"
        deadline = self._time() + timeout_ms
        while True:
            # (built for every attempt: a KIP-848 member's epoch may have moved)
            body = self._commit_body(offsets)
            resp = self._coordinator_request(_OFFSET_COMMIT, body,
                                             max(deadline - self._time(), 0), what)
            if self._commit_errors(resp) is None:
                return
            self._retry_sleep(deadline, timeout_ms, what)

    def _commit_body(self, offsets):
        generation, member = (self._group.generation_and_member() if self._group is not None
                              else (-1, ""))
        return {"group_id": self.group_id, "generation_id_or_member_epoch": generation,
                "member_id": member, "group_instance_id": self.config["group.instance.id"]
                if self._group is not None else None, "retention_time_ms": -1,
                "topics": _group(offsets, lambda tp, om: {
                    "partition_index": tp.partition, "committed_offset": om.offset,
                    "committed_leader_epoch": -1, "committed_metadata": om.metadata or "",
                    "commit_timestamp": -1})}

    def _commit_errors(self, resp):
        """Kafka's OffsetCommitResponseHandler: None when committed, the
        retriable error code when to retry; raises the others."""
        self.sensors.commit_latency.record(resp.receive_time_ms - resp.request_time_ms)
        retry = None
        for topic in resp.body["topics"]:
            for p in topic["partitions"]:
                code = p["error_code"]
                if not code:
                    continue
                if code in _MOVED_COORDINATOR_ERRORS:
                    if self._coordinator is not None:
                        self._mark_coordinator_unknown(exception_for(code))
                    retry = code
                elif code in RETRIABLE_ERRORS or code == Errors.STALE_MEMBER_EPOCH:
                    # (STALE_MEMBER_EPOCH: a KIP-848 member retries with the
                    # epoch its next heartbeat brings)
                    retry = code
                elif code == Errors.REBALANCE_IN_PROGRESS and self._group is not None:
                    self._group.need_join = True
                    raise _rebalance_in_progress()
                elif code in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID,
                              Errors.FENCED_MEMBER_EPOCH) and self._group is not None:
                    self._group.need_join = True
                    raise errors.KafkaError(
                        code, "COMMIT_FAILED",
                        "Commit cannot be completed since the group has already "
                        "rebalanced and assigned the partitions to another member. This "
                        "means that the time between subsequent calls to poll() was longer "
                        "than the configured max.poll.interval.ms, which typically implies "
                        "that the poll loop is spending too much time message processing.")
                else:
                    raise exception_for(code)
        if retry is None:
            self._coordinator_answered()
        return retry

    def _retry_sleep(self, deadline, timeout_ms, what):
        """The retry back-off before another attempt (bounded by the
        deadline); RequestTimeoutError when no time is left."""
        now = self._time()
        if now >= deadline:
            raise RequestTimeoutError(f"Timeout of {timeout_ms}ms expired before {what}")
        until = min(deadline, max(self._next_lookup_ms, now + self._retry_backoff_ms()))
        while self._time() < until:
            self._client.poll(until - self._time())
            self._raise_fatal()

    def _offset_fetch_body(self, tps):
        by_topic = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        # OffsetFetch v9: a KIP-848 member names itself (the coordinator
        # checks its epoch); others send no member.
        epoch, member = -1, None
        if isinstance(self._group, ConsumerMembershipManager):
            epoch, member = self._group.generation_and_member()
            member = member or None
        return {"group_id": self.group_id, "topics": topics, "require_stable": True,
                "groups": [{"group_id": self.group_id, "member_id": member,
                            "member_epoch": epoch, "topics": topics}]}

    def _offset_fetch_result(self, resp, tps):
        """Kafka's OffsetFetchResponseHandler: ``{tp: OffsetAndMetadata or
        None}``, or None to retry (a retriable error); raises the others."""
        b = resp.body
        if "groups" in b and b["groups"]:
            g = b["groups"][0]
            code, topics_out = g["error_code"], g["topics"]
        else:
            code, topics_out = b.get("error_code", 0), b["topics"]
        if code in _MOVED_COORDINATOR_ERRORS:
            if self._coordinator is not None:
                self._mark_coordinator_unknown(exception_for(code))
            return None
        if code in RETRIABLE_ERRORS or code == Errors.STALE_MEMBER_EPOCH:
            return None
        if code:
            raise exception_for(code)
        out = {tp: None for tp in tps}
        for topic in topics_out:
            for p in topic["partitions"]:
                code = p["error_code"]
                if code == Errors.UNSTABLE_OFFSET_COMMIT:
                    # A transaction's offsets are pending: ask again.
                    return None
                if code:
                    raise exception_for(code)
                tp = TopicPartition(topic["name"], p["partition_index"])
                if p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(p["committed_offset"],
                                                p.get("metadata") or "")
        self._coordinator_answered()
        return out

    def group_metadata(self):
        """This consumer's :class:`ConsumerGroupMetadata` (Kafka's
        ``groupMetadata()``): for ``Producer.send_offsets_to_transaction``.
        Needs ``group.id``; a consumer that assigns its partitions itself
        has generation -1 and no member id, as Kafka's."""
        self._require_group()
        generation, member = (self._group.generation_and_member() if self._group is not None
                              else (-1, ""))
        return ConsumerGroupMetadata(self.group_id, generation, member,
                                     self.config["group.instance.id"])

    def committed(self, partitions, timeout=None):
        """``{tp: OffsetAndMetadata or None}`` committed for the group.
        Retriable errors are retried within ``timeout``."""
        self._ensure_open()
        self._require_group()
        tps = [_tp(p) for p in partitions]
        timeout_ms = self._default_timeout_ms(timeout)
        what = (f"the last committed offset for partitions {_tps_text(tps)} could be "
                "determined. Try tuning default.api.timeout.ms larger to relax the threshold.")
        deadline = self._time() + timeout_ms
        while True:
            body = self._offset_fetch_body(tps)
            resp = self._coordinator_request(_OFFSET_FETCH, body,
                                             max(deadline - self._time(), 0), what)
            out = self._offset_fetch_result(resp, tps)
            if out is not None:
                return out
            self._retry_sleep(deadline, timeout_ms, what)

    def _poll_committed(self, tps, timeout_ms):
        """``committed`` for ``poll``: None when ``timeout_ms`` ran out, the
        OffsetFetch then staying in flight for the next poll to wait for
        (Kafka's pendingCommittedOffsetRequest)."""
        key = frozenset(tps)
        pending, self._offset_fetch = self._offset_fetch, None
        box = pending[1] if pending is not None and pending[0] == key else None
        deadline = self._time() + timeout_ms
        while True:
            if box is None and self._time() < self._next_lookup_ms and self._coordinator is None:
                if not self._wait_step(deadline):
                    return None
                continue
            if box is None:
                node = self._poll_coordinator(self._time())
                if node is None:
                    if not self._wait_step(deadline):
                        return None
                    continue
                box = self._send_to_coordinator(node, _OFFSET_FETCH,
                                                self._offset_fetch_body(tps))
            while "r" not in box:
                if not self._wait_step(deadline):
                    self._offset_fetch = (key, box)
                    return None
            resp, box = box["r"], None
            if resp.exception is not None:
                if self._coordinator is not None and resp.node_id == self._coordinator[0]:
                    self._mark_coordinator_unknown(resp.exception)
                continue
            out = self._offset_fetch_result(resp, tps)
            if out is not None:
                return out
            self._next_lookup_ms = max(self._next_lookup_ms,
                                       self._time() + self._retry_backoff_ms())

    def _maybe_auto_commit(self):
        """Kafka's auto-commit from ``poll``: asynchronous (the answer is
        handled by a later poll); when the coordinator is not ready it is
        tried again after the retry back-off."""
        if not self.config["enable.auto.commit"] or self._commit_in_flight or \
                (self._group is not None and self._group.rebalance_in_progress()):
            return
        now = self._time()
        if now < self._next_auto_commit:
            return
        offsets = {tp: OffsetAndMetadata(pos)
                   for tp, pos in self.subscriptions.positions().items()}
        if not offsets:
            self._next_auto_commit = now + self.config["auto.commit.interval.ms"]
            return
        node = self._poll_coordinator(now)
        if node is None:
            self._next_auto_commit = now + self.config["retry.backoff.ms"]
            return
        self._next_auto_commit = now + self.config["auto.commit.interval.ms"]
        body = self._commit_body(offsets)

        def done(resp):
            self._commit_in_flight = False
            if resp.exception is not None:
                log.warning("Asynchronous auto-commit of offsets %s failed: %s",
                            _offsets_text(offsets), resp.exception)
                if self._coordinator is not None and resp.node_id == self._coordinator[0]:
                    self._mark_coordinator_unknown(resp.exception)
                return
            try:
                retry = self._commit_errors(resp)
            except errors.KChannelError as exc:
                log.warning("Asynchronous auto-commit of offsets %s failed: %s",
                            _offsets_text(offsets), exc)
                return
            if retry is not None:
                log.debug("Asynchronous auto-commit of offsets %s failed due to retriable "
                          "error: %s", _offsets_text(offsets), exception_for(retry))
                self._next_auto_commit = self._time() + self.config["retry.backoff.ms"]
        try:
            self._client.send(node, _OFFSET_COMMIT, body, done)
        except errors.KChannelError as exc:
            log.warning("Asynchronous auto-commit of offsets failed: %s", exc)
            return
        self._commit_in_flight = True

    def metrics(self):
        """``{MetricName: value}`` of every metric of this consumer (Kafka's
        ``metrics()``): ``consumer-fetch-manager-metrics``,
        ``consumer-coordinator-metrics`` and its selector's."""
        return self._client.client.metrics.metrics()

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
            self._close_fetch_sessions(wait_ms=100)
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


def _rebalance_in_progress():
    """Kafka's RebalanceInProgressException for a commit: poll() (which
    carries the rebalance on, never past its timeout), then commit again."""
    return errors.KafkaError(
        Errors.REBALANCE_IN_PROGRESS, "REBALANCE_IN_PROGRESS",
        "Offset commit cannot be completed since the consumer is undergoing a rebalance for "
        "auto partition assignment. You can try completing the rebalance by calling poll() and "
        "then retry the operation.")


def _tps_text(tps):
    return "[" + ", ".join(str(tp) for tp in tps) + "]"


def _offsets_text(offsets):
    return "{" + ", ".join(f"{tp}={om!r}" for tp, om in offsets.items()) + "}"


def _group(by_tp, make):
    topics = {}
    for tp, v in by_tp.items():
        topics.setdefault(tp.topic, []).append(make(tp, v))
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]

