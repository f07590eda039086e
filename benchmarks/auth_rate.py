"""Authenticated connections per second to a kchannel server, per client.

    python benchmarks/auth_rate.py [--pure] [--connections 300] [--storm 100]
                                   [--only kchannel,kafka-python,confluent]
                                   [--key ec|rsa] [--paired 5] [--no-cells]

The server is a ``kchannel serve``-like :class:`kchannel.server.Server` (the
same ``Server(props, sasl_kwargs={"scram_store": ...})`` construction as
``kchannel.server.build_server``) running alone in a forked process with
two listeners: SASL_PLAINTEXT and SASL_SSL (the test PKI's ECDSA P-256 server
certificate, ``--key rsa`` for its RSA-2048 one; TLS 1.3 by default), mechanisms PLAIN (JAAS ``user_bench``) and SCRAM-SHA-512
(4096 iterations, in-memory credential store).  The clients run in this
process, so client and server each have a core of their own.

A "connection" is counted once it is usable: TCP connect, TLS handshake
(SASL_SSL), ApiVersions, SaslHandshake, SaslAuthenticate exchange(s), then
each client's own first request where it insists on one (see below).  The
connections are closed after the measurement, outside the clock for the
storm, inside it for the sequential clients (a new client per connection).

Clients, one cell per (client, protocol, mechanism):

* ``kchannel storm``: one :class:`kchannel.client.NetworkClient` (one
  Selector) opening ``--storm`` connections at once and polling until every
  one is READY (authenticated and ApiVersions negotiated) -- what a PySpark
  executor start-up storm looks like from one process.  SCRAM's PBKDF2 is
  paid once per (password, salt, iterations) thanks to the client-side
  salted-password cache, so the cache is warm after the first connection.
* ``kchannel storm, cold cache``: the same with the salted-password cache
  disabled (LRU size 0: every connection pays PBKDF2, as connections from
  separate processes would).
* ``kchannel storm, resumed``: the same NetworkClient after one connection
  made outside the clock, so every connection of the storm offers the TLS
  session cached for that host:port (a client reconnecting to a broker).
* ``TLS handshakes only`` (the ceiling): the same storm of concurrent
  connections, but only the TLS handshake, driven by a bare ``selectors``
  loop on both sides with the same certificates and ``SSLContext`` settings
  (``SslFactory``'s contexts); the server side runs in its own process too.
  kchannel's storm is reported as a percentage of it (issue 24 item 5:
  target >= 85 %), from the rates of the same rounds and, since the storms
  are bound by the client's core, from the client CPU per connection (the
  same share, steadier when other work loads the machine).
* ``TLS + 5 round trips only`` (``--floor``; the floor of the whole
  exchange): the ceiling's storm, then over each connection the five
  request/response round trips a kchannel connection makes after its
  handshake (ApiVersions, SaslHandshake, two SaslAuthenticate, the
  NetworkClient's ApiVersions) as fixed-size opaque records of about the
  same sizes, driven by the same bare loops: the kernel's and OpenSSL's
  share of a connection with next to no Python and no Kafka logic.  (Its
  client sends its TLS Finished and first request in two segments,
  kchannel in one.)
* ``kchannel sequential``: a new blocking :class:`kchannel.client.KafkaClient`
  per connection (connect, wait READY, close).
* ``kafka-python``: a new ``kafka.net.compat.KafkaNetClient`` per connection
  (kafka-python 3.x's network client; 3.x has no ``BrokerConnection``) and
  ``await_ready`` on the bootstrap node: TCP, TLS, ApiVersions, SASL -- the
  connect+auth path only, no metadata.  kafka-python derives the SCRAM salted
  password with ``hashlib.pbkdf2_hmac`` on every connection.
* ``confluent-kafka``: a new ``AdminClient`` per connection and
  ``list_topics(timeout=10)`` (librdkafka has no public per-connection
  API; client creation, one bootstrap connection with authentication and one
  Metadata request is the closest comparable unit), then the client is
  dropped.  librdkafka derives the SCRAM key in C (OpenSSL PBKDF2) per
  connection.

Target: kchannel >= 1,000 SASL_SSL SCRAM-SHA-512 connections/s (storm) and >= 10x
kafka-python on the same cell.  Figures are best of ``--repeat`` runs; only
ratios within one run mean anything on a shared machine, and since the load
of other processes moves between cells, ``--paired`` rounds measure the
SASL_SSL SCRAM-SHA-512 cell of every client back to back and report the
median of the per-round ratios (9 rounds by default; the ceiling runs at the
start and again at the end of each round, and counts as the mean of the two).
"""
import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

