"""Server CPU per authenticated connection and per request, ``kchannel
serve`` with 1 and 2 worker processes (``num.network.threads``).

    python benchmarks/serve_workers.py [--rounds 5] [--storm 200] [--key ec|rsa]
                                       [--requests 20000] [--connections 16]

Two ``kchannel serve`` processes run side by side, one with
``num.network.threads=1`` and one with ``2`` (SASL_SSL, SCRAM-SHA-512, the
test PKI's server certificate, SCRAM credentials in the SQLite store of each
one's data directory).  Each round, a storm of ``--storm`` connections from
one kchannel ``NetworkClient`` (benchmarks/auth_rate.py's storm) goes to
each server in turn, so both share the machine's load of the moment.  The
server's CPU is read from ``/proc/<pid>/stat`` of every worker process
(Linux only) before and after the storm.

Requests: each round also sends ``--requests`` Metadata requests (v1, no
topics: answered by the server itself) over ``--connections`` authenticated
SASL_SSL connections of one NetworkClient, up to 8 in flight per connection,
and reads the server's CPU the same way: server CPU microseconds per request
(TLS decryption and encryption of every request and response included).

Reported per configuration: median server CPU ms per authenticated
connection, and conn/s; median server CPU us per request, and requests/s.  A second worker should cost little CPU per
connection (the same work, spread); conn/s only grows when a core is idle,
which on a loaded machine it is not -- compare CPU per connection, not the
wall clock.
"""
import argparse
import os
import re
import select
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import auth_rate  # noqa: E402 - benchmarks/ sibling

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
TICKS = os.sysconf("SC_CLK_TCK")


