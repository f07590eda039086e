"""Spark's Kafka source options, parsed and checked without Spark.

The option names, defaults and error messages follow Spark's
``KafkaSourceProvider`` (``spark-sql-kafka-0-10``): exactly one of
``assign`` / ``subscribe`` / ``subscribePattern``; ``startingOffsets``
(batch default ``earliest``) and ``endingOffsets`` (default ``latest``) as
``earliest`` / ``latest`` / per-partition JSON (-2 earliest, -1 latest);
the by-timestamp variants (``startingTimestamp``,
``startingOffsetsByTimestamp``, ``endingTimestamp``,
``endingOffsetsByTimestamp``) win over the offsets in that order;
``kafka.``-prefixed keys go to the kchannel client with the prefix dropped.
Spark hands a Python data source its options with lower-cased names, so
every lookup here is by lower-cased name.
"""
import json
import math

from kchannel import errors

__all__ = ["SourceOptions", "parse_assign", "parse_offsets_json", "client_configs",
           "rate_limit", "offsets_json", "offsets_from_json", "split_ranges",
           "EARLIEST", "LATEST"]

EARLIEST = -2
LATEST = -1

STRATEGIES = ("assign", "subscribe", "subscribepattern")
_STRATEGY_NAMES = {"assign": "assign", "subscribe": "subscribe",
                   "subscribepattern": "subscribePattern"}

# Kafka consumer keys Spark refuses (KafkaSourceProvider.validateGeneralOptions),
# with the advice it gives.
_UNSUPPORTED = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the "
                         "source option 'startingOffsets' to 'earliest' or 'latest' to specify "
                         "where to start.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, keys are always "
                        "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame "
                        "operations to explicitly deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, values are "
                          "always deserialized as byte arrays with ByteArrayDeserializer. Use "
                          "DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported. This is "
                          "because the source does not commit any offsets.",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported as returning "
                           "null values from interceptors is not supported.",
}
_UNSUPPORTED_SINK = {
    "key.serializer": "Kafka option 'key.serializer' is not supported, keys are always "
                      "serialized with ByteArraySerializer or StringSerializer. Use "
                      "DataFrame operations to explicitly serialize the keys into either "
                      "strings or byte arrays.",
    "value.serializer": "Kafka option 'value.serializer' is not supported, values are always "
                        "serialized with ByteArraySerializer or StringSerializer. Use "
                        "DataFrame operations to explicitly serialize the values into either "
                        "strings or byte arrays.",
}


def _bool(options, name, default):
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value not in ("true", "false"):
        raise errors.ConfigError(f"Invalid value '{raw}' for option '{name}', must be true "
                                 "or false", key=name, value=raw)
    return value == "true"


def _int(options, name, default, minimum=None):
    raw = options.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise errors.ConfigError(f"Invalid value '{raw}' for option '{name}', must be an "
                                 "integer", key=name, value=raw) from None
    if minimum is not None and value < minimum:
        raise errors.ConfigError(f"Invalid value '{raw}' for option '{name}', must be at "
                                 f"least {minimum}", key=name, value=raw)
    return value


def client_configs(options, sink=False):
    """The ``kafka.``-prefixed options, prefix dropped (Kafka client keys)."""
    out = {}
    refused = dict(_UNSUPPORTED_SINK if sink else _UNSUPPORTED)
    if sink:
        refused.pop("auto.offset.reset", None)
    for key, value in options.items():
        k = key.lower()
        if not k.startswith("kafka."):
            continue
        name = k[len("kafka."):]
        if name in refused:
            raise errors.ConfigError(refused[name], key=key)
        out[name] = value
    if not out.get("bootstrap.servers"):
        raise errors.ConfigError("Option 'kafka.bootstrap.servers' must be specified for "
                                 "configuring Kafka consumer" if not sink else
                                 "Option 'kafka.bootstrap.servers' must be specified for "
                                 "configuring Kafka producer", key="kafka.bootstrap.servers")
    return out


def parse_assign(text):
    """``{"topicA":[0,1],"topicB":[2,4]}`` -> [(topic, partition)]."""
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise ValueError
        out = []
        for topic, parts in parsed.items():
            if not isinstance(parts, list):
                raise ValueError
            for p in parts:
                if not isinstance(p, int) or isinstance(p, bool):
                    raise ValueError
                out.append((str(topic), p))
        return out
    except ValueError:
        raise errors.ConfigError(
            f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {text}",
            key="assign", value=text) from None


