"""Spark's Kafka source options parsed without Spark (kchannel.spark.options):
strategies, offsets JSON, batch restrictions, refused kafka.* keys, and
Spark's offset-range splitting (minPartitions / maxRecordsPerPartition)."""
import json

import pytest

from kchannel import errors
from kchannel.spark import options as o
from tests.fixtures.spark import require_spark

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def parse(**kw):
    return o.SourceOptions(dict(BOOT, **kw))


def test_strategies_and_defaults():
    s = parse(subscribe="a, b")
    assert (s.strategy, s.subscribe) == ("subscribe", ["a", "b"])
    assert (s.starting.kind, s.ending.kind) == ("earliest", "latest")
    assert (s.include_headers, s.fail_on_data_loss, s.min_partitions) == (False, True, None)
    assert parse(assign='{"t":[0,2]}').assign == [("t", 0), ("t", 2)]
    assert parse(subscribepattern="t-.*").pattern == "t-.*"
    # Spark hands options with lower-cased names; the client keys lose "kafka."
    s = parse(subscribe="a", **{"kafka.security.protocol": "SASL_SSL"})
    assert s.client == {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL"}


def test_offsets_json_and_timestamps():
    s = parse(subscribe="t", startingoffsets='{"t":{"0":5,"1":-2}}',
              endingoffsets='{"t":{"0":-1,"1":9}}')
    assert s.starting.value == {("t", 0): 5, ("t", 1): -2}
    assert s.ending.value == {("t", 0): -1, ("t", 1): 9}
    # by-timestamp options win over the offsets, the global timestamp first
    s = parse(subscribe="t", startingoffsets="earliest", startingtimestamp="1000",
              startingoffsetsbytimestamp='{"t":{"0":5}}')
    assert (s.starting.kind, s.starting.value) == ("timestamp", 1000)
    s = parse(subscribe="t", endingoffsetsbytimestamp='{"t":{"0":7}}')
    assert (s.ending.kind, s.ending.value) == ("timestamps", {("t", 0): 7})


@pytest.mark.parametrize("options, message", [
    ({}, "One of the following options must be specified"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "Only one of the following options"),
    ({"assign": "{not json"}, "Expected e.g."),
    ({"assign": '{"t":0}'}, "Expected e.g."),
    ({"subscribe": " , "}, "No topics to subscribe to"),
    ({"subscribe": "t", "startingoffsets": "latest"}, "starting offset can't be latest"),
    ({"subscribe": "t", "endingoffsets": "earliest"}, "ending offset can't be earliest"),
    ({"subscribe": "t", "startingoffsets": '{"t":{"0":-1}}'}, "can't be latest"),
    ({"subscribe": "t", "endingoffsets": '{"t":{"0":-2}}'}, "can't be earliest"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not"),
    ({"subscribe": "t", "kafka.value.deserializer": "x"}, "'value.deserializer' is not"),
    ({"subscribe": "t", "includeheaders": "yes"}, "must be true or false"),
    ({"subscribe": "t", "minpartitions": "0"}, "must be at least 1"),
])
def test_wrong_options(options, message):
    with pytest.raises(errors.ConfigError, match=message):
        parse(**options)


def test_bootstrap_servers_required():
    with pytest.raises(errors.ConfigError, match="kafka.bootstrap.servers"):
        o.SourceOptions({"subscribe": "t"})


def test_split_ranges_as_spark():
    ranges = [("t", 0, 0, 100), ("t", 1, 10, 10), ("t", 2, 0, 300)]
    # empty ranges dropped; nothing to split without minPartitions
    assert o.split_ranges(ranges) == [("t", 0, 0, 100), ("t", 2, 0, 300)]
    # split in proportion to size: 1/4 and 3/4 of 8 partitions
    out = o.split_ranges(ranges, min_partitions=8)
    assert [r for r in out if r[1] == 0] == [("t", 0, 0, 50), ("t", 0, 50, 100)]
    assert len([r for r in out if r[1] == 2]) == 6
    # contiguous, covering every offset exactly once
    for p, size in ((0, 100), (2, 300)):
        parts = sorted(r for r in out if r[1] == p)
        assert parts[0][2] == 0 and parts[-1][3] == size
        assert all(a[3] == b[2] for a, b in zip(parts, parts[1:]))
    # maxRecordsPerPartition caps each range
    out = o.split_ranges([("t", 0, 0, 10)], max_records=3)
    assert [r[3] - r[2] for r in out] == [2, 3, 2, 3]
    # a range is never split into empty pieces
    assert o.split_ranges([("t", 0, 0, 2)], min_partitions=10) == [("t", 0, 0, 1),
                                                                   ("t", 0, 1, 2)]


def test_streaming_options():
    base = {"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}
    # A streaming query starts at latest unless told otherwise; latest is allowed.
    assert o.SourceOptions(base, streaming=True).starting.kind == "latest"
    assert o.SourceOptions(dict(base, startingOffsets="latest"), streaming=True) \
        .starting.kind == "latest"
    assert o.SourceOptions(dict(base, maxOffsetsPerTrigger="7"),
                           streaming=True).max_offsets_per_trigger == 7
    for key in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(errors.ConfigError, match=f"{key} option not valid in streaming"):
            o.SourceOptions(dict(base, **{key.lower(): "1"}), streaming=True)
    with pytest.raises(errors.ConfigError, match="maxOffsetsPerTrigger"):
        o.SourceOptions(dict(base, maxoffsetspertrigger="0"), streaming=True)


def test_offsets_in_sparks_json_form():
    offsets = {("b", 1): 7, ("a", 0): 23, ("a", 10): -1}
    form = o.offsets_json(offsets)
    assert form == {"a": {"0": 23, "10": -1}, "b": {"1": 7}}
    assert o.offsets_from_json(form) == offsets
    # Spark's checkpoint holds the JSON text; both forms parse the same.
    assert o.offsets_from_json(json.dumps(form)) == offsets


def test_rate_limit_as_spark():
    """KafkaMicroBatchStream.rateLimit: the limit shared in proportion to
    each partition's backlog, floor of the share, but at least one offset for
    a partition whose share is below one."""
    a0, a1, a2 = ("a", 0), ("a", 1), ("a", 2)
    # equal backlogs of 10: 12 * 10/30 = 4 each
    assert o.rate_limit(12, {a0: 0, a1: 0, a2: 0}, {a0: 10, a1: 10, a2: 10}, {}) == \
        {a0: 4, a1: 4, a2: 4}
    # backlogs 1 and 99 under a limit of 10: shares 0.1 -> 1 and 9.9 -> 9
    assert o.rate_limit(10, {a0: 5, a1: 100}, {a0: 6, a1: 199}, {}) == {a0: 6, a1: 109}
    # a new partition starts at its earliest offset (5): backlogs 20 and 20
    assert o.rate_limit(10, {a0: 0}, {a0: 20, a1: 25}, {a1: 5}) == {a0: 5, a1: 10}
    # nothing to read, or a partition whose end is behind its start: end as is
    assert o.rate_limit(10, {a0: 3, a1: 9}, {a0: 3, a1: 4}, {}) == {a0: 3, a1: 4}
    # a limit above the backlog never goes past the end
    assert o.rate_limit(1000, {a0: 0, a1: 0}, {a0: 3, a1: 1}, {}) == {a0: 3, a1: 1}


def test_exactly_once_options():
    """``kchannel.exactlyOnce`` is a streaming sink option; batch writes
    and a ``kafka.transactional.id`` of the user's are refused, saying why."""
    require_spark()
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kchannel.spark.source import KChannelStreamWriter, KChannelWriter
    schema = StructType([StructField("value", BinaryType())])
    base = {"kafka.bootstrap.servers": "localhost:9092", "topic": "t"}
    with pytest.raises(errors.ConfigError, match="is for streaming writes"):
        KChannelWriter(dict(base, **{"kchannel.exactlyOnce": "true"}), schema)
    with pytest.raises(errors.ConfigError, match="'kchannel.exactlyOnce' to 'true'"):
        KChannelStreamWriter(dict(base, **{"kafka.transactional.id": "mine"}), schema)
    with pytest.raises(errors.ConfigError, match="must be true or false"):
        KChannelStreamWriter(dict(base, **{"kchannel.exactlyOnce": "yes"}), schema)
    assert not KChannelStreamWriter(dict(base), schema).exactly_once
    w = KChannelStreamWriter(dict(base, **{"kchannel.exactlyOnce": "TRUE",
                                            "kchannel.transactionalIdPrefix": "etl"}), schema)
    assert w.exactly_once and w.transactional_id_prefix == "etl"
