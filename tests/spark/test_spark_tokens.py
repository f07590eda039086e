"""Delegation tokens for Spark executors against Apache Kafka, the parts
that need no Spark session: the driver renews its token in place (same id
and HMAC, later expiry, as the broker reports) once ``renewalRatio`` of its
life has passed, obtains a new one when the old cannot be renewed further
(its max lifetime caps the expiry), and an executor whose token was expired
while the job ran fails with an error that names the token (never its
HMAC) and says what to do."""
import time

import pytest

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.spark import tokens
from kchannel.tokens.admin import DelegationTokenAdmin
from tests.fixtures.records import consume_confluent, create_topic, produce, topic_name
from tests.fixtures.spark import require_spark

pytestmark = [pytest.mark.interop, pytest.mark.kafka, pytest.mark.timeout(600)]


def _driver(kafka_broker):
    return kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")


def _broker_view(driver, token_id):
    with KafkaClient(dict(driver)) as c:
        c.connect()
        return {t.token_info.token_id: t for t in DelegationTokenAdmin(c).describe()}.get(
            token_id)


def test_token_renewed_in_place_then_replaced_at_max_lifetime(kafka_broker):
    driver = _driver(kafka_broker)
    first = tokens.obtain_token(driver, renewers=("User:renewal-test",))
    info = first.token_info
    assert info.expiry_timestamp < info.max_timestamp       # renewable
    # Before renewalRatio of its life: the cached token as it is.
    early = info.issue_timestamp + 0.5 * (info.expiry_timestamp - info.issue_timestamp)
    assert tokens.obtain_token(driver, renewers=("User:renewal-test",), now_ms=early) is first
    # Past it: renewed in place (same id and HMAC), the broker's expiry moved on.
    late = info.issue_timestamp + 0.8 * (info.expiry_timestamp - info.issue_timestamp)
    renewed = tokens.obtain_token(driver, renewers=("User:renewal-test",), now_ms=late)
    assert renewed.token_info.token_id == info.token_id and renewed.hmac == first.hmac
    assert renewed.token_info.expiry_timestamp > info.expiry_timestamp
    # (KRaft: the broker lists the renewal once it replays the controller's record)
    deadline = time.time() + 15
    while _broker_view(driver, info.token_id).token_info.expiry_timestamp != \
            renewed.token_info.expiry_timestamp:
        assert time.time() < deadline, "the broker never listed the renewed expiry"
        time.sleep(0.1)

    # A token whose expiry is its max lifetime cannot be renewed further:
    # past renewalRatio of it, the driver obtains a new one.
    short = tokens.obtain_token(driver, max_lifetime_ms=120_000)
    s = short.token_info
    assert s.expiry_timestamp == s.max_timestamp
    replaced = tokens.obtain_token(driver, max_lifetime_ms=120_000,
                                   now_ms=s.issue_timestamp + 0.9 * 120_000)
    assert replaced.token_info.token_id != s.token_id
    assert _broker_view(driver, replaced.token_info.token_id) is not None


def test_executor_with_an_expired_token_names_it(kafka_broker):
    require_spark()
    from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField,
                                   StructType, TimestampType)

    from kchannel.spark.source import KChannelDataSource
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("expired-token"), partitions=1)
    produce(plain, topic, [(None, b"v%d" % i, [], None) for i in range(5)])
    options = {f"kafka.{k}": v for k, v in _driver(kafka_broker).items()}
    options.update({"kchannel.delegationToken": "true", "subscribe": topic,
                    # a configuration of its own: a token no other test caches
                    "kchannel.delegationToken.renewers": "User:expiry-test"})
    source = KChannelDataSource(options)
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                         StructField("timestampType", IntegerType())])   # source.schema()
    reader = source.reader(schema)    # the driver's planning
    parts = reader.partitions()
    token_id = tokens.token_id_of(reader.executor_configs)
    assert token_id
    # The token is expired while the job runs (before the executors log in).
    with KafkaClient(dict(_driver(kafka_broker))) as c:
        c.connect()
        admin = DelegationTokenAdmin(c)
        (token,) = [t for t in admin.describe() if t.token_info.token_id == token_id]
        admin.expire(token.hmac, -1)
    with pytest.raises(errors.SaslAuthenticationError) as info:
        for _ in reader.read(parts[0]):     # what an executor runs
            pass
    message = str(info.value)
    assert f"delegation token {token_id}" in message and "expired" in message
    assert "Run the query again" in message
    assert token.hmac_base64 not in message


