"""Kafka's ``ConsumerCoordinator`` for the classic group protocol:
JoinGroup (the leader assigns with the first assignor every member
supports), SyncGroup, Heartbeat, LeaveGroup.

Rebalancing is eager (every partition revoked before rejoining) unless every
configured assignor supports the incremental cooperative protocol (only
``cooperative-sticky``), as Kafka decides: then a member keeps its partitions
while rejoining, sends them as its owned partitions, revokes only those its
new assignment lacks, and rejoins at once when it revoked any so that the
next rebalance can give them to their new owner.

Heartbeats are sent from ``Consumer.poll`` (and while it waits), not from a
background thread: an application that does not poll for
``session.timeout.ms`` leaves the group (Kafka's consumer keeps
heartbeating from its heartbeat thread until ``max.poll.interval.ms``).

Joining never holds ``poll`` past its timeout: as Kafka's joinFuture, a
JoinGroup or SyncGroup in flight when the time is up is waited for by the
next ``poll``.  The coordinator is found (and found again when it moves or
dies) by the consumer, with the retry back-off.
"""
import logging

from kchannel import errors
from kchannel.client import RequestTimeoutError
from kchannel.consumer.assignors import (ASSIGNORS, COOPERATIVE, EAGER, decode_assignment,
                                         decode_subscription, encode_assignment,
                                         encode_subscription, member_data_from_subscription,
                                         subscription_version)
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import (COORDINATOR_MOVED_ERRORS, RETRIABLE_ERRORS, Errors,
                                      exception_for)

__all__ = ["ConsumerCoordinator"]

log = get_logger("kchannel.consumer.coordinator")

_JOIN = messages.JOIN_GROUP.api_key
_SYNC = messages.SYNC_GROUP.api_key
_HEARTBEAT = messages.HEARTBEAT.api_key
_LEAVE = messages.LEAVE_GROUP.api_key

_REJOIN = frozenset({Errors.REBALANCE_IN_PROGRESS})
_RESET_MEMBER = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION,
                           Errors.FENCED_INSTANCE_ID})
# The coordinator moved: find it again (COORDINATOR_LOAD_IN_PROGRESS: the
# right one, still loading; retry after the back-off).
_MOVED = COORDINATOR_MOVED_ERRORS



def commit_before_revoking(owner, deadline, logger, timeout_message, failure_level,
                           failure_message):
    """The auto-commit of the positions before partitions are revoked, shared
    by the classic coordinator (Kafka's onJoinPrepare) and the KIP-848
    membership manager (its reconciliation): False while the commit is not
    done by ``deadline`` (the poll's) and the rebalance timeout, counted
    from ``owner``'s first try, has not passed (the next poll tries again);
    True when it is done or given up (logged with Kafka's messages)."""
    c = owner.consumer
    now = c._time()
    if owner._prepare_deadline is None:
        owner._prepare_deadline = now + owner.rebalance_timeout_ms
    until = min(deadline, owner._prepare_deadline)
    try:
        c.commit(timeout=max(until - now, 0) / 1000)
    except RequestTimeoutError:
        if c._time() < owner._prepare_deadline:
            return False
        logger.error(timeout_message)
    except errors.KChannelError as exc:
        logger.log(failure_level, failure_message, exc)
    return True

