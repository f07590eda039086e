"""What the producer costs per Produce request and per record, counted, not timed.

    python benchmarks/producer_cost.py calls [--pure] [--records 3000] [--size 1024]
    python benchmarks/producer_cost.py instructions [--pure] [--records 1500] [--size 1024]
    (either with [--shape plain|key|partition|headers|timestamp|callback|all])

The set-up is that of ``records_clients.py``'s kchannel producer at its
defaults (Kafka's ``batch.size`` 16384 and ``linger.ms`` 5, acks=1, no
idempotence, ``send(T, V)`` in a loop, one partition), against a
``kchannel.server.Server`` in a forked process that answers Metadata with
one partition and every Produce with a constant answer (the broker's cost
is not measured; it counts the Produce requests and their records).

``calls``: the interpreted (Python-level) function calls per Produce
request on the Sender thread and per record on the application thread, by
function (``sys.setprofile`` in both threads over the measured records;
compiled twins' functions make no Python frames).

``instructions``: instructions per Produce request on the Sender thread
and per record on the application thread, counted by valgrind's callgrind
(``--separate-threads``, independent of the machine's load): the producer
runs twice under callgrind, with ``--records`` and five times as many after
the same warm-up, and the difference is divided by the extra Produce
requests (Sender) or records (application).  Kernel time is not counted
(nor are the wake-ups and system calls: under valgrind the threads take
turns, so the passes of the Sender's loop per request differ from a
native run's).  The sum of every thread per record is printed too.

``--shape``: the records are sent as ``records_clients.py`` sends that
record shape (its SHAPE_KW loop: the shape's keywords spelled out in the
call), 100 B values with ``--size 100``: what a shape costs against the
plain record, both threads (a callback runs on the Sender's).
"""
import argparse
import collections
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.rt_cost import CallCounter  # noqa: E402

TOPIC = "cost"
_MP = multiprocessing.get_context("fork")


def serve(port_out, ctl):
    """A Server answering Metadata (one partition, itself the leader) and
    Produce (a constant answer per partition, offsets counted); reports
    (requests, records) on ``ctl`` when asked, stops when told."""
    from kchannel.protocol.api_keys import ApiKey
    from kchannel.server import Server
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    port = None
    counts = [0, 0]

    def metadata(ctx):
        node = server.node_id
        return {"brokers": [{"node_id": node, "host": "127.0.0.1", "port": port,
                             "rack": None}],
                "cluster_id": "cost", "controller_id": node,
                "topics": [{"error_code": 0, "name": TOPIC, "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": 0,
                                            "leader_id": node, "leader_epoch": 0,
                                            "replica_nodes": [node], "isr_nodes": [node],
                                            "offline_replicas": []}]}]}

    def produce(ctx):
        counts[0] += 1
        out = []
        for topic in ctx.body["topic_data"]:
            parts = []
            for p in topic["partition_data"]:
                raw = p["records"]
                n = int.from_bytes(raw[57:61], "big")      # the batch's record count
                parts.append({"index": p["index"], "error_code": 0, "base_offset": counts[1],
                              "log_append_time_ms": -1, "log_start_offset": 0,
                              "record_errors": [], "error_message": None})
                counts[1] += n
            out.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": out, "throttle_time_ms": 0}

    server.register_handler(ApiKey.METADATA, metadata)
    server.register_handler(ApiKey.PRODUCE, produce)
    server.start()
    port = server.bound_port("PLAINTEXT")
    port_out.send(port)
    while True:
        msg = ctl.recv()
        if msg == "count":
            ctl.send(tuple(counts))
        else:
            break
    server.shutdown()


def _start_server():
    port_r, port_w = _MP.Pipe(False)
    ctl_parent, ctl_child = _MP.Pipe()
    p = _MP.Process(target=serve, args=(port_w, ctl_child), daemon=True)
    p.start()
    return p, port_r.recv(), ctl_parent


def _shape_loop(shape, value):
    """records_clients.py's loop of a record shape (its SHAPE_KW: the
    shape's keywords spelled out in the call), ``loop(send, n)``; None for
    the plain record (its own ``for`` loop, as there)."""
    if shape == "plain":
        return None
    import time
    from benchmarks.records_clients import SHAPE_KW
    ns = {"SHAPE": shape, "T": TOPIC, "V": value, "time": time}
    exec(SHAPE_KW, ns)
    return ns["shape_loop"]("fn(T, V{args})")


def produce(port, records, size, warmup=2000, before=None, after=None, shape="plain"):
    """records_clients.py's kchannel producer loop: ``warmup`` records and a
    flush, ``before()``, ``records`` records and a flush, ``after()``.
    ``shape``: records_clients.py's record shape (``--shape``)."""
    from kchannel import Producer
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1",
                  "enable.idempotence": "false"})
    value = b"x" * size
    send = p.send
    loop = _shape_loop(shape, value)
    if loop is not None:
        loop(send, warmup)
    else:
        for _ in range(warmup):
            send(TOPIC, value)
    p.flush()
    if before is not None:
        before(p)
    if loop is not None:
        loop(send, records)
    else:
        for _ in range(records):
            send(TOPIC, value)
    p.flush()
    if after is not None:
        after(p)
    p.close()


class ThreadCalls:
    """A CallCounter per thread (keyed by thread name)."""

    def __init__(self):
        self.by_thread = collections.defaultdict(CallCounter)

    def __call__(self, frame, event, arg):
        self.by_thread[threading.current_thread().name](frame, event, arg)


