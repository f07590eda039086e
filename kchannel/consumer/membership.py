"""Kafka's ``ConsumerMembershipManager`` and ``ConsumerHeartbeatRequestManager``:
the consumer group protocol of KIP-848 (``group.protocol=consumer``).

The member heartbeats with ConsumerGroupHeartbeat (API 68): it joins with
epoch 0 and its own member id (a random Kafka ``Uuid``, as Kafka's
consumer generates from version 1), sends its subscribed topic names, its
rebalance timeout (``max.poll.interval.ms``) and ``group.remote.assignor``
when joining or when they change, and gets from the coordinator its member
epoch, the heartbeat interval and, when it changes, its target assignment
(topic ids and partitions: the broker assigns, no member leads).

Reconciliation as Kafka's: the target's topic ids are resolved to names from
the metadata (an unknown id asks for a metadata update and is reconciled
when it arrives); with auto-commit the positions are committed first; then
the partitions no longer assigned are revoked (``on_partitions_revoked``),
the new ones added (``on_partitions_assigned``, called after every
reconciliation as Kafka's), and the next heartbeat, sent at once,
acknowledges the owned partitions (ACKNOWLEDGING, then STABLE).

FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: the partitions are lost
(``on_partitions_lost``, which defaults to ``on_partitions_revoked``) and
the member rejoins with epoch 0.  Leaving (``close``, ``unsubscribe``) revokes
the partitions and heartbeats with epoch -1 (-2 for a static member, with
``group.instance.id``, which keeps its assignment for its return).  A member
whose application did not call ``poll`` for ``max.poll.interval.ms`` leaves
at its next poll (STALE: its partitions are lost) and joins again.

As in Kafka's consumer the listener callbacks, the commit before a
revocation and the rejoining run in the application's ``poll``; heartbeats
are sent from ``poll`` too (and between calls by ``kchannel.aio``): an
application that does not poll for the broker's
``group.consumer.session.timeout.ms`` is fenced by the coordinator.
"""
import base64
import enum
import logging
import uuid

from kchannel import errors
from kchannel.client.metadata import TopicPartition
from kchannel.consumer.coordinator import commit_before_revoking
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import COORDINATOR_MOVED_ERRORS, Errors, exception_for

__all__ = ["ConsumerMembershipManager", "MemberState"]

log = get_logger("kchannel.consumer.membership")

_HEARTBEAT = messages.CONSUMER_GROUP_HEARTBEAT.api_key
# Kafka's ConsumerGroupHeartbeatRequest epochs.
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

_MOVED = COORDINATOR_MOVED_ERRORS
_FENCED = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})
_UNSUPPORTED_PROTOCOL = ("The cluster does not support the new CONSUMER group protocol. Set "
                         "group.protocol=classic on the consumer configs to revert to the "
                         "CLASSIC protocol until the cluster is upgraded.")
_POLL_TIMEOUT = ("consumer poll timeout has expired. This means the time between subsequent "
                 "calls to poll() was longer than the configured max.poll.interval.ms, which "
                 "typically implies that the poll loop is spending too much time processing "
                 "messages. You can address this either by increasing max.poll.interval.ms or "
                 "by reducing the maximum size of batches returned in poll() with "
                 "max.poll.records.")


class MemberState(enum.Enum):
    """Kafka's ``MemberState``."""
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    UNJOINED = "UNJOINED"
    STALE = "STALE"
    FATAL = "FATAL"

    def __str__(self):
        return self.value


S = MemberState
# States in which the member takes part in the group (Kafka's isNotInGroup
# negated) and may heartbeat.
_IN_GROUP = frozenset({S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})


