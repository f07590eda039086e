"""What recording a sensor costs, counted, not timed.

    python benchmarks/metrics_cost.py instructions [--pure] [--records 20000] [--shape NAME]
    python benchmarks/metrics_cost.py timed [--records 200000]

The sensor shapes are those the clients record per request or per poll:

* ``loop``: the benchmark's loop alone (included in every other figure);
* ``avg_max``: ``Sensor.record`` of an Avg + Max sensor (the producer's
  ``request-latency``, ``batch-size``, ``produce-throttle-time``);
* ``meter_avg``: Rate + CumulativeSum + Avg (the producer's
  ``records-per-request``: ``record-send-rate/total``,
  ``records-per-request-avg``);
* ``meter_count``: a count Rate + CumulativeCount (a count meter: the
  selector's ``bytes_transferred``, the server's per-request meters);
* ``fetch``: Avg + Max + count Rate + CumulativeCount (the consumer's
  ``fetch-latency``, recorded per Fetch response);
* ``recorders``: the ``meter_avg`` stats recorded one by one through
  ``Sensor.recorders()`` (what the producer's network thread does);
* ``record_many4``: ``Sensor.record_many`` of 4 values into ``meter_avg``;
* ``sends1``: ``SelectorMetrics.record_sends([size])`` (a request sent);
* ``poll``: ``SelectorMetrics.record_poll`` of a client's poll that sent one
  request and read one response;
* ``poll_idle``: ``record_poll`` of a poll that read and sent nothing.

``instructions``: each shape runs twice under valgrind's callgrind, with
``--records`` and six times as many records after the same set-up and
warm-up; the difference divided by the extra records is the instructions
per record (the interpreter's start and the set-up cancel out).  The clock
is not read: ``now`` advances 1 ms per record as callers pass it (a 30 s
window rolls over every 30,000 records, as at 1,000 requests a second).

``timed``: ns per record of each shape in a tight loop, both twins in
subprocesses, best of 5 (a second opinion on a loaded machine).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

SHAPES = ["loop", "avg_max", "meter_avg", "meter_count", "fetch", "recorders", "record_many4",
          "sends1", "poll", "poll_idle"]


def make(shape):
    """A function ``run(n, t0)`` recording ``n`` events of ``shape``."""
    from kchannel.metrics import Metrics, MetricGroup
    metrics = Metrics(time=lambda: 0)
    g = MetricGroup(metrics, "bench-metrics", "bench")
    if shape in ("sends1", "poll", "poll_idle"):
        from kchannel.network.selector_metrics import SelectorMetrics
        sm = SelectorMetrics(metrics, "bench", {"client-id": "bench"})
        if shape == "sends1":
            def run(n, t0):
                rec = sm.record_sends
                for i in range(n):
                    rec([1071], t0 + i)
        elif shape == "poll":
            def run(n, t0):
                rec = sm.record_poll
                for i in range(n):
                    rec(21000, 9000, t0 + i, 61, 1, [1071])
        else:
            def run(n, t0):
                rec = sm.record_poll
                for i in range(n):
                    rec(21000, 9000, t0 + i)
        return run
    if shape == "loop":
        def run(n, t0):
            for i in range(n):
                t0 + i
        return run
    sensor = g.sensor(shape)
    if shape == "avg_max":
        g.avg_max(sensor, "lat", "latency")
    elif shape in ("meter_avg", "recorders", "record_many4"):
        g.meter(sensor, "record-send", "records sent")
        from kchannel.metrics import Avg
        sensor.add(g.name("records-per-request-avg", "avg"), Avg(metrics.config))
    elif shape == "meter_count":
        g.meter(sensor, "network-io", "io", count=True)
    elif shape == "fetch":
        g.avg_max(sensor, "fetch-latency", "latency")
        g.meter(sensor, "fetch", "fetches", count=True)
    else:
        raise SystemExit(f"unknown shape {shape}")
    if shape == "recorders":
        recs = sensor.recorders()

        def run(n, t0):
            for i in range(n):
                now = t0 + i
                for record in recs:
                    record(15, now)
    elif shape == "record_many4":
        def run(n, t0):
            rec = sensor.record_many
            values = [15, 14, 15, 16]
            for i in range(n):
                rec(values, t0 + i)
    else:
        def run(n, t0):
            rec = sensor.record
            for i in range(n):
                rec(15, t0 + i)
    return run


def cmd_side(args):
    run = make(args.shape)
    run(2000, 1_000_000)                # warm-up: specialisation, windows open
    run(args.records, 2_000_000)


def _total(out):
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s*(\d+)", line)
            if m:
                return int(m.group(1))
    raise SystemExit(f"no totals in {out}")


def cmd_instructions(args):
    env = dict(os.environ)
    if args.pure:
        env["KCHANNEL_NO_EXTENSIONS"] = "1"
    here = os.path.abspath(__file__)
    small, big = args.records, args.records * 6
    shapes = [args.shape] if args.shape else SHAPES
    print(f"{'pure' if args.pure else 'compiled'} twins; callgrind, {small} and {big} records "
          f"per shape; instructions per record")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            totals = []
            for n in (small, big):
                out = os.path.join(tmp, f"cg.{shape}.{n}")
                cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                      sys.executable, here, "_side", "--shape", shape, "--records", str(n)]
                subprocess.run(cg, env=env, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                totals.append(_total(out))
            per = (totals[1] - totals[0]) / (big - small)
            print(f"  {shape:<13} {per:9.0f}", flush=True)


def cmd_timed(args):
    here = os.path.abspath(__file__)
    res = {}
    for pure in (False, True):
        env = dict(os.environ)
        if pure:
            env["KCHANNEL_NO_EXTENSIONS"] = "1"
        out = subprocess.run([sys.executable, here, "_timed", "--records", str(args.records)],
                             env=env, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            shape, ns = line.split()
            res.setdefault(shape, {})[pure] = float(ns)
    print(f"ns per record, best of 5 x {args.records} (load {os.getloadavg()[0]:.1f})")
    print(f"  {'shape':<13} {'compiled':>9} {'pure':>9}")
    for shape in SHAPES:
        r = res[shape]
        print(f"  {shape:<13} {r[False]:9.0f} {r[True]:9.0f}")


def cmd_timed_side(args):
    for shape in SHAPES:
        run = make(shape)
        run(2000, 1_000_000)
        best = None
        for k in range(5):
            t = time.perf_counter_ns()
            run(args.records, 2_000_000 + k * args.records)
            dt = (time.perf_counter_ns() - t) / args.records
            best = dt if best is None else min(best, dt)
        print(shape, f"{best:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["instructions", "timed", "_side", "_timed"])
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--shape", choices=SHAPES)
    args = ap.parse_args(argv)
    if args.mode == "instructions":
        args.records = args.records or 20000
        cmd_instructions(args)
    elif args.mode == "_side":
        cmd_side(args)
    elif args.mode == "timed":
        args.records = args.records or 200000
        cmd_timed(args)
    else:
        args.records = args.records or 200000
        cmd_timed_side(args)


if __name__ == "__main__":
    main()