USER = "bench"
PASSWORD = "bench-secret"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-512")

_MP = multiprocessing.get_context("fork")
# CPU seconds of the last storm's clocked part (client side), for the paired
# rounds; None: the whole call counts (sequential clients).
_CLIENT_CPU = [None]


def _pki(directory):
    from tests.fixtures.certs import make_pki
    return make_pki(directory)


def _server_identity(pki, key):
    return pki.ec_server if key == "ec" else pki.server


def server_props(pki, log_dir, key="ec"):
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "log.dirs": log_dir,
        "connections.max.idle.ms": "600000",
        # a storm comes in faster than a backlog of 50 drains
        "socket.listen.backlog.size": "1024",
    }
    props.update(pki.server_configs(identity=_server_identity(pki, key)))
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
            f'{PLAIN_MODULE} required user_{USER}="{PASSWORD}";')
        props[f"listener.name.{listener}.scram-sha-512.sasl.jaas.config"] = (
            f"{SCRAM_MODULE} required;")
    return props


def _serve(pipe, pki_dir, log_dir, key):
    logging.basicConfig(level=logging.ERROR)
    from kchannel.security.sasl.scram_store import (
        InMemoryScramCredentialStore, credential_from_password)
    from kchannel.server import Server
    store = InMemoryScramCredentialStore()
    store.put(USER, "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", PASSWORD))
    pki = _pki(pki_dir)
    server = Server(server_props(pki, log_dir, key), sasl_kwargs={"scram_store": store})
    server.start()
    hs_sock = _handshake_server_socket()
    ports = {p: server.bound_port(p) for p in PROTOCOLS}
    ports["TLS"] = hs_sock.getsockname()[1]
    pipe.send(ports)
    import threading
    stop = threading.Event()
    # The handshake-only server shares the process (and its core) with the
    # kchannel server, but only one of them is busy at a time: the rounds
    # run one client after the other.
    t = threading.Thread(target=_handshake_server,
                         args=(hs_sock, pki, _server_identity(pki, key), stop), daemon=True)
    t.start()
    # "cpu": report this process's CPU seconds (paired rounds divide the
    # server's CPU by the connections made); anything else: stop.
    while pipe.recv() == "cpu":
        t = os.times()
        pipe.send(t.user + t.system)
    stop.set()
    server.shutdown()


def _handshake_server_socket():
    import socket
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1024)
    ls.setblocking(False)
    return ls


def _handshake_server(ls, pki, identity, stop):
    """Accept TLS connections and complete their handshakes, nothing else."""
    import selectors
    import socket
    import ssl

    from kchannel.network.ssl_factory import SslFactory
    ctx = SslFactory("server", pki.server_configs(identity=identity)).context
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    while not stop.is_set():
        for key, _ in sel.select(0.2):
            if key.data is None:
                try:
                    sock, _ = ls.accept()
                except BlockingIOError:
                    continue
                sock.setblocking(False)
                # as kchannel's sockets (--floor's small answers must not
                # wait for delayed ACKs)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                tls = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                sel.register(tls, selectors.EVENT_READ, "hs")
                continue
            tls = key.fileobj
            try:
                if key.data == "hs":
                    tls.do_handshake()
                    # [round trips answered, request bytes received]
                    sel.modify(tls, selectors.EVENT_READ, [0, 0])
                else:
                    data = tls.recv(4096)
                    if not data:
                        raise EOFError
                    # --floor's exchange: answer each request of the fixed
                    # sizes (a TLS-only client sends nothing).
                    st = key.data
                    st[1] += len(data)
                    while st[0] < len(FLOOR_REQUESTS) and st[1] >= FLOOR_REQUESTS[st[0]]:
                        st[1] -= FLOOR_REQUESTS[st[0]]
                        tls.sendall(b"r" * FLOOR_RESPONSES[st[0]])
                        st[0] += 1
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
            except (OSError, EOFError):
                sel.unregister(tls)
                tls.close()


