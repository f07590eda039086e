"""What one record costs ``kchannel.aio.AIOProducer``, counted, not timed.

    python benchmarks/aio_cost.py [--bootstrap HOST:PORT] [--size 100,1024]
                                  [--records 4000] [--pure] [--split N]
                                  [--keep DIR] [--mode each|flush] [--client aio|sync]
                                  [--tree PATH]

The producer of ``aio_clients.py`` (its defaults, ``--mode each``: every
record sent, then every record's future awaited; ``flush``: every record
sent, then ``flush()``) runs twice under valgrind's callgrind, with
``--records`` and with five times as many; the difference of the two
instruction totals divided by the extra records is the cost of one record
(start-up, connections, metadata and warm-up cancel out), independent of
the machine's load.  Without ``--bootstrap`` a Tansu broker is started in
memory on 127.0.0.1, as ``aio_clients.py`` does.

``--split N`` also prints the N C functions whose own (exclusive)
instructions grew most per record between the two runs (memcpy, the
interpreter, the compiled twins' functions...): where a record's cost goes.
Under callgrind the client runs some 50 times slower, so its batches may be
fuller than in a native run (the broker answers sooner, relatively): the
per-record figure is a like-for-like measure of the client's code, not a
prediction of a native run's.  The broker's pace still shapes the passes
of the Sender (responses per wake-up): on a loaded machine figures move by a
few per cent; compare trees (``--tree``) in the same conditions.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import asyncio, sys
from kchannel.aio import AIOProducer
B, T, N, V, EACH = sys.argv[1], sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4]), sys.argv[5] == "each"
async def run():
    async with AIOProducer({"bootstrap.servers": B}) as p:
        # warm-up (metadata, connection): the same in both runs
        await (await p.send(T, V))
        if EACH:
            futs = [await p.send(T, V) for _ in range(N)]
            for f in futs:
                await f
        else:
            for _ in range(N):
                await p.send(T, V)
            await p.flush()
asyncio.run(run())
"""

# --client sync: kchannel.Producer, the same records and awaits (the
# reference: what the event loop's driving adds or saves).
SYNC_CHILD = r"""
import sys
from kchannel import Producer
B, T, N, V, EACH = sys.argv[1], sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4]), sys.argv[5] == "each"
p = Producer({"bootstrap.servers": B})
p.send(T, V).get()
if EACH:
    futs = [p.send(T, V) for _ in range(N)]
    for f in futs:
        f.get()
else:
    for _ in range(N):
        p.send(T, V)
    p.flush()
p.close()
"""


def _totals(out):
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + out)


def _exclusive(out):
    """function name -> exclusive instructions (callgrind_annotate)."""
    res = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                         capture_output=True, text=True, check=True).stdout
    table = {}
    for line in res.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+)", line)
        if m:
            name = m.group(2)
            table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


def run_callgrind(bootstrap, topic, n, size, mode, pure, out, client="aio", tree=ROOT):
    """Instructions of one child run (``out`` None: natively, not counted).
    Run in ``tree``: ``python -c`` puts its working directory first on
    sys.path, so run from another kchannel tree it imported that one's
    kchannel, whatever PYTHONPATH said (``--tree`` measured the current
    tree)."""
    env = dict(os.environ, PYTHONPATH=tree + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if pure:
        env["KCHANNEL_NO_EXTENSIONS"] = "1"
    else:
        env.pop("KCHANNEL_NO_EXTENSIONS", None)
    cmd = [sys.executable, "-c", CHILD if client == "aio" else SYNC_CHILD,
           bootstrap, topic, str(n), str(size), mode]
    if out is None:
        subprocess.run(cmd, capture_output=True, env=env, timeout=600, check=True, cwd=tree)
        return None
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, cwd=tree)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return _totals(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--size", default="100,1024")
    ap.add_argument("--records", type=int, default=4000,
                    help="records of the smaller run (the larger runs five times as many)")
    ap.add_argument("--mode", default="each", choices=("each", "flush"))
    ap.add_argument("--client", default="aio", choices=("aio", "sync"),
                    help="sync: kchannel.Producer instead, as a reference")
    ap.add_argument("--pure", action="store_true", help="the pure twins (KCHANNEL_NO_EXTENSIONS)")
    ap.add_argument("--split", type=int, default=0, metavar="N",
                    help="print the N functions whose own instructions grew most per record")
    ap.add_argument("--tree", default=ROOT,
                    help="the kchannel tree (built) to measure, e.g. main's for a before/after")
    ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
    args = ap.parse_args()
    from records_clients import create_topic
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.fixtures.peers import start_tansu
        broker = start_tansu()
        bootstrap = broker.bootstrap
    tmp = args.keep or tempfile.mkdtemp(prefix="aio-cost-")
    os.makedirs(tmp, exist_ok=True)
    twins = "pure" if args.pure else "compiled"
    try:
        for size in (int(x) for x in args.size.split(",")):
            small, big = args.records, args.records * 5
            outs, totals = [], []
            # A native run first: the tree's .pyc files written, so that
            # neither counted run compiles source (it skewed the smaller).
            topic = f"bench-aiocost-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic)
            run_callgrind(bootstrap, topic, 10, size, args.mode, args.pure, None, args.client,
                          args.tree)
            for n in (small, big):
                topic = f"bench-aiocost-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic)
                out = os.path.join(tmp, f"callgrind.{args.client}.{size}.{n}.out")
                totals.append(run_callgrind(bootstrap, topic, n, size, args.mode, args.pure, out,
                                            args.client, args.tree))
                outs.append(out)
            per = (totals[1] - totals[0]) / (big - small)
            print(f"{size} B records, {'AIOProducer' if args.client == 'aio' else 'Producer'} ({twins} twins, --mode {args.mode}): "
                  f"{per:,.0f} instructions per record (callgrind, {small} and {big} records)",
                  flush=True)
            if args.split:
                a, b = _exclusive(outs[0]), _exclusive(outs[1])
                grown = sorted(((b.get(k, 0) - a.get(k, 0)) / (big - small), k)
                               for k in set(a) | set(b))
                for v, k in grown[::-1][:args.split]:
                    print(f"  {v:10,.0f}  {k}")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