@pytest.mark.slow
def test_streaming_query_outlives_its_first_token(spark, kafka_broker, tmp_path):
    """A streaming read-transform-write query whose tokens are replaced
    after 6 s (maxLifetimeMs 600000, renewalRatio 0.01) runs for longer
    than that, reading and writing with
    the token: the driver obtains new tokens as they age, every
    micro-batch's readers and writers get the current one, and the tokens
    it replaced are cancelled (ExpireDelegationToken) mid-stream; nothing is
    lost.  Afterwards a Python worker that wrote holds clients of the newer
    tokens only (the writers too moved on to the new ones).

    (Tokens that live long after they are replaced: the broker ties a
    token-authenticated session to the token's expiry (KIP-368); a read
    reaching it is test_executor_read_past_its_token_expiry's subject.)"""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("token-rotation"), partitions=2)
    target = create_topic(plain, topic_name("token-rotation-out"), partitions=2)
    driver = _driver(kafka_broker)
    options = {f"kafka.{k}": v for k, v in driver.items()}
    options.update({"kchannel.delegationToken": "true",
                    "kchannel.delegationToken.maxLifetimeMs": "600000",
                    "kchannel.delegationToken.renewalRatio": "0.01",
                    "kchannel.delegationToken.renewers": "User:rotation-test"})

    def ours():
        with KafkaClient(dict(driver)) as c:
            c.connect()
            return [t for t in DelegationTokenAdmin(c).describe()
                    if "User:rotation-test" in t.token_info.renewers_as_string]

    q = (spark.readStream.format("kchannel").options(**options).option("subscribe", topic)
         .option("startingOffsets", "earliest").load()
         .selectExpr("key", "value").writeStream.format("kchannel").options(**options)
         .option("topic", target).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="1 second").start())
    cancelled = set()
    try:
        for wave in range(5):
            produce(plain, topic, [(None, b"w%d-%d" % (wave, i), [], None) for i in range(10)])
            q.processAllAvailable()
            if wave == 0:
                # (the reader and the writer are made in driver-side Python
                # processes of their own, each with its token cache)
                first = {t.token_info.token_id for t in ours()}
            # Tokens older than 6 s are replaced by the next micro-batch's
            # planning: cancel them now, as an operator revoking them would.
            now = time.time() * 1000
            with KafkaClient(dict(driver)) as c:
                c.connect()
                admin = DelegationTokenAdmin(c)
                for t in admin.describe():
                    info = t.token_info
                    if "User:rotation-test" in info.renewers_as_string and \
                            now - info.issue_timestamp > 7000 and \
                            info.token_id not in cancelled:
                        admin.expire(t.hmac, -1)
                        cancelled.add(info.token_id)
            time.sleep(4)
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    want = sorted(b"w%d-%d" % (w, i) for w in range(5) for i in range(10))
    got = consume_confluent(plain, target, 2, len(want))
    assert sorted(v for _, _, _, v, _, _ in got) == want
    print("tokens used by the query:", len(ours()) + len(cancelled), "cancelled:",
          len(cancelled))
    # ~20 s of query with tokens replaced every 6 s: several tokens.
    assert first <= cancelled and len(cancelled) >= 2
    stats = spark.read.format("kchannel_stats").option("numPartitions", "16").load().collect()
    writers = [r for r in stats if r["producers_created"]]
    assert writers, stats
    # Writers moved on: some worker that wrote holds clients of the newer
    # tokens only.  (Not every worker: one that got no task of the same
    # settings since the replacement still caches its idle clients of a
    # replaced token until it next creates one or they idle out, so "no
    # worker holds the first token" depends on Spark's task placement.)
    assert any(not first & set((r["token_ids"] or "").split(",")) and r["token_ids"]
               for r in writers), stats


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "SCRAM-SHA-256"])
def test_driver_login_with_any_mechanism_gives_executors_a_token(kafka_broker, mechanism):
    """The driver's own login (Kerberos keytab on the MIT KDC, OAUTHBEARER,
    SCRAM) obtains the token; the executors' configuration holds none of
    the driver's sasl.* settings (keytab, token, password) and logs in with
    the token only, as the driver's principal."""
    from kchannel import Consumer
    from kchannel.client.metadata import TopicPartition
    if mechanism == "GSSAPI" and not kafka_broker.gssapi:
        pytest.skip("the MIT KDC is not available, so the broker has no GSSAPI")
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name(f"token-{mechanism.lower()}"), partitions=1)
    produce(plain, topic, [(None, b"v%d" % i, [], None) for i in range(7)])
    driver = kafka_broker.client_configs("SASL_SSL", mechanism)
    token = tokens.obtain_token(driver)
    executor = tokens.executor_configs(driver, token)
    driver_sasl = {k: v for k, v in driver.items() if k.startswith("sasl.")}
    for k, v in driver_sasl.items():
        if k != "sasl.mechanism":
            assert k not in executor or executor[k] != v, k
    assert tokens.token_id_of(executor) == token.token_info.token_id
    owner = str(token.token_info.owner)
    assert owner.startswith("User:") and owner != "User:ANONYMOUS"
    with Consumer(dict(executor, **{"auto.offset.reset": "earliest"})) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.time() + 30
        while len(got) < 7 and time.time() < deadline:
            got.extend(r.value for r in consumer.poll(0.5))
    assert sorted(got) == sorted(b"v%d" % i for i in range(7))