# --floor: application bytes of the five round trips after the handshake
# (requests, responses), about those of a SASL_SSL SCRAM-SHA-512 connection.
FLOOR_REQUESTS = (30, 30, 60, 170, 30)
FLOOR_RESPONSES = (45, 36, 120, 110, 50)


def tls_exchange(pki, ports, n):
    """The floor: ``n`` concurrent TLS handshakes, then over each the five
    round trips of fixed-size opaque records (``FLOOR_REQUESTS`` /
    ``FLOOR_RESPONSES``), one at a time, then close -- bare loops."""
    import selectors
    import socket
    import ssl

    from kchannel.network.ssl_factory import SslFactory
    ctx = SslFactory("client", pki.client_configs()).context
    sel = selectors.DefaultSelector()
    socks = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.connect_ex(("127.0.0.1", ports["TLS"]))
        tls = ctx.wrap_socket(s, server_hostname="localhost", do_handshake_on_connect=False)
        socks.append(tls)
        # [round trip (-1: handshaking), response bytes received]
        sel.register(tls, selectors.EVENT_WRITE, [-1, 0])
    pending = len(socks)
    while pending:
        for key, _ in sel.select(1.0):
            tls, st = key.fileobj, key.data
            try:
                if st[0] < 0:
                    tls.do_handshake()
                    st[0] = 0
                    tls.sendall(b"q" * FLOOR_REQUESTS[0])
                    sel.modify(tls, selectors.EVENT_READ, st)
                    continue
                while True:
                    st[1] += len(tls.recv(4096))
            except ssl.SSLWantReadError:
                if st[0] < 0:
                    sel.modify(tls, selectors.EVENT_READ, st)
                    continue
            except ssl.SSLWantWriteError:
                sel.modify(tls, selectors.EVENT_WRITE, st)
                continue
            except OSError as exc:
                if getattr(exc, "errno", None) in (11, 115, 107):  # not connected yet
                    continue
                raise
            if st[1] >= FLOOR_RESPONSES[st[0]]:
                st[1] -= FLOOR_RESPONSES[st[0]]
                st[0] += 1
                if st[0] == len(FLOOR_REQUESTS):
                    sel.unregister(tls)
                    pending -= 1
                else:
                    tls.sendall(b"q" * FLOOR_REQUESTS[st[0]])
    dt = time.perf_counter() - t0
    _CLIENT_CPU[0] = time.process_time() - c0
    for tls in socks:
        tls.close()
    sel.close()
    return n / dt


def tls_handshakes(pki, ports, n):
    """The ceiling: ``n`` concurrent TLS handshakes, nothing else."""
    import selectors
    import socket
    import ssl

    from kchannel.network.ssl_factory import SslFactory
    ctx = SslFactory("client", pki.client_configs()).context
    sel = selectors.DefaultSelector()
    socks = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", ports["TLS"]))
        tls = ctx.wrap_socket(s, server_hostname="localhost", do_handshake_on_connect=False)
        socks.append(tls)
        sel.register(tls, selectors.EVENT_WRITE)
    pending = len(socks)
    while pending:
        for key, _ in sel.select(1.0):
            tls = key.fileobj
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                sel.modify(tls, selectors.EVENT_READ)
                continue
            except ssl.SSLWantWriteError:
                sel.modify(tls, selectors.EVENT_WRITE)
                continue
            except OSError as exc:
                if getattr(exc, "errno", None) in (11, 115, 107):  # not connected yet
                    continue
                raise
            sel.unregister(tls)
            pending -= 1
    dt = time.perf_counter() - t0
    _CLIENT_CPU[0] = time.process_time() - c0
    for tls in socks:
        tls.close()
    sel.close()
    return n / dt


def start_server(pki_dir, log_dir, key="ec"):
    parent, child = _MP.Pipe()
    p = _MP.Process(target=_serve, args=(child, pki_dir, log_dir, key), daemon=True)
    p.start()
    child.close()
    ports = parent.recv()
    return p, parent, ports


# ------------------------------------------------------------ kchannel
def kchannel_configs(pki, protocol, mechanism):
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    c = {"security.protocol": protocol, "sasl.mechanism": mechanism,
         "sasl.jaas.config": f'{module} required username="{USER}" password="{PASSWORD}";'}
    if protocol == "SASL_SSL":
        c.update(pki.client_configs())
    return c


