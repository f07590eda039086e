"""Kafka's consumer ``Fetcher`` and ``SubscriptionState`` (assigned
partitions and their positions), on a
:class:`~kchannel.client.cluster_client.ClusterClient`.

Fetching is pipelined as in Kafka: a Fetch request goes to every leader
that has fetchable partitions with nothing buffered, and ``poll`` sends the
next ones before handing records to the application, so the broker works
while the application processes.  From Fetch v7 each leader has an
incremental fetch session (KIP-227, :mod:`kchannel.consumer.fetch_session`):
a request names only the partitions whose offset changed, joined or left;
from Fetch v13 partitions are named by topic id.
"""
import collections

from kchannel import errors
from kchannel.consumer.config import deserializer
from kchannel.consumer.fetch_session import FetchSessionHandler
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition
from kchannel.protocol import messages
from kchannel.protocol.errors import (INVALID_METADATA_ERRORS, RETRIABLE_ERRORS, Errors,
                                      exception_for)
from kchannel.protocol.records import PartitionReader, batch_at, track_records

__all__ = ["ConsumerRecord", "Fetcher", "SubscriptionState", "PartitionState"]

log = get_logger("kchannel.consumer.fetcher")

_FETCH = messages.FETCH.api_key
_ZERO_UUID_INT = 0
_SESSIONS_VERSION = 7       # Fetch v7 brought sessions (KIP-227)
# Errors about the session, not the request: the next request is a full one.
_SESSION_ERRORS = frozenset((Errors.FETCH_SESSION_ID_NOT_FOUND,
                             Errors.INVALID_FETCH_SESSION_EPOCH,
                             Errors.FETCH_SESSION_TOPIC_ID_ERROR))


class ConsumerRecord(collections.namedtuple(
        "ConsumerRecord", "topic partition offset timestamp timestamp_type key value headers "
                          "leader_epoch")):
    """One fetched record (Kafka's ``ConsumerRecord``; a named tuple, as
    kafka-python's, because the consumer makes one per record)."""

    __slots__ = ()

    @property
    def serialized_key_size(self):
        return -1 if self.key is None else len(self.key)

    @property
    def serialized_value_size(self):
        return -1 if self.value is None else len(self.value)

    def __repr__(self):
        return (f"ConsumerRecord(topic = {self.topic}, partition = {self.partition}, "
                f"offset = {self.offset}, {self.timestamp_type} = {self.timestamp}, "
                f"key = {self.key!r}, value = {self.value!r})")


_new_record = tuple.__new__


class PartitionState:
    __slots__ = ("position", "paused", "reset_strategy", "high_watermark",
                 "last_stable_offset", "log_start_offset")

    def __init__(self):
        self.position = None
        self.paused = False
        self.reset_strategy = None
        self.high_watermark = None
        self.last_stable_offset = None
        self.log_start_offset = None


class SubscriptionState:
    def __init__(self, default_reset):
        self.default_reset = default_reset
        self.assignment = {}          # tp -> PartitionState (insertion ordered)
        self.subscription = set()     # topics (subscribe mode)

    def assign(self, tps):
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in tps}

    def is_assigned(self, tp):
        return tp in self.assignment

    def state(self, tp):
        st = self.assignment.get(tp)
        if st is None:
            raise errors.KChannelError(f"No current assignment for partition {tp.topic}-"
                                       f"{tp.partition}")
        return st

    def seek(self, tp, offset):
        st = self.state(tp)
        st.position = offset
        st.reset_strategy = None

    def request_reset(self, tp, strategy=None):
        st = self.state(tp)
        st.reset_strategy = strategy or self.default_reset
        st.position = None

    def missing_positions(self):
        return [tp for tp, st in self.assignment.items() if st.position is None]

    def fetchable(self):
        return [tp for tp, st in self.assignment.items()
                if st.position is not None and not st.paused]

    def positions(self):
        return {tp: st.position for tp, st in self.assignment.items() if st.position is not None}