def parse_offsets_json(text, name):
    """``{"topicA":{"0":23,"1":-1}}`` -> {(topic, partition): offset or timestamp}."""
    try:
        parsed = json.loads(text)
        if not isinstance(parsed, dict):
            raise ValueError
        out = {}
        for topic, parts in parsed.items():
            if not isinstance(parts, dict):
                raise ValueError
            for p, off in parts.items():
                if not isinstance(off, int) or isinstance(off, bool):
                    raise ValueError
                out[(str(topic), int(p))] = off
        return out
    except ValueError:
        raise errors.ConfigError(
            f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}}, "
            f"got {text}", key=name, value=text) from None


class OffsetSpec:
    """Where a range starts or ends: ``kind`` is "earliest", "latest",
    "offsets" (``value`` {tp: offset}), "timestamp" (``value`` one ms
    timestamp for every partition) or "timestamps" ({tp: ms})."""

    __slots__ = ("kind", "value")

    def __init__(self, kind, value=None):
        self.kind = kind
        self.value = value

    def __repr__(self):
        return f"OffsetSpec({self.kind!r}, {self.value!r})"


def _offset_spec(options, prefix, default):
    ts = options.get(f"{prefix}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", int(str(ts).strip()))
        except ValueError:
            raise errors.ConfigError(f"Invalid value '{ts}' for option '{prefix}Timestamp'",
                                     key=f"{prefix}Timestamp", value=ts) from None
    by_ts = options.get(f"{prefix}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", parse_offsets_json(by_ts,
                                                           f"{prefix}OffsetsByTimestamp"))
    raw = options.get(f"{prefix}offsets")
    if raw is None:
        return OffsetSpec(default)
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", parse_offsets_json(text, f"{prefix}Offsets"))