def _token_reader(kafka_broker, topic, client_id, max_lifetime_ms, renewers):
    """The driver's planning of a read of ``topic`` whose executors log in
    with a delegation token of ``max_lifetime_ms``, one record per fetch
    (each record is its own batch) and, with workers.BATCH_ROWS patched to
    1, one record per Arrow batch: a read can be paused between records."""
    from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField,
                                   StructType, TimestampType)

    from kchannel.spark.source import KChannelDataSource
    options = {f"kafka.{k}": v for k, v in _driver(kafka_broker).items()}
    options.update({"kchannel.delegationToken": "true", "subscribe": topic,
                    "kchannel.delegationToken.maxLifetimeMs": str(max_lifetime_ms),
                    "kchannel.delegationToken.renewers": renewers,
                    # its own cluster settings: tokens of other readers are not its own
                    "kafka.client.id": client_id,
                    "kafka.max.partition.fetch.bytes": "1",
                    # the stall this guards against lasted until pollTimeoutMs
                    "kafkaConsumer.pollTimeoutMs": "60000"})
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                         StructField("timestampType", IntegerType())])   # source.schema()
    reader = KChannelDataSource(options).reader(schema)
    (part,) = reader.partitions()
    return reader, part


def _column_values(batches):
    return [v for batch in batches for v in batch.column(1).to_pylist()]


def _sleep_until(ms):
    time.sleep(max(0.0, ms / 1000 - time.time()))


@pytest.mark.slow
def test_executor_read_past_its_token_expiry(kafka_broker, monkeypatch):
    """An executor's read whose delegation token reaches its expiry
    mid-read: Kafka still accepts a login with the expired token (until it
    purges expired tokens, hourly) but grants a 0 ms session and closes the
    connection at the next request, so the consumer used to reconnect in a
    loop and the task failed after kafkaConsumer.pollTimeoutMs as data loss.
    Now: (a) with no newer token in the process, the read fails at once
    with a login error naming the token (never its HMAC); (b) with a newer
    token of the same cluster and settings in the process, the read goes on
    with it and loses nothing; (c) a token the driver renewed mid-read keeps
    its read going (the client re-authenticates, KIP-368)."""
    require_spark()
    from kchannel.spark import workers
    monkeypatch.setattr(workers, "BATCH_ROWS", 1)
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("token-expiry-read"), partitions=1)
    values = [b"v%d" % i for i in range(4)]
    produce(plain, topic, [(None, v, [], None) for v in values], **{"batch.size": 1,
                                                                       "linger.ms": 0})
    # Tokens that outlive the test first: (b)'s newer token, (c)'s renewable one.
    newer, newer_part = _token_reader(kafka_broker, topic, "expiry-moving", 60_000,
                                      "User:expiry-b2")
    renewed, renewed_part = _token_reader(kafka_broker, topic, "expiry-renewed", 120_000,
                                          "User:expiry-c")
    token_id = tokens.token_id_of(renewed.executor_configs)
    with KafkaClient(dict(_driver(kafka_broker))) as c:
        c.connect()
        (token,) = [t for t in DelegationTokenAdmin(c).describe()
                    if t.token_info.token_id == token_id]
    reads = []

    def start_reading(reader, part):
        # each read logs in and reads its first record right after its
        # token's expiry was set 3 s ahead (however loaded the machine)
        reads.append(reader.read(part))
        assert _column_values([next(reads[-1])]) == values[:1]
    try:
        alone, alone_part = _token_reader(kafka_broker, topic, "expiry-alone", 3000,
                                          "User:expiry-a")
        start_reading(alone, alone_part)
        moving, moving_part = _token_reader(kafka_broker, topic, "expiry-moving", 3000,
                                            "User:expiry-b")
        start_reading(moving, moving_part)
        # (c) the driver has set its renewable token's expiry 3 s ahead
        with KafkaClient(dict(_driver(kafka_broker))) as c:
            c.connect()
            renewed.token_expiry_ms = DelegationTokenAdmin(c).renew(token.hmac, 3000)
        start_reading(renewed, renewed_part)
        # (b) the process gets a newer token of "moving"'s cluster and settings
        assert _column_values(newer.read(newer_part)) == values
        # (c) the driver renews its token (its expiry moves on by 2 minutes)
        with KafkaClient(dict(_driver(kafka_broker))) as c:
            c.connect()
            DelegationTokenAdmin(c).renew(token.hmac)
        expiries = [_broker_view(_driver(kafka_broker), tokens.token_id_of(
            r.executor_configs)).token_info.expiry_timestamp for r in (alone, moving)]
        # past both expiries and the renewed token's first one
        _sleep_until(max(expiries + [renewed.token_expiry_ms]) + 500)

        started = time.monotonic()
        with pytest.raises(errors.SaslAuthenticationError) as info:
            _column_values(reads[0])
        waited = time.monotonic() - started
        message = str(info.value)
        alone_id = tokens.token_id_of(alone.executor_configs)
        assert message.startswith(f"Delegation token {alone_id} expired at ") and \
            "Run the query again" in message, message
        hmac = alone.executor_configs["sasl.jaas.config"].split('password="')[1].split('"')[0]
        assert hmac not in message
        # at once: not after kafkaConsumer.pollTimeoutMs (60 s)
        assert waited < 20, waited
        print(f"failed {waited:.1f} s after the expiry was reached")

        assert _column_values(reads[1]) == values[1:]
        assert _column_values(reads[2]) == values[1:]
    finally:
        workers.close_all()
