"""librdkafka-style statistics (``statistics.interval.ms`` + ``stats_cb``)
of a Producer or Consumer: what their poll()/flush() call (see
:class:`kchannel.metrics.StatisticsCallback`).

Only what kchannel tracks is there, under librdkafka's field names; a field
librdkafka has and kchannel does not track is left out, never a made-up 0.

``brokers`` {``host:port/nodeid``: ...} per node the client connected to:
``name``, ``nodeid``, ``nodename``, ``state`` (kchannel's connection state:
``CONNECTING``, ``READY``, ``DISCONNECTED``, ``AUTHENTICATION_FAILED``),
``stateage`` (µs since it changed), ``waitresp_cnt`` (requests awaiting
their response), ``tx``/``txbytes`` (requests sent and their bytes, size
prefix included), ``rx``/``rxbytes`` (responses), ``req_timeouts``
(requests that timed out), ``connects``/``disconnects`` (connections
started and lost) and ``rtt`` (µs: ``min``, ``max``, ``avg``, ``sum``,
``cnt``, ``stddev``, ``p50``, ``p75``, ``p90``, ``p95``, ``p99``,
``p99_99`` of the responses since the previous statistics, at most the
latest 1024; only ``cnt`` 0 when none came).  Not tracked: ``outbuf_cnt``,
``waitresp_msg_cnt``, ``int_latency``, ``throttle``, ``source``.

``topics`` {topic: {``topic``, ``partitions`` {id: ...}}} per topic in the
client's metadata, each partition with ``partition`` and ``leader``
(-1: none); a producer's with ``msgq_cnt`` (records waiting in the
accumulator, not yet sent); a consumer's assigned partitions with
``app_offset`` and ``stored_offset`` (the position: the offset after the
last record handed to the application, which auto-commit commits),
``hi_offset``, ``ls_offset``, ``lo_offset`` (from the last fetch; -1
before one) and ``consumer_lag_stored`` (``hi_offset``, or ``ls_offset``
under read_committed, minus ``stored_offset``).  Not tracked:
``committed_offset`` and ``consumer_lag`` (the consumer does not keep the
offsets it committed), per-partition ``txmsgs``/``rxmsgs``, ``fetch_state``.
"""
import math
import time

from kchannel.metrics import StatisticsCallback, librdkafka_statistics

__all__ = ["client_statistics"]


def _now_ms():
    return int(time.time() * 1000)


def _percentile(ordered, q):
    """Nearest-rank percentile of the sorted list ``ordered``."""
    return ordered[max(0, math.ceil(q / 100.0 * len(ordered)) - 1)]


def rtt_window(samples_ms):
    """librdkafka's rtt object (µs) of the round trips ``samples_ms``."""
    if not samples_ms:
        return {"cnt": 0}
    us = sorted(int(s * 1000) for s in samples_ms)
    n = len(us)
    total = sum(us)
    mean = total / n
    return {"min": us[0], "max": us[-1], "avg": int(mean), "sum": total, "cnt": n,
            "stddev": int(math.sqrt(sum((v - mean) ** 2 for v in us) / n)),
            "p50": _percentile(us, 50), "p75": _percentile(us, 75),
            "p90": _percentile(us, 90), "p95": _percentile(us, 95),
            "p99": _percentile(us, 99), "p99_99": _percentile(us, 99.99)}


class _Brokers:
    """The ``brokers`` object; remembers each node's response count at the
    previous statistics so ``rtt`` covers the responses since."""

    def __init__(self):
        self._rx_seen = {}

    def describe(self, net):
        now = net.time()
        out = {}
        for node_id, node in sorted(net._nodes.items(), key=lambda kv: str(kv[0])):
            st = node.stats
            fresh = st.rx - self._rx_seen.get(node_id, 0)
            self._rx_seen[node_id] = st.rx
            rtts = list(st.rtts)[-fresh:] if fresh > 0 else []
            name = f"{node.host}:{node.port}/{node_id}"
            out[name] = {
                "name": name, "nodeid": node_id, "nodename": f"{node.host}:{node.port}",
                "state": node.state.name, "stateage": max(0, int(now - st.state_ms)) * 1000,
                "waitresp_cnt": len(node.in_flight),
                "tx": st.tx, "txbytes": st.txbytes, "rx": st.rx, "rxbytes": st.rxbytes,
                "req_timeouts": st.req_timeouts, "connects": st.connects,
                "disconnects": st.disconnects, "rtt": rtt_window(rtts)}
        return out


def _topics(client, client_type):
    cluster = client.metadata.cluster
    queued = {}
    assigned = {}
    read_committed = False
    if client_type == "producer":
        # (the sender may change the queues meanwhile: copies are read)
        for tp, dq in list(client.accumulator.batches.items()):
            queued[tp] = sum(b.record_count for b in list(dq))
    else:
        assigned = dict(client.subscriptions.assignment)
        read_committed = client._fetcher.read_committed
    out = {}
    for topic in sorted(cluster.topics() | {tp.topic for tp in assigned}):
        parts = {}
        for p in cluster.partitions_for_topic(topic):
            leader = p.leader if p.leader is not None and p.leader >= 0 else -1
            parts[p.partition] = {"partition": p.partition, "leader": leader}
        for tp, dq_count in queued.items():
            if tp.topic == topic:
                parts.setdefault(tp.partition, {"partition": tp.partition, "leader": -1})[
                    "msgq_cnt"] = dq_count
        for tp, st in assigned.items():
            if tp.topic != topic:
                continue
            entry = parts.setdefault(tp.partition, {"partition": tp.partition, "leader": -1})
            position = -1 if st.position is None else st.position
            entry.update({"app_offset": position, "stored_offset": position,
                          "hi_offset": _offset(st.high_watermark),
                          "ls_offset": _offset(st.last_stable_offset),
                          "lo_offset": _offset(st.log_start_offset)})
            end = entry["ls_offset"] if read_committed else entry["hi_offset"]
            if end >= 0 and position >= 0:
                entry["consumer_lag_stored"] = max(0, end - position)
        if client_type == "producer":
            for entry in parts.values():
                entry.setdefault("msgq_cnt", 0)
        out[topic] = {"topic": topic,
                      "partitions": {str(k): parts[k] for k in sorted(parts)}}
    return out


def _offset(value):
    return -1 if value is None or value < 0 else value


def client_statistics(client, client_type, values, extras):
    """``client``: a Producer or Consumer (``_client`` its ClusterClient,
    ``metadata``, ``client_id``, ``metrics()``); ``values``/``extras``:
    its parsed configs and callables."""
    start = _now_ms()
    brokers = _Brokers()

    def describe(now_ms):
        net = client._client.client
        # Records not yet acknowledged (librdkafka's queue count).
        msg_cnt = sum(b.record_count for b in list(client.accumulator.incomplete)) \
            if client_type == "producer" else 0
        stats = librdkafka_statistics(client_type, client.client_id, client.metrics(), now_ms,
                                      start, msg_cnt)
        stats["brokers"] = brokers.describe(net)
        stats["topics"] = _topics(client, client_type)
        return stats
    return StatisticsCallback(values.get("statistics.interval.ms", 0), extras.get("stats_cb"),
                              describe, _now_ms)
