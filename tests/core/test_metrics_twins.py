"""The metrics twin (``kchannel._metrics_py`` and its compiled
``kchannel._cmetrics``): every stat measures the same values on both twins
for the same records at the same times, windows expire as Kafka's
SampledStat's, ``record_many`` leaves each stat as recording the values one
by one does, and a sensor records into its stats and then its parents."""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.metrics import MetricConfig, MetricName, Metrics

KINDS = ["rate", "count_rate", "ns_rate", "avg", "max", "sum", "sum_count", "count", "value"]


def _make(m, kind, config):
    return {"rate": lambda: m.Rate(config),
            "count_rate": lambda: m.Rate(config, count=True),
            "ns_rate": lambda: m.Rate(config, per_ns=True),
            "avg": lambda: m.Avg(config),
            "max": lambda: m.Max(config),
            "sum": lambda: m.CumulativeSum(),
            "sum_count": lambda: m.CumulativeSumCount(),
            "count": lambda: m.CumulativeCount(),
            "value": lambda: m.Value()}[kind]()


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float)
                      and math.isnan(a) and math.isnan(b))


def _held(stat):
    """Everything a stat holds, as floats (the pure twin keeps the ints it
    is given where the compiled one has C doubles)."""
    samples = [(float(s.start), float(s.value), int(s.count))
               for s in getattr(stat, "_samples", ())]
    return (samples, float(getattr(stat, "total", 0.0)),
            float(getattr(stat, "count", 0) or 0), float(getattr(stat, "value", 0.0)))


def _states_equal(a, b):
    sa, sb = _held(a), _held(b)
    flat_a = [x for s in sa[0] for x in s] + list(sa[1:])
    flat_b = [x for s in sb[0] for x in s] + list(sb[1:])
    return len(flat_a) == len(flat_b) and all(_same(x, y) for x, y in zip(flat_a, flat_b))


values = st.one_of(st.integers(-10**6, 10**6), st.integers(0, 10**6).map(float),
                   st.floats(allow_nan=True, allow_infinity=True, width=32))
steps = st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 5, 40]),      # clock advance, ms
                           st.lists(values, min_size=0, max_size=4),  # values at that time
                           st.booleans()),                            # as one record_many
                 max_size=30)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(KINDS), st.sampled_from([1, 5, 30000]), st.integers(1, 3), steps)
def test_each_stat_measures_the_same_on_both_twins(impl_pair, kind, window, samples, script):
    pure, compiled = (i.metrics for i in impl_pair)
    config = MetricConfig(samples=samples, time_window_ms=window)
    a, b = _make(pure, kind, config), _make(compiled, kind, config)
    now = 1000
    for dt, vals, many in script:
        now += dt
        if many:
            a.record_many(vals, now)
            b.record_many(vals, now)
        else:
            for v in vals:
                a.record(v, now)
                b.record(v, now)
        assert _states_equal(a, b), (kind, _held(a), _held(b))
        for later in (0, 1, window - 1, window, samples * window, samples * window + 7):
            x, y = a.measure(now + later), b.measure(now + later)
            assert _same(float(x), float(y)), (kind, later, x, y)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(window=st.sampled_from([1, 5, 30000]), samples=st.integers(1, 3), script=steps)
def test_record_many_equals_recording_one_by_one(impl, kind, window, samples, script):
    m = impl.metrics
    config = MetricConfig(samples=samples, time_window_ms=window)
    one, many = _make(m, kind, config), _make(m, kind, config)
    now = 1000
    for dt, vals, _ in script:
        now += dt
        for v in vals:
            one.record(v, now)
        many.record_many(vals, now)
        assert _states_equal(one, many), (kind, _held(one), _held(many))
    assert _same(float(one.measure(now + 1)), float(many.measure(now + 1)))


