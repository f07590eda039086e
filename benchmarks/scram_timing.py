"""Does the time to the SCRAM server-first message tell real users apart?

    python benchmarks/scram_timing.py [--samples 1000] [--mechanism SCRAM-SHA-256]
                                      [--only mechanism,network]

The server answers a client-first message for an unknown user with a stand-in
credential (README, SCRAM): the messages are alike, and the question here is
whether the time it takes is.  Two measurements, each of ``--samples``
client-first messages for an existing user (``alice``) and as many for
unknown users, interleaved in pairs (each pair in a random order) so that
drifts of machine load fall on both alike:

* ``mechanism``: the sans-I/O server mechanism alone
  (``ScramSaslServer.evaluate_response(client-first)``, timed with
  ``perf_counter_ns``) over the SQLite credential store ``kchannel serve``
  uses -- the part of the answer time that depends on the user.
* ``network``: a ``kchannel serve``-like server in a forked process (SASL_PLAINTEXT,
  SQLite store); a raw socket per sample sends SaslHandshake, then times
  SaslAuthenticate(client-first) from the last byte sent to the whole
  response received, as an attacker on the same host would.

Each unknown sample uses a user name never asked before (``nobody-<n>``,
or ``--unknown-prefix``), the
case where a cache of stand-ins would show; the existing user is asked each
time.  Prints, per measurement and group, the median and quartiles in
microseconds, the difference of medians, and how often an unknown-user sample
is faster than the existing-user sample of its pair (50% when nothing
tells them apart).  Nothing is asserted: on a shared machine only
these figures, read together, mean anything.
"""
import argparse
import multiprocessing
import os
import random
import socket
import statistics
import struct
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

USER = "alice"
PASSWORD = "alice-secret"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

_MP = multiprocessing.get_context("fork")


def _store(directory, mechanism):
    from kchannel.security.sasl.scram_store import (SqliteScramCredentialStore,
                                                    credential_from_password,
                                                    default_store_path)
    store = SqliteScramCredentialStore(default_store_path(directory))
    store.put(USER, mechanism, credential_from_password(mechanism, PASSWORD))
    # A few other users, so the lookups search a real index.
    for i in range(200):
        store.put(f"user-{i}", mechanism, credential_from_password(mechanism, f"pw-{i}"))
    return store


def _client_first(user, n):
    return f"n,,n={user},r=timing{n:08d}nonce".encode("ascii")


def _quartiles(samples):
    q1, q2, q3 = statistics.quantiles(samples, n=4)
    return q1, q2, q3


def report(title, known, unknown):
    kq, uq = _quartiles(known), _quartiles(unknown)
    faster = sum(1 for k, u in zip(known, unknown) if u < k) / len(known)
    print(f"\n{title} ({len(known)} + {len(unknown)} samples, microseconds)")
    print(f"  {'':<16} {'q1':>9} {'median':>9} {'q3':>9}")
    print(f"  {'existing user':<16} {kq[0]:9.1f} {kq[1]:9.1f} {kq[2]:9.1f}")
    print(f"  {'unknown user':<16} {uq[0]:9.1f} {uq[1]:9.1f} {uq[2]:9.1f}")
    print(f"  median difference (unknown - existing): {uq[1] - kq[1]:+.1f} us; "
          f"unknown faster than the existing sample of its pair: {faster:.0%}")
    return kq, uq


def _interleaved(one, samples, unknown_prefix):
    """``samples`` pairs (existing, unknown), each pair in a random order so
    that whatever the first of two calls pays falls on both groups alike."""
    rng = random.Random(14)
    known, unknown = [], []
    for n in range(samples):
        if rng.random() < 0.5:
            known.append(one(USER, n))
            unknown.append(one(f"{unknown_prefix}{n}", n))
        else:
            unknown.append(one(f"{unknown_prefix}{n}", n))
            known.append(one(USER, n))
    return known, unknown


