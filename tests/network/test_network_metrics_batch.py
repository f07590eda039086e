"""Sensor.record_many leaves every stat exactly as recording each value in
turn would (windows, counts, sums, maxima, NaN included)."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel.metrics import Avg, Max, MetricConfig, MetricName, Metrics, Value

values = st.lists(st.one_of(st.just(1.0), st.integers(0, 10**6).map(float),
                            st.floats(allow_nan=True, allow_infinity=False, width=32)),
                  max_size=6)


def _sensor(metrics):
    s = metrics.sensor("s")
    s.add_meter("g", "count", "events", {}, count=True)
    s.add_meter("g", "sum", "bytes", {})
    s.add(MetricName.of("avg", "g"), Avg(metrics.config))
    s.add(MetricName.of("max", "g"), Max(metrics.config))
    s.add(MetricName.of("last", "g"), Value())
    return s


def _state(sensor):
    return repr([(getattr(stat, "_samples", None), getattr(stat, "total", None),
                  getattr(stat, "value", None)) for stat in sensor._stats])


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 5, 30000]), st.integers(1, 3),
       st.lists(st.tuples(st.sampled_from([0, 0, 1, 3, 7]), values), max_size=25))
def test_record_many_equals_one_by_one(window, samples, steps):
    cfg = MetricConfig(samples=samples, time_window_ms=window)
    clock = [1000]
    m1, m2 = Metrics(cfg, time=lambda: clock[0]), Metrics(cfg, time=lambda: clock[0])
    one, many = _sensor(m1), _sensor(m2)
    for dt, batch in steps:
        clock[0] += dt
        for v in batch:
            one.record(v, clock[0])
        many.record_many(batch, clock[0])
    assert _state(one) == _state(many)
    s1, s2 = m1.snapshot(), m2.snapshot()
    for name, x in s1.items():
        y = s2[name]
        assert x == y or (math.isnan(x) and math.isnan(y)), name
