"""kchannel.metrics_export: how worker metrics are put together."""
import json
import math

from kchannel.metrics import Metrics, MetricName
from kchannel.metrics_export import combine, read_record, record, write_atomically


def _rec(worker, **values):
    return {"worker": worker, "pid": 100 + worker, "time_ms": 1,
            "metrics": {f"g:{k.replace('_', '-')}": v for k, v in values.items()}}


def test_sum_max_mean_and_missing_values():
    a = _rec(2, connection_count=3, request_size_max=100.0, io_ratio=0.5,
             request_size_avg=None, failed_authentication_total=1)
    b = _rec(1, connection_count=4, request_size_max=250.0, io_ratio=0.25,
             request_size_avg=80.0, failed_authentication_total=0, only_here_total=7)
    out = combine([a, b], now_ms=5)
    assert out["time_ms"] == 5
    assert [w["worker"] for w in out["workers"]] == [1, 2]
    m = out["metrics"]
    assert m["g:connection-count"] == 7
    assert m["g:request-size-max"] == 250.0
    assert m["g:io-ratio"] == 0.375
    # A worker without a value is left out of the mean, not counted as 0.
    assert m["g:request-size-avg"] == 80.0
    assert m["g:failed-authentication-total"] == 1
    assert m["g:only-here-total"] == 7
    assert combine([_rec(1, x_avg=None)], 0)["metrics"]["g:x-avg"] is None


def test_tags_do_not_change_the_rule():
    a = {"worker": 1, "pid": 1, "time_ms": 0, "metrics": {"g:request-size-max{listener=A}": 5.0}}
    b = {"worker": 2, "pid": 2, "time_ms": 0, "metrics": {"g:request-size-max{listener=A}": 9.0}}
    assert combine([a, b], 0)["metrics"] == {"g:request-size-max{listener=A}": 9.0}


def test_record_of_real_metrics_is_json(tmp_path):
    metrics = Metrics()
    sensor = metrics.sensor("s")
    sensor.add_meter("grp", "request", count=False)
    avg = MetricName.of("lat-avg", "grp", tags={"listener": "X"})
    metrics.add_gauge(avg, lambda: math.nan)
    sensor.record(1.0, 0)
    rec = record(metrics, 3, 42, now_ms=123)
    assert rec["worker"] == 3 and rec["pid"] == 42 and rec["time_ms"] == 123
    # NaN (no sample) is written as null: strict JSON readers accept the file.
    assert rec["metrics"]["grp:lat-avg{listener=X}"] is None
    path = tmp_path / "m.json"
    write_atomically(str(path), rec)
    json.loads(path.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert read_record(str(path)) == rec
    assert read_record(str(tmp_path / "absent.json")) is None
    (tmp_path / "half.json").write_text('{"worker": 1, "metr')
    assert read_record(str(tmp_path / "half.json")) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half.json", "m.json"]
