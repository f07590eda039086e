"""Consumer configuration: Kafka's ``ConsumerConfig`` keys and defaults
(Apache Kafka 4.x) with librdkafka and kafka-python/aiokafka aliases, split
from the network client's keys as the producer's are."""
from kchannel.config.aliases import split_configs
from kchannel.config.definitions import (CaseInsensitiveValidString, ConfigDef, ConfigKey,
                                         Importance, Range, Type, ValidList, ValidString)
from kchannel.errors import ConfigError
from kchannel.log import get_logger

__all__ = ["CONSUMER_CONFIG_DEF", "CONSUMER_ALIASES", "split_consumer_configs", "deserializer"]

log = get_logger("kchannel.consumer.config")

S, I, LG, B, LI = Type.STRING, Type.INT, Type.LONG, Type.BOOLEAN, Type.LIST
H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
_atl = Range.at_least

_BYTE_ARRAY = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
_STRING = "org.apache.kafka.common.serialization.StringDeserializer"
RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"
ROUND_ROBIN = "org.apache.kafka.clients.consumer.RoundRobinAssignor"
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"

_ROWS = [
    ("group.id", S, None, None, H, "A unique string that identifies the consumer group this "
     "consumer belongs to."),
    ("group.instance.id", S, None, None, M, "A unique identifier of the consumer instance "
     "provided by the end user (static membership)."),
    ("group.protocol", S, "classic", CaseInsensitiveValidString("classic", "consumer"), M,
     "The group protocol consumer should use: classic (JoinGroup/SyncGroup) or consumer "
     "(KIP-848, ConsumerGroupHeartbeat with assignment by the broker)."),
    ("group.remote.assignor", S, None, None, M, "The name of the server-side assignor to use "
     "(group.protocol=consumer). If not specified, the group coordinator's default assignor "
     "is used."),
    ("auto.offset.reset", S, "latest", ValidString("latest", "earliest", "none"), M,
     "What to do when there is no initial offset in Kafka or if the current offset does not "
     "exist any more on the server."),
    ("enable.auto.commit", B, True, None, M, "If true the consumer's offset will be "
     "periodically committed in the background."),
    ("auto.commit.interval.ms", I, 5000, _atl(0), L, "The frequency in milliseconds that the "
     "consumer offsets are auto-committed to Kafka if enable.auto.commit is set to true."),
    ("fetch.min.bytes", I, 1, _atl(0), H, "The minimum amount of data the server should "
     "return for a fetch request."),
    ("fetch.max.bytes", I, 52428800, _atl(0), M, "The maximum amount of data the server "
     "should return for a fetch request."),
    ("fetch.max.wait.ms", I, 500, _atl(0), L, "The maximum amount of time the server will "
     "block before answering the fetch request if there isn't sufficient data."),
    ("max.partition.fetch.bytes", I, 1048576, _atl(0), H, "The maximum amount of data per "
     "partition the server will return."),
    ("max.poll.records", I, 500, _atl(1), M, "The maximum number of records returned in a "
     "single call to poll()."),
    ("max.poll.interval.ms", I, 300000, _atl(1), M, "The maximum delay between invocations "
     "of poll() when using consumer group management."),
    ("session.timeout.ms", I, 45000, None, H, "The timeout used to detect client failures "
     "when using Kafka's group management facility."),
    ("heartbeat.interval.ms", I, 3000, None, H, "The expected time between heartbeats to the "
     "consumer coordinator when using Kafka's group management facilities."),
    ("isolation.level", S, "read_uncommitted", ValidString("read_committed",
                                                           "read_uncommitted"), M,
     "Controls how to read messages written transactionally."),
    ("check.crcs", B, True, None, L, "Automatically check the CRC32 of the records consumed."),
    ("request.timeout.ms", I, 30000, _atl(0), M, "The maximum amount of time the client will "
     "wait for the response of a request."),
    ("default.api.timeout.ms", I, 60000, _atl(0), M, "Specifies the timeout (in "
     "milliseconds) for client APIs that block."),
    ("retry.backoff.ms", LG, 100, _atl(0), L, "The amount of time to wait before attempting "
     "to retry a failed request."),
    ("retry.backoff.max.ms", LG, 1000, _atl(0), L, "The maximum amount of time in milliseconds "
     "to wait when retrying a request that has repeatedly failed."),
    ("statistics.interval.ms", LG, 0, _atl(0), L,
     "librdkafka's: how often (ms) poll()/flush() call stats_cb with the client's statistics "
     "as librdkafka's JSON; 0 (the default) turns statistics off."),
    ("metadata.max.age.ms", LG, 300000, _atl(0), L, "The period of time after which we force "
     "a refresh of metadata."),
    ("partition.assignment.strategy", LI, f"{RANGE},{COOPERATIVE_STICKY}",
     ValidList(RANGE, ROUND_ROBIN, COOPERATIVE_STICKY, "range", "roundrobin",
               "cooperative-sticky"), M,
     "A list of class names of the supported partition assignment strategies."),
    ("allow.auto.create.topics", B, True, None, M, "Allow automatic topic creation on the "
     "broker when subscribing to or assigning a topic."),
    ("exclude.internal.topics", B, True, None, M, "Whether internal topics matching a "
     "subscribed pattern should be excluded from the subscription."),
    ("client.rack", S, "", None, L, "A rack identifier for this client."),
    ("key.deserializer", S, _BYTE_ARRAY, ValidString(_BYTE_ARRAY, _STRING), H,
     "Deserializer for keys: ByteArrayDeserializer (bytes) or StringDeserializer (str)."),
    ("value.deserializer", S, _BYTE_ARRAY, ValidString(_BYTE_ARRAY, _STRING), H,
     "Deserializer for values: ByteArrayDeserializer or StringDeserializer."),
]

