"""Kafka's producer ``TransactionManager``: the transactional state machine
and the coordinator requests of a producer with a ``transactional.id``.

The application's thread moves the state (``begin_transaction``,
``begin_commit``...) and waits on a :class:`TransactionalRequestResult`;
the Sender's network thread sends the queued requests one at a time
(FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn) and handles their answers, as Kafka's Sender
drives ``TransactionManager.nextRequest``.

Transaction version 2 (KIP-890 part 2), when the coordinator's broker has
``transaction.version`` >= 2 finalized: partitions join the transaction
implicitly with Produce v12 (no AddPartitionsToTxn), offsets with
TxnOffsetCommit v5 (no AddOffsetsToTxn), and every EndTxn v5 answer
carries the bumped epoch the next transaction uses.  Otherwise version 1:
Produce at most v11, EndTxn at most v4, and the epoch stays.

Errors are classified as Kafka's: fatal (ProducerFencedError for
PRODUCER_FENCED and INVALID_PRODUCER_EPOCH, TransactionalIdAuthorizationError,
InvalidTxnStateError, UnsupportedVersionError) leave FATAL_ERROR, where only
``close()`` is allowed; abortable ones (any other failure inside a
transaction, a failed batch included) leave ABORTABLE_ERROR, from which
``abort_transaction()`` recovers; retriable ones (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS, lost connections...)
are retried after ``retry.backoff.ms``, looking the coordinator up again
when it may have moved.
"""
import dataclasses
import enum
import heapq
import itertools
import logging
import threading
from _thread import allocate_lock as _allocate_lock

from kchannel import errors
from kchannel.client import RequestTimeoutError
from kchannel.client.metadata import TopicPartition
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import (COORDINATOR_MOVED_ERRORS, RETRIABLE_ERRORS, Errors, error_name,
                                      exception_for)

__all__ = ["State", "TransactionManager", "TransactionalRequestResult",
           "FATAL_TRANSACTION_ERRORS"]

log = get_logger("kchannel.producer.transaction_manager")

_TIMEOUT_MAX = threading.TIMEOUT_MAX

_FIND_COORDINATOR = messages.FIND_COORDINATOR.api_key
_INIT_PRODUCER_ID = messages.INIT_PRODUCER_ID.api_key
_ADD_PARTITIONS = messages.ADD_PARTITIONS_TO_TXN.api_key
_ADD_OFFSETS = messages.ADD_OFFSETS_TO_TXN.api_key
_TXN_OFFSET_COMMIT = messages.TXN_OFFSET_COMMIT.api_key
_END_TXN = messages.END_TXN.api_key

# FindCoordinator key types.
_GROUP, _TRANSACTION = 0, 1

# Versions 4+ of AddPartitionsToTxn are broker-to-broker (Kafka's
# AddPartitionsToTxnRequest.LAST_CLIENT_VERSION).
_ADD_PARTITIONS_LAST_CLIENT_VERSION = 3
# The last versions of transaction version 1; the next ones mean version 2.
_PRODUCE_TV1_MAX, _END_TXN_TV1_MAX, _TXN_OFFSET_COMMIT_TV1_MAX = 11, 4, 4
# Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a
# transaction that meets CONCURRENT_TRANSACTIONS (the previous transaction
# still completing) retries sooner than retry.backoff.ms.
_ADD_PARTITIONS_RETRY_BACKOFF_MS = 20

# Produce errors that make a transactional producer fail for good (Kafka's
# TransactionManager.maybeTransitionToErrorState).
FATAL_TRANSACTION_ERRORS = (errors.ProducerFencedError, errors.InvalidProducerEpochError,
                            errors.TransactionalIdAuthorizationError,
                            errors.UnsupportedVersionError)

_COORDINATOR_MOVED = COORDINATOR_MOVED_ERRORS
_FENCED = frozenset((Errors.INVALID_PRODUCER_EPOCH, Errors.PRODUCER_FENCED))


class State(enum.Enum):
    """Kafka's ``TransactionManager.State``."""
    # Enum's own __hash__ is a Python function (hash of the name), called
    # at every lookup of a state in a dict: several per transaction.  A
    # member is its only instance, so identity hashes the same way.
    __hash__ = object.__hash__

    UNINITIALIZED = 0
    INITIALIZING = 1
    READY = 2
    IN_TRANSACTION = 3
    COMMITTING_TRANSACTION = 4
    ABORTING_TRANSACTION = 5
    ABORTABLE_ERROR = 6
    FATAL_ERROR = 7