def _profile_sender_from_next_pass(prod, profiler):
    """Install ``profiler`` (None: remove it) in the running Sender thread,
    from its next call of its loop's entry point on (run_once goes through
    _run_safely): sys.setprofile reaches only the calling thread."""
    sender = prod._sender
    orig = sender._run_safely

    def once(*a, **k):
        sys.setprofile(profiler)
        sender._run_safely = orig
        return orig(*a, **k)
    sender._run_safely = once


def cmd_calls(args):
    p, port, ctl = _start_server()
    counter = ThreadCalls()
    marks = {}

    def before(prod):
        ctl.send("count")
        marks["before"] = ctl.recv()
        threading.setprofile(counter)
        _profile_sender_from_next_pass(prod, counter)
        sys.setprofile(counter)

    def after(prod):
        sys.setprofile(None)
        threading.setprofile(None)
        _profile_sender_from_next_pass(prod, None)
        ctl.send("count")
        marks["after"] = ctl.recv()

    produce(port, args.records, args.size, before=before, after=after, shape=args.shape)
    ctl.send("stop")
    p.join(10)
    requests = marks["after"][0] - marks["before"][0]
    records = marks["after"][1] - marks["before"][1]
    print(f"{records} records of {args.size} B in {requests} Produce requests "
          f"({records / requests:.1f} records per request; "
          f"{'pure' if args.pure else 'compiled'} twins)")
    for name, c in sorted(counter.by_thread.items()):
        if not c.calls:
            continue          # (a thread that only passed through the hook)
        is_app = name == "MainThread"
        n, unit = (records, "record") if is_app else (requests, "Produce request")
        total = sum(c.calls.values()) / n
        ctotal = sum(c.c_calls.values()) / n
        print(f"\n{name}: {total:.1f} interpreted calls per {unit}, "
              f"{ctotal:.1f} C calls from Python")
        for (fn, qn), k in sorted(c.calls.items(), key=lambda kv: -kv[1]):
            if k / n >= args.threshold:
                print(f"  {k / n:6.2f}  {fn}:{qn}")
        for qn, k in sorted(c.c_calls.items(), key=lambda kv: -kv[1])[:15]:
            if k / n >= args.threshold:
                print(f"  {k / n:6.2f}  (C) {qn}")


def _thread_totals(prefix):
    """{thread number: instructions} of a --separate-threads run."""
    out = {}
    d = os.path.dirname(prefix)
    base = os.path.basename(prefix)
    for fn in os.listdir(d):
        m = re.fullmatch(re.escape(base) + r"-(\d+)", fn)
        if not m:
            continue
        with open(os.path.join(d, fn)) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    out[int(m.group(1))] = int(line.split()[1])
                    break
    return out


def cmd_instructions(args):
    here = os.path.abspath(__file__)
    small, big = args.records, args.records * 5
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as d:
        if args.keep:
            d = args.keep
            os.makedirs(d, exist_ok=True)
        runs = []
        for n in (small, big):
            out = os.path.join(d, f"cg.{n}")
            cg = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                  f"--callgrind-out-file={out}", sys.executable, here, "_side",
                  "--records", str(n), "--size", str(args.size), "--shape", args.shape] + (
                      ["--pure"] if args.pure else [])
            p, port, ctl = _start_server()
            ctl.send("count")
            c0 = ctl.recv()
            subprocess.run(cg + ["--port", str(port)], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ctl.send("count")
            c1 = ctl.recv()
            ctl.send("stop")
            p.join(10)
            runs.append((_thread_totals(out), c1[0] - c0[0], c1[1] - c0[1]))
        (t0, q0, r0), (t1, q1, r1) = runs
        dq, dr = q1 - q0, r1 - r0
        print(f"{'pure' if args.pure else 'compiled'} twins, {args.size} B records "
              f"({args.shape}); callgrind, "
              f"{small} and {big} records after the same warm-up: {dr} records in {dq} "
              f"more Produce requests ({dr / dq:.1f} records per request)")
        app = (t1.get(1, 0) - t0.get(1, 0))
        # the Sender: the thread (other than the main one) that grew most
        others = {k: t1.get(k, 0) - t0.get(k, 0) for k in t1 if k != 1}
        sender_tid = max(others, key=others.get)
        snd = others[sender_tid]
        print(f"  application thread: {app / dr:,.0f} instructions per record "
              f"({app / dq:,.0f} per request)")
        print(f"  Sender thread:      {snd / dq:,.0f} instructions per Produce request")
        total = app + sum(others.values())
        print(f"  all threads:        {total / dr:,.0f} instructions per record")
        for k, v in sorted(others.items()):
            if k != sender_tid and abs(v) / dq > 100:
                print(f"  thread {k}: {v / dq:,.0f} per request")


def cmd_side(args):
    produce(args.port, args.records, args.size, shape=args.shape)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["calls", "instructions", "_side"])
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threshold", type=float, default=0.05,
                    help="calls: list functions called at least this often per unit")
    ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
    ap.add_argument("--port", type=int)
    ap.add_argument("--shape", default="plain",
                    help="records_clients.py's record shape (plain, key, partition, headers, "
                         "timestamp, callback, all): its send() call, keywords spelled out")
    args = ap.parse_args(argv)
    if args.pure:
        os.environ["KCHANNEL_NO_EXTENSIONS"] = "1"
    if args.mode == "calls":
        args.records = args.records or 3000
        cmd_calls(args)
    elif args.mode == "instructions":
        args.records = args.records or 1500
        cmd_instructions(args)
    else:
        cmd_side(args)


if __name__ == "__main__":
    main()
