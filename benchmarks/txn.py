"""Transactional producer throughput: kchannel's Producer against
confluent-kafka's, same Apache Kafka broker, same run.

    python benchmarks/txn.py [--bootstrap HOST:PORT] [--transactions 50]
                             [--per-transaction 1000] [--size 100]

Without ``--bootstrap`` an Apache Kafka broker (the test fixture's, single
node, transaction.version 2) is started in a temporary directory and stopped
at the end.  Each client runs in its own child process, which reports its
own CPU time (every thread: librdkafka's too) and wall time: it opens a
transactional producer (``init_transactions``), then writes
``--transactions`` transactions of ``--per-transaction`` records of
``--size`` bytes to a one-partition topic of its own, each committed.  Both
producers at their own defaults (transactional.id implies acks=all and
idempotence for both), and kchannel again with librdkafka's batch size
(1,000,000 bytes) reported beside, and kchannel's idempotent producer
without transactions (``flush()`` where the others commit) for the cost of
the transactions themselves.  Prints records per CPU-second and per second, and
kchannel's ratio to confluent-kafka's (target: >= 0.75x per CPU-second).
Absolute figures on a shared machine swing; the ratios are of one run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._results import row  # noqa: E402

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, {root!r})
client, bootstrap, topic, txns, per, size = {args!r}
value = b"x" * size

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

if client == "kchannel-idempotent":
    # The same records without transactions: flush() where the others commit.
    from kchannel import Producer
    p = Producer({{"bootstrap.servers": bootstrap}})
    p.send(topic, value); p.flush()
    c0, t0 = cpu(), time.monotonic()
    for _ in range(txns):
        send = p.send
        for _ in range(per):
            send(topic, value)
        p.flush()
    c1, t1 = cpu(), time.monotonic()
    p.close()
elif client.startswith("kchannel"):
    from kchannel import Producer
    tuned = {{"batch.size": 1000000}} if client == "kchannel-tuned" else {{}}
    p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": "bench-" + topic,
                  **tuned}})
    p.init_transactions(60)
    c0, t0 = cpu(), time.monotonic()
    for _ in range(txns):
        p.begin_transaction()
        send = p.send
        for _ in range(per):
            send(topic, value)
        p.commit_transaction(60)
    c1, t1 = cpu(), time.monotonic()
    p.close()
else:
    from confluent_kafka import Producer
    p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": "bench-" + topic}})
    p.init_transactions(60)
    c0, t0 = cpu(), time.monotonic()
    for _ in range(txns):
        p.begin_transaction()
        produce, poll = p.produce, p.poll
        for i in range(per):
            produce(topic, value)
            if i % 1000 == 999:
                poll(0)
        p.commit_transaction(60)
    c1, t1 = cpu(), time.monotonic()
print(json.dumps({{"cpu": c1 - c0, "wall": t1 - t0, "records": txns * per}}))
'''


def run_child(client, bootstrap, topic, txns, per, size):
    code = CHILD.format(root=ROOT, args=(client, bootstrap, topic, txns, per, size))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--transactions", type=int, default=50)
    ap.add_argument("--per-transaction", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    broker = None
    bootstrap = args.bootstrap
    tmp = None
    if bootstrap is None:
        from tests.fixtures.certs import make_pki
        from tests.fixtures.kafka import start_kafka_broker
        tmp = tempfile.TemporaryDirectory(prefix="kchannel-txn-bench-")
        os.makedirs(os.path.join(tmp.name, "pki"))
        broker = start_kafka_broker(os.path.join(tmp.name, "kafka"),
                                    make_pki(os.path.join(tmp.name, "pki")))
        bootstrap = broker.bootstrap("PLAINTEXT")
    try:
        from tests.fixtures.records import create_topic
        results = {}
        for client in ("kchannel", "confluent", "kchannel-tuned", "kchannel-idempotent"):
            topic = create_topic(bootstrap, f"txn-bench-{client}-{uuid.uuid4().hex[:8]}",
                                 partitions=1)
            results[client] = run_child(client, bootstrap, topic, args.transactions,
                                        args.per_transaction, args.size)
    finally:
        if broker is not None:
            broker.stop()
            broker.oauth.close()
            tmp.cleanup()
    print(f"Transactional producer, {args.transactions} transactions x "
          f"{args.per_transaction} records of {args.size} B, each committed:")
    for client, r in results.items():
        name = {"kchannel": "kchannel", "confluent": "confluent-kafka",
                "kchannel-tuned": "kchannel, batch.size 1000000",
                "kchannel-idempotent": "kchannel, no transactions"}[client]
        print(f"  {name:30s} {r['records'] / r['cpu']:10,.0f} records/CPU-s  "
              f"{r['records'] / r['wall']:10,.0f} records/s  (cpu {r['cpu']:.2f} s, "
              f"wall {r['wall']:.2f} s)")
    k, c = results["kchannel"], results["confluent"]
    per_cpu = (k["records"] / k["cpu"]) / (c["records"] / c["cpu"])
    per_s = (k["records"] / k["wall"]) / (c["records"] / c["wall"])
    t = results["kchannel-tuned"]
    tuned_cpu = (t["records"] / t["cpu"]) / (c["records"] / c["cpu"])
    tuned_s = (t["records"] / t["wall"]) / (c["records"] / c["wall"])
    print(f"  kchannel / confluent-kafka at their defaults: {per_cpu:.2f}x per CPU-second "
          f"(target >= 0.75x), {per_s:.2f}x per second")
    print(f"  kchannel with batch.size 1000000 (librdkafka's) / confluent-kafka: "
          f"{tuned_cpu:.2f}x per CPU-second, {tuned_s:.2f}x per second")
    i = results["kchannel-idempotent"]
    print(f"  kchannel transactional / kchannel idempotent without transactions (flush() per "
          f"{args.per_transaction} records): "
          f"{(k['records'] / k['cpu']) / (i['records'] / i['cpu']):.2f}x per CPU-second, "
          f"{(k['records'] / k['wall']) / (i['records'] / i['wall']):.2f}x per second")
    row(f"Transactional producer vs confluent-kafka at their defaults "
        f"(`txn.py`, Apache Kafka, {args.transactions} transactions of "
        f"{args.per_transaction} x {args.size} B records; tuned: kchannel batch.size 1000000)",
        f"{per_cpu:.2f}x per CPU-second, {per_s:.2f}x per second; tuned {tuned_cpu:.2f}x "
        f"per CPU-second, {tuned_s:.2f}x per second", ">= 0.75x per CPU-second",
        per_cpu >= 0.75)


if __name__ == "__main__":
    main()
