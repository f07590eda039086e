"""The consumer's group offsets: the group coordinator (found as Kafka's
``AbstractCoordinator`` finds it), ``commit`` (OffsetCommit), ``committed``
(OffsetFetch) and the auto-commit, with the offset value types.

:class:`GroupCommits` holds these methods of :class:`kchannel.Consumer`
(its base class); they use the consumer's client, clock, configuration and
group state set up by ``Consumer.__init__``.
"""
from typing import NamedTuple

from kchannel import errors
from kchannel.client import ClientResponse, RequestTimeoutError
from kchannel.client.group_metadata import ConsumerGroupMetadata
from kchannel.client.metadata import TopicPartition
from kchannel.consumer.membership import ConsumerMembershipManager
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import (COORDINATOR_MOVED_ERRORS, RETRIABLE_ERRORS, Errors,
                                      exception_for)

__all__ = ["CoordinatorNode", "GroupCommits", "OffsetAndMetadata", "OffsetAndTimestamp"]

log = get_logger("kchannel.consumer")

_FIND_COORDINATOR = messages.FIND_COORDINATOR.api_key
_OFFSET_COMMIT = messages.OFFSET_COMMIT.api_key
_OFFSET_FETCH = messages.OFFSET_FETCH.api_key
# Kafka's AbstractCoordinator: the coordinator moved (or the request to it
# timed out on the broker): find it again.  COORDINATOR_LOAD_IN_PROGRESS only
# waits (the coordinator is the right one, still loading the group).
_MOVED_COORDINATOR_ERRORS = COORDINATOR_MOVED_ERRORS | {Errors.REQUEST_TIMED_OUT}


class CoordinatorNode(NamedTuple):
    """The group coordinator as FindCoordinator answered it: ``node_id`` is
    the connection id of its own (Kafka's ``Integer.MAX_VALUE - node id``),
    host and port where that connection goes."""
    node_id: int
    host: str
    port: int


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


class GroupCommits:
    """The group coordinator and the group's offsets, for
    :class:`kchannel.Consumer` (see the module docstring)."""

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
                     "to cause: %s. Rediscovery will be attempted.", coordinator.host,
                     coordinator.port, coordinator.node_id, cause)
            # As Kafka: no request stays in flight to the old coordinator.
            self._client.client.disconnect(coordinator.node_id)
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
            node = coordinator.node_id
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
            self._coordinator = CoordinatorNode(coord_id, entry["host"], entry["port"])
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
            if self._coordinator is not None and resp.node_id == self._coordinator.node_id:
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
                if self._coordinator is not None and resp.node_id == self._coordinator.node_id:
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
                if self._coordinator is not None and resp.node_id == self._coordinator.node_id:
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