def _host(protocol):
    # the server certificate is for localhost (and 127.0.0.1)
    return "localhost" if protocol == "SASL_SSL" else "127.0.0.1"


def kchannel_storm(pki, ports, protocol, mechanism, n, cold=False, resumed=False):
    from kchannel.client import NetworkClient
    from kchannel.security.sasl import scram
    net = NetworkClient(kchannel_configs(pki, protocol, mechanism))
    host, port = _host(protocol), ports[protocol]
    cache = scram.SALTED_PASSWORD_CACHE
    saved = cache.maxsize
    if cold:
        # an LRU of size 0 keeps nothing: every connection derives its keys
        cache.clear()
        cache.maxsize = 0
    try:
        if resumed:
            _wait_ready(net, {n}, lambda: net.connect(n, host, port))
            if protocol == "SASL_SSL" and not len(net.channel_builder.ssl_factory.session_cache):
                raise RuntimeError("no TLS session was cached")
        t0, c0 = time.perf_counter(), time.process_time()
        _wait_ready(net, set(range(n)), lambda: [net.connect(i, host, port) for i in range(n)])
        dt = time.perf_counter() - t0
        _CLIENT_CPU[0] = time.process_time() - c0
    finally:
        cache.maxsize = saved
        net.close()
    return n / dt


def _wait_ready(net, pending, start):
    from kchannel.client import ConnectionState
    start()
    sel = net.selector
    polls = 0
    while pending:
        net.poll(100)
        polls += 1
        # A connection's state changes with what its poll delivered: a
        # response (the ApiVersions answer makes it READY) or a disconnect.
        # Only those are looked at, as an application reacting to its poll
        # would, rather than every pending connection after every poll
        # (which cost the client ~10 us per connection in a storm of 300);
        # all of them now and then (a setup timeout delivers neither).
        if polls % 64 == 0:
            touched = list(pending)
        else:
            touched = [i for i, _ in sel.completed_receives]
            touched.extend(sel.disconnected)
        for i in touched:
            if i not in pending:
                continue
            st = net.connection_state(i)
            if st is ConnectionState.READY:
                pending.discard(i)
            elif st in (ConnectionState.DISCONNECTED, ConnectionState.AUTHENTICATION_FAILED):
                raise RuntimeError(f"connection {i}: {net.connection_exception(i)}")


def kchannel_sequential(pki, ports, protocol, mechanism, n):
    from kchannel.client import KafkaClient
    cfg = kchannel_configs(pki, protocol, mechanism)
    host, port = _host(protocol), ports[protocol]
    t0 = time.perf_counter()
    for _ in range(n):
        c = KafkaClient(cfg)
        try:
            c.connect(host, port)
        finally:
            c.close()
    return n / (time.perf_counter() - t0)


# -------------------------------------------------------- kafka-python
def kafka_python_configs(pki, protocol, mechanism, port):
    c = {"bootstrap_servers": f"{_host(protocol)}:{port}", "security_protocol": protocol,
         "sasl_mechanism": mechanism, "sasl_plain_username": USER,
         "sasl_plain_password": PASSWORD, "request_timeout_ms": 10000,
         "api_version_auto_timeout_ms": 10000}
    if protocol == "SASL_SSL":
        c["ssl_cafile"] = pki.ca.cert_path
        c["ssl_check_hostname"] = True
    return c


def kafka_python_sequential(pki, ports, protocol, mechanism, n):
    from kafka.net.compat import KafkaNetClient
    cfg = kafka_python_configs(pki, protocol, mechanism, ports[protocol])
    t0 = time.perf_counter()
    for _ in range(n):
        client = KafkaNetClient(**cfg)
        try:
            node = client.least_loaded_node(bootstrap_fallback=True)
            if node is None:
                raise RuntimeError("kafka-python: no bootstrap node")
            if not client.await_ready(node, timeout_ms=10000):
                raise RuntimeError("kafka-python: connection not ready")
        finally:
            client.close()
    return n / (time.perf_counter() - t0)