_S = State
# target -> the states it may be entered from (FATAL_ERROR: any).
_VALID_SOURCES = {
    _S.UNINITIALIZED: (_S.READY, _S.ABORTABLE_ERROR),
    _S.INITIALIZING: (_S.UNINITIALIZED, _S.ABORTING_TRANSACTION),
    _S.READY: (_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION),
    _S.IN_TRANSACTION: (_S.READY,),
    _S.COMMITTING_TRANSACTION: (_S.IN_TRANSACTION,),
    _S.ABORTING_TRANSACTION: (_S.IN_TRANSACTION, _S.ABORTABLE_ERROR),
    _S.ABORTABLE_ERROR: (_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR,
                         _S.INITIALIZING),
}


class TransactionalRequestResult:
    """The outcome of one transactional operation (Kafka's
    ``TransactionalRequestResult``): the application waits on it.

    A latch of one plain lock, held from creation until the outcome is
    known, rather than a ``threading.Event``: an Event is a Condition, a
    lock and a waiter list, built per operation (one or two per
    transaction) and woken through Python-level ``notify_all``; here the
    Sender's completion is one ``release()`` that wakes the waiter in the
    kernel, and a waiter passes the latch on (acquire, then release) so
    any number of waits, repeated or concurrent, all return."""

    __slots__ = ("operation", "error", "_completed", "_latch")

    def __init__(self, operation):
        self.operation = operation
        self.error = None
        self._completed = False
        self._latch = _allocate_lock()
        self._latch.acquire()

    def done(self):
        self._complete()

    def fail(self, exc):
        self.error = exc
        self._complete()

    def _complete(self):
        # (completions come from the Sender's thread under the transaction
        # manager's lock, or from close(): a second one only keeps the
        # first's wake-up)
        if not self._completed:
            self._completed = True
            self._latch.release()

    @property
    def is_completed(self):
        return self._completed

    @property
    def is_successful(self):
        return self._completed and self.error is None

    def wait(self, timeout_s=None):
        """Wait for the outcome; raises its error, or RequestTimeoutError
        when ``timeout_s`` passes first (the operation goes on: calling the
        same method again waits for it, as Kafka's)."""
        if not self._completed:
            latch = self._latch
            if timeout_s is None:
                latch.acquire()
            elif not latch.acquire(True, min(max(timeout_s, 0), _TIMEOUT_MAX)):
                raise RequestTimeoutError(
                    f"Timeout expired after {int(timeout_s * 1000)}ms while awaiting "
                    f"{self.operation}")
            latch.release()
        if self.error is not None:
            raise self.error


@dataclasses.dataclass(frozen=True, slots=True)
class _CoordinatorKey:
    """Which coordinator a request goes to: ``kind`` ``_TRANSACTION`` (the
    producer's transactional id: ``key`` None) or ``_GROUP`` (``key``: the
    group id)."""
    kind: int
    key: object


_TXN_COORDINATOR = _CoordinatorKey(_TRANSACTION, None)


@dataclasses.dataclass(frozen=True, slots=True)
class _Coordinator:
    """A coordinator found by FindCoordinator: ``node_id`` is the id of the
    client's own connection to it (see _handle_find_coordinator)."""
    node_id: int
    host: str
    port: int


class _Handler:
    """One queued transactional request (Kafka's TxnRequestHandler)."""

    __slots__ = ("priority", "api_key", "body", "max_version", "handle", "result",
                 "coordinator", "retry", "backoff_ms", "is_end_txn", "name")

    def __init__(self, name, priority, api_key, body, handle, result,
                 coordinator=_TXN_COORDINATOR,
                 max_version=None, is_end_txn=False):
        self.name = name
        self.priority = priority
        self.api_key = api_key
        self.body = body
        self.handle = handle
        self.result = result
        # None: any node; else a _CoordinatorKey.
        self.coordinator = coordinator
        self.max_version = max_version
        self.retry = False
        self.backoff_ms = None
        self.is_end_txn = is_end_txn


# Kafka's Priority: coordinator lookups first, EndTxn last.
_P_FIND_COORDINATOR, _P_INIT_PRODUCER_ID, _P_ADD, _P_END_TXN = 0, 1, 2, 3


@dataclasses.dataclass(order=True, frozen=True, slots=True)
class _Queued:
    """An entry of the queued requests' heap: by priority, then in the
    order queued."""
    priority: int
    seq: int
    handler: _Handler = dataclasses.field(compare=False)


