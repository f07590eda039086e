"""Transactional producer throughput: kchannel's Producer against
confluent-kafka's, same Apache Kafka broker, same run.

    python benchmarks/txn.py [--bootstrap HOST:PORT] [--transactions 100]
                             [--per-transaction 1000] [--size 100] [--rounds 5]
                             [--baseline DIR]

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
The clients run in ``--rounds`` (default 5) interleaved rounds (the order
reversed every other round, so a drift of the machine's speed weighs on all
alike); a ratio is the median of the rounds' ratios, each taken within its
round, printed with the rounds' ratios beside it, and the load average is
printed before and after.  Absolute figures on a shared
machine swing; the ratios are of one run.  ``--baseline DIR`` (another
checkout of kchannel, its compiled twins built) adds kchannel from DIR at
its defaults to every round, for a before/after ratio measured in the same
run.

Each transactional client also reports the share of its transactions that
took over 15 ms from begin to commit: those whose first write reached the
broker while the previous transaction's commit markers were still being
written.  The broker answers CONCURRENT_TRANSACTIONS then and the write is
retried 20 ms later (under transaction version 2 by the partition leader,
``add.partitions.to.txn.retry.backoff.ms``; under version 1 by the client's
AddPartitionsToTxn retry), during which both threads of the producer sleep:
such a transaction costs about a third more CPU (cold caches on a shared
machine), and the share differs between clients with when their first write
of a transaction goes out (a kchannel or Java producer sends its first full
batch at once; librdkafka registers the partition about a millisecond later),
so it moves the per-CPU-second ratio from run to run.

    python benchmarks/txn.py instructions [--transactions 10] [--clients kchannel,...]
                             [--pure] [--split] [--baseline DIR] [--keep DIR]

``instructions``: instructions per transaction of each kchannel client (at
its defaults; ``--clients`` picks among kchannel, kchannel-tuned,
kchannel-idempotent), counted by valgrind's callgrind (independent of the
machine's load), against the broker started as above (or
``--bootstrap``): the client's process runs twice under callgrind, with
``--transactions`` and three times as many, and the difference is divided
by the extra transactions (start-up, ``init_transactions`` and warm-up
cancel out).  Every thread of the client counts (the Sender's too); the
broker runs natively.  Under callgrind the client runs about 50 times
slower, so its GIL switch interval (wall time) is scaled by 50 as well:
the threads hand the GIL over about as often per instruction as natively.
``--split`` adds the instructions per transaction of the main entry points
(the appender's send, the Sender's passes, requests and responses);
``--baseline DIR`` counts kchannel from DIR (at its defaults) as well.
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
if {switch!r}:
    # under callgrind (see the module docstring: instructions)
    sys.setswitchinterval({switch!r})
if {baseline!r}:
    # this checkout of kchannel, not the benchmark's
    sys.path.insert(0, {baseline!r})
client, bootstrap, topic, txns, per, size = {args!r}
value = b"x" * size
# A transaction (begin to commit returned) slower than this one met the
# broker's CONCURRENT_TRANSACTIONS back-off (see the module docstring).
SLOW_S = 0.015
slow = 0

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
elif client.startswith("kchannel") or client == "baseline":
    from kchannel import Producer
    tuned = {{"batch.size": 1000000}} if client == "kchannel-tuned" else {{}}
    p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": "bench-" + topic,
                  **tuned}})
    p.init_transactions(60)
    c0, t0 = cpu(), time.monotonic()
    for _ in range(txns):
        b = time.monotonic()
        p.begin_transaction()
        send = p.send
        for _ in range(per):
            send(topic, value)
        p.commit_transaction(60)
        slow += time.monotonic() - b > SLOW_S
    c1, t1 = cpu(), time.monotonic()
    p.close()
else:
    from confluent_kafka import Producer
    p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": "bench-" + topic}})
    p.init_transactions(60)
    c0, t0 = cpu(), time.monotonic()
    for _ in range(txns):
        b = time.monotonic()
        p.begin_transaction()
        produce, poll = p.produce, p.poll
        for i in range(per):
            produce(topic, value)
            if i % 1000 == 999:
                poll(0)
        p.commit_transaction(60)
        slow += time.monotonic() - b > SLOW_S
    c1, t1 = cpu(), time.monotonic()
print(json.dumps({{"cpu": c1 - c0, "wall": t1 - t0, "records": txns * per, "slow": slow}}))
'''


def run_child(client, bootstrap, topic, txns, per, size, baseline=None):
    code = CHILD.format(root=ROOT, args=(client, bootstrap, topic, txns, per, size),
                        baseline=baseline if client == "baseline" else None, switch=None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# (the child's SLOW_S, for the printout)
SLOW_MS = 15

CLIENTS = ("kchannel", "confluent", "kchannel-tuned", "kchannel-idempotent")
NAMES = {"kchannel": "kchannel", "confluent": "confluent-kafka",
         "kchannel-tuned": "kchannel, batch.size 1000000",
         "kchannel-idempotent": "kchannel, no transactions"}


def _median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def _load():
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class _Broker:
    """``--bootstrap``'s broker, or the fixture's started in a temporary
    directory (stopped on exit)."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.broker = self.tmp = None

    def __enter__(self):
        if self.bootstrap is None:
            from tests.fixtures.certs import make_pki
            from tests.fixtures.kafka import start_kafka_broker
            self.tmp = tempfile.TemporaryDirectory(prefix="kchannel-txn-bench-")
            os.makedirs(os.path.join(self.tmp.name, "pki"))
            self.broker = start_kafka_broker(os.path.join(self.tmp.name, "kafka"),
                                             make_pki(os.path.join(self.tmp.name, "pki")))
            self.bootstrap = self.broker.bootstrap("PLAINTEXT")
        return self.bootstrap

    def __exit__(self, *exc):
        if self.broker is not None:
            self.broker.stop()
            self.broker.oauth.close()
            self.tmp.cleanup()


