"""Producer configuration: Kafka's defaults, validation, the idempotence
rules of ProducerConfig, librdkafka and kafka-python aliases."""
import pytest

from kchannel.errors import ConfigError
from kchannel.producer.config import split_producer_configs


def test_java_defaults():
    values, client, _ = split_producer_configs({"bootstrap.servers": "h:1"})
    assert values["acks"] == -1
    assert values["linger.ms"] == 5
    assert values["batch.size"] == 16384
    assert values["buffer.memory"] == 33554432
    assert values["compression.type"] == "none"
    assert values["enable.idempotence"] is True
    assert values["max.in.flight.requests.per.connection"] == 5
    assert values["delivery.timeout.ms"] == 120000
    assert values["retries"] == 2147483647
    assert values["retry.backoff.ms"] == 100
    assert values["request.timeout.ms"] == 30000
    assert values["max.request.size"] == 1048576
    assert values["max.block.ms"] == 60000
    assert client == {"bootstrap.servers": "h:1", "request.timeout.ms": 30000}


@pytest.mark.parametrize("acks,expected", [("all", -1), ("-1", -1), ("1", 1), ("0", 0),
                                           (1, 1), (0, 0), (-1, -1)])
def test_acks(acks, expected):
    values, _, _ = split_producer_configs({"acks": acks, "enable.idempotence": "false"})
    assert values["acks"] == expected


def test_invalid_values_name_the_key():
    with pytest.raises(ConfigError) as info:
        split_producer_configs({"acks": "2"})
    assert info.value.key == "acks"
    with pytest.raises(ConfigError, match="compression.type"):
        split_producer_configs({"compression.type": "brotli"})
    with pytest.raises(ConfigError, match="batch.size"):
        split_producer_configs({"batch.size": "-1"})


def test_idempotence_explicit_conflicts_are_errors():
    with pytest.raises(ConfigError, match="acks to all"):
        split_producer_configs({"enable.idempotence": "true", "acks": "1"})
    with pytest.raises(ConfigError, match="at most 5"):
        split_producer_configs({"enable.idempotence": True,
                                "max.in.flight.requests.per.connection": 6})
    with pytest.raises(ConfigError, match="retries to non-zero"):
        split_producer_configs({"enable.idempotence": True, "retries": 0})


def test_idempotence_default_gives_way():
    values, _, _ = split_producer_configs({"acks": "1"})
    assert values["enable.idempotence"] is False
    values, _, _ = split_producer_configs({"max.in.flight.requests.per.connection": 10})
    assert values["enable.idempotence"] is False


def test_delivery_timeout_bound():
    with pytest.raises(ConfigError, match="linger.ms \\+ request.timeout.ms"):
        split_producer_configs({"delivery.timeout.ms": 1000, "linger.ms": 5,
                                "request.timeout.ms": 30000})
    values, _, _ = split_producer_configs({"request.timeout.ms": 200000})
    assert values["delivery.timeout.ms"] == 200005


def test_transactional_id_requires_idempotence():
    """Kafka's postProcessAndValidateIdempotenceConfigs: a transactional.id
    keeps the idempotence default; a setting that turns idempotence off
    (acks=1) or an explicit enable.idempotence=false is an error."""
    values, _, _ = split_producer_configs({"transactional.id": "tx"})
    assert (values["transactional.id"], values["enable.idempotence"], values["acks"],
            values["transaction.timeout.ms"]) == ("tx", True, -1, 60000)
    for extra in ({"acks": "1"}, {"enable.idempotence": False}, {"retries": 0}):
        with pytest.raises(ConfigError, match="Cannot set a transactional.id without also "
                                              "enabling idempotence"):
            split_producer_configs({"transactional.id": "tx", **extra})
    with pytest.raises(ConfigError, match="acks to all"):
        split_producer_configs({"transactional.id": "tx", "enable.idempotence": True,
                                "acks": 1})
    with pytest.raises(ConfigError, match="non-empty"):
        split_producer_configs({"transactional.id": ""})
    values, _, _ = split_producer_configs({"transactional_id": "t",
                                           "transaction_timeout_ms": 5000})
    assert (values["transactional.id"], values["transaction.timeout.ms"]) == ("t", 5000)


def test_librdkafka_aliases():
    values, _, _ = split_producer_configs({
        "queue.buffering.max.ms": 20, "compression.codec": "lz4",
        "request.required.acks": "all", "message.timeout.ms": 60000,
        "message.send.max.retries": 3, "max.in.flight": 2,
        "queue.buffering.max.kbytes": 1024, "message.max.bytes": 2000000})
    assert values["linger.ms"] == 20
    assert values["compression.type"] == "lz4"
    assert values["acks"] == -1
    assert values["delivery.timeout.ms"] == 60000
    assert values["retries"] == 3
    assert values["max.in.flight.requests.per.connection"] == 2
    assert values["buffer.memory"] == 1024 * 1024
    assert values["max.request.size"] == 2000000


def test_kafka_python_aliases_and_serializers():
    ser = str.encode
    values, client, extras = split_producer_configs({
        "bootstrap_servers": "h:1", "linger_ms": 7, "batch_size": 100, "acks": 1,
        "compression_type": None, "max_request_size": 5000, "key_serializer": ser})
    assert (values["linger.ms"], values["batch.size"], values["acks"]) == (7, 100, 1)
    assert values["compression.type"] == "none"
    assert values["max.request.size"] == 5000
    assert extras == {"key_serializer": ser}
    assert client["bootstrap_servers"] == "h:1"


def test_alias_conflicting_with_java_key():
    with pytest.raises(ConfigError, match="alias of linger.ms"):
        split_producer_configs({"linger.ms": 1, "linger_ms": 2})


def test_compression_level_alias():
    values, _, _ = split_producer_configs({"compression.type": "zstd",
                                           "compression.level": 7})
    assert values["compression.zstd.level"] == 7


def test_transactional_methods_check_the_state():
    """Kafka's IllegalStateException cases, before any broker is involved."""
    from kchannel import Producer
    from kchannel.errors import IllegalStateError
    with Producer({"bootstrap.servers": "127.0.0.1:9"}) as plain:
        with pytest.raises(IllegalStateError, match="transactional.id"):
            plain.begin_transaction()
    p = Producer({"bootstrap.servers": "127.0.0.1:9", "transactional.id": "tx"})
    try:
        with pytest.raises(IllegalStateError, match="UNINITIALIZED to state IN_TRANSACTION"):
            p.begin_transaction()
        with pytest.raises(IllegalStateError,
                           match="UNINITIALIZED to state COMMITTING_TRANSACTION"):
            p.commit_transaction(1)
        with pytest.raises(IllegalStateError, match="initTransactions"):
            p.send("t", b"v")
    finally:
        p.close(0)