class ConsumerCoordinator:
    def __init__(self, consumer, values, listener=None):
        self.consumer = consumer
        self.group_id = values["group.id"]
        self.group_instance_id = values["group.instance.id"]
        self.session_timeout_ms = values["session.timeout.ms"]
        self.rebalance_timeout_ms = values["max.poll.interval.ms"]
        self.heartbeat_interval_ms = values["heartbeat.interval.ms"]
        self.retry_backoff_ms = values["retry.backoff.ms"]
        self.rack = values["client.rack"] or None
        self.assignors = []
        for name in values["partition.assignment.strategy"]:
            cls = ASSIGNORS.get(name)
            if cls is None:
                log.warning("Partition assignment strategy %s is not supported by kchannel; "
                            "it is left out of the group's protocols", name)
                continue
            self.assignors.append(cls())
        if not self.assignors:
            raise errors.ConfigError(
                "partition.assignment.strategy names no assignor kchannel implements "
                "(RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)",
                key="partition.assignment.strategy",
                value=values["partition.assignment.strategy"])
        # Kafka's rule: the protocol every configured assignor supports,
        # cooperative preferred (range + cooperative-sticky stays eager).
        common = set(self.assignors[0].rebalance_protocols)
        for a in self.assignors[1:]:
            common &= set(a.rebalance_protocols)
        self.rebalance_protocol = COOPERATIVE if COOPERATIVE in common else EAGER
        self.listener = listener
        self.member_id = ""
        self.generation = -1
        self.protocol = None
        self.need_join = True
        self.last_heartbeat_ms = 0
        self.heartbeat_in_flight = False
        self._pending = None          # {"stage": "join"|"sync", "r": response} in flight
        self._prepared = False        # _on_join_prepare done for the join under way
        self._next_join_ms = 0        # retry back-off after a failed join
        self._prepare_deadline = None  # the auto-commit before a rebalance gives up then

    @property
    def active(self):
        return self.generation >= 0 and not self.need_join

    def rebalance_in_progress(self):
        """A JoinGroup or SyncGroup of this member is under way (its
        generation is not the group's any more)."""
        return self.need_join and (self._prepared or self._pending is not None)

    def generation_and_member(self):
        if self.generation >= 0:
            return self.generation, self.member_id
        return -1, ""

    def poll_started(self, now):
        """The application polls (the classic member's liveness between
        polls is its heartbeats: nothing to do here)."""

    # -- rebalance --------------------------------------------------------------------
    def ensure_active_group(self, timeout_ms):
        """Join (or rejoin) the group if needed, for up to ``timeout_ms``;
        False when the time ran out first (a JoinGroup or SyncGroup in
        flight is then waited for by the next call)."""
        c = self.consumer
        deadline = c._time() + timeout_ms
        while self.need_join:
            now = c._time()
            if self._pending is None:
                if now < self._next_join_ms:
                    if now >= deadline:
                        return False
                    c._wait_step(min(deadline, self._next_join_ms))
                    continue
                node = c._poll_coordinator(now)
                if node is None:
                    if not c._wait_step(deadline):
                        return False
                    continue
                if not self._prepared:
                    if not self._on_join_prepare(deadline):
                        return False      # the commit before it goes on in the next poll
                    self._prepared = True
                    if not self.need_join:
                        continue
                self._send_join(node)
            box = self._pending
            if "r" not in box:
                if not c._wait_step(deadline):
                    return False
                continue
            self._pending = None
            resp = box["r"]
            if resp.exception is not None:
                log.info("%s failed: %s", "JoinGroup" if box["stage"] == "join" else
                         "SyncGroup", resp.exception)
                if c._coordinator is not None and resp.node_id == c._coordinator.node_id:
                    c._mark_coordinator_unknown(resp.exception)
                continue
            latency = resp.receive_time_ms - resp.request_time_ms
            if box["stage"] == "join":
                self._handle_join(box["node"], resp.body, latency)
            else:
                self._handle_sync(resp.body, latency)
        return True

    def _retry_join_later(self):
        self._next_join_ms = self.consumer._time() + self.consumer._retry_backoff_ms()

    def _on_join_prepare(self, deadline):
        """Before (re)joining: the auto-commit of the positions, then the
        revocation.  False when the commit is not done by ``deadline`` (the
        poll's): the next poll tries again, until the rebalance timeout has
        passed since the first try (then the join goes on without it), as
        Kafka's onJoinPrepare."""
        c = self.consumer
        owned = list(c.subscriptions.assignment)
        if not owned:
            return True
        lost = self.generation < 0
        if c.config["enable.auto.commit"] and not lost and not commit_before_revoking(
                self, deadline, log,
                "Asynchronous auto-commit of offsets failed: joinPrepare timeout. "
                "Will continue to join group",
                logging.WARNING, "Offset commit before rebalance failed: %s"):
            return False
        self._prepare_deadline = None
        if lost:
            # Fenced or expired: another member may own them already
            # (Kafka's onPartitionsLost, which defaults to onPartitionsRevoked).
            log.info("Lost previously assigned partitions %s",
                     sorted(f"{t}-{p}" for t, p in owned))
            if self.listener is not None and getattr(self.listener, "on_partitions_lost",
                                                     None) is not None:
                _call(self.listener, "on_partitions_lost", owned)
                self._drop(owned)
                return True
            revoked = owned
        elif self.rebalance_protocol == EAGER:
            revoked = owned
        else:
            # Cooperative: keep what is still subscribed while rejoining.
            revoked = [tp for tp in owned if tp.topic not in c.subscriptions.subscription]
        if revoked:
            self._revoke(revoked)
        return True

    def _revoke(self, tps):
        if self.listener is not None:
            _call(self.listener, "on_partitions_revoked", tps)
        self._drop(tps)

    def _drop(self, tps):
        c = self.consumer
        gone = set(tps)
        c.subscriptions.assign([tp for tp in c.subscriptions.assignment if tp not in gone])
        c._fetcher.clear_buffered(list(gone))

    def _send(self, stage, node, api_key, body):
        box = self.consumer._send_to_coordinator(
            node, api_key, body, request_timeout_ms=self.rebalance_timeout_ms + 5000)
        box["stage"] = stage
        box["node"] = node
        self._pending = box

    def _send_join(self, node):
        c = self.consumer
        topics = sorted(c.subscriptions.subscription)
        owned = list(c.subscriptions.assignment)
        protocols = [{"name": a.name, "metadata": encode_subscription(
            topics, owned=owned, generation_id=self.generation, rack_id=self.rack,
            user_data=a.subscription_user_data(self.generation))} for a in self.assignors]
        body = {"group_id": self.group_id, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "member_id": self.member_id,
                "group_instance_id": self.group_instance_id, "protocol_type": "consumer",
                "protocols": protocols,
                "reason": None}
        log.info("(Re-)joining group %s", self.group_id)
        self._send("join", node, _JOIN, body)

    def _handle_join(self, node, b, latency):
        c = self.consumer
        code = b["error_code"]
        if code == Errors.MEMBER_ID_REQUIRED:
            self.member_id = b["member_id"]
            return
        if code in _RESET_MEMBER and code != Errors.FENCED_INSTANCE_ID:
            self.member_id, self.generation = "", -1
            return
        if code in _MOVED:
            if c._coordinator is not None:
                c._mark_coordinator_unknown(exception_for(code))
            return
        if code in RETRIABLE_ERRORS:
            self._retry_join_later()
            return
        if code in _REJOIN or code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            return
        if code:
            raise exception_for(code, b.get("error_message"))
        c._coordinator_answered()
        c.sensors.join_latency.record(latency)
        self.member_id = b["member_id"]
        self.generation = b["generation_id"]
        self.protocol = b["protocol_name"]
        assignments = []
        if b["leader"] == self.member_id:
            assignments = self._perform_assignment(b["members"])
        sync = {"group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.group_instance_id,
                "protocol_type": "consumer", "protocol_name": self.protocol,
                "assignments": assignments}
        self._send("sync", node, _SYNC, sync)

    def _handle_sync(self, body, latency):
        c = self.consumer
        code = body["error_code"]
        if code in _RESET_MEMBER:
            self.member_id, self.generation = "", -1
            return
        if code in _MOVED:
            if c._coordinator is not None:
                c._mark_coordinator_unknown(exception_for(code))
            return
        if code in RETRIABLE_ERRORS:
            self._retry_join_later()
            return
        if code in _REJOIN:
            return
        if code:
            raise exception_for(code)
        c._coordinator_answered()
        c.sensors.sync_latency.record(latency)
        tps = decode_assignment(body["assignment"])
        self.need_join = False
        self._prepared = False
        self.last_heartbeat_ms = c._time()
        for a in self.assignors:
            if a.name == self.protocol:
                a.on_assignment(self.generation)
        owned = set(c.subscriptions.assignment)
        assigned = set(tps)
        revoked = [tp for tp in c.subscriptions.assignment if tp not in assigned]
        added = [tp for tp in tps if tp not in owned]
        log.info("Successfully joined group %s with generation %d; assigned partitions: %s",
                 self.group_id, self.generation, sorted(f"{t}-{p}" for t, p in tps))
        if revoked:
            # Only cooperative members still own partitions here.
            log.info("Revoking previously assigned partitions %s",
                     sorted(f"{t}-{p}" for t, p in revoked))
            self._revoke(revoked)
            # The group can give them to their new owner only in another
            # rebalance, which this member starts by rejoining.
            self.need_join = True
        c.subscriptions.assign(tps)
        if self.listener is not None:
            _call(self.listener, "on_partitions_assigned", added)

    def _perform_assignment(self, members):
        c = self.consumer
        assignor = next(a for a in self.assignors if a.name == self.protocol)
        subscriptions = {}
        member_data = {}
        all_topics = set()
        for m in members:
            sub = decode_subscription(m["metadata"])
            subscriptions[m["member_id"]] = (set(sub["topics"]), m.get("group_instance_id"))
            member_data[m["member_id"]] = member_data_from_subscription(
                sub, subscription_version(m["metadata"]))
            all_topics.update(sub["topics"])
        cluster = c._await_metadata(all_topics, c.config["default.api.timeout.ms"],
                                    require_all=False)
        counts = {t: cluster.partition_count(t) for t in all_topics
                  if cluster.partition_count(t)}
        result = assignor.assign(counts, subscriptions, member_data)
        log.info("Finished assignment for group %s with %s", self.group_id, assignor.name)
        return [{"member_id": m, "assignment": encode_assignment(tps)}
                for m, tps in result.items()]

    # -- heartbeat --------------------------------------------------------------------
    def maybe_heartbeat(self, now):
        """Send a heartbeat when due (from ``poll``); a failure asks to rejoin.
        Never blocks: without a ready coordinator it only moves the lookup
        (or the connection) on."""
        if not self.active or self.heartbeat_in_flight:
            return
        if now - self.last_heartbeat_ms < self.heartbeat_interval_ms:
            return
        c = self.consumer
        node = c._poll_coordinator(now)
        if node is None:
            return
        body = {"group_id": self.group_id, "generation_id": self.generation,
                "member_id": self.member_id, "group_instance_id": self.group_instance_id}
        try:
            c._client.send(node, _HEARTBEAT, body, self._handle_heartbeat)
        except errors.KChannelError as exc:
            log.debug("Heartbeat not sent: %s", exc)
            return
        self.heartbeat_in_flight = True
        self.last_heartbeat_ms = now

    def _handle_heartbeat(self, resp):
        self.heartbeat_in_flight = False
        c = self.consumer
        if resp.exception is not None:
            if c._coordinator is not None and resp.node_id == c._coordinator.node_id:
                c._mark_coordinator_unknown(resp.exception)
            return
        c.sensors.heartbeat_latency.record(resp.receive_time_ms - resp.request_time_ms)
        code = resp.body["error_code"]
        if code == 0:
            c._coordinator_answered()
            return
        if code in _REJOIN:
            log.info("Attempt to heartbeat failed since group is rebalancing")
            self.need_join = True
        elif code in _RESET_MEMBER:
            log.info("Attempt to heartbeat failed: %s; rejoining", exception_for(code))
            self.member_id, self.generation = "", -1
            self.need_join = True
        elif code in _MOVED:
            if c._coordinator is not None:
                c._mark_coordinator_unknown(exception_for(code))
        elif code in RETRIABLE_ERRORS:
            log.debug("Heartbeat failed with a retriable error: %s", exception_for(code))
        else:
            log.warning("Heartbeat failed: %s", exception_for(code))

    def time_to_next_heartbeat(self, now):
        """How long ``poll`` may wait before the next heartbeat is due."""
        if not self.active or self.heartbeat_in_flight:
            # (its response wakes the poll)
            return 2 ** 31 - 1
        left = self.last_heartbeat_ms + self.heartbeat_interval_ms - now
        # Overdue: maybe_heartbeat found no ready coordinator; look again
        # after the retry back-off rather than spinning.
        return left if left > 0 else self.retry_backoff_ms

    # -- leave --------------------------------------------------------------------------
    def leave_group(self, timeout_ms, reason="the consumer is being closed"):
        if self.generation < 0 or not self.member_id or self.group_instance_id:
            self.generation, self.member_id = -1, ""
            return
        c = self.consumer
        body = {"group_id": self.group_id, "member_id": self.member_id,
                "members": [{"member_id": self.member_id, "group_instance_id": None,
                             "reason": reason}]}
        log.info("Member %s sending LeaveGroup request to coordinator", self.member_id)
        try:
            c._coordinator_request(_LEAVE, body, timeout_ms, "the group was left")
        except errors.KChannelError as exc:
            log.warning("LeaveGroup failed: %s", exc)
        self.generation, self.member_id = -1, ""
        self.need_join = True


def _call(listener, method, partitions):
    fn = getattr(listener, method, None)
    if fn is None:
        return
    try:
        fn(list(partitions))
    except Exception:
        log.exception("User provided listener failed on %s", method)