def kafka_uuid():
    """A random id as Kafka's ``Uuid.randomUuid().toString()`` (URL-safe
    base64 of 16 bytes, unpadded)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


class ConsumerMembershipManager:
    """The group membership of a ``Consumer`` with ``group.protocol=consumer``
    (see the module docstring); the interface the consumer drives is the
    classic ``ConsumerCoordinator``'s."""

    def __init__(self, consumer, values, listener=None):
        self.consumer = consumer
        self.group_id = values["group.id"]
        self.group_instance_id = values["group.instance.id"]
        self.rebalance_timeout_ms = values["max.poll.interval.ms"]
        self.server_assignor = values["group.remote.assignor"]
        self.rack = values["client.rack"] or None
        self.listener = listener
        self.member_id = kafka_uuid()
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.state = S.UNSUBSCRIBED
        self.heartbeat_interval_ms = 0       # until the coordinator says
        self.last_heartbeat_ms = 0
        self.heartbeat_in_flight = False
        self._send_now = False               # heartbeat at once (Kafka's shouldHeartbeatNow)
        self._next_retry_ms = 0              # after a failed heartbeat: the retry back-off
        self._sent = None                    # fields sent last (Kafka's SentFields)
        self._target = None                  # {topic id: set(partitions)} from the coordinator
        self._current = {}                   # {topic id: set(partitions)} reconciled
        self._local_epoch = 0                # bumps with every reconciled assignment
        self._fatal = None                   # the error poll() raises (FATAL)
        self._prepare_deadline = None        # the commit before a revocation gives up then
        self._last_poll_ms = None

    # -- the interface the consumer drives ---------------------------------------------
    @property
    def active(self):
        return self.state in _IN_GROUP

    @property
    def need_join(self):
        """Work for the application's thread (``ensure_active_group``):
        joining, reconciling, the partitions of a fenced member, an error."""
        if self.state in (S.UNSUBSCRIBED, S.STALE):
            return bool(self.consumer.subscriptions.subscription)
        return self.state in (S.RECONCILING, S.FENCED) or self._fatal is not None

    @need_join.setter
    def need_join(self, value):
        # The consumer asks for a rejoin when the subscription changes or a
        # commit found the member out of date: a member in the group sends
        # its new subscription with the next heartbeat, at once.
        if value and self.state in _IN_GROUP:
            self._send_now = True

    def rebalance_in_progress(self):
        # Commits carry the member epoch at any time (no RebalanceInProgress).
        return False

    def generation_and_member(self):
        """``(member epoch, member id)`` for commits and the transactional
        group metadata (OffsetCommit v9+ takes the epoch as generation)."""
        if self.member_epoch > 0 and self.state in _IN_GROUP:
            return self.member_epoch, self.member_id
        return -1, ""

    def poll_started(self, now):
        """The application polls: a member whose last poll is older than
        ``max.poll.interval.ms`` leaves (its partitions lost) and joins
        again, as Kafka's on an expired poll timer."""
        last, self._last_poll_ms = self._last_poll_ms, now
        if last is not None and now - last > self.rebalance_timeout_ms and \
                self.state in _IN_GROUP and self.member_epoch > 0:
            log.warning("%s", _POLL_TIMEOUT)
            self.leave_group(self.consumer.config["request.timeout.ms"], _POLL_TIMEOUT)

    def ensure_active_group(self, timeout_ms):
        """The application thread's part (from ``poll``): raise a fatal
        error, give up the partitions of a fenced member, join, reconcile."""
        if self._fatal is not None:
            exc, self._fatal = self._fatal, None
            if self.state is S.FATAL:
                self._lose_partitions()
            raise exc
        if self.state is S.FENCED:
            self._lose_partitions()
            self._transition_to_joining()
        elif self.state in (S.UNSUBSCRIBED, S.STALE):
            if self.consumer.subscriptions.subscription:
                self._transition_to_joining()
        if self.state is S.RECONCILING:
            return self._reconcile(self.consumer._time() + timeout_ms)
        return True

    # -- states --------------------------------------------------------------------------
    def _transition(self, state):
        if state is not self.state:
            log.info("Member %s with epoch %d transitioned from %s to %s.", self.member_id,
                     self.member_epoch, self.state, state)
            self.state = state

    def _transition_to_joining(self):
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._target = None
        self._sent = None
        self._send_now = True
        self._transition(S.JOINING)

    def _owned(self):
        return list(self.consumer.subscriptions.assignment)

    def _lose_partitions(self):
        """Kafka's onPartitionsLost (defaulting to onPartitionsRevoked)."""
        owned = self._owned()
        self._current = {}
        self._local_epoch += 1
        if not owned:
            return
        log.info("Lost previously assigned partitions %s", _text(owned))
        if self.listener is not None and getattr(self.listener, "on_partitions_lost",
                                                 None) is not None:
            _call(self.listener, "on_partitions_lost", owned)
        else:
            _call(self.listener, "on_partitions_revoked", owned)
        self._drop(owned)

    def _drop(self, tps):
        c = self.consumer
        gone = set(tps)
        c.subscriptions.assign([tp for tp in c.subscriptions.assignment if tp not in gone])
        c._fetcher.clear_buffered(list(gone))

    # -- reconciliation ---------------------------------------------------------------
    def _resolve(self, target):
        """``({TopicPartition}, {topic id: set(partitions)} resolved)``; an
        id the metadata does not name yet asks for a metadata update."""
        names = self.consumer.metadata.cluster.topic_names
        tps, resolved = set(), {}
        unresolved = False
        for tid, parts in target.items():
            name = names.get(tid)
            if name is None:
                unresolved = True
                continue
            resolved[tid] = set(parts)
            tps.update(TopicPartition(name, p) for p in parts)
        if unresolved:
            self.consumer.metadata.request_update()
        return tps, resolved

    def _reconcile(self, deadline):
        """Kafka's maybeReconcile, on the application's thread: commit (with
        auto-commit), revoke, assign, then acknowledge.  False when the
        commit before it is not done by ``deadline`` (the next poll goes on,
        until the rebalance timeout has passed)."""
        c = self.consumer
        assigned, resolved = self._resolve(self._target or {})
        owned = set(c.subscriptions.assignment)
        if assigned == owned and resolved == self._current:
            if resolved == self._target:
                # Nothing to change: acknowledge (the epoch may be new).
                self._acknowledge(resolved, changed=False)
            return True
        revoked = [tp for tp in c.subscriptions.assignment if tp not in assigned]
        added = sorted(assigned - owned)
        if c.config["enable.auto.commit"] and c.subscriptions.positions() and \
                not commit_before_revoking(
                    self, deadline, log,
                    "Auto-commit request before reconciling new assignment failed. "
                    "Will proceed with the reconciliation anyway.",
                    logging.ERROR,
                    "Auto-commit request before reconciling new assignment failed: %s. "
                    "Will proceed with the reconciliation anyway."):
            return False
        self._prepare_deadline = None
        if self.state is not S.RECONCILING:
            return True       # fenced or left meanwhile (the commit polled)
        log.info("Reconciling assignment: assigned %s, revoking %s, adding %s",
                 _text(assigned), _text(revoked), _text(added))
        if revoked:
            _call(self.listener, "on_partitions_revoked", revoked)
            self._drop(revoked)
        c.subscriptions.assign([*c.subscriptions.assignment, *added])
        now = c._time()
        for tp in added:
            c.metadata.add_topic(tp.topic, now)
        _call(self.listener, "on_partitions_assigned", added)
        self._acknowledge(resolved, changed=True)
        return True

    def _acknowledge(self, resolved, changed):
        self._current = resolved
        if changed:
            self._local_epoch += 1
        # The next heartbeat, at once, carries the owned partitions.
        self._send_now = True
        self._transition(S.ACKNOWLEDGING)

    # -- heartbeats -------------------------------------------------------------------
    def _request(self):
        """Kafka's HeartbeatState.buildRequestData: every field when
        joining, else only what changed since the last heartbeat."""
        c = self.consumer
        body = {"group_id": self.group_id, "member_id": self.member_id,
                "member_epoch": self.member_epoch, "instance_id": self.group_instance_id}
        sent = self._sent or {}
        all_fields = self.state is S.JOINING
        if all_fields or sent.get("rebalance_timeout_ms") != self.rebalance_timeout_ms:
            body["rebalance_timeout_ms"] = self.rebalance_timeout_ms
        topics = sorted(c.subscriptions.subscription)
        if all_fields or sent.get("topics") != topics:
            body["subscribed_topic_names"] = topics
        if self.server_assignor and (all_fields or
                                     sent.get("assignor") != self.server_assignor):
            body["server_assignor"] = self.server_assignor
        if all_fields and self.rack:
            body["rack_id"] = self.rack
        local = self._local_epoch
        if all_fields or sent.get("local") != local:
            body["topic_partitions"] = [{"topic_id": tid, "partitions": sorted(ps)}
                                        for tid, ps in self._current.items()]
        return body, {"rebalance_timeout_ms": self.rebalance_timeout_ms, "topics": topics,
                      "assignor": self.server_assignor, "local": local}

    def _due(self, now):
        if self.state not in _IN_GROUP or self.heartbeat_in_flight:
            return False
        if now < self._next_retry_ms:
            return False
        return self._send_now or now - self.last_heartbeat_ms >= self.heartbeat_interval_ms

    def maybe_heartbeat(self, now):
        """Send the heartbeat when due (from ``poll``); never blocks."""
        if not self._due(now):
            return
        c = self.consumer
        node = c._poll_coordinator(now)
        if node is None:
            return
        body, sent = self._request()
        try:
            c._client.send(node, _HEARTBEAT, body,
                           lambda resp: self._handle_response(resp, sent))
        except errors.UnsupportedVersionError:
            self._fail(errors.UnsupportedVersionError(_UNSUPPORTED_PROTOCOL))
            return
        except errors.KChannelError as exc:
            log.debug("ConsumerGroupHeartbeatRequest not sent: %s", exc)
            self._retry_later()
            return
        self.heartbeat_in_flight = True
        self._send_now = False
        self.last_heartbeat_ms = now

    def time_to_next_heartbeat(self, now):
        """How long ``poll`` may wait before the next heartbeat is due."""
        if self.state not in _IN_GROUP or self.heartbeat_in_flight:
            return 2 ** 31 - 1       # (a response wakes the poll)
        if now < self._next_retry_ms:
            return self._next_retry_ms - now
        if self._send_now:
            # Due now; when the coordinator is not ready, look again after
            # the retry back-off rather than spinning.
            return 0 if self.consumer._coordinator is not None and \
                self.consumer._client.ready(self.consumer._coordinator.node_id, now) \
                else self.consumer.config["retry.backoff.ms"]
        left = self.last_heartbeat_ms + self.heartbeat_interval_ms - now
        return left if left > 0 else self.consumer.config["retry.backoff.ms"]

    def _retry_later(self):
        self._next_retry_ms = self.consumer._time() + self.consumer._retry_backoff_ms()

    def _fail(self, exc):
        """Kafka's handleFatalFailure: FATAL, the partitions lost (by the
        next poll, which raises ``exc``)."""
        log.error("Member %s with epoch %d transitioned to fatal state: %s", self.member_id,
                  self.member_epoch, exc)
        self._fatal = exc
        self._transition(S.FATAL)

    def _handle_response(self, resp, sent):
        """The heartbeat's answer (from the network poll: state only; the
        callbacks run in ``ensure_active_group``)."""
        self.heartbeat_in_flight = False
        c = self.consumer
        if resp.exception is not None:
            log.info("ConsumerGroupHeartbeatRequest failed: %s", resp.exception)
            if c._coordinator is not None and resp.node_id == c._coordinator.node_id:
                c._mark_coordinator_unknown(resp.exception)
            self._sent = None      # the next one repeats every field
            self._send_now = True
            return
        c.sensors.heartbeat_latency.record(resp.receive_time_ms - resp.request_time_ms)
        b = resp.body
        code, message = b["error_code"], b.get("error_message")
        if self.state not in _IN_GROUP:
            log.debug("Ignoring heartbeat response of member %s in state %s",
                      self.member_id, self.state)
            return
        if code:
            self._handle_error(code, message)
            return
        c._coordinator_answered()
        self._sent = sent
        self._next_retry_ms = 0
        if b["heartbeat_interval_ms"] > 0:
            self.heartbeat_interval_ms = b["heartbeat_interval_ms"]
        if b.get("member_id"):
            self.member_id = b["member_id"]
        if b["member_epoch"] != self.member_epoch:
            log.debug("Member %s updated its epoch from %d to %d", self.member_id,
                      self.member_epoch, b["member_epoch"])
            self.member_epoch = b["member_epoch"]
        assignment = b.get("assignment")
        if assignment is not None:
            self._target = {tp["topic_id"]: set(tp["partitions"])
                            for tp in assignment["topic_partitions"]}
        if self._target is None:
            if self.state is S.JOINING:
                return        # joined; the assignment comes with a later heartbeat
            self._target = dict(self._current)
        reconciled = self._target == self._current
        if self.state is S.ACKNOWLEDGING or self.state is S.JOINING:
            self._transition(S.STABLE if reconciled else S.RECONCILING)
        elif self.state is S.STABLE and not reconciled:
            self._transition(S.RECONCILING)

    def _handle_error(self, code, message):
        c = self.consumer
        exc = exception_for(code, message)
        if code in _MOVED:
            log.info("ConsumerGroupHeartbeatRequest failed because the group coordinator "
                     "is incorrect. Will attempt to find the coordinator again and retry: %s",
                     exc)
            if c._coordinator is not None:
                c._mark_coordinator_unknown(exc)
            self._send_now = True
        elif code == Errors.COORDINATOR_LOAD_IN_PROGRESS:
            log.debug("ConsumerGroupHeartbeatRequest failed because the group coordinator "
                      "is still loading. Will retry: %s", exc)
            self._retry_later()
        elif code in _FENCED:
            log.error("ConsumerGroupHeartbeatRequest failed for member %s with epoch %d due "
                      "to %s error: %s. Will abandon all partitions and rejoin the group",
                      self.member_id, self.member_epoch, Errors(code).name, message)
            self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
            self._transition(S.FENCED)
        elif code == Errors.UNSUPPORTED_VERSION:
            self._fail(errors.UnsupportedVersionError(_UNSUPPORTED_PROTOCOL))
        elif code == Errors.TOPIC_AUTHORIZATION_FAILED:
            # Not fatal in Kafka: poll() raises it, the member stays.
            log.error("ConsumerGroupHeartbeatRequest failed: %s", exc)
            self._fatal = exc
            self._retry_later()
        else:
            # GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED,
            # UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID...
            self._fail(exc)

    # -- leave ----------------------------------------------------------------------------
    def leave_group(self, timeout_ms, reason="the consumer is being closed"):
        """Kafka's leaveGroup: the partitions revoked (lost when the poll
        timer expired), then a heartbeat with epoch -1 (-2 for a static
        member) waited for up to ``timeout_ms``."""
        if self.state not in _IN_GROUP:
            if self.state is S.FENCED:
                self._lose_partitions()
            self._transition(S.UNSUBSCRIBED)
            return
        stale = reason == _POLL_TIMEOUT or "poll timeout" in reason
        self._transition(S.PREPARE_LEAVING)
        owned = self._owned()
        if not stale and owned:
            _call(self.listener, "on_partitions_revoked", owned)
            self._drop(owned)
        c = self.consumer
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id else \
            LEAVE_GROUP_MEMBER_EPOCH
        self._transition(S.LEAVING)
        if self.member_epoch != JOIN_GROUP_MEMBER_EPOCH or self.heartbeat_in_flight:
            log.info("Member %s sending leave group heartbeat with epoch %d", self.member_id,
                     epoch)
            body = {"group_id": self.group_id, "member_id": self.member_id,
                    "member_epoch": epoch, "instance_id": self.group_instance_id}
            try:
                resp = c._coordinator_request(_HEARTBEAT, body, timeout_ms, "the group was left")
                code = resp.body["error_code"]
                if code and code not in _FENCED:
                    log.warning("Leave group heartbeat failed: %s",
                                exception_for(code, resp.body.get("error_message")))
            except errors.KChannelError as exc:
                log.warning("Leave group heartbeat failed: %s", exc)
        self.member_epoch = epoch
        self._target = None
        self._sent = None
        self.heartbeat_in_flight = False
        if stale:
            # Kafka's STALE: lost after the leave is sent; the next poll rejoins.
            self._transition(S.STALE)
            self._lose_partitions()
        else:
            self._current = {}
            self._transition(S.UNSUBSCRIBED)


def _text(tps):
    return "[" + ", ".join(sorted(f"{tp.topic}-{tp.partition}" for tp in tps)) + "]"


def _call(listener, method, partitions):
    fn = getattr(listener, method, None) if listener is not None else None
    if fn is None:
        return
    try:
        fn(list(partitions))
    except Exception:
        log.exception("User provided listener %s failed on invocation of %s for partitions "
                      "%s", type(listener).__name__, method, _text(partitions))
