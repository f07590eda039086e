"""What one depth-1 request round trip costs each side, counted, not timed.

    python benchmarks/rt_cost.py calls [--pure] [--requests 2000] [--depth 1]
    python benchmarks/rt_cost.py instructions [--pure] [--side client|server] [--depth 1]

The set-up is that of ``network_ratio.py`` (c): a
``kchannel.client.NetworkClient`` sends Metadata v1 requests (100 B, an
86-character client id) one at a time to a ``kchannel.server.Server`` in a
forked process whose Metadata handler returns a constant empty body.

``--depth N`` keeps N requests in flight instead (the client tops its
window up after every poll, as ``network_ratio.py`` (c) depth N does); the
counts are then per round trip of that pipeline.

``calls``: the interpreted (Python-level) function calls per round trip on
each side, by function, counted with ``sys.setprofile`` over the measured
requests (compiled twins' functions make no Python frames, so what is
listed is what still runs in the interpreter; C functions called from
Python are counted apart).

``instructions``: instructions per round trip of one side, counted by
valgrind's callgrind (independent of the machine's load): the side runs
twice under callgrind, with ``--requests`` and with five times as many
round trips, and the difference is divided by the extra round trips (start-
up, connection and warm-up cancel out).  The other side runs natively.
With ``--split`` the inclusive instructions of the compiled twins' entry
points and of the system calls are printed per round trip as well.
"""
import argparse
import collections
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

CLIENT_ID = "network-ratio-" + "x" * 72     # as network_ratio.py (100 B requests)
_MP = multiprocessing.get_context("fork")


