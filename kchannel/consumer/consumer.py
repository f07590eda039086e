"""``kchannel.Consumer``: Kafka's ``KafkaConsumer`` on kchannel channels.

Single-threaded as Kafka's consumer: ``poll`` does the network I/O on the
caller's thread.  Partitions are given with ``assign``, or by the group with
``subscribe`` (:mod:`kchannel.consumer.coordinator`); with ``group.id``
offsets are committed to and read from the group coordinator (a consumer
that assigns its partitions commits with generation -1, as Kafka's does):
:class:`~kchannel.consumer.commits.GroupCommits`, the consumer's base class
in :mod:`kchannel.consumer.commits`, holds that part.
"""
import itertools

from kchannel import errors
from kchannel.client import ExponentialBackoff, RequestTimeoutError
from kchannel.client.cluster_client import ClusterClient
from kchannel.client.statistics import client_statistics
from kchannel.config import ClientConfig
from kchannel.consumer.commits import (GroupCommits, OffsetAndMetadata,  # noqa: F401
                                       OffsetAndTimestamp, _group, _tp)
from kchannel.consumer.config import split_consumer_configs
from kchannel.consumer.coordinator import ConsumerCoordinator
from kchannel.consumer.fetcher import Fetcher, SubscriptionState
from kchannel.consumer.membership import ConsumerMembershipManager
from kchannel.consumer.metrics import ConsumerMetrics
from kchannel.log import get_logger
from kchannel.client.metadata import Metadata, TopicPartition
from kchannel.protocol import messages
from kchannel.protocol.errors import RETRIABLE_ERRORS, Errors, exception_for

__all__ = ["Consumer", "OffsetAndMetadata", "OffsetAndTimestamp"]

log = get_logger("kchannel.consumer")

_ids = itertools.count(1)
_LIST_OFFSETS = messages.LIST_OFFSETS.api_key
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# CommonClientConfigs' retry back-off: doubling, +/-20 % jitter.
_RETRY_BACKOFF_EXP_BASE = 2
_RETRY_BACKOFF_JITTER = 0.2


class Consumer(GroupCommits):
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
        self._coordinator = None      # commits.CoordinatorNode of the group coordinator
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