def start_serve(directory, pki, workers, key):
    from kchannel.security.sasl.scram_store import credential_from_password, open_store
    data = os.path.join(directory, f"data-{workers}")
    os.makedirs(data)
    store = open_store(data_dir=data)
    store.put(auth_rate.USER, "SCRAM-SHA-512",
              credential_from_password("SCRAM-SHA-512", auth_rate.PASSWORD))
    store.close()
    props = {
        "node.id": "1",
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{SCRAM} required;",
        "log.dirs": data,
        "socket.listen.backlog.size": "1024",
        "num.network.threads": str(workers),
    }
    props.update(pki.server_configs(identity=pki.ec_server if key == "ec" else pki.server))
    cfg = os.path.join(directory, f"server-{workers}.properties")
    with open(cfg, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    proc = subprocess.Popen([sys.executable, "-m", "kchannel", "serve", "--config", cfg],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    buf = b""
    deadline = time.monotonic() + 120
    want = rb"(?s)(Worker \d+ of \d+ \(pid \d+\) serving.*){%d}" % workers if workers > 1 \
        else rb"started"
    while not re.search(want, buf):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"kchannel serve did not start: {buf.decode(errors='replace')}")
        if select.select([proc.stderr], [], [], 0.2)[0]:
            buf += os.read(proc.stderr.fileno(), 65536)
    port = int(re.search(rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.", buf).group(1))
    pids = [int(p) for p in re.findall(rb"Worker \d+ of \d+ \(pid (\d+)\)", buf)] or [proc.pid]
    return proc, port, pids


def requests_round(pki, port, pids, requests, connections, depth=8):
    """(server CPU us per request, requests/s) for ``requests`` Metadata v1
    requests spread over ``connections`` authenticated connections."""
    from kchannel.client import NetworkClient
    from kchannel.protocol.api_keys import ApiKey
    net = NetworkClient(auth_rate.kchannel_configs(pki, "SASL_SSL", "SCRAM-SHA-512"))
    try:
        ids = list(range(connections))
        auth_rate._wait_ready(net, set(ids),
                              lambda: [net.connect(i, "localhost", port) for i in ids])
        metadata = int(ApiKey.METADATA)
        sent = {i: 0 for i in ids}
        share = requests // connections
        got = 0
        total = share * connections
        c0, t0 = cpu_seconds(pids), time.perf_counter()
        while got < total:
            for i in ids:
                while sent[i] < share and net.in_flight_count(i) < depth:
                    net.send(i, metadata, {"topics": []}, 1)
                    sent[i] += 1
            for resp in net.poll(1000):
                if resp.exception is not None:
                    raise resp.exception
                got += 1
        dt = time.perf_counter() - t0
        return 1e6 * (cpu_seconds(pids) - c0) / total, total / dt
    finally:
        net.close()


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])   # utime, stime
    return total / TICKS


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--storm", type=int, default=200)
    ap.add_argument("--key", choices=("ec", "rsa"), default="ec")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("Linux only (SO_REUSEPORT workers, /proc CPU times)")
        return None
    import logging
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory() as d:
        pki_dir = os.path.join(d, "pki")
        os.mkdir(pki_dir)
        pki = auth_rate._pki(pki_dir)
        servers = {}
        try:
            for workers in (1, 2):
                servers[workers] = start_serve(d, pki, workers, args.key)
            results = {w: [] for w in servers}
            req_results = {w: [] for w in servers}
            for w, (_, port, _) in servers.items():   # warm-up
                auth_rate.kchannel_storm(pki, {"SASL_SSL": port}, "SASL_SSL", "SCRAM-SHA-512",
                                         20)
            for _ in range(args.rounds):
                for w, (_, port, pids) in servers.items():
                    c0 = cpu_seconds(pids)
                    rate = auth_rate.kchannel_storm(pki, {"SASL_SSL": port}, "SASL_SSL",
                                                    "SCRAM-SHA-512", args.storm)
                    results[w].append((1e3 * (cpu_seconds(pids) - c0) / args.storm, rate))
                for w, (_, port, pids) in servers.items():
                    req_results[w].append(requests_round(pki, port, pids, args.requests,
                                                         args.connections))
        finally:
            for proc, _, _ in servers.values():
                proc.terminate()
                proc.wait(30)
                proc.stderr.close()
    print(f"kchannel serve, SASL_SSL SCRAM-SHA-512, server key {args.key}, storms of "
          f"{args.storm} connections, {args.rounds} interleaved rounds (loaded-machine figures)")
    med = {}
    for w, rows in results.items():
        cpu = sorted(r[0] for r in rows)
        rate = sorted(r[1] for r in rows)
        med[w] = cpu[len(cpu) // 2]
        print(f"  {w} worker(s): server CPU {med[w]:.2f} ms per connection (rounds: "
              + ", ".join(f"{c:.2f}" for c, _ in rows) + f"); median {rate[len(rate) // 2]:.0f}"
              " conn/s")
    print(f"  2 workers / 1 worker, server CPU per connection: {med[2] / med[1]:.2f}")
    req = {}
    for w, rows in req_results.items():
        cpu = sorted(r[0] for r in rows)
        rate = sorted(r[1] for r in rows)
        req[w] = (cpu[len(cpu) // 2], rate[len(rate) // 2])
        print(f"  {w} worker(s): server CPU {req[w][0]:.1f} us per request (rounds: "
              + ", ".join(f"{c:.1f}" for c, _ in rows) + f"); median {req[w][1]:.0f} requests/s"
              f" ({args.connections} connections, Metadata v1)")
    print(f"  2 workers / 1 worker, server CPU per request: {req[2][0] / req[1][0]:.2f}")
    rate = {w: sorted(r[1] for r in rows)[len(rows) // 2] for w, rows in results.items()}
    from _results import row
    row(f"`kchannel serve` server CPU per authenticated SASL_SSL SCRAM-SHA-512 connection, "
        f"1 vs 2 worker processes (`num.network.threads`; `serve_workers.py`, storms of "
        f"{args.storm}, median of {args.rounds} rounds)",
        f"{med[1]:.2f} vs {med[2]:.2f} ms ({med[2] / med[1]:.2f}x per connection with 2); "
        f"{rate[1]:.0f} vs {rate[2]:.0f} conn/s")
    row(f"same, server CPU per request: Metadata v1 over {args.connections} SASL_SSL "
        f"connections, up to 8 in flight each, 1 vs 2 workers",
        f"{req[1][0]:.1f} vs {req[2][0]:.1f} us ({req[2][0] / req[1][0]:.2f}x per request with 2);"
        f" {req[1][1]:.0f} vs {req[2][1]:.0f} requests/s")
    return results


if __name__ == "__main__":
    main()
