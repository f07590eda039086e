"""Cost of the gateway's authorization per request, with many ACLs.

    python benchmarks/authorizer.py [--acls 1000] [--seconds 1.0]

Builds a StandardAuthorizer holding ``--acls`` ACLs (literal and prefixed
topic and group ACLs for 50 principals, some DENYs, a wildcard) and measures,
in CPU time (time.process_time, best of several rounds):

* one decision, cached (the same principal/operation/resource again, as a
  client's steady stream of requests) and uncached (a different resource name
  every time, so every call walks the index: the worst case);
* one whole request check as the gateway runs it: decode a Produce (3
  topics) or a Fetch (3 topics), decide per topic, answer / narrow.

Target: < 5 us per request with 1,000 ACLs (issue 23).  The figures are
per call on this machine; the headline is the Produce check, cached.
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks._results import row  # noqa: E402
from kchannel.protocol import messages  # noqa: E402
from kchannel.protocol.api_keys import ApiKey  # noqa: E402
from kchannel.protocol.records.batch import encode_batch  # noqa: E402
from kchannel.security.authorizer.acl import AclBinding, AclOperation, ResourceType  # noqa: E402
from kchannel.security.authorizer.requests import RequestAuthorizer  # noqa: E402
from kchannel.security.authorizer.standard import StandardAuthorizer  # noqa: E402

TARGET_US = 5.0


def build(n):
    acls = {AclBinding.of("TOPIC", "*", "LITERAL", "User:auditor", "*", "DESCRIBE", "ALLOW")}
    i = 0
    while len(acls) < n:
        p = f"User:user{i % 50}"
        for b in (AclBinding.of("TOPIC", f"topic-{i}", "LITERAL", p, "*", "WRITE", "ALLOW"),
                  AclBinding.of("TOPIC", f"team{i % 40}-", "PREFIXED", p, "*", "READ",
                                "ALLOW"),
                  AclBinding.of("GROUP", f"group-{i}", "LITERAL", p, "*", "READ", "ALLOW"),
                  AclBinding.of("TOPIC", f"topic-{i}", "LITERAL", "User:user7", "10.0.0.9",
                                "ALL", "DENY")):
            if len(acls) < n:
                acls.add(b)
        i += 1
    a = StandardAuthorizer(super_users="User:admin")
    assert all(r is None for r in a.create_acls(sorted(acls)))
    return a


def _twin():
    return "pure" if os.environ.get("KCHANNEL_NO_EXTENSIONS") else "compiled (if built)"


def per_call_us(fn, calls, seconds):
    fn()
    best, spent, rounds = float("inf"), 0.0, 0
    while spent < seconds or rounds < 3:
        t0 = time.process_time()
        fn()
        dt = time.process_time() - t0
        spent += dt
        rounds += 1
        best = min(best, dt)
    return best / calls * 1e6


def frame(key, version, body):
    api = messages.API[key]
    return bytes(api.request.encode(body, version))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acls", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args(argv)
    a = build(args.acls)
    ra = RequestAuthorizer(a)
    auth = a.authorize
    W, R = AclOperation.WRITE, AclOperation.READ
    T = ResourceType.TOPIC
    N = 2000

    def cached():
        for _ in range(N):
            auth("User:user3", "10.0.0.1", W, T, "topic-3")

    names = [f"team{k % 40}-x{k}" for k in range(N)]

    def uncached():
        a._cache.clear()
        for name in names:
            auth("User:user3", "10.0.0.1", R, T, name)

    records = encode_batch([(1_700_000_000_000, b"k", b"v" * 100, [])])
    produce = frame(int(ApiKey.PRODUCE), 9, {"acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": f"topic-{k}", "partition_data": [{"index": 0, "records": records}]}
        for k in (3, 53, 103)]})
    fetch = frame(int(ApiKey.FETCH), 12, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                                          "max_bytes": 1 << 20, "session_id": 0,
                                          "session_epoch": -1, "topics": [
        {"topic": f"team3-{k}", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                "partition_max_bytes": 1 << 20}]}
        for k in range(3)]})
    check = ra.check
    M = 500

    def produce_check():
        for _ in range(M):
            assert check("User:user3", "10.0.0.1", 0, 9, produce, 0) is None

    def fetch_check():
        for _ in range(M):
            assert check("User:user3", "10.0.0.1", 1, 12, fetch, 0) is None

    def produce_denied():
        for _ in range(M):
            check("User:user4", "10.0.0.1", 0, 9, produce, 0)

    figures = {
        "decision, cached": per_call_us(cached, N, args.seconds),
        "decision, uncached (index walk)": per_call_us(uncached, N, args.seconds),
        "Produce check (3 topics), allowed": per_call_us(produce_check, M, args.seconds),
        "Fetch check (3 topics), allowed": per_call_us(fetch_check, M, args.seconds),
        "Produce check (3 topics), refused -> answered": per_call_us(produce_denied, M,
                                                                     args.seconds),
    }
    print(f"StandardAuthorizer with {len(a.acls())} ACLs ({sys.implementation.name} "
          f"{sys.version.split()[0]}, codec twin: {_twin()}), CPU us per call:")
    for label, us in figures.items():
        print(f"  {label:48s} {us:8.2f} us")
    head = figures["Produce check (3 topics), allowed"]
    met = head < TARGET_US
    print(f"Produce check {head:.2f} us: target < {TARGET_US} us "
          f"{'met' if met else 'MISSED'}")
    row(f"Gateway authorization per request, {len(a.acls())} ACLs (authorizer.py)",
        f"Produce (3 topics) {head:.2f} us, Fetch {figures['Fetch check (3 topics), allowed']:.2f}"
        f" us; one decision {figures['decision, cached']:.2f} us cached, "
        f"{figures['decision, uncached (index walk)']:.2f} us uncached",
        f"< {TARGET_US:.0f} us per request", met)
    return 0


if __name__ == "__main__":
    sys.exit(main())