class SourceOptions:
    """The read options of one query (see the module docstring)."""

    def __init__(self, options, streaming=False):
        options = {str(k).lower(): v for k, v in dict(options).items()}
        self.streaming = streaming
        given = [k for k in STRATEGIES if options.get(k) is not None]
        if not given:
            raise errors.ConfigError(
                "One of the following options must be specified for Kafka source: "
                "subscribe, subscribePattern, assign. See the docs for more details.")
        if len(given) > 1:
            raise errors.ConfigError(
                "Only one of the following options can be specified for Kafka source: "
                "subscribe, subscribePattern, assign. See the docs for more details.")
        self.strategy = _STRATEGY_NAMES[given[0]]
        raw = str(options[given[0]])
        if self.strategy == "assign":
            self.assign = parse_assign(raw)
        elif self.strategy == "subscribe":
            topics = [t.strip() for t in raw.split(",") if t.strip()]
            if not topics:
                raise errors.ConfigError(f"No topics to subscribe to as specified value for "
                                         f"option 'subscribe' is '{raw}'", key="subscribe",
                                         value=raw)
            self.subscribe = topics
        else:
            if not raw.strip():
                raise errors.ConfigError("Pattern to subscribe is empty as specified value for "
                                         "option 'subscribePattern' is ''",
                                         key="subscribePattern", value=raw)
            self.pattern = raw.strip()
        self.client = client_configs(options)
        # A streaming query starts at the latest offsets by default (Spark's
        # KafkaSourceProvider) and has no end.
        self.starting = _offset_spec(options, "starting", "latest" if streaming else "earliest")
        if streaming:
            for key, name in (("endingoffsets", "endingOffsets"),
                              ("endingtimestamp", "endingTimestamp"),
                              ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp")):
                if options.get(key) is not None:
                    raise errors.ConfigError(f"{name} option not valid in streaming queries",
                                             key=name)
            self.ending = None
        else:
            self.ending = _offset_spec(options, "ending", "latest")
            self._check_batch_offsets()
        strategy = str(options.get("startingoffsetsbytimestampstrategy", "error")).lower()
        if strategy not in ("error", "latest"):
            raise errors.ConfigError(
                f"Invalid value '{strategy}' for option 'startingOffsetsByTimestampStrategy', "
                "must be 'error' or 'latest'", key="startingOffsetsByTimestampStrategy")
        self.timestamp_strategy = strategy
        self.min_partitions = _int(options, "minPartitions", None, minimum=1)
        self.max_records_per_partition = _int(options, "maxRecordsPerPartition", None,
                                              minimum=1)
        self.include_headers = _bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _bool(options, "failOnDataLoss", True)
        # Spark's kafkaConsumer.pollTimeoutMs defaults to spark.network.timeout (120 s).
        self.poll_timeout_ms = _int(options, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1)
        self.max_offsets_per_trigger = _int(options, "maxOffsetsPerTrigger", None, minimum=1)

    def _check_batch_offsets(self):
        # KafkaSourceProvider.validateBatchOptions
        if self.starting.kind == "latest":
            raise errors.ConfigError("starting offset can't be latest for batch queries on "
                                     "Kafka", key="startingOffsets")
        if self.starting.kind == "offsets":
            for (topic, part), off in self.starting.value.items():
                if off == LATEST:
                    raise errors.ConfigError(
                        f"startingOffsets for {topic}-{part} can't be latest for batch "
                        "queries on Kafka", key="startingOffsets")
        if self.ending.kind == "earliest":
            raise errors.ConfigError("ending offset can't be earliest for batch queries on "
                                     "Kafka", key="endingOffsets")
        if self.ending.kind == "offsets":
            for (topic, part), off in self.ending.value.items():
                if off == EARLIEST:
                    raise errors.ConfigError(
                        f"ending offset for {topic}-{part} can't be earliest for batch "
                        "queries on Kafka", key="endingOffsets")


def rate_limit(limit, start, end, earliest_of_new):
    """Spark's ``KafkaMicroBatchStream.rateLimit``: end offsets so that a
    micro-batch reads at most about ``limit`` offsets, shared by the
    partitions in proportion to what each has to read (a partition with
    less than one offset's share still gets one, so none starves).
    ``start`` and ``end`` map a key to an offset; a key of ``end`` missing
    from ``start`` (a new partition) starts at ``earliest_of_new[key]``."""
    sizes = {}
    for key, e in end.items():
        b = start.get(key, earliest_of_new.get(key))
        if b is not None and e - b > 0:
            sizes[key] = e - b
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(end)
    out = {}
    for key, e in end.items():
        if key not in sizes:
            out[key] = e
            continue
        b = start.get(key, earliest_of_new.get(key))
        prorate = limit * (sizes[key] / total)
        n = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[key] = min(e, b + int(n))
    return out


def offsets_json(offsets):
    """{(topic, partition): offset} -> Spark's Kafka offset form
    ``{"topic": {"0": 23}}`` (a dict, as the Python streaming API wants)."""
    out = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def offsets_from_json(value):
    """Spark's Kafka offset form (a dict or its JSON text) -> {(topic, partition): offset}."""
    if isinstance(value, str):
        return parse_offsets_json(value, "offset")
    return {(str(t), int(p)): int(o) for t, parts in value.items() for p, o in parts.items()}


def split_ranges(ranges, min_partitions=None, max_records=None):
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: the non-empty
    ``(topic, partition, start, end)`` ranges, split so that there are at
    least ``min_partitions`` (in proportion to their sizes) and none holds
    more than ``max_records`` offsets."""
    ranges = [r for r in ranges if r[3] > r[2]]
    if max_records:
        out = []
        for topic, part, start, end in ranges:
            size = end - start
            parts = -(-size // max_records)
            out.extend(_split(topic, part, start, end, parts))
        ranges = out
    if min_partitions and len(ranges) < min_partitions and ranges:
        total = sum(r[3] - r[2] for r in ranges)
        out = []
        for topic, part, start, end in ranges:
            size = end - start
            parts = max(int(size / total * min_partitions + 0.5), 1)
            out.extend(_split(topic, part, start, end, parts))
        ranges = out
    return ranges


def _split(topic, part, start, end, parts):
    size = end - start
    parts = max(1, min(parts, size))
    bounds = [start + size * i // parts for i in range(parts)] + [end]
    return [(topic, part, bounds[i], bounds[i + 1]) for i in range(parts)]
