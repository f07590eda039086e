"""Incremental fetch sessions (KIP-227, issue 25 item 4) against Apache
Kafka: the Fetch requests the consumer sends and what the broker answers
are recorded (the consumer's own client, observed, not replaced): a full
request opens a session, incremental ones follow with the epoch going up
and unchanged partitions left out, the broker accepts them; a session
error falls back to a full fetch and records keep flowing; close and
unassign close the session (epoch -1).  And the handler's books alone."""
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.client.metadata import TopicPartition
from kchannel.consumer.fetch_session import FetchSessionHandler
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from tests.fixtures.records import create_topic, topic_name

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
IDS = {"a": 1, "b": 2}


def test_handler_full_then_incremental_then_fallback():
    h = FetchSessionHandler(1)
    full = h.build({A0: 0, A1: 5}, 13, IDS)
    assert (full.full, full.session_id, full.epoch, full.to_send) == (True, 0, 0, {A0: 0, A1: 5})
    assert h.handle_response({"error_code": 0, "session_id": 77}, full)
    inc = h.build({A0: 0, A1: 9, B0: 0}, 13, IDS)
    # A0 unchanged: left out; A1 moved on, B0 joined
    assert (inc.full, inc.session_id, inc.epoch) == (False, 77, 1)
    assert inc.to_send == {A1: 9, B0: 0} and inc.to_forget == []
    assert h.handle_response({"error_code": 0, "session_id": 77}, inc)
    gone = h.build({A1: 9}, 13, IDS)
    assert (gone.epoch, gone.to_send, gone.to_forget) == (2, {}, [A0, B0])
    assert gone.topic_ids == {"a": 1, "b": 2}
    assert not h.handle_response({"error_code": Errors.INVALID_FETCH_SESSION_EPOCH,
                                  "session_id": 0}, gone)
    again = h.build({A1: 9}, 13, IDS)
    # full, closing session 77 on the broker and opening another
    assert (again.full, again.session_id, again.epoch) == (True, 77, 0)
    assert not h.handle_response({"error_code": Errors.FETCH_SESSION_ID_NOT_FOUND}, again)
    assert h.build({A1: 9}, 13, IDS).session_id == 0


def test_handler_without_sessions_and_topic_id_changes():
    h = FetchSessionHandler(1)
    req = h.build({A0: 0}, 13, IDS)
    assert h.handle_response({"error_code": 0, "session_id": 0}, req)
    # a broker keeping no session: full requests asking for one
    assert (h.build({A0: 3}, 13, IDS).full, h.session_id) == (True, 0)
    h.handle_response({"error_code": 0, "session_id": 5}, h.build({A0: 3}, 13, IDS))
    assert not h.build({A0: 3}, 13, IDS).full
    # a re-created topic (new id): start over
    assert h.build({A0: 3}, 13, {"a": 9}).full
    h.handle_response({"error_code": 0, "session_id": 5}, h.build({A0: 3}, 13, {"a": 9}))
    h.handle_error()
    assert h.build({A0: 3}, 13, {"a": 9}).full
    assert h.close_request() == (5, -1) and h.close_request() is None


class _Recorder:
    """Records the Fetch requests a consumer's client sends and the
    answers, then hands them on."""

    def __init__(self, consumer):
        self.client = consumer._client
        self.send = self.client.send
        self.exchanges = []       # [request body, response body or None]
        self.client.send = self._send

    def _send(self, node, api_key, body, callback, *args, **kwargs):
        if api_key != ApiKey.FETCH:
            return self.send(node, api_key, body, callback, *args, **kwargs)
        entry = [dict(body), None]
        self.exchanges.append(entry)

        def done(resp):
            if resp.exception is None:
                entry[1] = resp.body

            callback(resp)
        return self.send(node, api_key, body, done, *args, **kwargs)


def _partitions(body):
    return sum(len(t["partitions"]) for t in body["topics"])


def _read(consumer, n, timeout=30, until=lambda: True):
    got = []
    deadline = time.time() + timeout
    while (len(got) < n or not until()) and time.time() < deadline:
        got.extend(consumer.poll(0.2))
    return got


def _answered_full_after(rec, mark):
    """A session error was answered after ``mark`` and then a full
    request that opened a new session."""
    def check():
        after = rec.exchanges[mark:]
        err = next((i for i, (b, r) in enumerate(after) if r and r["error_code"]), None)
        return err is not None and any(b["session_epoch"] == 0 and r and r["session_id"]
                                       for b, r in after[err:])
    return check


def _produce(bootstrap, topic, start, n, partitions=3):
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(start, start + n):
            p.send(topic, value=b"%d" % i, partition=i % partitions)
        p.flush(30)