class CallCounter:
    """Python-level calls (``call``) and C calls made from Python
    (``c_call``) by function while installed."""

    def __init__(self):
        self.calls = collections.Counter()
        self.c_calls = collections.Counter()

    def __call__(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            self.calls[(os.path.relpath(code.co_filename, ROOT), code.co_qualname)] += 1
        elif event == "c_call":
            self.c_calls[getattr(arg, "__qualname__", repr(arg))] += 1


def serve(port_out, stop_in, count_calls):
    """The Server side: runs until ``stop_in`` says so; sends back its
    call counts (or None)."""
    import threading
    from kchannel.protocol.api_keys import ApiKey
    from kchannel.server import Server
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    body = {"brokers": [], "controller_id": 0, "topics": []}
    server.register_handler(ApiKey.METADATA, lambda ctx: body)
    server.start()
    port_out.send(server.bound_port("PLAINTEXT"))
    serve_counted(server, stop_in, count_calls)


def serve_counted(server, ctl, count_calls):
    """Until ``ctl`` says stop; told "count" first, count the server's
    calls (installed in its thread from its next poll on) and, once shut
    down, send them back."""
    counter = CallCounter() if count_calls else None
    msg = ctl.recv()
    if counter is not None and msg == "count":
        _install_in_thread(server, counter)
        ctl.send("counting")
        msg = ctl.recv()
    server.shutdown()
    if counter is not None:
        ctl.send((dict(counter.calls), dict(counter.c_calls)))


def _install_in_thread(server, counter):
    """Install ``counter`` in the server's serving thread: wrap its poll so
    that the first call installs the profiler in that thread."""
    orig = server.poll

    def poll(*a, **k):
        sys.setprofile(counter)
        server.poll = orig
        return orig(*a, **k)
    server.poll = poll


def client(port, requests, counter=None, warmup=200, before=None, depth=1):
    from kchannel.client import NetworkClient
    from kchannel.protocol.api_keys import ApiKey
    net = NetworkClient({"client.id": CLIENT_ID})
    net.connect(0, "127.0.0.1", port)
    while not net.is_ready(0):
        net.poll(100)
    metadata = int(ApiKey.METADATA)
    body = {"topics": []}

    def run(n):
        if depth > 1:
            # as network_ratio.py (c) depth N: keep ``depth`` requests in
            # flight, topping the window up after every poll
            sent = got = 0
            while got < n:
                while sent < n and sent - got < depth:
                    net.send(0, metadata, body, 1)
                    sent += 1
                for resp in net.poll(1000):
                    if resp.exception is not None:
                        raise resp.exception
                    got += 1
            return
        for _ in range(n):
            net.send(0, metadata, body, 1)
            while True:
                out = net.poll(1000)
                if out:
                    break
            if out[0].exception is not None:
                raise out[0].exception

    run(warmup)
    if before is not None:
        before()
    if counter is not None:
        sys.setprofile(counter)
    run(requests)
    if counter is not None:
        sys.setprofile(None)
    net.close()


def _start_server(count_calls=False):
    port_r, port_w = _MP.Pipe(False)
    ctl_parent, ctl_child = _MP.Pipe()
    p = _MP.Process(target=serve, args=(port_w, ctl_child, count_calls), daemon=True)
    p.start()
    return p, port_r.recv(), ctl_parent


def cmd_calls(args):
    p, port, ctl = _start_server(True)
    # both sides count from after the client's warm-up (the server from
    # its next poll on, which may include the end of one idle wait)
    counter = CallCounter()

    def before():
        ctl.send("count")
        ctl.recv()

    client(port, args.requests, counter, before=before, depth=args.depth)
    ctl.send("stop")
    server_calls, server_c = ctl.recv()
    p.join(10)
    print_calls(counter, server_calls, server_c, args.requests, "round trip")


def print_calls(counter, server_calls, server_c, n, unit, threshold=0.05, c_top=15):
    """Each side's interpreted calls (and C calls from Python) per ``unit``
    over ``n`` of them, the functions at or above ``threshold`` per unit."""
    for side, calls, c_calls in (("client", counter.calls, counter.c_calls),
                                 ("server", server_calls, server_c)):
        total = sum(calls.values()) / n
        ctotal = sum(c_calls.values()) / n
        print(f"\n{side}: {total:.1f} interpreted calls per {unit}, "
              f"{ctotal:.1f} C calls from Python")
        for (fn, name), c in sorted(calls.items(), key=lambda kv: -kv[1]):
            if c / n >= threshold:
                print(f"  {c / n:6.2f}  {fn}:{name}")
        for name, c in sorted(c_calls.items(), key=lambda kv: -kv[1])[:c_top]:
            if c / n >= threshold:
                print(f"  {c / n:6.2f}  (C) {name}")


# (label, the compiled function whose inclusive instructions it is); the
# interpreted pieces (encoders, decoders, channel and transport methods,
# metric records) show inside the compiled steps that call them.
_SPLIT = [
    ("NetworkClient.send (encode, queue, in flight)", r"ClientLoop_\d+send$"),
    ("  Selector.send (queue on the channel)", r"SelectorLoop_\d+send$"),
    ("NetworkClient.poll", r"ClientLoop_\d+poll$"),
    ("  Selector.poll", r"SelectorLoop_\d+poll$"),
    ("    flush: channel + transport write", r"SelectorLoop__flush_queued$"),
    ("      of which send metrics", r"SelectorLoop__record_sends$"),
    ("    epoll wait", r"^select_epoll_poll$"),
    ("    ready channel (read, settle)", r"SelectorLoop__poll_channel$"),
    ("      read: channel, transport, frames", r"SelectorLoop__attempt_read$"),
    ("  response: correlate, decode, complete", r"ClientLoop__handle_response$"),
    ("Selector write-through (a Server's responses)", r"SelectorLoop__write_now$"),
]


def cmd_instructions(args):
    here = os.path.abspath(__file__)
    small, big = args.requests, args.requests * 5
    env = dict(os.environ, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as d:
        if args.keep:
            d = args.keep
            os.makedirs(d, exist_ok=True)
        totals = []
        outs = []
        for n in (small, big):
            out = os.path.join(d, f"cg.{n}")
            outs.append(out)
            cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                  sys.executable, here, "_side", args.side, "--depth", str(args.depth)] + (
                      ["--pure"] if args.pure else [])
            # the other side runs natively in a process of its own (a fork
            # under valgrind would run under it too)
            if args.side == "client":
                p, port, ctl = _start_server(False)
                subprocess.run(cg + ["--requests", str(n), "--port", str(port)], env=env,
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                ctl.send("stop")
                p.join(10)
            else:
                served_under_callgrind(
                    cg, env, os.path.join(d, f"port.{n}"),
                    lambda port: _MP.Process(target=client, args=(port, n),
                                             kwargs={"depth": args.depth}, daemon=True))
            totals.append(_totals(out))
        per = (totals[1] - totals[0]) / (big - small)
        print(f"{args.side}: {per:,.0f} instructions per depth-{args.depth} round trip "
              f"({'pure' if args.pure else 'compiled'} twins; callgrind, {small} and {big} "
              "round trips)")
        if args.split:
            incl = [_inclusive(o) for o in outs]
            for label, pat in _SPLIT:
                rx = re.compile(pat)
                vals = []
                for table in incl:
                    vals.append(max([v for k, v in table.items() if rx.search(k)] or [0]))
                print(f"  {label:<48} {(vals[1] - vals[0]) / (big - small):>10,.0f}")


def served_under_callgrind(cg, env, portfile, make_peer):
    """Run the server side ``cg`` (a callgrind command line taking
    ``--port-file``) and, once it has written its port, the native peer
    process ``make_peer(port)`` against it; then tell the server to stop
    (on its stdin) and wait for callgrind to write its counts."""
    proc = subprocess.Popen(cg + ["--port-file", portfile], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True)
    while not (os.path.exists(portfile) and os.path.getsize(portfile)):
        time.sleep(0.2)
    with open(portfile) as f:
        port = int(f.read())
    peer = make_peer(port)
    peer.start()
    peer.join()
    proc.communicate("stop\n", timeout=600)


def _totals(out):
    with open(out) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in " + out)


def _inclusive(out):
    """function name -> inclusive instructions (callgrind_annotate)."""
    res = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                         capture_output=True, text=True, check=True).stdout
    table = {}
    for line in res.splitlines():
        if re.search(r"\(\d[\d,]*x\)", line):
            continue      # (a call-count line, not the function's own)
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(?:\S+:)?(\S+)", line)
        if m:
            v = int(m.group(1).replace(",", ""))
            name = m.group(2)
            table[name] = max(table.get(name, 0), v)
    return table


def cmd_side(args):
    """(run under callgrind by cmd_instructions) one side; the other runs
    natively, started by cmd_instructions."""
    if args.side == "client":
        client(args.port, args.requests, depth=args.depth)
        return
    from kchannel.protocol.api_keys import ApiKey
    from kchannel.server import Server
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    body = {"brokers": [], "controller_id": 0, "topics": []}
    server.register_handler(ApiKey.METADATA, lambda ctx: body)
    serve_until_stopped(server, "PLAINTEXT", args.port_file)


def serve_until_stopped(server, listener, port_file):
    """The server side under callgrind (see served_under_callgrind): serve
    in a thread, write the listener's port to ``port_file`` (atomically),
    stop at a line on stdin."""
    import threading
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.bound_port(listener)))
    os.rename(port_file + ".tmp", port_file)
    sys.stdin.readline()
    server.shutdown()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["calls", "instructions", "_side"])
    ap.add_argument("side", nargs="?", default="client", choices=["client", "server"])
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--depth", type=int, default=1,
                    help="requests kept in flight (network_ratio.py (c) depth N; default 1)")
    ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
    ap.add_argument("--port", type=int)
    ap.add_argument("--port-file")
    args = ap.parse_args(argv)
    if args.pure:
        os.environ["KCHANNEL_NO_EXTENSIONS"] = "1"
    if args.mode == "calls":
        args.requests = args.requests or 2000
        cmd_calls(args)
    elif args.mode == "instructions":
        args.requests = args.requests or 200
        cmd_instructions(args)
    else:
        cmd_side(args)


if __name__ == "__main__":
    main()
