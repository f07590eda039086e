"""What one consumed record costs kchannel's Consumer, counted, not timed.

    python benchmarks/consumer_cost.py instructions [--pure] [--size 1024] [--records 3000]
    python benchmarks/consumer_cost.py calls [--pure] [--size 1024] [--records 3000]
    python benchmarks/consumer_cost.py timed [--pure] [--size 1024] [--records 100000]

The broker is a ``kchannel.server.Server`` in a forked process (Metadata,
ListOffsets and Fetch handlers, as tests/consumer/test_consumer_hostile_broker.py)
serving one partition of records already written: uncompressed v2 batches
of ``--size`` B values and no key, as many to a batch as kchannel's producer
puts in one at Kafka's default batch.size 16384 (15 at 1 KiB), a Fetch
answered with the whole batches from the fetch offset up to the request's
partition_max_bytes (Kafka's default max.partition.fetch.bytes 1 MiB).  The
consumer is the one of ``records_clients.py``: Kafka's defaults,
``auto.offset.reset=earliest``, assign, ``poll(1.0)`` until it has
``--records`` records.

``instructions``: instructions per consumed record of the consumer process,
counted by valgrind's callgrind (independent of the machine's load): it runs
twice under callgrind, with ``--records`` and five times as many, and the
difference is divided by the extra records (start-up, connection and the
first fetches cancel out).  The broker runs natively.  With ``--split`` the
inclusive instructions of a few steps are printed per record as well.

``calls``: the interpreted (Python-level) function calls per record, by
function (``sys.setprofile``), over the measured records.

``timed``: records per CPU-second of the consumer process (a second opinion;
load-dependent).
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

from benchmarks.rt_cost import (_MP, CallCounter, _inclusive,  # noqa: E402
                                _totals)

TOPIC = "cost"
BATCH_SIZE = 16384       # Kafka's default batch.size


def records_per_batch(size):
    """How many records of ``size`` B values (no key, no headers) kchannel's
    producer puts in one batch at batch.size 16384: the 61 B header, then
    records of (size + about 9) B while they fit."""
    from kchannel.protocol.records import encode_batch
    n = 1
    while len(encode_batch([(1_700_000_000_000, None, b"x" * size, [])] * (n + 1))) \
            <= BATCH_SIZE:
        n += 1
    return n


def broker(port_out, stop_in, total, size):
    from kchannel.protocol.api_keys import ApiKey
    from kchannel.protocol.records import encode_batch
    from kchannel.server import Server
    per = records_per_batch(size)
    value = b"x" * size
    batches = []        # (base offset, bytes)
    offset = 0
    ts = 1_700_000_000_000
    while offset < total:
        n = min(per, total - offset)
        batches.append((offset, encode_batch([(ts + i // 7, None, value, [])
                                              for i in range(n)], base_offset=offset)))
        offset += n
    hw = offset
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    port = None

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

    def list_offsets(ctx):
        return {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 0,
             "leader_epoch": 0}]}]}

    def fetch(ctx):
        want = ctx.body["topics"][0]["partitions"][0]
        at, limit = want["fetch_offset"], want["partition_max_bytes"]
        i = 0
        while i < len(batches) and batches[i][0] + per <= at:
            i += 1
        out = []
        got = 0
        while i < len(batches) and (not out or got + len(batches[i][1]) <= limit):
            out.append(batches[i][1])
            got += len(batches[i][1])
            i += 1
        return {"error_code": 0, "session_id": 0, "responses": [
            {"topic": TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": hw,
                 "last_stable_offset": hw, "log_start_offset": 0,
                 "aborted_transactions": None, "preferred_read_replica": -1,
                 "records": b"".join(out)}]}]}

    server.register_handler(ApiKey.METADATA, metadata)
    server.register_handler(ApiKey.LIST_OFFSETS, list_offsets)
    server.register_handler(ApiKey.FETCH, fetch, max_version=12)
    server.start()
    port = server.bound_port("PLAINTEXT")
    port_out.send(port)
    stop_in.recv()
    server.shutdown()


def _start_broker(total, size):
    port_r, port_w = _MP.Pipe(False)
    ctl_parent, ctl_child = _MP.Pipe()
    p = _MP.Process(target=broker, args=(port_w, ctl_child, total, size), daemon=True)
    p.start()
    return p, port_r.recv(), ctl_parent


def consume(port, n, counter=None, warmup=0):
    from kchannel import Consumer
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "auto.offset.reset": "earliest"})
    c.assign([(TOPIC, 0)])
    got = 0
    while got < warmup:
        got += len(c.poll(1.0))
    if counter is not None:
        sys.setprofile(counter)
    t0 = time.process_time()
    got = 0
    while got < n:
        got += len(c.poll(1.0))
    cpu = time.process_time() - t0
    if counter is not None:
        sys.setprofile(None)
    c.close()
    return got, cpu


# (label, the function whose inclusive instructions it is)
_SPLIT = [
    ("Consumer.poll", r"(^|\.)poll'?\d*$|Consumer\.poll"),
    ("  Fetcher.fetched_records", r"fetched_records"),
    ("    PartitionReader.read_into", r"PartitionReader_\d*read_into$"),
    ("      crc32c", r"_crc32c$"),
    ("  Fetcher._handle (response)", r"Fetcher\._handle|_handle$"),
    ("memcpy / memmove", r"^__memcpy|^__memmove"),
    ("recv", r"^recv$|^__libc_recv$"),
]


def cmd_instructions(args):
    here = os.path.abspath(__file__)
    small, big = args.records, args.records * 5
    env = dict(os.environ, PYTHONHASHSEED="0")
    totals, outs = [], []
    with tempfile.TemporaryDirectory() as d:
        if args.keep:
            d = args.keep
            os.makedirs(d, exist_ok=True)
        for n in (small, big):
            out = os.path.join(d, f"cg.{n}")
            outs.append(out)
            p, port, ctl = _start_broker(big, args.size)
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            sys.executable, here, "_consume", "--port", str(port),
                            "--records", str(n), "--size", str(args.size)]
                           + (["--pure"] if args.pure else []),
                           env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            ctl.send("stop")
            p.join(10)
            totals.append(_totals(out))
        per = (totals[1] - totals[0]) / (big - small)
        print(f"consumer: {per:,.0f} instructions per consumed {args.size} B record "
              f"({'pure' if args.pure else 'compiled'} twins; callgrind, {small} and {big} "
              "records)")
        if args.split:
            incl = [_inclusive(o) for o in outs]
            for label, pat in _SPLIT:
                rx = re.compile(pat)
                vals = [max([v for k, v in t.items() if rx.search(k)] or [0]) for t in incl]
                print(f"  {label:<40} {(vals[1] - vals[0]) / (big - small):>10,.0f}")


def cmd_calls(args):
    p, port, ctl = _start_broker(args.records * 2 + 5000, args.size)
    counter = CallCounter()
    got, _ = consume(port, args.records, counter, warmup=args.records // 2)
    ctl.send("stop")
    p.join(10)
    n = got
    total = sum(counter.calls.values()) / n
    print(f"consumer: {total:.3f} interpreted calls per record, "
          f"{sum(counter.c_calls.values()) / n:.3f} C calls from Python")
    for (fn, name), c in sorted(counter.calls.items(), key=lambda kv: -kv[1]):
        if c / n >= 0.001:
            print(f"  {c / n:8.4f}  {fn}:{name}")
    for name, c in sorted(counter.c_calls.items(), key=lambda kv: -kv[1])[:15]:
        if c / n >= 0.001:
            print(f"  {c / n:8.4f}  (C) {name}")


def cmd_timed(args):
    # more than asked for: a poll may overshoot the warm-up (the rest of a
    # fetch), and the consumer would then wait for records never written
    p, port, ctl = _start_broker(args.records + 25000, args.size)
    got, cpu = consume(port, args.records, warmup=20000)
    ctl.send("stop")
    p.join(10)
    print(f"consumer: {got / cpu / 1e3:,.0f} k records per CPU-second ({args.size} B, "
          f"{'pure' if args.pure else 'compiled'} twins; load {os.getloadavg()[0]:.1f})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["instructions", "calls", "timed", "_consume"])
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--records", type=int, default=None)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
    ap.add_argument("--port", type=int)
    args = ap.parse_args(argv)
    if args.pure:
        os.environ["KCHANNEL_NO_EXTENSIONS"] = "1"
    if args.mode == "instructions":
        args.records = args.records or 3000
        cmd_instructions(args)
    elif args.mode == "calls":
        args.records = args.records or 3000
        cmd_calls(args)
    elif args.mode == "timed":
        args.records = args.records or 100000
        cmd_timed(args)
    else:
        consume(args.port, args.records)


if __name__ == "__main__":
    main()