def test_windows_expire_as_kafkas_sampled_stat(impl):
    """2 windows of 1000 ms: a value counts while its window started less
    than 2000 ms before the measurement; the third window drops the first."""
    m = impl.metrics
    config = MetricConfig(samples=2, time_window_ms=1000)
    avg, mx, rate, count = m.Avg(config), m.Max(config), m.Rate(config), \
        m.Rate(config, count=True)
    for stat in (avg, mx, rate, count):
        stat.record(10, 0)
        stat.record(30, 999)        # same window (opened at 0)
        stat.record(20, 1000)       # a second window
    assert [(s.start, s.value, s.count) for s in avg._samples] == [(0, 40, 2), (1000, 20, 1)]
    assert avg.measure(1999) == pytest.approx(20.0)
    assert mx.measure(1999) == 30
    # 60 over 1999 ms (two windows: no padding)
    assert rate.measure(1999) == pytest.approx(60 / 1.999)
    assert count.measure(1999) == pytest.approx(3 / 1.999)
    # at 2000 the first window is out: only the 20 at 1000 is left, over
    # the 1000 ms since its window opened (one full window: no padding)
    assert avg.measure(2000) == 20
    assert mx.measure(2000) == 20
    assert rate.measure(2000) == pytest.approx(20 / 1.0)
    # a young window alone is padded to samples - 1 full windows (Kafka's
    # Rate): 20 over 500 + 1000 ms
    young = m.Rate(config)
    young.record(20, 1000)
    assert young.measure(1500) == pytest.approx(20 / 1.5)
    # every window out
    assert math.isnan(avg.measure(3000)) and math.isnan(mx.measure(3000))
    assert rate.measure(3000) == 0.0
    # a third window replaces the oldest
    avg.record(5, 2500)
    assert [(s.start, s.value, s.count) for s in avg._samples] == [(1000, 20, 1), (2500, 5, 1)]
    assert avg.measure(2500) == pytest.approx(12.5)


def test_max_of_negative_values_and_nan(impl):
    m = impl.metrics
    mx = m.Max(MetricConfig(samples=2, time_window_ms=1000))
    assert math.isnan(mx.measure(0))
    mx.record(-5, 0)
    mx.record(float("nan"), 1)     # never greater: as max(), the maximum stays
    assert mx.measure(2) == -5


def test_sensor_records_its_stats_then_its_parents(impl):
    m = impl.metrics
    metrics = Metrics(time=lambda: 5000)
    parent = metrics.sensor("parent")
    assert isinstance(parent, m.Sensor) or not impl.compiled
    parent.add_meter("g", "all", "events", count=True)
    child = metrics.sensor("child", parent)
    child.add(MetricName.of("child-avg", "g"), m.Avg(metrics.config))
    child.add(MetricName.of("child-max", "g"), m.Max(metrics.config))
    grandchild = metrics.sensor("grandchild", child)
    seen = []

    class Custom:                   # any object with record(): no Stat
        def record(self, value, now):
            seen.append((value, now))

        def measure(self, now):
            return float(len(seen))

    child.add(MetricName.of("custom", "g"), Custom())
    child.record(10)
    child.record(20, 6000)
    grandchild.record_many([30, 40], 7000)
    parent.record(1.0)
    assert metrics.metric("child-avg") == 25
    assert metrics.metric("child-max") == 40
    assert metrics.metric("all-total") == 5
    assert seen == [(10, 5000), (20, 6000), (30, 7000), (40, 7000)]
    # an existing sensor is returned as it is (Kafka: parents are set once)
    assert metrics.sensor("child") is child and child.parents == [parent]


def test_recorders_are_each_stats_record(impl):
    m = impl.metrics
    metrics = Metrics(time=lambda: 0)
    s = metrics.sensor("s")
    avg = m.Avg(metrics.config)
    s.add(MetricName.of("a", "g"), avg)
    recs = s.recorders()
    assert len(recs) == 1
    recs[0](7, 100)
    total = m.CumulativeSum()
    s.add(MetricName.of("t", "g"), total)
    assert len(recs) == 2          # the live list
    s.record(3, 100)
    assert avg.measure(100) == 5 and total.measure(100) == 3
