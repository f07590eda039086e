"""What one SASL_SSL SCRAM-SHA-512 storm connection costs each side, counted, not timed.

    python benchmarks/storm_cost.py calls [--pure] [--storm 200]
    python benchmarks/storm_cost.py instructions [--pure] [--side client|server|tls]
                                    [--storm 10] [--big 50]

The set-up is ``auth_rate.py``'s ``kchannel storm`` cell: one
``kchannel.client.NetworkClient`` opens a storm of SASL_SSL SCRAM-SHA-512
connections to a ``kchannel.server.Server`` (``auth_rate.py``'s listeners,
certificates and in-memory credential store) and polls until every one is
READY; a warm-up storm comes first on another NetworkClient (the client's
salted-password cache is warm, as in ``auth_rate.py``; the measured storm's
TLS session cache is empty, so every connection makes a full handshake, as
in ``auth_rate.py``'s storm cell).

``calls``: interpreted (Python-level) function calls per connection on each
side, by function (``sys.setprofile`` over the measured storm only).

``instructions``: instructions per connection of one side, counted by
valgrind's callgrind (independent of the machine's load): the side runs
twice under callgrind, with storms of ``--storm`` and ``--big`` connections
after the same warm-up, and the difference is divided by the extra
connections.  The other side runs natively.  ``--side tls`` counts the
client of ``auth_rate.py``'s TLS-handshakes-only storm (the ceiling) the
same way, so the storm's share by instructions is tls / client.
"""
import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

import auth_rate   # noqa: E402  (the storm's server and client set-up)
from rt_cost import (CallCounter, _totals, print_calls,   # noqa: E402
                     serve_counted, served_under_callgrind, serve_until_stopped)

_MP = multiprocessing.get_context("fork")
_make_pki = auth_rate._pki


def _load_pki(directory):
    """The PKI made once in ``directory`` (auth_rate's ``_pki`` makes a new
    one at every call; the callgrind runs are separate processes)."""
    import dataclasses
    import pickle
    path = os.path.join(directory, "pki.pickle")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    pki = _make_pki(directory)
    for name, value in list(vars(pki).items()):
        if dataclasses.is_dataclass(value):
            setattr(pki, name, dataclasses.replace(value, cert=None, key=None))
    with open(path, "wb") as f:
        pickle.dump(pki, f)
    return pki


auth_rate._pki = _load_pki
PROTOCOL, MECHANISM = "SASL_SSL", "SCRAM-SHA-512"


def make_server(pki_dir, log_dir):
    from kchannel.security.sasl.scram_store import (
        InMemoryScramCredentialStore, credential_from_password)
    from kchannel.server import Server
    store = InMemoryScramCredentialStore()
    store.put(auth_rate.USER, MECHANISM,
              credential_from_password(MECHANISM, auth_rate.PASSWORD))
    pki = auth_rate._pki(pki_dir)
    return Server(auth_rate.server_props(pki, log_dir), sasl_kwargs={"scram_store": store})


def serve(pki_dir, log_dir, port_out, ctl, count_calls):
    import logging
    logging.basicConfig(level=logging.ERROR)
    server = make_server(pki_dir, log_dir)
    server.start()
    hs = auth_rate._handshake_server_socket()
    import threading
    stop = threading.Event()
    pki = auth_rate._pki(pki_dir)
    threading.Thread(target=auth_rate._handshake_server,
                     args=(hs, pki, pki.ec_server, stop), daemon=True).start()
    port_out.send({PROTOCOL: server.bound_port(PROTOCOL), "TLS": hs.getsockname()[1]})
    serve_counted(server, ctl, count_calls)
    stop.set()


def _start_server(pki_dir, log_dir, count_calls=False):
    port_r, port_w = _MP.Pipe(False)
    ctl_parent, ctl_child = _MP.Pipe()
    p = _MP.Process(target=serve, args=(pki_dir, log_dir, port_w, ctl_child, count_calls),
                    daemon=True)
    p.start()
    return p, port_r.recv(), ctl_parent