CONSUMER_CONFIG_DEF = ConfigDef(
    [ConfigKey(name, t, default, validator, imp, doc, "consumer")
     for name, t, default, validator, imp, doc in _ROWS], "consumer")

SHARED_WITH_CLIENT = ("request.timeout.ms",)


def _rd_reset(v):
    s = str(v).strip().lower()
    return {"smallest": "earliest", "beginning": "earliest", "largest": "latest",
            "end": "latest", "error": "none"}.get(s, s)


CONSUMER_ALIASES = {
    # librdkafka
    "fetch.wait.max.ms": ("fetch.max.wait.ms", None),
    "fetch.message.max.bytes": ("max.partition.fetch.bytes", None),
    "max.partition.fetch.bytes": ("max.partition.fetch.bytes", None),
    "auto.commit.interval.ms": ("auto.commit.interval.ms", None),
    "check.crcs": ("check.crcs", None),
    # kafka-python / aiokafka
    "group_id": ("group.id", None),
    "group_instance_id": ("group.instance.id", None),
    "group_protocol": ("group.protocol", lambda v: _normalize("group.protocol", v)),
    "group_remote_assignor": ("group.remote.assignor", None),
    "auto_offset_reset": ("auto.offset.reset", _rd_reset),
    "enable_auto_commit": ("enable.auto.commit", None),
    "auto_commit_interval_ms": ("auto.commit.interval.ms", None),
    "fetch_min_bytes": ("fetch.min.bytes", None),
    "fetch_max_bytes": ("fetch.max.bytes", None),
    "fetch_max_wait_ms": ("fetch.max.wait.ms", None),
    "max_partition_fetch_bytes": ("max.partition.fetch.bytes", None),
    "max_poll_records": ("max.poll.records", None),
    "max_poll_interval_ms": ("max.poll.interval.ms", None),
    "session_timeout_ms": ("session.timeout.ms", None),
    "heartbeat_interval_ms": ("heartbeat.interval.ms", None),
    "isolation_level": ("isolation.level", None),
    "check_crcs": ("check.crcs", None),
    "default_api_timeout_ms": ("default.api.timeout.ms", None),
    "retry_backoff_ms": ("retry.backoff.ms", None),
    "retry_backoff_max_ms": ("retry.backoff.max.ms", None),
    "metadata_max_age_ms": ("metadata.max.age.ms", None),
    "allow_auto_create_topics": ("allow.auto.create.topics", None),
    "exclude_internal_topics": ("exclude.internal.topics", None),
    "client_rack": ("client.rack", None),
}

# Kafka's ConsumerConfig: the keys of the other group protocol.
_CLASSIC_PROTOCOL_UNSUPPORTED = ("group.remote.assignor",)
_CONSUMER_PROTOCOL_UNSUPPORTED = ("partition.assignment.strategy", "heartbeat.interval.ms",
                                  "session.timeout.ms")

_CALLABLES = ("key_deserializer", "value_deserializer", "stats_cb")


def _normalize(key, value):
    if key == "auto.offset.reset":
        return _rd_reset(value)
    if key == "group.protocol" and isinstance(value, str):
        return value.lower()      # (case-insensitive, as Kafka's)
    return value


def split_consumer_configs(configs):
    """``(consumer values, client configs, extras)`` from one user dict."""
    raw, client, extras = split_configs(
        configs, CONSUMER_CONFIG_DEF, CONSUMER_ALIASES, _CALLABLES, SHARED_WITH_CLIENT,
        normalize=_normalize)
    values = CONSUMER_CONFIG_DEF.parse(raw)
    # Kafka's ConsumerConfig.checkUnsupportedConfigsPostProcess: the keys
    # of the other protocol, when the user set them (not their defaults).
    protocol = values["group.protocol"]
    unsupported = _CONSUMER_PROTOCOL_UNSUPPORTED if protocol == "consumer" else \
        _CLASSIC_PROTOCOL_UNSUPPORTED
    invalid = [k for k in unsupported if raw.get(k) is not None and str(raw[k]).strip()]
    if invalid:
        raise ConfigError(f"{', '.join(invalid)} cannot be set when group.protocol="
                          f"{protocol.upper()}", key=invalid[0], value=raw[invalid[0]])
    if values["heartbeat.interval.ms"] >= values["session.timeout.ms"]:
        raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms",
                          key="heartbeat.interval.ms", value=values["heartbeat.interval.ms"])
    for k in SHARED_WITH_CLIENT:
        client.setdefault(k, values[k])
    return values, client, extras


def deserializer(data, configured, callable_=None):
    if callable_ is not None:
        return callable_(data)
    if data is not None and configured == _STRING:
        return data.decode("utf-8", "replace")
    return data