class _CompletedFetch:
    __slots__ = ("tp", "fetch_offset", "batches", "aborted", "aborted_pids", "reader", "done",
                 "special_end")

    def __init__(self, tp, fetch_offset, records, aborted, check_crcs, read_committed,
                 tuple_headers):
        self.tp = tp
        self.fetch_offset = fetch_offset
        # Walks the plain batches itself (one call a poll, not a dozen a
        # batch); stops at the others for _open_batch.
        self.batches = PartitionReader(records, ConsumerRecord, tp.topic, tp.partition,
                                       check_crcs, read_committed, tuple_headers)
        self.aborted = sorted(aborted or (), key=lambda a: a["first_offset"])
        self.aborted_pids = set()
        self.reader = None        # reader of a batch that self.batches left to _open_batch
        self.done = False
        # The next offset of the last valid batch that self.batches left to
        # _open_batch (self.batches tracks the plain ones itself).
        self.special_end = -1


class Fetcher:
    def __init__(self, client, metadata, subscriptions, values, key_deserializer=None,
                 value_deserializer=None, sensors=None):
        self.client = client
        self.metadata = metadata
        self.subscriptions = subscriptions
        self.min_bytes = values["fetch.min.bytes"]
        self.max_bytes = values["fetch.max.bytes"]
        self.max_wait_ms = values["fetch.max.wait.ms"]
        self.partition_max_bytes = values["max.partition.fetch.bytes"]
        self.max_poll_records = values["max.poll.records"]
        self.check_crcs = values["check.crcs"]
        self.read_committed = values["isolation.level"] == "read_committed"
        self.client_rack = values["client.rack"]
        self.key_type = values["key.deserializer"]
        self.value_type = values["value.deserializer"]
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        # Records' headers as a tuple of (key, value) pairs instead of a list
        # (kchannel.aio's, as aiokafka's): see RecordReader.
        self.tuple_headers = False
        self.completed = collections.deque()
        self.in_flight_nodes = set()
        self.sessions = {}            # node -> FetchSessionHandler
        self.closing = 0              # session close requests awaiting an answer
        self.errors = []              # exceptions to raise from poll (Kafka raises them)
        self.sensors = sensors        # ConsumerMetrics, or None

    # -- requests ----------------------------------------------------------------
    def send_fetches(self, now):
        """Send a Fetch to each leader of fetchable partitions that has no
        fetch in flight and whose partitions have nothing buffered; returns
        the number sent."""
        tps = self.subscriptions.fetchable()
        if self.completed:
            buffered = {c.tp for c in self.completed}
            tps = [tp for tp in tps if tp not in buffered]
            if not tps:
                return 0    # (most polls: every partition's last fetch is still being read)
        cluster = self.metadata.cluster
        by_node = collections.defaultdict(list)
        for tp in tps:
            leader = cluster.leader_for(tp)
            if leader is None:
                self.metadata.add_topic(tp.topic, now)
                self.metadata.request_update()
                continue
            if leader in self.in_flight_nodes:
                continue
            by_node[leader].append(tp)
        sent = 0
        for node, tps in by_node.items():
            if not self.client.ready(node, now):
                continue
            try:
                version = self.client.choose_version(node, _FETCH)
            except errors.UnsupportedVersionError as exc:
                self.errors.append(exc)
                continue
            if version >= 13 and any(cluster.topic_id(tp.topic).int == _ZERO_UUID_INT
                                     for tp in tps):
                version = 12
            positions = {tp: self.subscriptions.assignment[tp].position for tp in tps}
            session = None
            if version >= _SESSIONS_VERSION:
                handler = self.sessions.get(node)
                if handler is None:
                    handler = self.sessions[node] = FetchSessionHandler(node)
                session = handler.build(positions, version,
                                        {t: cluster.topic_id(t) for t in {tp.topic for tp in tps}})
                body = self._request(version, session.to_send, cluster, session)
            else:
                body = self._request(version, positions, cluster)
            self.client.send(node, _FETCH, body,
                             lambda resp, p=positions, n=node, s=session: self._handle(resp, p, n,
                                                                                      s),
                             version=version)
            self.in_flight_nodes.add(node)
            sent += 1
        return sent

    def _request(self, version, positions, cluster, session=None):
        topics = collections.OrderedDict()
        for tp, offset in positions.items():
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": self.partition_max_bytes})
        forgotten = []
        if session is not None and session.to_forget:
            gone = collections.OrderedDict()
            for tp in session.to_forget:
                gone.setdefault(tp.topic, []).append(tp.partition)
            forgotten = [{"topic": t, "topic_id": session.topic_ids.get(t) or cluster.topic_id(t),
                          "partitions": ps} for t, ps in gone.items()]
        return {
            "replica_id": -1, "max_wait_ms": self.max_wait_ms, "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes, "isolation_level": 1 if self.read_committed else 0,
            "session_id": 0 if session is None else session.session_id,
            "session_epoch": -1 if session is None else session.epoch,
            "topics": [{"topic": t, "topic_id": cluster.topic_id(t), "partitions": ps}
                       for t, ps in topics.items()],
            "forgotten_topics_data": forgotten, "rack_id": self.client_rack,
        }

    def close_sessions(self):
        """Close every fetch session (a Fetch with epoch -1 and no
        partitions, as Kafka's consumer does on close) on the nodes that can
        take a request now; returns the number of close requests sent."""
        sent = 0
        sessions, self.sessions = self.sessions, {}
        for node, handler in sessions.items():
            request = handler.close_request()
            if request is None or handler.version is None or not self.client.is_ready(node):
                continue
            session_id, epoch = request
            body = self._request(handler.version, {}, self.metadata.cluster)
            body.update(session_id=session_id, session_epoch=epoch, max_wait_ms=0, min_bytes=0)
            try:
                # Behind a fetch in flight the answer may be a long poll
                # away: only the others are waited for (``closing``).
                counted = node not in self.in_flight_nodes
                self.client.send(node, _FETCH, body,
                                 lambda resp, c=counted: self._session_closed(resp, c),
                                 version=handler.version)
                sent += 1
                self.closing += counted
            except errors.KChannelError as exc:
                log.debug("Could not close fetch session %s on node %s: %s", session_id, node,
                          exc)
        return sent

    def _session_closed(self, resp, counted):
        self.closing -= counted
        if resp.exception is None and resp.body.get("error_code"):
            log.debug("Closing the fetch session on node %s: %s", resp.node_id,
                      exception_for(resp.body["error_code"]).name)

    def _handle(self, resp, positions, node, session=None):
        self.in_flight_nodes.discard(node)
        handler = self.sessions.get(node) if session is not None else None
        if handler is not None and handler.session_id != session.session_id:
            handler = None      # closed (close_sessions) since the request
        if resp.exception is not None:
            log.debug("Fetch request to node %s failed: %s", node, resp.exception)
            if handler is not None:
                handler.handle_error()
            self.metadata.request_update()
            return
        body = resp.body
        sensors = self.sensors
        if sensors is not None:
            now = resp.receive_time_ms
            sensors.fetch_latency.record(now - resp.request_time_ms, now)
            sensors.fetch_throttle_time.record(body.get("throttle_time_ms") or 0, now)
            size = 0
        top = body.get("error_code", 0)
        if handler is not None and not handler.handle_response(body, session) and \
                top == Errors.FETCH_SESSION_TOPIC_ID_ERROR:
            self.metadata.request_update()
        if top:
            if top in _SESSION_ERRORS:
                return      # the next request is a full one (handle_response)
            log.info("Fetch request to node %s failed: %s", node, exception_for(top))
            self.errors.append(exception_for(top))
            return
        names = self.metadata.cluster.topic_names
        for topic in body["responses"]:
            name = topic.get("topic")
            if not name:
                name = names.get(topic.get("topic_id"))
                if name is None:
                    self.metadata.request_update()
                    continue
            for p in topic["partitions"]:
                tp = TopicPartition(name, p["partition_index"])
                requested = positions.get(tp)
                st = self.subscriptions.assignment.get(tp)
                if requested is None or st is None or st.position != requested:
                    continue  # reassigned or sought since the request
                code = p["error_code"]
                if code == 0:
                    st.high_watermark = p["high_watermark"]
                    st.last_stable_offset = p.get("last_stable_offset", -1)
                    st.log_start_offset = p.get("log_start_offset", -1)
                    records = p.get("records")
                    if sensors is not None and records:
                        size += len(records)
                    if records:
                        self.completed.append(_CompletedFetch(
                            tp, requested, records, p.get("aborted_transactions"),
                            self.check_crcs, self.read_committed, self.tuple_headers))
                elif code == Errors.OFFSET_OUT_OF_RANGE:
                    if self.subscriptions.default_reset == "none":
                        self.errors.append(errors.KafkaError(
                            Errors.OFFSET_OUT_OF_RANGE, "OFFSET_OUT_OF_RANGE",
                            f"Fetch position FetchPosition{{offset={requested}}} is out of "
                            f"range for partition {tp.topic}-{tp.partition}"))
                    else:
                        log.info("Fetch position %s is out of range for partition %s, "
                                 "resetting offset", requested, tp)
                        self.subscriptions.request_reset(tp)
                elif code in INVALID_METADATA_ERRORS or (
                        code in RETRIABLE_ERRORS and code != Errors.CORRUPT_MESSAGE):
                    # A leader moved or is catching up (UNKNOWN_LEADER_EPOCH,
                    # OFFSET_NOT_AVAILABLE): fetch again after a metadata
                    # refresh, as Kafka's FetchCollector does.
                    self.metadata.request_update()
                else:
                    self.errors.append(exception_for(code))
        if sensors is not None:
            sensors.bytes_fetched.record(size, now)

    # -- records ------------------------------------------------------------------
    def fetched_records(self):
        """Up to ``max.poll.records`` records from the buffered fetches;
        advances the positions past what is returned."""
        out = []
        try:
            return self._fetched_records(out)
        finally:
            # Before anyone else sees them: the records that read_into left
            # untracked by the garbage collector (see _drain).
            track_records(out)

    def _fetched_records(self, out):
        budget = self.max_poll_records
        while budget > 0 and self.completed:
            cf = self.completed[0]
            st = self.subscriptions.assignment.get(cf.tp)
            if st is None or cf.done:
                self.completed.popleft()
                continue
            try:
                n = self._drain(cf, st, out, budget)
            except errors.CorruptRecordError as exc:
                if not out:
                    raise
                # The records before the corrupt ones are handed out (their
                # positions are already past them) and the error is raised
                # by the next poll, as Kafka's consumer does.
                self.errors.append(exc)
                break
            budget -= n
            if self.sensors is not None and st.high_watermark is not None:
                # Kafka's records-lag: the high watermark (the last stable
                # offset under read_committed) minus the position reached.
                end = st.last_stable_offset if self.read_committed and \
                    st.last_stable_offset is not None and st.last_stable_offset >= 0 \
                    else st.high_watermark
                self.sensors.records_lag.record(end - st.position)
            if cf.done:
                self.completed.popleft()
        if out and self.sensors is not None:
            self.sensors.records_consumed.record(len(out))
        return out

    def _drain(self, cf, st, out, budget):
        taken = 0
        kd, vd = self.key_deserializer, self.value_deserializer
        decode_keys = kd is not None or self.key_type.endswith("StringDeserializer")
        decode_values = vd is not None or self.value_type.endswith("StringDeserializer")
        batches = cf.batches
        while taken < budget:
            start = len(out)
            reader = cf.reader
            if reader is None:
                # Decoded now, as many as this poll hands out: the records
                # die with the application's use of them instead of a whole
                # batch outliving polls (the garbage collector's cost).
                # Straight into the poll's list, untracked until the poll
                # ends (fetched_records): with Kafka's default 16 KiB
                # batches a poll gathers dozens of batches, and a collection
                # set off while decoding a later one would otherwise find
                # the earlier ones' records alive and promote them.
                try:
                    n = batches.read_into(out, budget - taken, st.position)
                finally:
                    st.position = batches.position
                special = batches.special
                if special is not None:
                    try:
                        batch = batch_at(batches.buffer, *special)
                    except errors.CorruptRecordError:
                        cf.done = True      # as iter_batches: the walk ends there
                        raise
                    self._open_batch(cf, st, batch)
                elif not n:
                    # The end of the fetch: as Kafka's CompletedFetch, the
                    # position moves to the last batch's next offset (past
                    # records compaction removed from its end, which a v2
                    # batch's last offset still counts), not just past its
                    # last record, else the next fetch reads that batch again.
                    if cf.special_end > st.position:
                        st.position = cf.special_end
                    cf.done = True
                    break
            elif not reader.remaining:
                cf.reader = None
                continue
            else:
                position = st.position
                try:
                    n = reader.read_into(out, budget - taken)
                except errors.CorruptRecordError:
                    # Done with this batch: the next poll goes on after it.
                    cf.reader = None
                    raise
                if not n:
                    continue
                # Records before the position (a seek into the middle of a
                # batch): offsets grow within a batch, so they are a prefix.
                if out[start].offset < position:
                    i = start
                    end = start + n
                    while i < end and out[i].offset < position:
                        i += 1
                    del out[start:i]
                    n = end - i
                    if not n:
                        continue
                st.position = out[-1].offset + 1
            if n and (decode_keys or decode_values):
                topic, partition = cf.tp
                for j in range(start, start + n):
                    # Unpacking names the fields at no cost (it is faster
                    # than indexing them one by one).
                    _t, _p, offset, timestamp, ttype, key, value, headers, _e = out[j]
                    if decode_keys:
                        key = deserializer(key, self.key_type, kd)
                    if decode_values:
                        value = deserializer(value, self.value_type, vd)
                    out[j] = _new_record(ConsumerRecord, (topic, partition, offset, timestamp,
                                                          ttype, key, value, headers, None))
            taken += n
        return taken

    def _open_batch(self, cf, st, batch):
        """Make the reader of ``batch`` (one that ``cf.batches`` left to
        this: legacy, compressed, or transactional under read_committed)
        current in ``cf``, unless the batch is to be skipped."""
        tp = cf.tp
        if self.check_crcs:
            batch.ensure_valid()
        next_offset = batch.next_offset
        cf.special_end = max(cf.special_end, next_offset)
        if next_offset <= st.position:
            return
        if self.read_committed and batch.producer_id >= 0:
            while cf.aborted and cf.aborted[0]["first_offset"] <= batch.last_offset:
                cf.aborted_pids.add(cf.aborted.pop(0)["producer_id"])
            if batch.is_control:
                # An ABORT marker (control key type 0) ends the aborted transaction.
                recs = batch.records()
                key = recs[0].key if recs else None
                if key is not None and len(key) >= 4 and \
                        int.from_bytes(key[2:4], "big") == 0:
                    cf.aborted_pids.discard(batch.producer_id)
                st.position = max(st.position, batch.next_offset)
                return
            if batch.is_transactional and batch.producer_id in cf.aborted_pids:
                st.position = max(st.position, batch.next_offset)
                return
        if batch.is_control:
            st.position = max(st.position, next_offset)
            return
        reader = batch.reader(ConsumerRecord, tp.topic, tp.partition, None,
                              self.tuple_headers)
        if not reader.remaining:
            reader.read(0)  # checks that the batch holds nothing more
            st.position = max(st.position, next_offset)
            return
        cf.reader = reader

    def clear_buffered(self, tps=None):
        if tps is None:
            self.completed.clear()
        else:
            tps = set(tps)
            self.completed = collections.deque(c for c in self.completed if c.tp not in tps)

    def has_buffered(self):
        return any(not c.done for c in self.completed)

    def raise_errors(self):
        if self.errors:
            exc = self.errors.pop(0)
            raise exc
