"""The Selector's fused per-poll and per-send stats (one Avg and one
CumulativeSumCount feeding rate/total views; the reads of a poll recorded
once, by record_poll, with the sends it completed) measure exactly what one
stat per metric, each recorded with every value (Kafka's layout), measures."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel.metrics import (Avg, CumulativeCount, CumulativeSum, Max, MetricConfig, MetricName,
                              Metrics, Rate)
from kchannel.network.selector import SelectorMetrics

G = "selector-metrics"


def _reference(metrics):
    """Kafka's layout: every metric its own stat, recorded per value."""
    c = metrics.config

    def sensor(name, stats):
        s = metrics.sensor("ref:" + name)
        for metric, stat in stats:
            s.add(MetricName.of(metric, G + "-ref"), stat)
        return s

    select = sensor("select", [("select-rate", Rate(c, count=True)),
                               ("select-total", CumulativeCount()),
                               ("io-wait-time-ns-avg", Avg(c)),
                               ("io-wait-ratio", Rate(c, per_ns=True)),
                               ("io-wait-time-ns-total", CumulativeSum()),
                               ("io-waittime-total", CumulativeSum())])
    io = sensor("io", [("io-time-ns-avg", Avg(c)), ("io-ratio", Rate(c, per_ns=True)),
                       ("io-time-ns-total", CumulativeSum()), ("iotime-total", CumulativeSum())])
    sent = sensor("sent", [("outgoing-byte-rate", Rate(c)), ("outgoing-byte-total", CumulativeSum()),
                           ("request-rate", Rate(c, count=True)),
                           ("request-total", CumulativeCount()),
                           ("request-size-avg", Avg(c)), ("request-size-max", Max(c))])
    received = sensor("in", [("incoming-byte-rate", Rate(c)),
                             ("incoming-byte-total", CumulativeSum())])
    responses = sensor("resp", [("response-rate", Rate(c, count=True)),
                                ("response-total", CumulativeCount())])
    network_io = sensor("netio", [("network-io-rate", Rate(c, count=True)),
                                  ("network-io-total", CumulativeCount())])
    return select, io, sent, received, responses, network_io


NAMES = ["select-rate", "select-total", "io-wait-time-ns-avg", "io-wait-ratio",
         "io-wait-time-ns-total", "io-waittime-total", "io-time-ns-avg", "io-ratio",
         "io-time-ns-total", "iotime-total", "outgoing-byte-rate", "outgoing-byte-total",
         "request-rate", "request-total", "request-size-avg", "request-size-max",
         "incoming-byte-rate", "incoming-byte-total", "response-rate", "response-total",
         "network-io-rate", "network-io-total"]

steps = st.lists(st.tuples(
    st.sampled_from([0, 0, 1, 3, 7, 40]),                       # clock advance, ms
    st.integers(0, 10**7), st.integers(0, 10**7),               # select ns, io ns
    st.lists(st.integers(0, 10**6), max_size=5),                # sizes sent
    st.lists(st.integers(0, 10**5), max_size=3),                # bytes read per channel
    st.integers(0, 4),                                          # receives completed
    st.booleans()),                                             # sends folded into the poll
    max_size=30)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 5, 30000]), st.integers(1, 3), steps)
def test_fused_selector_stats_measure_as_separate_stats(window, samples, polls):
    clock = [1000]
    metrics = Metrics(MetricConfig(samples=samples, time_window_ms=window),
                      time=lambda: clock[0])
    fused = SelectorMetrics(metrics)
    select, io, sent, received, responses, network_io = _reference(metrics)
    for dt, select_ns, io_ns, sizes, reads, receives, fold in polls:
        clock[0] += dt
        now = clock[0]
        if sizes:
            if not fold:
                fused.record_sends(sizes, now)
            for size in sizes:
                sent.record(size, now)
                network_io.record(1.0, now)
        # Kafka records each channel's read as it happens; the Selector
        # sums a poll's reads (all at the poll's ``now``) into one record.
        # The sends a poll completed are recorded by its record_poll
        # (``sent``); those written outside a poll by record_sends.
        fused.record_poll(select_ns, io_ns, now, sum(reads), receives,
                          sizes if fold else None)
        select.record(select_ns, now)
        io.record(io_ns, now)
        for nbytes in reads:
            if nbytes:
                received.record(nbytes, now)
        for _ in range(receives):
            responses.record(1.0, now)
            network_io.record(1.0, now)
    clock[0] += 1
    for name in NAMES:
        got = metrics.metric(name, group=G)
        want = metrics.metric(name, group=G + "-ref")
        assert got == want or (math.isnan(got) and math.isnan(want)), (name, got, want)


def test_views_are_removed_with_their_sensor():
    metrics = Metrics()
    SelectorMetrics(metrics)
    assert metrics.metric("request-rate", group=G) == 0.0
    for name in [n for n in list(metrics._sensors) if n.endswith(":requests-sent")]:
        metrics.remove_sensor(name)
    assert metrics.metric("request-rate", group=G) is None
    assert metrics.metric("request-size-max", group=G) is None
