"""Scale proof: N authenticated SASL_SSL SCRAM-SHA-512 connections held by
one kchannel ``Server`` process, then all closed by idle expiry.

    python benchmarks/scale.py [--connections 19000] [--clients 2] [--idle-ms 3000]

The server runs in its own process; ``--clients`` processes (a process may
hold at most 20,000 open files) each log in ``connections / clients`` times
with one kchannel NetworkClient, as a client really does (TLS with the test
PKI's ECDSA certificate, SCRAM-SHA-512).  Reported, from /proc of each
process: server and client resident memory per connection (RSS growth / N;
targets <= 30 KB server, <= 36 KB client), open file descriptors before,
while holding and after.  Then the server's ``connections.max.idle.ms`` is
lowered to ``--idle-ms``: the server closes every connection by itself; the
longest poll of its selector while doing so is reported (target <= 50 ms),
and afterwards no descriptor is left open on either side.
"""
import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_MP = multiprocessing.get_context("fork")


def rss_kb(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid="self"):
    return len(os.listdir(f"/proc/{pid}/fd"))


def _serve(pipe, pki, log_dir):
    logging.basicConfig(level=logging.ERROR)
    import auth_rate
    from kchannel.security.sasl.scram_store import (
        InMemoryScramCredentialStore, credential_from_password)
    from kchannel.server import Server
    store = InMemoryScramCredentialStore()
    store.put(auth_rate.USER, "SCRAM-SHA-512",
              credential_from_password("SCRAM-SHA-512", auth_rate.PASSWORD))
    props = auth_rate.server_props(pki, log_dir, "ec")
    props["connections.max.idle.ms"] = str(24 * 3600 * 1000)
    props["max.connections"] = "100000"
    server = Server(props, sasl_kwargs={"scram_store": store})
    sel = server.selector
    longest = [0.0]
    poll = sel.poll

    def timed_poll(timeout_ms):
        t0 = time.perf_counter()
        try:
            return poll(timeout_ms)
        finally:
            longest[0] = max(longest[0], time.perf_counter() - t0 - _waited[0])
            _waited[0] = 0.0
    # A poll's select() waiting for events is not work: only the rest counts.
    _waited = [0.0]
    select = sel._os.sel.select

    def timed_select(timeout=None):
        t0 = time.perf_counter()
        try:
            return select(timeout)
        finally:
            _waited[0] += time.perf_counter() - t0
    sel._os.sel.select = timed_select

    # The poll loop calls epoll directly where it can (Selector._epoll), not
    # the selectors module: its wait is timed there.
    class _TimedEpoll:
        def __init__(self, epoll):
            self._epoll = epoll

        def poll(self, *args):
            t0 = time.perf_counter()
            try:
                return self._epoll.poll(*args)
            finally:
                _waited[0] += time.perf_counter() - t0

        def __getattr__(self, name):
            return getattr(self._epoll, name)
    if getattr(sel, "_epoll", None) is not None:
        sel._epoll = _TimedEpoll(sel._epoll)
    sel.poll = timed_poll
    server.start()
    pipe.send(server.bound_port("SASL_SSL"))
    while True:
        cmd = pipe.recv()
        if cmd == "stats":
            pipe.send((rss_kb(), fds(), len(sel)))
        elif cmd.startswith("idle "):
            longest[0] = 0.0
            sel.connections_max_idle_ms = int(cmd.split()[1])   # checked at the next poll
            pipe.send(True)
        elif cmd == "longest":
            pipe.send(longest[0])
        else:
            break
    server.shutdown()
    pipe.send((rss_kb(), fds()))


def _client(pipe, pki, port, n):
    logging.basicConfig(level=logging.ERROR)
    import auth_rate
    from kchannel.client import ConnectionState, NetworkClient
    net = NetworkClient(auth_rate.kchannel_configs(pki, "SASL_SSL", "SCRAM-SHA-512"))
    # One login first: the TLS session and the SCRAM keys it caches are
    # part of the client's steady state, not of the per-connection cost.
    _ready(net, ["warm"], port)
    net.close("warm")
    net.poll(0)
    base_rss, base_fds = rss_kb(), fds()
    pipe.send("ready")
    pipe.recv()
    ids = [f"c{i}" for i in range(n)]
    for i in range(0, n, 250):
        _ready(net, ids[i:i + 250], port)
        pipe.send(("progress", min(n, i + 250)))
    pipe.send(("held", rss_kb() - base_rss, fds() - base_fds))
    pipe.recv()                           # the server expires them now
    deadline = time.time() + 600
    while time.time() < deadline:
        net.poll(100)
        alive = sum(1 for i in ids if net.connection_state(i) is not ConnectionState.DISCONNECTED)
        if not alive:
            break
    for i in ids:
        net.close(i)
    net.poll(0)
    pipe.send(("closed", alive, fds() - base_fds))
    pipe.recv()
    net.close()