# ------------------------------------------------------ confluent-kafka
def confluent_sequential(pki, ports, protocol, mechanism, n):
    from confluent_kafka.admin import AdminClient
    cfg = {"bootstrap.servers": f"{_host(protocol)}:{ports[protocol]}",
           "security.protocol": protocol, "sasl.mechanism": mechanism,
           "sasl.username": USER, "sasl.password": PASSWORD}
    if protocol == "SASL_SSL":
        cfg["ssl.ca.location"] = pki.ca.cert_path
    errors = []
    cfg["error_cb"] = errors.append
    t0 = time.perf_counter()
    for _ in range(n):
        admin = AdminClient(cfg)
        md = admin.list_topics(timeout=10)
        if not md.brokers:
            raise RuntimeError(f"confluent-kafka: no metadata ({errors[-1:]})")
        del admin, md
    return n / (time.perf_counter() - t0)


# ---------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pure", action="store_true", help="pure-Python twins")
    ap.add_argument("--connections", type=int, default=200,
                    help="connections per sequential cell")
    ap.add_argument("--storm", type=int, default=200, help="connections per storm")
    ap.add_argument("--repeat", type=int, default=2, help="runs per cell (best kept)")
    ap.add_argument("--only", default="kchannel,kafka-python,confluent")
    ap.add_argument("--paired", type=int, default=9,
                    help="rounds of the paired SASL_SSL SCRAM-SHA-512 comparison (0: none)")
    ap.add_argument("--key", choices=("ec", "rsa"), default="ec",
                    help="server certificate key: ECDSA P-256 (default) or RSA-2048")
    ap.add_argument("--floor", action="store_true",
                    help="paired rounds also run 'TLS + 5 round trips only' (the floor)")
    ap.add_argument("--no-cells", action="store_true",
                    help="only the paired rounds, not every (client, protocol, mechanism) cell")
    args = ap.parse_args(argv)
    if args.pure:
        os.environ["KCHANNEL_NO_EXTENSIONS"] = "1"
    logging.basicConfig(level=logging.ERROR)
    import ssl

    import kchannel
    from kchannel import _impl
    from kchannel.security.sasl import scram  # noqa: F401 - loads the PBKDF2 twin
    from kchannel.network import ssl_transport  # noqa: F401 - loads the pump twin
    print(f"kchannel implementation: {kchannel.implementation()} {_impl.loaded()}; "
          f"{ssl.OPENSSL_VERSION}; best of {args.repeat}; server key {args.key}")
    only = set(args.only.split(","))
    clients = []
    if "kchannel" in only:
        clients += [
            ("kchannel storm", lambda *a: kchannel_storm(*a, args.storm)),
            ("kchannel storm, cold cache", lambda *a: kchannel_storm(*a, args.storm, cold=True)),
            ("kchannel storm, resumed", lambda *a: kchannel_storm(*a, args.storm, resumed=True)),
            ("kchannel sequential", lambda *a: kchannel_sequential(*a, args.connections)),
        ]
    if "kafka-python" in only:
        try:
            import kafka
            clients.append((f"kafka-python {kafka.__version__}",
                            lambda *a: kafka_python_sequential(*a, max(20, args.connections // 4))))
        except ImportError:
            print("kafka-python not installed: skipped")
    if "confluent" in only:
        try:
            import confluent_kafka
            clients.append((f"confluent-kafka {confluent_kafka.version()[0]}",
                            lambda *a: confluent_sequential(*a, max(20, args.connections // 4))))
        except ImportError:
            print("confluent-kafka not installed: skipped")
    cells = {}
    paired = None
    with tempfile.TemporaryDirectory() as d:
        pki_dir = os.path.join(d, "pki")
        os.mkdir(pki_dir)
        pki = _pki(pki_dir)
        proc, pipe, ports = start_server(pki_dir, d, args.key)
        try:
            # warm-up: imports, contexts, the server's first connections
            kchannel_sequential(pki, ports, "SASL_SSL", "SCRAM-SHA-512", 3)
            for name, fn in ([] if args.no_cells else clients):
                for protocol in PROTOCOLS:
                    for mech in MECHANISMS:
                        try:
                            v = max(fn(pki, ports, protocol, mech) for _ in range(args.repeat))
                        except Exception as exc:  # noqa: BLE001 - report and go on
                            print(f"  {name} {protocol} {mech}: failed: {exc!r}")
                            continue
                        cells[(name, protocol, mech)] = v
                        print(f"  {name:<30} {protocol:<15} {mech:<14} {v:8.1f} conn/s",
                              flush=True)
            if args.paired and "kchannel" in only:
                paired = paired_rounds(pki, ports, args, only, pipe)
        finally:
            pipe.send("stop")
            proc.join(20)
            if proc.is_alive():
                proc.terminate()

    cols = [(p, m) for p in PROTOCOLS for m in MECHANISMS]
    if cells:
        print_cells(cells, clients, cols)
    _report_storm(cells, clients, paired, args)
    return cells


def print_cells(cells, clients, cols):
    print("\nconnections/s (rows: client; columns: protocol/mechanism)")
    print(f"  {'':<30}" + "".join(f"{p + ' ' + m:>30}" for p, m in cols))
    for name, _ in clients:
        print(f"  {name:<30}" + "".join(
            f"{cells[(name, p, m)]:>30.1f}" if (name, p, m) in cells else f"{'-':>30}"
            for p, m in cols))


def _report_storm(cells, clients, paired, args=None):
    key = ("SASL_SSL", "SCRAM-SHA-512")
    storm = cells.get(("kchannel storm",) + key)
    if storm is not None:
        print(f"\nkchannel storm SASL_SSL SCRAM-SHA-512: {storm:.0f} conn/s "
              f"(target >= 1000: {'met' if storm >= 1000 else 'MISSED'})")
        for name, _ in clients:
            if name.startswith("kafka-python") and (name,) + key in cells:
                ratio = storm / cells[(name,) + key]
                print(f"  vs {name}: {ratio:.1f}x (target >= 10x: "
                      f"{'met' if ratio >= 10 else 'MISSED'})")
            if name.startswith("confluent") and (name,) + key in cells:
                print(f"  vs {name}: {storm / cells[(name,) + key]:.1f}x")
    if paired:
        paired, cpu = paired
        print("\npaired rounds, SASL_SSL SCRAM-SHA-512 (each round measures every client "
              "back to back, so they share the machine's load of the moment):")
        for name, rates in paired.items():
            print(f"  {name:<30} " + " ".join(f"{r:7.1f}" for r in rates) + " conn/s")
        print("  CPU ms per connection, median of the rounds (client / server process; "
              "the server's includes what a client's connect costs it):")
        for name, per in cpu.items():
            c = sorted(x[0] for x in per)[len(per) // 2]
            sv = sorted(x[1] for x in per)[len(per) // 2]
            print(f"  {name:<30} client {c:6.2f} ms   server {sv:6.2f} ms")
        base = paired.get("kchannel storm")
        ceiling = paired.get("TLS handshakes only")
        if base is not None and ceiling is not None:
            print(f"\nSTORM SHARE (issue 24 item 5; target >= {SHARE_TARGET} % of the ceiling):")
            for name in ("kchannel storm", "kchannel storm, resumed",
                         "TLS + 5 round trips only"):
                if name in paired:
                    pct = sorted(100.0 * k / c for k, c in zip(paired[name], ceiling))
                    med = pct[len(pct) // 2]
                    verdict = ""
                    if name == "kchannel storm":
                        verdict = f" (target >= {SHARE_TARGET} %: " \
                                  f"{'met' if med >= SHARE_TARGET else 'MISSED'})"
                    elif name == "TLS + 5 round trips only":
                        verdict = " (the floor: bare loops making the five round trips)"
                    print(f"  {name} / TLS handshakes only (ceiling): median "
                          f"{med:.0f} %{verdict}, per round "
                          + ", ".join(f"{x:.0f}" for x in pct))
            # The storms are bound by the client's core (its CPU per
            # connection is the larger, the server has a core of its own):
            # the ratio of client CPU per connection is the same share, and
            # it holds when other work on the machine moves the rates.
            for name in ("kchannel storm", "TLS + 5 round trips only"):
                if name in cpu:
                    print(f"  {name}: share by client CPU per connection "
                          f"{_cpu_share(cpu, name):.0f} % (ceiling's client CPU / {name}'s)")
        for name, rates in paired.items():
            if name in ("kchannel storm", "kchannel storm, resumed", "TLS handshakes only") \
                    or base is None:
                continue
            ratios = sorted(b / r for b, r in zip(base, rates))
            med = ratios[len(ratios) // 2]
            verdict = ""
            if name.startswith("kafka-python"):
                verdict = f" (target >= 10x: {'met' if med >= 10 else 'MISSED'})"
            print(f"  kchannel storm / {name}: median {med:.1f}x, per round "
                  + ", ".join(f"{x:.1f}" for x in ratios) + verdict)
        floor = paired.get("TLS + 5 round trips only")
        kp = paired.get("kafka-python")
        if floor is not None and kp is not None:
            # What no client doing this exchange over these sockets could
            # beat: the bound on "kchannel storm / kafka-python".
            for name, rates in (("TLS handshakes only", ceiling),
                                ("TLS + 5 round trips only", floor)):
                if rates is not None:
                    ratios = sorted(a / b for a, b in zip(rates, kp))
                    print(f"  {name} / kafka-python (bound): median "
                          f"{ratios[len(ratios) // 2]:.1f}x, per round "
                          + ", ".join(f"{x:.1f}" for x in ratios))
        if base is not None:
            med = sorted(base)[len(base) // 2]
            print(f"  kchannel storm median {med:.0f} conn/s "
                  f"(target >= 1000: {'met' if med >= 1000 else 'MISSED'})")
            _readme_rows(paired, cpu, args)


# issue 24 item 5: the storm's share of the TLS-handshakes-only ceiling
SHARE_TARGET = 85


def _cpu_share(cpu, name):
    """Median over the rounds of ceiling client CPU / ``name``'s client CPU
    per connection, in percent."""
    return _median(100.0 * c[0] / k[0] for k, c in zip(cpu[name], cpu["TLS handshakes only"]))


def _median(values):
    values = sorted(values)
    return values[len(values) // 2]


def _readme_rows(paired, cpu, args):
    """The storm's README rows (benchmarks/_results.py), from the paired rounds."""
    from _results import row
    base = paired["kchannel storm"]
    rounds = len(base)
    storm = getattr(args, "storm", None)

    def cpu_of(name):
        per = cpu[name]
        return _median(x[0] for x in per), _median(x[1] for x in per)
    med = _median(base)
    row(f"SASL_SSL SCRAM-SHA-512 connections/s, kchannel storm: one NetworkClient opening "
        f"{storm} connections at once (ECDSA P-256, TLS 1.3; `auth_rate.py`, median of {rounds} "
        "paired rounds)", f"median {med:.0f}/s ({min(base):.0f}-{max(base):.0f})",
        ">= 1,000/s", med >= 1000)
    kp = paired.get("kafka-python")
    if kp is not None:
        ratio = _median(b / r for b, r in zip(base, kp))
        ck, _ = cpu_of("kchannel storm")
        cp, _ = cpu_of("kafka-python")
        row("same, ratio to kafka-python 3 in the same rounds (a new client per connection; "
            "it opens one at a time)",
            f"median {ratio:.1f}x (kafka-python {min(kp):.0f}-{max(kp):.0f}/s); client CPU per "
            f"connection {ck:.2f} vs {cp:.2f} ms ({cp / ck:.1f}x less)", ">= 10x", ratio >= 10)
        bounds = []
        for name in ("TLS handshakes only", "TLS + 5 round trips only"):
            if name in paired:
                bounds.append(f"{name}: {_median(a / b for a, b in zip(paired[name], kp)):.1f}x")
        if bounds:
            row("the bound on that ratio: storms of bare loops with the same certificates doing "
                "only the TLS handshakes, and the handshakes plus five request/response round "
                "trips of opaque bytes, as multiples of kafka-python in the same rounds",
                "; ".join(bounds))
    ceiling = paired.get("TLS handshakes only")
    if ceiling is not None:
        pct = _median(100.0 * k / c for k, c in zip(base, ceiling))
        ck, sk = cpu_of("kchannel storm")
        ch, sh = cpu_of("TLS handshakes only")
        floor = ""
        if "TLS + 5 round trips only" in paired:
            fpct = _median(100.0 * k / c for k, c in zip(paired["TLS + 5 round trips only"],
                                                          ceiling))
            floor = (f"; the floor (bare loops making the five round trips) "
                     f"{fpct:.0f} %")
        row("kchannel storm as a share of the TLS-handshakes-only storm (the ceiling), in the "
            "same rounds; share by client CPU per connection (the storm is bound by the "
            "client's core); CPU per connection client / server, storm vs handshakes only",
            f"median {pct:.0f} %; by client CPU {_cpu_share(cpu, 'kchannel storm'):.0f} %"
            f"{floor}; {ck:.2f} / {sk:.2f} ms vs {ch:.2f} / {sh:.2f} ms",
            f">= {SHARE_TARGET} %", pct >= SHARE_TARGET)
    resumed = paired.get("kchannel storm, resumed")
    if resumed is not None:
        rate = _median(resumed)
        extra = ""
        if kp is not None:
            extra += f", {_median(a / b for a, b in zip(resumed, kp)):.1f}x kafka-python"
        if ceiling is not None:
            extra += (f", {_median(100.0 * a / b for a, b in zip(resumed, ceiling)):.0f} % "
                      "of the full-handshake ceiling")
        cr, sr = cpu_of("kchannel storm, resumed")
        row("same storm resuming TLS sessions (client session cache, server tickets; a client "
            "reconnecting)", f"median {rate:.0f}/s{extra}; CPU {cr:.2f} / {sr:.2f} ms")


def paired_rounds(pki, ports, args, only, pipe):
    """Rounds of kchannel storm / kafka-python / confluent-kafka on SASL_SSL
    SCRAM-SHA-512, back to back: ratios within a round are robust to the
    load other processes put on the machine, which moves between cells.

    Returns ``(rates, cpu)``: conn/s per client per round, and per client
    per round ``(client CPU ms, server CPU ms)`` per connection -- on a
    loaded machine the wall clock mostly measures waiting for a core, the
    CPU cost per connection does not."""
    storm = args.storm
    seq = max(20, args.connections // 4)
    fns = [("TLS handshakes only", storm, lambda: tls_handshakes(pki, ports, storm)),
           ("kchannel storm", storm, lambda: kchannel_storm(
               pki, ports, "SASL_SSL", "SCRAM-SHA-512", storm)),
           ("kchannel storm, resumed", storm, lambda: kchannel_storm(
               pki, ports, "SASL_SSL", "SCRAM-SHA-512", storm, resumed=True))]
    if getattr(args, "floor", False):
        fns.append(("TLS + 5 round trips only", storm, lambda: tls_exchange(pki, ports, storm)))
    if "kafka-python" in only:
        try:
            import kafka  # noqa: F401
            fns.append(("kafka-python", seq, lambda: kafka_python_sequential(
                pki, ports, "SASL_SSL", "SCRAM-SHA-512", seq)))
        except ImportError:
            pass
    if "confluent" in only:
        try:
            import confluent_kafka  # noqa: F401
            n_conf = max(20, args.connections // 8)
            fns.append(("confluent-kafka", n_conf, lambda: confluent_sequential(
                pki, ports, "SASL_SSL", "SCRAM-SHA-512", n_conf)))
        except ImportError:
            pass

    def server_cpu():
        pipe.send("cpu")
        return pipe.recv()

    def measure(n, fn):
        _CLIENT_CPU[0] = None
        s0, c0 = server_cpu(), time.process_time()
        rate = fn()
        c1, s1 = time.process_time(), server_cpu()
        client = _CLIENT_CPU[0] if _CLIENT_CPU[0] is not None else c1 - c0
        return rate, (1e3 * client / n, 1e3 * (s1 - s0) / n)

    out = {name: [] for name, _, _ in fns}
    cpu = {name: [] for name, _, _ in fns}
    ceiling = "TLS handshakes only"
    for _ in range(args.paired):
        # The ceiling runs first and again last in each round, and counts
        # as the mean of the two: a share is then taken against the load
        # on both sides of the storms it is compared with, not only the
        # load of the moment the ceiling happened to run.
        first = None
        for name, n, fn in fns:
            if name == ceiling:
                first = measure(n, fn)
                continue
            rate, c = measure(n, fn)
            out[name].append(rate)
            cpu[name].append(c)
        if first is not None:
            n, fn = next((n, fn) for name, n, fn in fns if name == ceiling)
            rate, c = measure(n, fn)
            out[ceiling].append((first[0] + rate) / 2)
            cpu[ceiling].append(((first[1][0] + c[0]) / 2, (first[1][1] + c[1]) / 2))
    return out, cpu


if __name__ == "__main__":
    main()
