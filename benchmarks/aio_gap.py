"""Where the benchmark's AIOProducer run spends what a steady-state loop does
not: the ``aio_clients.py`` producer child, run as the benchmark runs it,
beside the same loop split into phases.

    python benchmarks/aio_gap.py [--bootstrap HOST:PORT] [--records 100000]
                                 [--phased-records N] [--size 1024]
                                 [--rounds 3] [--fresh]
                                 [--clients aio,aiokafka]

``aio_clients.py`` reports records per CPU-second of a whole child: the
producer made, started, every record sent and its future awaited, closed,
and ``asyncio.run`` ended (the futures freed), against a Tansu it started
for the script.  A loop timed after a warm-up (a long-lived broker, the
first record excluded, more records) measures only its middle.  Per round
this runs:

* ``exact``: the benchmark's own child code (``records_clients.run_child``'s
  wrapper around ``aio_clients.PRODUCE``'s body, the client's defaults, the
  same arguments) and its own figure; a prelude outside the clocks adds the
  garbage collector's collections (and CPU time) per generation, page faults
  and context switches from the producer's construction on, and the
  producer's metrics (Produce requests, records per request, batch size);
* ``phased``: the same producer and loop with CPU marks between its
  phases -- start (made, connected, first record acknowledged), steady (the
  other records sent, then each future awaited: the warm-up-free figure),
  close (``async with``'s exit), teardown (the rest of ``asyncio.run``, the
  coroutine's list of futures freed) -- the Sender's passes and the sends
  that waited for buffer memory.

Without ``--bootstrap`` a Tansu broker is started for the script (as
``aio_clients.py`` does); ``--fresh`` starts a new one for every child.
Each child gets a new one-partition topic.  CPU times on a shared machine
swing by 10-30 % between runs: compare the phases within one run, and the
medians over ``--rounds``.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aio_clients  # noqa: E402
import records_clients  # noqa: E402

# Installed before the benchmark's child code (so before its clocks): the
# collector's callbacks and, from the producer's construction on (just after
# the clocks start), rusage counts; at exit one line "GAP {json}".  CAPTURE
# (set before it): the child's client is kchannel.aio's (its producer's
# construction starts the counts, its metrics are read at exit); else the
# counts cover the whole process.
PRELUDE = r'''
import atexit as _ax, gc as _gc, json as _js, resource as _rs, time as _tm
_G = {}
_S = [0.0]
def _gccb(phase, info):
    if phase == "start":
        _S[0] = _tm.process_time()
    else:
        g = _G.setdefault(str(info["generation"]), [0, 0.0])
        g[0] += 1
        g[1] += _tm.process_time() - _S[0]
_gc.callbacks.append(_gccb)
_P = []
_R0 = []
def _capture():
    import kchannel.aio
    cls = kchannel.aio.AIOProducer
    init = cls.__init__
    def __init__(self, *a, **k):
        if not _R0:
            _G.clear()
            _R0.append(_rs.getrusage(_rs.RUSAGE_SELF))
        init(self, *a, **k)
        _P.append(self)
    cls.__init__ = __init__
if CAPTURE:
    _capture()
def _report():
    # From the producer's construction, or the whole process (no capture).
    r0 = _R0[0] if _R0 else _rs.struct_rusage((0,) * 16)
    r1 = _rs.getrusage(_rs.RUSAGE_SELF)
    out = {"gc": {g: [n, round(t * 1e3, 2)] for g, (n, t) in sorted(_G.items())}}
    out.update(minflt=r1.ru_minflt - r0.ru_minflt, vcsw=r1.ru_nvcsw - r0.ru_nvcsw,
               ivcsw=r1.ru_nivcsw - r0.ru_nivcsw,
               user=round(r1.ru_utime - r0.ru_utime, 3), sys=round(r1.ru_stime - r0.ru_stime, 3))
    if _P:
        names = ("request-total", "records-per-request-avg", "batch-size-avg", "select-total",
                 "bufferpool-wait-time-ns-total")
        for k, v in _P[0]._producer.metrics().items():
            if k.group == "producer-metrics" and k.name in names:
                out[k.name] = round(v, 1)
    print("GAP " + _js.dumps(out), flush=True)
_ax.register(_report)
'''

# The benchmark's loop with marks: argv B T N SIZE.
PHASED = r'''
import asyncio, gc, json, resource, sys, time
from kchannel.aio import AIOProducer
B, T, N, V = sys.argv[1], sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4])
G = {}
S = [0.0]
def gccb(phase, info):
    if phase == "start":
        S[0] = time.process_time()
    else:
        g = G.setdefault(str(info["generation"]), [0, 0.0])
        g[0] += 1
        g[1] += time.process_time() - S[0]
gc.callbacks.append(gccb)
MARKS = []
def mark(name):
    r = resource.getrusage(resource.RUSAGE_SELF)
    MARKS.append((name, time.process_time(), r.ru_minflt, r.ru_nvcsw,
                  {g: list(v) for g, v in G.items()}))
PASSES = [0]
WAITS = [0]
async def run():
    async with AIOProducer({"bootstrap.servers": B}) as p:
        sender = p._sender
        run_once = sender.run_once
        def counted():
            PASSES[0] += 1
            return run_once()
        sender.run_once = counted
        wait_for_memory = p._wait_for_memory
        async def memory_wait():
            WAITS[0] += 1
            return await wait_for_memory()
        p._wait_for_memory = memory_wait
        await (await p.send(T, V))
        mark("start")
        futs = [await p.send(T, V) for _ in range(N - 1)]
        for f in futs:
            await f
        mark("steady")
        PASSES.append(PASSES[0])
    mark("close")
mark("begin")
asyncio.run(run())
mark("teardown")
out = {"passes": PASSES[0], "memory_waits": WAITS[0]}
for (_, c0, f0, v0, g0), (name, c1, f1, v1, g1) in zip(MARKS, MARKS[1:]):
    gc_ms = sum(v[1] for v in g1.values()) - sum(v[1] for v in g0.values())
    full = g1.get("2", [0])[0] - g0.get("2", [0])[0]
    out[name] = {"cpu_ms": round((c1 - c0) * 1e3, 2), "minflt": f1 - f0, "vcsw": v1 - v0,
                 "gc_ms": round(gc_ms * 1e3, 2), "full_gc": full}
out["steady_passes"] = PASSES[1] if len(PASSES) > 1 else None
print(json.dumps(out), flush=True)
'''


def exact_code(client):
    """The code ``aio_clients.py`` runs for ``client``'s producer (its
    defaults, every future awaited): what ``records_clients.run_child``
    hands to ``python -c``, taken from run_child itself (its subprocess
    call captured), so that it cannot drift from the benchmark's."""
    body = aio_clients._body(aio_clients.PRODUCE, client, "asyncio", None)
    seen = []

    class _Done:
        returncode = 0
        stdout = '{"wall": 1, "cpu": 1}'
        stderr = ""

    def capture(cmd, **kw):
        seen.append(cmd)
        return _Done()
    real = records_clients.subprocess.run
    records_clients.subprocess.run = capture
    try:
        records_clients.run_child(body, "B", "T", 1, 1)
    finally:
        records_clients.subprocess.run = real
    cmd = seen[0]
    return cmd[cmd.index("-c") + 1]