def client_storms(pki_dir, ports, n, warmup, counter=None, before=None, tls_only=False):
    """A warm-up storm of ``warmup`` connections, then a storm of ``n``
    (counted with ``counter`` if given) on the same NetworkClient."""
    pki = auth_rate._pki(pki_dir)
    if tls_only:
        auth_rate.tls_handshakes(pki, ports, warmup)
        if before is not None:
            before()
        auth_rate.tls_handshakes(pki, ports, n)
        return
    from kchannel.client import NetworkClient
    configs = auth_rate.kchannel_configs(pki, PROTOCOL, MECHANISM)
    # a side under callgrind runs ~50x slower: no set-up timeout (the value
    # changes nothing a connection runs)
    configs.update({"socket.connection.setup.timeout.ms": "600000",
                    "socket.connection.setup.timeout.max.ms": "600000"})
    host, port = auth_rate._host(PROTOCOL), ports[PROTOCOL]
    net = NetworkClient(configs)
    auth_rate._wait_ready(net, set(range(warmup)),
                          lambda: [net.connect(i, host, port) for i in range(warmup)])
    net.close()
    # A new NetworkClient, as auth_rate.py's storm: its TLS session cache is
    # empty, so the storm's connections, opened at once, make full
    # handshakes (the warm-up's would offer the session it kept).
    net = NetworkClient(configs)
    if before is not None:
        before()
    if counter is not None:
        sys.setprofile(counter)
    ids = range(n)
    auth_rate._wait_ready(net, set(ids), lambda: [net.connect(i, host, port) for i in ids])
    if counter is not None:
        sys.setprofile(None)
    net.close()


def cmd_calls(args, pki_dir, log_dir):
    p, ports, ctl = _start_server(pki_dir, log_dir, True)
    counter = CallCounter()

    def before():
        ctl.send("count")
        ctl.recv()

    client_storms(pki_dir, ports, args.storm, args.storm, counter, before=before)
    ctl.send("stop")
    server_calls, server_c = ctl.recv()
    p.join(10)
    print_calls(counter, server_calls, server_c, args.storm, "connection",
                threshold=args.threshold, c_top=25)


def cmd_instructions(args, pki_dir, log_dir):
    here = os.path.abspath(__file__)
    small, big = args.storm, args.big
    env = dict(os.environ, PYTHONHASHSEED="0")
    d = args.keep or log_dir
    os.makedirs(d, exist_ok=True)
    totals = []
    for n in (small, big):
        out = os.path.join(d, f"cg.{args.side}.{n}")
        cg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
              sys.executable, here, "_side", args.side, "--pki", pki_dir,
              "--storm", str(n), "--warmup", str(small)] + (["--pure"] if args.pure else [])
        if args.side in ("client", "tls"):
            p, ports, ctl = _start_server(pki_dir, log_dir)
            subprocess.run(cg + ["--ports", f"{ports[PROTOCOL]},{ports['TLS']}"], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ctl.send("stop")
            p.join(10)
        else:
            served_under_callgrind(
                cg, env, os.path.join(d, f"port.{n}"),
                lambda port: _MP.Process(target=client_storms,
                                         args=(pki_dir, {PROTOCOL: port}, n, small), daemon=True))
        totals.append(_totals(out))
    per = (totals[1] - totals[0]) / (big - small)
    print(f"{args.side}: {per:,.0f} instructions per connection "
          f"({'pure' if args.pure else 'compiled'} twins; callgrind, storms of {small} "
          f"and {big} after a warm-up of {small})")


def cmd_side(args):
    if args.side in ("client", "tls"):
        a, b = (int(x) for x in args.ports.split(","))
        client_storms(args.pki, {PROTOCOL: a, "TLS": b}, args.storm, args.warmup,
                      tls_only=args.side == "tls")
        return
    with tempfile.TemporaryDirectory() as log_dir:
        serve_until_stopped(make_server(args.pki, log_dir), PROTOCOL, args.port_file)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["calls", "instructions", "_side"])
    ap.add_argument("side", nargs="?", default="client", choices=["client", "server", "tls"])
    ap.add_argument("--pure", action="store_true")
    ap.add_argument("--storm", type=int, default=None)
    ap.add_argument("--big", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--keep", help="keep the callgrind outputs in this directory")
    ap.add_argument("--pki")
    ap.add_argument("--ports")
    ap.add_argument("--port-file")
    args = ap.parse_args(argv)
    if args.pure:
        os.environ["KCHANNEL_NO_EXTENSIONS"] = "1"
    if args.mode == "_side":
        cmd_side(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        pki_dir = os.path.join(tmp, "pki")
        os.makedirs(pki_dir)
        auth_rate._pki(pki_dir)
        log_dir = os.path.join(tmp, "logs")
        os.makedirs(log_dir)
        if args.mode == "calls":
            args.storm = args.storm or 200
            cmd_calls(args, pki_dir, log_dir)
        else:
            args.storm = args.storm or 10
            cmd_instructions(args, pki_dir, log_dir)


if __name__ == "__main__":
    main()