# Callgrind runs a client about this many times slower than natively.
CALLGRIND_SLOWDOWN = 50

# (label, the function whose inclusive instructions it is) for --split
_SPLIT = [
    ("Appender.send (the per-record path, application thread)", r"Appender_\d+send$"),
    ("Sender.run_once (every pass of the network thread)", r"SenderLoop_\d+run_once$"),
    ("  send_producer_data (ready, drain, Produce requests)",
     r"SenderLoop_\d+send_producer_data$"),
    ("    encode the batches", r"SenderLoop_\d+_encode$"),
    ("  NetworkClient.poll (I/O, responses, completions)", r"ClientLoop_\d+poll$"),
    ("    Produce responses (batches completed)",
     r"SenderLoop_\d+_handle_produce_response$"),
]


def _callgrind_totals(out):
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + out)


def cmd_instructions(args):
    from benchmarks.rt_cost import _inclusive
    from tests.fixtures.records import create_topic
    import re
    clients = args.clients.split(",") + (["baseline"] if args.baseline else [])
    if args.baseline:
        NAMES["baseline"] = f"kchannel from {args.baseline}"
    small, big = args.transactions, args.transactions * 3
    env = dict(os.environ, PYTHONHASHSEED="0")
    if args.pure:
        env["KCHANNEL_NO_EXTENSIONS"] = "1"
    # the default switch interval (5 ms) times the slowdown
    switch = 0.005 * CALLGRIND_SLOWDOWN
    with _Broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as d:
        if args.keep:
            d = args.keep
            os.makedirs(d, exist_ok=True)
        for client in clients:
            totals, outs = [], []
            for n in (small, big):
                topic = create_topic(bootstrap, f"txn-cg-{client}-{uuid.uuid4().hex[:8]}",
                                     partitions=1)
                code = CHILD.format(root=ROOT, args=(client, bootstrap, topic, n,
                                                     args.per_transaction, args.size),
                                    baseline=args.baseline if client == "baseline" else None,
                                    switch=switch)
                out = os.path.join(d, f"cg.{client}.{n}")
                outs.append(out)
                res = subprocess.run(["valgrind", "--tool=callgrind",
                                      f"--callgrind-out-file={out}", sys.executable, "-c",
                                      code], env=env, capture_output=True, text=True,
                                     timeout=1800)
                if res.returncode != 0:
                    raise RuntimeError(f"{client} failed under callgrind:\n"
                                       f"{res.stderr[-3000:]}")
                totals.append(_callgrind_totals(out))
            per = (totals[1] - totals[0]) / (big - small)
            print(f"{NAMES[client]}: {per:,.0f} instructions per transaction of "
                  f"{args.per_transaction} x {args.size} B ({per / args.per_transaction:,.0f}"
                  f" per record; {'pure' if args.pure else 'compiled'} twins; callgrind, "
                  f"{small} and {big} transactions)")
            if args.split:
                incl = [_inclusive(o) for o in outs]
                for label, pat in _SPLIT:
                    rx = re.compile(pat)
                    vals = [max([v for k, v in t.items() if rx.search(k)] or [0])
                            for t in incl]
                    print(f"  {label:<58} {(vals[1] - vals[0]) / (big - small):>12,.0f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "instructions":
        ap = argparse.ArgumentParser(description="instructions per transaction (callgrind)")
        ap.add_argument("mode")
        ap.add_argument("--bootstrap")
        ap.add_argument("--transactions", type=int, default=10)
        ap.add_argument("--per-transaction", type=int, default=1000)
        ap.add_argument("--size", type=int, default=100)
        ap.add_argument("--clients", default="kchannel")
        ap.add_argument("--pure", action="store_true")
        ap.add_argument("--split", action="store_true")
        ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
        ap.add_argument("--baseline", metavar="DIR",
                        help="also count kchannel from this checkout (its twins built)")
        cmd_instructions(ap.parse_args())
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap")
    ap.add_argument("--transactions", type=int, default=100)
    ap.add_argument("--per-transaction", type=int, default=1000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", metavar="DIR",
                    help="also run kchannel from this checkout (before/after in one run)")
    args = ap.parse_args()
    clients = CLIENTS + (("baseline",) if args.baseline else ())
    if args.baseline:
        NAMES["baseline"] = f"kchannel from {args.baseline}"
    with _Broker(args.bootstrap) as bootstrap:
        load_before = _load()
        from tests.fixtures.records import create_topic
        rounds = []
        for i in range(args.rounds):
            results = {}
            for client in (clients if i % 2 == 0 else clients[::-1]):
                topic = create_topic(bootstrap, f"txn-bench-{client}-{uuid.uuid4().hex[:8]}",
                                     partitions=1)
                results[client] = run_child(client, bootstrap, topic, args.transactions,
                                            args.per_transaction, args.size, args.baseline)
            rounds.append(results)
    load_after = _load()

    def per_cpu(r):
        return r["records"] / r["cpu"]

    def per_s(r):
        return r["records"] / r["wall"]

    def ratio(a, b, rate):
        return _median([rate(r[a]) / rate(r[b]) for r in rounds])

    print(f"Transactional producer, {args.transactions} transactions x "
          f"{args.per_transaction} records of {args.size} B, each committed; "
          f"{args.rounds} interleaved rounds, medians:")
    print(f"  before: {load_before}; after: {load_after}")
    for client in clients:
        cpu = _median([r[client]["cpu"] for r in rounds])
        wall = _median([r[client]["wall"] for r in rounds])
        print(f"  {NAMES[client]:30s} {_median([per_cpu(r[client]) for r in rounds]):10,.0f} "
              f"records/CPU-s  {_median([per_s(r[client]) for r in rounds]):10,.0f} records/s  "
              f"(cpu {cpu:.2f} s, wall {wall:.2f} s; "
              f"{cpu * 1000 / args.transactions:.2f} ms CPU per transaction"
              + ("" if client == "kchannel-idempotent" else
                 f"; {_median([r[client]['slow'] for r in rounds]) * 100 / args.transactions:.0f}%"
                 f" over {SLOW_MS} ms") + ")")
    k_cpu, k_s = ratio("kchannel", "confluent", per_cpu), ratio("kchannel", "confluent", per_s)
    t_cpu = ratio("kchannel-tuned", "confluent", per_cpu)
    t_s = ratio("kchannel-tuned", "confluent", per_s)
    print(f"  kchannel / confluent-kafka at their defaults: {k_cpu:.2f}x per CPU-second "
          f"(target >= 0.75x), {k_s:.2f}x per second")
    print(f"  kchannel with batch.size 1000000 (librdkafka's) / confluent-kafka: "
          f"{t_cpu:.2f}x per CPU-second, {t_s:.2f}x per second")
    print(f"  kchannel transactional / kchannel idempotent without transactions (flush() per "
          f"{args.per_transaction} records): "
          f"{ratio('kchannel', 'kchannel-idempotent', per_cpu):.2f}x per CPU-second, "
          f"{ratio('kchannel', 'kchannel-idempotent', per_s):.2f}x per second")
    print("  per round, kchannel / confluent-kafka per CPU-second: " + ", ".join(
        f"{per_cpu(r['kchannel']) / per_cpu(r['confluent']):.2f}x" for r in rounds))
    if args.baseline:
        print(f"  kchannel / kchannel from {args.baseline}: "
              f"{ratio('kchannel', 'baseline', per_cpu):.2f}x per CPU-second, "
              f"{ratio('kchannel', 'baseline', per_s):.2f}x per second; from "
              f"{args.baseline} / confluent-kafka: "
              f"{ratio('baseline', 'confluent', per_cpu):.2f}x per CPU-second (per round: "
              + ", ".join(f"{per_cpu(r['baseline']) / per_cpu(r['confluent']):.2f}x"
                          for r in rounds) + ")")
    k_rounds = [per_cpu(r["kchannel"]) / per_cpu(r["confluent"]) for r in rounds]
    row(f"Transactional producer vs confluent-kafka at their defaults "
        f"(`txn.py`, Apache Kafka, {args.transactions} transactions of "
        f"{args.per_transaction} x {args.size} B records, median of {args.rounds} "
        f"interleaved rounds; tuned: kchannel batch.size 1000000)",
        f"{k_cpu:.2f}x per CPU-second"
        + (f" (rounds {', '.join(f'{x:.2f}' for x in k_rounds)})" if len(rounds) > 1 else "")
        + f", {k_s:.2f}x per second; tuned {t_cpu:.2f}x "
        f"per CPU-second, {t_s:.2f}x per second", ">= 0.75x per CPU-second",
        k_cpu >= 0.75)


if __name__ == "__main__":
    main()