# ------------------------------------------------------------- mechanism
def measure_mechanism(samples, mechanism, directory, unknown_prefix="nobody-"):
    from kchannel.security.sasl.mechanism import ServerCallbacks, create_server
    store = _store(directory, mechanism)
    callbacks = ServerCallbacks.default(store=store)
    clock = time.perf_counter_ns

    def one(user, n):
        server = create_server(mechanism, callbacks=callbacks)
        message = _client_first(user, n)
        t0 = clock()
        server.evaluate_response(message)
        return (clock() - t0) / 1000.0

    for n in range(200):      # warm-up: imports, SQLite page cache, branch caches
        one(USER, n)
        one(f"warm-{n}", n)
    known, unknown = _interleaved(one, samples, unknown_prefix)
    store.close()
    return known, unknown


# --------------------------------------------------------------- network
def _serve(pipe, directory, mechanism):
    import logging
    logging.basicConfig(level=logging.CRITICAL)
    from kchannel.server import Server
    store = _store(directory, mechanism)
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": mechanism,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "log.dirs": directory,
        "connection.failed.authentication.delay.ms": "0",
        f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config":
            f"{SCRAM_MODULE} required;",
    }
    server = Server(props, sasl_kwargs={"scram_store": store})
    server.start()
    pipe.send(server.bound_port("SASL_PLAINTEXT"))
    pipe.recv()
    server.shutdown()


def _frame(api_key, version, correlation_id, body):
    from kchannel.protocol.headers import RequestHeader, encode_request
    payload = encode_request(RequestHeader(api_key, version, correlation_id, "timing"), body)
    return struct.pack(">i", len(payload)) + payload


def _read_frame(sock):
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return buf
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def measure_network(samples, mechanism, directory, unknown_prefix="nobody-"):
    parent, child = _MP.Pipe()
    proc = _MP.Process(target=_serve, args=(child, directory, mechanism), daemon=True)
    proc.start()
    child.close()
    port = parent.recv()
    handshake = _frame(SASL_HANDSHAKE, 1, 1, {"mechanism": mechanism})
    clock = time.perf_counter_ns

    def one(user, n):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(handshake)
            _read_frame(sock)
            request = _frame(SASL_AUTHENTICATE, 2, 2, {"auth_bytes": _client_first(user, n)})
            t0 = clock()
            sock.sendall(request)
            response = _read_frame(sock)
            elapsed = (clock() - t0) / 1000.0
        if b"r=timing" not in response:
            raise RuntimeError(f"no server-first message for {user}: {response!r}")
        return elapsed

    try:
        for n in range(100):
            one(USER, n)
            one(f"warm-{n}", n)
        known, unknown = _interleaved(one, samples, unknown_prefix)
    finally:
        parent.send("stop")
        proc.join(10)
    return known, unknown


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--mechanism", default="SCRAM-SHA-256",
                        choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    parser.add_argument("--only", default="mechanism,network")
    parser.add_argument("--unknown-prefix", default="nobody-",
                        help="unknown user names are this plus a number (default nobody-; "
                             "zz- names sort after every existing user)")
    args = parser.parse_args(argv)
    from kchannel import _impl
    print(f"kchannel SCRAM server timing, {args.mechanism}, twins: {_impl.implementation()}")
    wanted = args.only.split(",")
    from _results import row
    if "mechanism" in wanted:
        with tempfile.TemporaryDirectory() as d:
            kq, uq = report("mechanism: evaluate_response(client-first), SQLite store",
                            *measure_mechanism(args.samples, args.mechanism, d,
                                               args.unknown_prefix))
        row(f"{args.mechanism} time to the server-first message, existing vs unknown user, "
            f"in the mechanism with the SQLite store (`scram_timing.py`, medians of "
            f"{args.samples})", f"{kq[1]:.1f} vs {uq[1]:.1f} us ({uq[1] - kq[1]:+.1f} us)")
    if "network" in wanted:
        with tempfile.TemporaryDirectory() as d:
            kq, uq = report("network: SaslAuthenticate(client-first) round trip on 127.0.0.1",
                            *measure_network(args.samples, args.mechanism, d,
                                             args.unknown_prefix))
        row("same over the network (SaslAuthenticate round trip on 127.0.0.1)",
            f"{kq[1]:.1f} vs {uq[1]:.1f} us ({uq[1] - kq[1]:+.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