def _run(code, argv):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True,
                         env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return out.stdout.strip().splitlines()


def run_exact(client, bootstrap, topic, n, size):
    """(the benchmark's own {wall, cpu}, the prelude's counters)."""
    # kchannel imported in kchannel.aio's child only: imported in another's,
    # its objects would lengthen that client's garbage collections.
    lines = _run(f"CAPTURE = {client in ('aio', aio_clients.BASELINE)}\n" + PRELUDE
                 + exact_code(client),
                 [bootstrap, topic, str(n), str(size), "{}", "plain", "1000"])
    own = json.loads([line for line in lines if line.startswith("{")][-1])
    gap = json.loads([line for line in lines if line.startswith("GAP ")][-1][4:])
    return own, gap


def run_phased(bootstrap, topic, n, size):
    return json.loads(_run(PHASED, [bootstrap, topic, str(n), str(size)])[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=100000,
                    help="records per child (aio_clients.py: 100,000 at 1 KiB)")
    ap.add_argument("--phased-records", type=int,
                    help="records of the phased child (default --records; child.py-style "
                         "native loops ran 200,000)")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fresh", action="store_true", help="a new Tansu for every child")
    ap.add_argument("--clients", default="aio",
                    help="clients whose exact child runs (aio, aiokafka, confluent.aio)")
    args = ap.parse_args()
    from tests.fixtures.peers import start_tansu
    shared = None
    if args.bootstrap is None and not args.fresh:
        shared = start_tansu()
    n, size = args.records, args.size
    pn = args.phased_records or n
    clients = args.clients.split(",")
    figures = {c: [] for c in clients}
    steady, whole = [], []

    def with_broker(fn):
        # fn(bootstrap, topic), a new topic on the shared or a fresh broker.
        broker = start_tansu() if args.fresh else None
        try:
            bootstrap = broker.bootstrap if broker else (args.bootstrap or shared.bootstrap)
            topic = f"gap-{uuid.uuid4().hex[:6]}"
            records_clients.create_topic(bootstrap, topic)
            return fn(bootstrap, topic)
        finally:
            if broker is not None:
                broker.stop()
    try:
        print(f"load average {os.getloadavg()[0]:.1f}; {n} x {size} B records per child, "
              f"{'a fresh broker per child' if args.fresh else 'one broker'}", flush=True)
        for rnd in range(args.rounds):
            # Every other round the phased child first: the one run right
            # after another finds the broker still busy with the last.
            for kind in (["exact", "phased"] if rnd % 2 == 0 else ["phased", "exact"]):
                if kind == "exact":
                    for client in clients:
                        own, gap = with_broker(lambda b, t: run_exact(client, b, t, n, size))
                        figures[client].append(n / own["cpu"])
                        print(f"exact {client:13s} {n / own['cpu'] / 1e3:6.1f} k rec/CPU-s "
                              f"(cpu {own['cpu'] * 1e3:.0f} ms, wall {own['wall']:.2f} s) | "
                              + json.dumps(gap), flush=True)
                    continue
                ph = with_broker(lambda b, t: run_phased(b, t, pn, size))
                total = sum(v["cpu_ms"] for k, v in ph.items() if isinstance(v, dict))
                st = ph["steady"]["cpu_ms"]
                steady.append((pn - 1) / st * 1e3)
                whole.append(pn / total * 1e3)
                print(f"phased ({pn}): whole {pn / total:6.1f} k rec/CPU-s, "
                      f"steady {(pn - 1) / st:6.1f} k "
                      f"({100 * (1 - st / total):.1f} % of the CPU outside the steady phase) | "
                      + json.dumps(ph), flush=True)
        print("medians:", ", ".join(f"exact {c} {statistics.median(v) / 1e3:.1f} k"
                                    for c, v in figures.items()),
              f"| phased whole {statistics.median(whole) / 1e3:.1f} k, "
              f"steady {statistics.median(steady) / 1e3:.1f} k "
              f"(whole/steady {statistics.median(w / s for w, s in zip(whole, steady)):.3f})",
              flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if shared is not None:
            shared.stop()


if __name__ == "__main__":
    main()