class TransactionManager:
    """State and requests of one transactional producer (see the module
    docstring).  ``sender`` is the producer's Sender: its producer id, epoch
    and sequence numbers are set from here."""

    def __init__(self, transactional_id, transaction_timeout_ms, retry_backoff_ms, client,
                 sender):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.client = client
        self.sender = sender
        self.lock = threading.RLock()
        self.state = State.UNINITIALIZED
        self.last_error = None
        self.transaction_v2 = False          # of the transaction under way
        self._latest_transaction_version = 0   # the coordinator broker's finalized level
        self._features_of = None             # the ApiVersions answer it was read from
        self.new_partitions = set()
        self.pending_partitions = set()
        self.partitions_in_transaction = set()
        self.transaction_started = False
        self._pending = []                   # heap of _Queued
        self._seq = itertools.count()
        self._in_flight = None
        self._next_send_ms = 0
        self._end_txn_waits = False          # EndTxn queued behind unacknowledged batches
        self._coordinator = None             # _Coordinator
        self._group_coordinators = {}        # group id -> _Coordinator
        self._results = {}                   # pending state -> result (cached, as Kafka's)

    # -- state ---------------------------------------------------------------------
    def _transition(self, target, error=None):
        source = self.state
        if target is not State.FATAL_ERROR and source not in _VALID_SOURCES[target]:
            raise errors.IllegalStateError(
                f"TransactionalId {self.transactional_id}: Invalid transition attempted from "
                f"state {source.name} to state {target.name}")
        if error is not None:
            self.last_error = error
        elif target not in (State.ABORTABLE_ERROR, State.FATAL_ERROR):
            self.last_error = None
        if target is not source and log.isEnabledFor(logging.DEBUG):
            log.debug("[TransactionalId %s] Transition from state %s to %s",
                      self.transactional_id, source.name, target.name)
        self.state = target

    def _abortable(self, exc):
        if self.state is State.FATAL_ERROR:
            return
        if self.state is State.ABORTING_TRANSACTION:
            # Kafka's transitionToAbortableError: already being aborted.
            log.debug("Skipping transition to abortable error state since the transaction is "
                      "already being aborted. Underlying exception: %s", exc)
            return
        if self.state in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION,
                          State.ABORTABLE_ERROR, State.INITIALIZING):
            self._transition(State.ABORTABLE_ERROR, exc)
        else:
            # An abort that fails goes on failing until closed.
            self._fatal(exc)

    def _fatal(self, exc):
        self._transition(State.FATAL_ERROR, exc)
        # Every queued request fails with it (Kafka's maybeTerminateRequestWithError).
        for h in self._handlers():
            if h.result is not None and not h.result.is_completed:
                h.result.fail(exc)
        self._pending = []

    def has_error(self):
        return self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    def has_pending(self):
        """Requests queued or in flight (a closing producer waits for them)."""
        return self.state is not State.FATAL_ERROR and bool(
            self._in_flight is not None or self._pending or self.new_partitions)

    def in_open_transaction(self):
        return self.state in (State.IN_TRANSACTION, State.ABORTABLE_ERROR)

    def has_fatal_error(self):
        return self.state is State.FATAL_ERROR

    def is_aborting(self):
        return self.state is State.ABORTING_TRANSACTION

    def is_completing(self):
        return self.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def maybe_fail_with_error(self):
        """Raise the error of an error state (Kafka's maybeFailWithError)."""
        if self.state is State.FATAL_ERROR or self.state is State.ABORTABLE_ERROR:
            raise self.last_error

    def _cached(self, state, operation, start):
        """Kafka's handleCachedTransactionRequestResult: calling an
        operation again after it timed out waits on the same request."""
        result = self._results.get(state)
        if result is not None and not result.is_completed and self.state is state:
            return result
        result = start()
        self._results = {state: result}
        return result

    # -- application API (any thread) -------------------------------------------------
    def initialize_transactions(self):
        with self.lock:
            self.maybe_fail_with_error()

            def start():
                self._transition(State.INITIALIZING)
                log.info("[TransactionalId %s] Invoking InitProducerId for the first time in "
                         "order to acquire a producer ID", self.transactional_id)
                return self._enqueue_init_producer_id()
            return self._cached(State.INITIALIZING, "initTransactions", start)

    def begin_transaction(self):
        with self.lock:
            self._require_no_pending("beginTransaction")
            self.maybe_fail_with_error()
            self._transition(State.IN_TRANSACTION)
            self.transaction_v2 = self._latest_transaction_version >= 2
            # Under version 2 the broker checks every partition's first
            # sequence of the transaction: its batches need not wait for the
            # first one's acknowledgement (see ProducerSequences).
            self.sender.sequences.first_sequence_checked = self.transaction_v2

    def begin_commit(self):
        with self.lock:
            def start():
                self.maybe_fail_with_error()
                self._transition(State.COMMITTING_TRANSACTION)
                return self._begin_completing(True)
            return self._cached(State.COMMITTING_TRANSACTION, "commitTransaction", start)

    def begin_abort(self):
        with self.lock:
            def start():
                if self.state is not State.ABORTABLE_ERROR:
                    self.maybe_fail_with_error()
                self._transition(State.ABORTING_TRANSACTION)
                self.new_partitions.clear()
                return self._begin_completing(False)
            return self._cached(State.ABORTING_TRANSACTION, "abortTransaction", start)

    def send_offsets_to_transaction(self, offsets, group_metadata):
        """``offsets``: {TopicPartition: OffsetAndMetadata or offset}."""
        with self.lock:
            self._require_no_pending("sendOffsetsToTransaction")
            self.maybe_fail_with_error()
            if self.state is not State.IN_TRANSACTION:
                raise errors.IllegalStateError(
                    f"Cannot send offsets if a transaction is not in progress (currentState= "
                    f"{self.state.name})")
            result = TransactionalRequestResult("sendOffsetsToTransaction")
            if self.transaction_v2:
                # TxnOffsetCommit v5 adds the offsets partition itself.
                self.transaction_started = True
                self._enqueue(self._txn_offset_commit(result, offsets, group_metadata))
            else:
                group_id = group_metadata.group_id
                body = {"transactional_id": self.transactional_id,
                        "producer_id": self.sender.producer_id,
                        "producer_epoch": self.sender.producer_epoch, "group_id": group_id}

                def handle(h, resp):
                    self._handle_add_offsets(h, resp, offsets, group_metadata)
                self._enqueue(_Handler("AddOffsetsToTxn", _P_ADD, _ADD_OFFSETS, body, handle,
                                       result))
            return result

    def maybe_add_partition(self, tp):
        """A batch is opening for ``tp`` (Kafka's maybeAddPartition, which
        Kafka calls per record: here once per batch, through
        ``RecordAccumulator.on_new_batch``, under the accumulator's lock).
        Raises when no record may be sent now."""
        if tp in self.partitions_in_transaction and self.state is State.IN_TRANSACTION:
            return     # the common case, without the lock
        with self.lock:
            self.check_send_allowed()
            if tp in self.partitions_in_transaction or tp in self.pending_partitions:
                return
            if self.transaction_v2:
                # Produce v12 adds it on the broker.
                self.partitions_in_transaction.add(tp)
                self.transaction_started = True
            else:
                log.debug("[TransactionalId %s] Begin adding new partition %s-%s to "
                          "transaction", self.transactional_id, tp.topic, tp.partition)
                self.new_partitions.add(tp)

    def check_send_allowed(self):
        """Raise unless a record may be sent now (inside a transaction)."""
        state = self.state
        if state is State.IN_TRANSACTION:
            return
        self.maybe_fail_with_error()
        self._require_no_pending("send")
        if self.sender.producer_id < 0:
            raise errors.IllegalStateError(
                "Cannot perform a 'send' before completing a call to initTransactions when "
                "transactions are enabled.")
        raise errors.IllegalStateError(
            f"Cannot call send in state {state.name}: call begin_transaction() first")

    def _require_no_pending(self, operation):
        # (a loop, no generator: run at every begin_transaction)
        for pending, result in self._results.items():
            if not result._completed:
                raise errors.IllegalStateError(
                    f"Cannot attempt operation `{operation}` because the previous call to "
                    f"`{ {State.INITIALIZING: 'initTransactions', State.COMMITTING_TRANSACTION: 'commitTransaction', State.ABORTING_TRANSACTION: 'abortTransaction'}.get(pending, pending.name)}` "  # noqa: E501
                    f"timed out and must be retried")

    def close(self, exc):
        """The producer closes: what is queued or waited for fails."""
        with self.lock:
            for h in self._handlers():
                if h.result is not None and not h.result.is_completed:
                    h.result.fail(exc)
            self._pending = []
            for r in self._results.values():
                if not r.is_completed:
                    r.fail(exc)

    # -- Sender thread ------------------------------------------------------------------
    def send_allowed(self, tp):
        """May a batch of ``tp`` be drained now (Kafka's
        isSendToPartitionAllowed)."""
        return self.state is not State.FATAL_ERROR and tp in self.partitions_in_transaction

    def produce_max_version(self):
        return None if self.transaction_v2 else _PRODUCE_TV1_MAX

    def has_in_flight_request(self):
        return self._in_flight is not None

    def run(self, now, has_incomplete):
        """Send the next transactional request if one is due; True when one
        is in flight (the Sender then only polls, as Kafka's
        maybeSendAndPollTransactionalRequest).  ``has_incomplete()``: whether
        a batch is still unacknowledged (asked only of an EndTxn that is
        due)."""
        if self._in_flight is not None:
            return True
        if not self._pending and not self.new_partitions:
            # Nothing queued (most passes of the Sender's loop, all those
            # inside a transaction): no lock.  A request queued meanwhile by
            # the application's thread wakes the Sender, whose next pass
            # sees it.
            self._end_txn_waits = False
            return False
        with self.lock:
            self._end_txn_waits = False
            if self.new_partitions and not self.transaction_v2:
                self._enqueue_add_partitions()
            if not self._pending or now < self._next_send_ms:
                return False
            handler = self._pending[0].handler
            if handler.is_end_txn and has_incomplete():
                # EndTxn waits until every batch is acknowledged.
                self._end_txn_waits = True
                return False
            heapq.heappop(self._pending)
            if handler.result is not None and handler.result.is_completed:
                return False
            if self.has_error() and not (handler.is_end_txn and not handler.body["committed"]) \
                    and handler.priority != _P_FIND_COORDINATOR \
                    and handler.priority != _P_INIT_PRODUCER_ID:
                # An error state lets only the abort through.
                if handler.result is not None:
                    handler.result.fail(self.last_error)
                return False
            if handler.is_end_txn and not self.transaction_started:
                log.debug("[TransactionalId %s] Not sending EndTxn for completed transaction "
                          "since no partitions or offsets were successfully added",
                          self.transactional_id)
                self._complete_transaction()
                handler.result.done()
                return False
            node = self._target(handler, now)
            if node is None:
                return False
            version = self.client.choose_version(node, handler.api_key)
            if handler.max_version is not None:
                version = min(version, handler.max_version)
            try:
                self.client.send(node, handler.api_key, handler.body,
                                 lambda resp: self._on_response(handler, resp),
                                 version=version)
            except errors.UnsupportedVersionError as exc:
                self._fail(handler, exc)
                return False
            except errors.KChannelError as exc:
                log.debug("Sending %s failed: %s", handler.name, exc)
                self._lookup_if_needed(handler)
                self._reenqueue(handler, now)
                return False
            self._in_flight = handler
            return True

    def poll_timeout(self, now):
        """How long the Sender may poll before ``run`` has something to
        send (None: no limit from here).  A response ends the poll anyway:
        an EndTxn waiting for its batches is released by their responses
        (or, at the latest, looked at again after retry.backoff.ms), a
        request in back-off when it is due; otherwise (a coordinator being
        looked up or connected) every 10 ms; partitions to add to the
        transaction (version 1) at once.  (A fixed 10 ms for all of
        them woke the Sender every 10 ms of every commit whose Produce
        responses took longer: on a loaded machine, several passes of its
        loop per transaction for nothing.)"""
        if self.new_partitions and not self.transaction_v2:
            return 0       # run() queues their AddPartitionsToTxn
        if self._in_flight is not None or not self._pending:
            return None
        if self._end_txn_waits:
            return self.retry_backoff_ms
        return max(self._next_send_ms - now, 10)

    def _target(self, handler, now):
        """The node to send ``handler`` to, or None (re-queued, after a
        coordinator lookup when needed)."""
        if handler.coordinator is None:
            node = self.client.least_loaded_node(now)
            if node is None or not self.client.ready(node, now):
                self._reenqueue(handler, now, backoff=node is None)
                return None
            return node
        kind, key = handler.coordinator.kind, handler.coordinator.key
        coord = self._coordinator if kind == _TRANSACTION else self._group_coordinators.get(key)
        if coord is None:
            self._lookup(kind, key)
            self._reenqueue(handler, now, backoff=False)
            return None
        node = coord.node_id
        if not self.client.ready(node, now):
            if self.client.client.connection_failed(node):
                log.debug("[TransactionalId %s] Coordinator %s is unreachable; looking it up "
                          "again", self.transactional_id, (coord.node_id, coord.host, coord.port))
                self._forget(kind, key)
                self._lookup(kind, key)
            self._reenqueue(handler, now, backoff=False)
            return None
        return node

    def _lookup(self, kind, key):
        key = self.transactional_id if kind == _TRANSACTION else key
        for h in self._handlers():
            if h.priority == _P_FIND_COORDINATOR and h.body["key_type"] == kind and \
                    h.body["key"] == key:
                return
        body = {"key": key, "key_type": kind, "coordinator_keys": [key]}
        self._enqueue(_Handler("FindCoordinator", _P_FIND_COORDINATOR, _FIND_COORDINATOR, body,
                               self._handle_find_coordinator, None, coordinator=None))

    def _forget(self, kind, key):
        if kind == _TRANSACTION:
            self._coordinator = None
        else:
            self._group_coordinators.pop(key, None)

    def _lookup_if_needed(self, handler):
        if handler.coordinator is not None:
            kind, key = handler.coordinator.kind, handler.coordinator.key
            self._forget(kind, key)
            self._lookup(kind, key)

    def _enqueue(self, handler):
        heapq.heappush(self._pending, _Queued(handler.priority, next(self._seq), handler))

    def _handlers(self):
        """The queued requests (in heap order)."""
        return [q.handler for q in self._pending]

    def _reenqueue(self, handler, now, backoff=True):
        handler.retry = True
        self._enqueue(handler)
        if backoff:
            delay = self.retry_backoff_ms if handler.backoff_ms is None else handler.backoff_ms
            self._next_send_ms = now + delay

    def _fail(self, handler, exc, fatal=True):
        if handler.result is not None:
            handler.result.fail(exc)
        if fatal:
            self._fatal(exc)
        else:
            self._abortable(exc)

    def _on_response(self, handler, resp):
        with self.lock:
            self._in_flight = None
            now = self.sender.time()
            if resp.exception is not None:
                if isinstance(resp.exception, errors.UnsupportedVersionError):
                    self._fail(handler, resp.exception)
                    return
                log.debug("[TransactionalId %s] %s to node %s failed (%s); will retry",
                          self.transactional_id, handler.name, resp.node_id, resp.exception)
                self._lookup_if_needed(handler)
                self._reenqueue(handler, now)
                return
            self._note_features(resp.node_id)
            handler.handle(handler, resp)

    def _note_features(self, node_id):
        """Kafka's maybeUpdateTransactionV2Enabled: the broker's finalized
        transaction.version, read at the next begin_transaction."""
        body = self.client.client.api_versions_response(node_id)
        if not body or body is self._features_of:
            # (the answer already read: every response of a transaction
            # comes from the same connection's ApiVersions)
            return
        self._features_of = body
        level = 0
        for f in body.get("finalized_features") or ():
            if f["name"] == "transaction.version":
                level = f["max_version_level"]
        self._latest_transaction_version = level

    # -- requests -----------------------------------------------------------------------
    def _enqueue_init_producer_id(self):
        result = TransactionalRequestResult("initTransactions")
        body = {"transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        self._enqueue(_Handler("InitProducerId", _P_INIT_PRODUCER_ID, _INIT_PRODUCER_ID, body,
                               self._handle_init_producer_id, result))
        return result

    def _begin_completing(self, commit):
        if self.new_partitions and not self.transaction_v2:
            self._enqueue_add_partitions()
        result = TransactionalRequestResult("commitTransaction" if commit
                                            else "abortTransaction")
        body = {"transactional_id": self.transactional_id,
                "producer_id": self.sender.producer_id,
                "producer_epoch": self.sender.producer_epoch, "committed": commit}
        self._enqueue(_Handler(f"EndTxn({str(commit).lower()})", _P_END_TXN, _END_TXN, body,
                               self._handle_end_txn, result,
                               max_version=None if self.transaction_v2 else _END_TXN_TV1_MAX,
                               is_end_txn=True))
        return result

    def _enqueue_add_partitions(self):
        partitions = sorted(self.new_partitions)
        self.pending_partitions.update(partitions)
        self.new_partitions.clear()
        topics = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {"v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.sender.producer_id,
                "v3_and_below_producer_epoch": self.sender.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps}
                                        for t, ps in topics.items()]}
        handler = _Handler("AddPartitionsToTxn", _P_ADD, _ADD_PARTITIONS, body,
                           self._handle_add_partitions, TransactionalRequestResult(
                               "AddPartitionsToTxn"),
                           max_version=_ADD_PARTITIONS_LAST_CLIENT_VERSION)
        self._enqueue(handler)

    def _txn_offset_commit(self, result, offsets, group_metadata):
        by_topic = {}
        for tp, om in offsets.items():
            offset = getattr(om, "offset", om)
            metadata = getattr(om, "metadata", "") or ""
            leader_epoch = getattr(om, "leader_epoch", None)
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "committed_offset": offset,
                "committed_leader_epoch": -1 if leader_epoch is None else leader_epoch,
                "committed_metadata": metadata})
        group_id = group_metadata.group_id
        body = {"transactional_id": self.transactional_id, "group_id": group_id,
                "producer_id": self.sender.producer_id,
                "producer_epoch": self.sender.producer_epoch,
                "generation_id": group_metadata.generation_id,
                "member_id": group_metadata.member_id,
                "group_instance_id": group_metadata.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        pending = {(t, p["partition_index"]) for t, ps in by_topic.items() for p in ps}
        return _Handler("TxnOffsetCommit", _P_ADD, _TXN_OFFSET_COMMIT, body,
                        lambda h, resp: self._handle_txn_offset_commit(h, resp, pending),
                        result, coordinator=_CoordinatorKey(_GROUP, group_id),
                        max_version=None if self.transaction_v2 else _TXN_OFFSET_COMMIT_TV1_MAX)

    # -- responses (Sender thread, under the lock) -------------------------------------
    def _handle_find_coordinator(self, h, resp):
        b = resp.body
        entry = b["coordinators"][0] if resp.api_version >= 4 else b
        code = entry["error_code"]
        kind, key = h.body["key_type"], h.body["key"]
        if code == Errors.NONE:
            # A connection of its own, as the consumer's group coordinator.
            coord_id = 2 ** 31 - 1 - entry["node_id"]
            self.client.extra_nodes[coord_id] = (entry["host"], entry["port"])
            coord = _Coordinator(coord_id, entry["host"], entry["port"])
            if kind == _TRANSACTION:
                self._coordinator = coord
            else:
                self._group_coordinators[key] = coord
            log.info("[TransactionalId %s] Discovered %s coordinator %s:%s (id: %s rack: "
                     "null)", self.transactional_id,
                     "transaction" if kind == _TRANSACTION else "group", entry["host"],
                     entry["port"], entry["node_id"])
        elif code in RETRIABLE_ERRORS:
            self._reenqueue(h, self.sender.time())
        elif code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            self._fatal(exception_for(code, entry.get("error_message")))
        elif code == Errors.GROUP_AUTHORIZATION_FAILED:
            self._abortable(exception_for(code, f"Not authorized to access group: {key}"))
        elif code == Errors.TRANSACTION_ABORTABLE:
            self._abortable(exception_for(code))
        else:
            self._fatal(errors.KafkaError(
                code, error_name(code),
                f"Could not find a coordinator with type {'TRANSACTION' if kind else 'GROUP'} "
                f"with key {key} due to unexpected error: {entry.get('error_message')}"))

    def _coordinator_error(self, h, code):
        """The handling every coordinator request shares: True when done."""
        now = self.sender.time()
        if code in _COORDINATOR_MOVED:
            self._lookup_if_needed(h)
            self._reenqueue(h, now)
        elif code in RETRIABLE_ERRORS:
            self._reenqueue(h, now)
        elif code in _FENCED:
            # INVALID_PRODUCER_EPOCH from an older coordinator means the same.
            self._fail(h, errors.ProducerFencedError())
        else:
            return False
        return True

    def _handle_init_producer_id(self, h, resp):
        b = resp.body
        code = b["error_code"]
        if code == Errors.NONE:
            self._set_producer_id_and_epoch(b["producer_id"], b["producer_epoch"])
            self._transition(State.READY)
            h.result.done()
        elif self._coordinator_error(h, code):
            return
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                      Errors.CLUSTER_AUTHORIZATION_FAILED):
            self._fail(h, exception_for(code), fatal=False)
        elif code == Errors.TRANSACTION_ABORTABLE:
            self._fail(h, exception_for(code), fatal=False)
        else:
            self._fail(h, errors.KafkaError(code, error_name(code),
                                            f"Unexpected error in InitProducerIdResponse; "
                                            f"{exception_for(code).message}"))

    def _set_producer_id_and_epoch(self, producer_id, epoch):
        sender = self.sender
        if (producer_id, epoch) != (sender.producer_id, sender.producer_epoch):
            # A new epoch starts every partition's sequence at 0.
            sender.reset_producer_id(producer_id, epoch)
        log.info("[TransactionalId %s] ProducerId set to %d with epoch %d",
                 self.transactional_id, producer_id, epoch)

    def _handle_add_partitions(self, h, resp):
        b = resp.body
        h.backoff_ms = None
        unauthorized, other_errors = set(), {}
        partitions = []
        for topic in b.get("results_by_topic_v3_and_below") or ():
            for p in topic["results_by_partition"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                partitions.append(tp)
                code = p["partition_error_code"]
                if code == Errors.NONE:
                    continue
                if code == Errors.CONCURRENT_TRANSACTIONS:
                    # The previous transaction is still completing.
                    if not self.partitions_in_transaction:
                        h.backoff_ms = min(_ADD_PARTITIONS_RETRY_BACKOFF_MS,
                                           self.retry_backoff_ms)
                    self._reenqueue(h, self.sender.time())
                    return
                if self._coordinator_error(h, code):
                    return
                if code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            Errors.INVALID_TXN_STATE):
                    self._fail(h, exception_for(code))
                    return
                if code == Errors.TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(tp.topic)
                elif code == Errors.OPERATION_NOT_ATTEMPTED:
                    other_errors.setdefault(tp, code)
                elif code in (Errors.UNKNOWN_PRODUCER_ID, Errors.INVALID_PRODUCER_ID_MAPPING,
                              Errors.TRANSACTION_ABORTABLE):
                    self._fail(h, exception_for(code), fatal=False)
                    return
                else:
                    log.error("Could not add partition %s-%s due to unexpected error %s",
                              tp.topic, tp.partition, error_name(code))
                    other_errors[tp] = code
        self.pending_partitions.difference_update(partitions)
        if unauthorized:
            self._fail(h, errors.KafkaError(
                Errors.TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED",
                f"Not authorized to access topics: [{', '.join(sorted(unauthorized))}]"),
                fatal=False)
        elif other_errors:
            self._fail(h, errors.KChannelError(
                "Could not add partitions to transaction due to errors: "
                + ", ".join(f"{tp.topic}-{tp.partition}={exception_for(c).name}"
                            for tp, c in other_errors.items())), fatal=False)
        else:
            log.debug("[TransactionalId %s] Successfully added partitions %s to transaction",
                      self.transactional_id, partitions)
            self.partitions_in_transaction.update(partitions)
            self.transaction_started = True
            h.result.done()
            self.sender.wakeup()

    def _handle_add_offsets(self, h, resp, offsets, group_metadata):
        code = resp.body["error_code"]
        if code == Errors.NONE:
            log.debug("[TransactionalId %s] Successfully added partition for consumer group "
                      "%s to transaction", self.transactional_id, group_metadata.group_id)
            # The result completes when the TxnOffsetCommit does.
            self._enqueue(self._txn_offset_commit(h.result, offsets, group_metadata))
            self.transaction_started = True
        elif self._coordinator_error(h, code):
            return
        elif code in (Errors.UNKNOWN_PRODUCER_ID, Errors.INVALID_PRODUCER_ID_MAPPING,
                      Errors.TRANSACTION_ABORTABLE):
            self._fail(h, exception_for(code), fatal=False)
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE):
            self._fail(h, exception_for(code))
        elif code == Errors.GROUP_AUTHORIZATION_FAILED:
            self._fail(h, exception_for(
                code, f"Not authorized to access group: {group_metadata.group_id}"),
                fatal=False)
        else:
            self._fail(h, errors.KafkaError(code, error_name(code),
                                            "Unexpected error in AddOffsetsToTxnResponse: "
                                            f"{exception_for(code).message}"))

    def _handle_txn_offset_commit(self, h, resp, pending):
        group_id = h.body["group_id"]
        reloaded = False
        for topic in resp.body.get("topics") or ():
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                code = p["error_code"]
                if code == Errors.NONE:
                    pending.discard(key)
                elif code in _COORDINATOR_MOVED or code == Errors.REQUEST_TIMED_OUT:
                    if not reloaded:
                        reloaded = True
                        self._forget(_GROUP, group_id)
                        self._lookup(_GROUP, group_id)
                elif code in RETRIABLE_ERRORS:
                    continue
                elif code in (Errors.GROUP_AUTHORIZATION_FAILED, Errors.FENCED_INSTANCE_ID,
                              Errors.TRANSACTION_ABORTABLE):
                    self._fail(h, exception_for(code), fatal=False)
                    return
                elif code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
                    self._fail(h, errors.CommitFailedError(
                        "Transaction offset Commit failed due to consumer group metadata "
                        f"mismatch: {exception_for(code).message}"), fatal=False)
                    return
                elif code in _FENCED:
                    self._fail(h, errors.ProducerFencedError())
                    return
                elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                    self._fail(h, exception_for(code))
                    return
                else:
                    self._fail(h, errors.KafkaError(
                        code, error_name(code),
                        f"Unexpected error in TxnOffsetCommitResponse: "
                        f"{exception_for(code).message}"))
                    return
        if not pending:
            h.result.done()
        else:
            # Retry only the partitions that failed with a retriable error.
            for t in h.body["topics"]:
                t["partitions"] = [p for p in t["partitions"]
                                   if (t["name"], p["partition_index"]) in pending]
            h.body["topics"] = [t for t in h.body["topics"] if t["partitions"]]
            self._reenqueue(h, self.sender.time())

    def _handle_end_txn(self, h, resp):
        b = resp.body
        code = b["error_code"]
        if code == Errors.NONE:
            if resp.api_version >= 5 and b.get("producer_id", -1) >= 0:
                # Transaction version 2: the coordinator bumped the epoch.
                self._set_producer_id_and_epoch(b["producer_id"], b["producer_epoch"])
            self._complete_transaction()
            h.result.done()
        elif self._coordinator_error(h, code):
            return
        elif code in (Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Errors.INVALID_TXN_STATE):
            self._fail(h, exception_for(code))
        elif code in (Errors.UNKNOWN_PRODUCER_ID, Errors.INVALID_PRODUCER_ID_MAPPING,
                      Errors.TRANSACTION_ABORTABLE):
            self._fail(h, exception_for(code), fatal=False)
        else:
            self._fail(h, errors.KafkaError(code, error_name(code),
                                            "Unhandled error in EndTxnResponse: "
                                            f"{exception_for(code).message}"))

    def _complete_transaction(self):
        self._transition(State.READY)
        self.transaction_started = False
        self.new_partitions.clear()
        self.pending_partitions.clear()
        self.partitions_in_transaction.clear()

    def handle_failed_batch(self, exc):
        """A batch of this transaction failed (Kafka's handleFailedBatch and
        maybeTransitionToErrorState)."""
        with self.lock:
            if isinstance(exc, FATAL_TRANSACTION_ERRORS) or (
                    isinstance(exc, errors.KafkaError) and exc.error_code in (
                        Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.PRODUCER_FENCED)):
                self._fatal(exc)
            elif self.state in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION,
                                State.ABORTABLE_ERROR):
                self._transition(State.ABORTABLE_ERROR, exc)