@pytest.mark.kafka
def test_fetch_sessions_on_apache_kafka(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("sessions"), partitions=3)
    _produce(plain, topic, 0, 30)
    tps = [TopicPartition(topic, p) for p in range(3)]
    c = Consumer({"bootstrap.servers": plain, "auto.offset.reset": "earliest",
                  "fetch.max.wait.ms": 100})
    rec = _Recorder(c)
    try:
        c.assign(tps)
        got = _read(c, 30)
        # idle polls: incremental requests with nothing changed
        deadline = time.time() + 30
        while sum(1 for b, r in rec.exchanges if b["session_epoch"] > 0 and r) < 4 and \
                time.time() < deadline:
            got.extend(c.poll(0.2))
        first_req, first_resp = rec.exchanges[0]
        assert (first_req["session_id"], first_req["session_epoch"]) == (0, 0)
        assert _partitions(first_req) == 3
        session_id = first_resp["session_id"]
        assert session_id != 0 and first_resp["error_code"] == 0
        answered = [(b, r) for b, r in rec.exchanges if r is not None]
        incremental = [(b, r) for b, r in answered if b["session_epoch"] > 0]
        assert len(incremental) >= 4
        assert [b["session_epoch"] for b, _ in incremental] == \
            list(range(1, len(incremental) + 1))
        assert all(b["session_id"] == session_id and r["error_code"] == 0
                   and r["session_id"] == session_id for b, r in incremental)
        # unchanged partitions are left out: the idle ones name none
        assert any(_partitions(b) == 0 for b, _ in incremental)
        assert any(_partitions(b) < 3 for b, _ in incremental)

        # a session error (a bogus epoch): a full fetch, then a new session
        handler = c._fetcher.sessions[next(iter(c._fetcher.sessions))]
        handler.epoch += 1000
        mark = len(rec.exchanges)
        _produce(plain, topic, 30, 30)
        got.extend(_read(c, 30, until=_answered_full_after(rec, mark)))
        after = rec.exchanges[mark:]
        errors = [r["error_code"] for b, r in after if r is not None and r["error_code"]]
        assert errors[:1] == [Errors.INVALID_FETCH_SESSION_EPOCH]
        fallback = next(b for b, r in after if b["session_epoch"] == 0)
        assert fallback["session_id"] == session_id and _partitions(fallback) == 3
        # the session was evicted on the broker: FETCH_SESSION_ID_NOT_FOUND
        handler = c._fetcher.sessions[next(iter(c._fetcher.sessions))]
        handler.session_id = 0x7ABCDEF
        mark = len(rec.exchanges)
        _produce(plain, topic, 60, 30)
        got.extend(_read(c, 30, until=_answered_full_after(rec, mark)))
        after = rec.exchanges[mark:]
        assert [r["error_code"] for b, r in after if r is not None and r["error_code"]][:1] == \
            [Errors.FETCH_SESSION_ID_NOT_FOUND]
        assert any(b["session_id"] == 0 and b["session_epoch"] == 0 for b, _ in after)
        by_partition = {}
        for r in got:
            by_partition.setdefault(r.partition, []).append(int(r.value))
        assert sorted(v for vs in by_partition.values() for v in vs) == list(range(90))
        assert all(vs == sorted(vs) for vs in by_partition.values())

        # unassign closes the session: epoch -1, no partitions, accepted
        live = c._fetcher.sessions[next(iter(c._fetcher.sessions))].session_id
        assert live != 0
        c.assign([])
        closing = [e for e in rec.exchanges if e[0]["session_epoch"] == -1]
        assert [(b["session_id"], _partitions(b)) for b, _ in closing] == [(live, 0)]
        deadline = time.time() + 30
        while closing[0][1] is None and time.time() < deadline:
            c._client.poll(100)
        assert closing[0][1] is not None and closing[0][1]["error_code"] == 0
        # and close() closes the one opened after
        c.assign(tps[:1])
        c.seek(tps[0], 0)
        assert _read(c, 30)
        live = c._fetcher.sessions[next(iter(c._fetcher.sessions))].session_id
        assert live != 0
    finally:
        c.close()
    closing = [b for b, r in rec.exchanges if b["session_epoch"] == -1]
    assert [b["session_id"] for b in closing][-1] == live


def test_fetch_sessions_on_tansu(tansu):
    """Another broker's answer to a full Fetch (Tansu's): with session id 0
    (no session kept) the consumer stays on full fetches; with one, it goes
    incremental.  Either way records flow."""
    topic = create_topic(tansu.bootstrap, topic_name("sessions"), partitions=2)
    _produce(tansu.bootstrap, topic, 0, 20, partitions=2)
    c = Consumer({"bootstrap.servers": tansu.bootstrap, "auto.offset.reset": "earliest",
                  "fetch.max.wait.ms": 100})
    rec = _Recorder(c)
    try:
        c.assign([TopicPartition(topic, p) for p in range(2)])
        got = _read(c, 20, until=lambda: sum(1 for _, r in rec.exchanges if r) >= 3)
    finally:
        c.close()
    assert sorted(int(r.value) for r in got) == list(range(20))
    answered = [(b, r) for b, r in rec.exchanges if r is not None]
    assert all(r["error_code"] == 0 for _, r in answered)
    for (b, r), (nxt, _) in zip(answered, rec.exchanges[1:]):
        if nxt["session_epoch"] == -1:
            break
        if r["session_id"] == 0:
            assert (nxt["session_id"], nxt["session_epoch"]) == (0, 0)
        else:
            assert (nxt["session_id"], nxt["session_epoch"]) == \
                (r["session_id"], b["session_epoch"] + 1)