def _ready(net, ids, port):
    import auth_rate
    auth_rate._wait_ready(net, set(ids), lambda: [net.connect(i, "localhost", port)
                                                  for i in ids])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=19000)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--idle-ms", type=int, default=3000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kchannel-scale-")
    pki_dir = os.path.join(tmp, "pki")
    os.makedirs(pki_dir)
    import auth_rate
    # One PKI, inherited by the forked server and clients.
    pki = auth_rate._pki(pki_dir)
    parent, child = _MP.Pipe()
    server = _MP.Process(target=_serve, args=(child, pki, os.path.join(tmp, "log")),
                         daemon=True)
    server.start()
    port = parent.recv()
    parent.send("stats")
    s_rss0, s_fds0, _ = parent.recv()
    share = [args.connections // args.clients + (1 if i < args.connections % args.clients else 0)
             for i in range(args.clients)]
    clients = []
    for n in share:
        a, b = _MP.Pipe()
        p = _MP.Process(target=_client, args=(b, pki, port, n), daemon=True)
        p.start()
        clients.append((p, a))
    for _, a in clients:
        assert a.recv() == "ready"
    time.sleep(0.5)     # the server closes the warm-up connections
    parent.send("stats")
    s_rss0, s_fds0, base_conns = parent.recv()
    t0 = time.perf_counter()
    for _, a in clients:
        a.send("go")
    held = []
    done = [0] * len(clients)
    last = 0
    while len(held) < len(clients):
        for k, (_, a) in enumerate(clients):
            while a.poll(0):
                msg = a.recv()
                if msg[0] == "progress":
                    done[k] = msg[1]
                else:
                    held.append(msg)
        if time.time() - last > 5:
            print(f"  {sum(done)} / {args.connections} connections authenticated", flush=True)
            last = time.time()
        time.sleep(0.05)
    setup = time.perf_counter() - t0
    parent.send("stats")
    s_rss1, s_fds1, conns = parent.recv()
    n = args.connections
    c_rss = sum(h[1] for h in held)
    print(f"{n} SASL_SSL SCRAM-SHA-512 connections authenticated in {setup:.0f} s "
          f"({n / setup:.0f}/s); server holds {conns - base_conns}")
    print(f"server memory per connection {(s_rss1 - s_rss0) / n:.1f} KB (target <= 30 KB); "
          f"client {c_rss / n:.1f} KB (target <= 36 KB); descriptors held: server "
          f"+{s_fds1 - s_fds0}, clients +{sum(h[2] for h in held)}", flush=True)
    parent.send(f"idle {args.idle_ms}")
    parent.recv()
    t1 = time.perf_counter()
    for _, a in clients:
        a.send("expire")
    closed = [a.recv() for _, a in clients]
    expire = time.perf_counter() - t1
    parent.send("stats")
    s_rss2, s_fds2, conns2 = parent.recv()
    parent.send("longest")
    longest = parent.recv()
    print(f"idle expiry ({args.idle_ms} ms) closed them all in {expire:.1f} s; the server's "
          f"longest poll doing so {longest * 1000:.1f} ms (target <= 50 ms); left open: "
          f"server {conns2 - base_conns} connections, {s_fds2 - s_fds0} descriptors; clients "
          f"{sum(c[1] for c in closed)} connections, {sum(c[2] for c in closed)} descriptors")
    from _results import row
    s_kb, c_kb = (s_rss1 - s_rss0) / n, c_rss / n
    row(f"{n} authenticated SASL_SSL SCRAM-SHA-512 connections held by one `Server` process "
        f"(`scale.py`, {args.clients} client processes): memory per connection, server / client",
        f"{s_kb:.1f} / {c_kb:.1f} KB (all {n} authenticated in {setup:.0f} s, {n / setup:.0f}/s)",
        "<= 30 KB / <= 36 KB", s_kb <= 30 and c_kb <= 36)
    left = (conns2 - base_conns, s_fds2 - s_fds0, sum(c[1] for c in closed),
            sum(c[2] for c in closed))
    row(f"same, idle expiry (`connections.max.idle.ms`={args.idle_ms}) closing them all: "
        "the server's longest poll; connections and descriptors left (server, clients)",
        f"closed in {expire:.1f} s, longest poll {longest * 1000:.1f} ms; left: "
        f"{left[0]} + {left[2]} connections, {left[1]} + {left[3]} descriptors",
        "poll <= 50 ms, nothing left", longest <= 0.050 and not any(left))
    for _, a in clients:
        a.send("stop")
    parent.send("stop")
    for p, _ in clients:
        p.join(30)
    server.join(30)


if __name__ == "__main__":
    main()
