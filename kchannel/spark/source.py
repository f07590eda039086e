"""The ``kchannel`` Python data source: Spark's Kafka source and sink on
kchannel (see :mod:`kchannel.spark`).  This is the only module that imports
pyspark."""
import re

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader,
                                    InputPartition, WriterCommitMessage)

from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,
                                              SupportsTriggerAvailableNow)

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import exception_for
from kchannel.spark import options as opts
from kchannel.spark import tokens, workers

__all__ = ["KChannelDataSource", "KChannelStreamReader", "KafkaInputPartition"]

log = get_logger("kchannel.spark")

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_FIELD = "headers array<struct<key:string,value:binary>>"

# Executors read ranges that exist: a fetch at the end of a range need not
# wait long for new data (Kafka's default fetch.max.wait.ms 500 would hold the
# next task on the same cached consumer for up to that long).  Not 0 either:
# Tansu (and librdkafka against it) answers a 0 ms fetch with no records at
# all, data or not, and the read would fail after kafkaConsumer.pollTimeoutMs
# as data loss.  10 ms costs nothing on Kafka, which answers as soon as data
# exists.  Positions are always sought, never reset: an offset out of range
# raises (Spark's executor consumers use auto.offset.reset=none too).
READ_FETCH_MAX_WAIT_MS = 10
_READ_DEFAULTS = {"fetch.max.wait.ms": str(READ_FETCH_MAX_WAIT_MS), "auto.offset.reset": "none"}

_TOKEN_OPTION = "kchannel.delegationtoken"
EXACTLY_ONCE = "kchannel.exactlyOnce"
TRANSACTIONAL_ID_PREFIX = "kchannel.transactionalIdPrefix"


def _token_settings(options):
    options = {str(k).lower(): v for k, v in dict(options).items()}
    raw = str(options.get(_TOKEN_OPTION, "false")).strip().lower()
    if raw not in ("true", "false"):
        raise errors.ConfigError(f"Invalid value '{raw}' for option 'kchannel.delegationToken', "
                                 "must be true or false", key="kchannel.delegationToken")
    if raw == "false":
        return None
    renewers = [r.strip() for r in str(options.get(_TOKEN_OPTION + ".renewers", "")).split(",")
                if r.strip()]
    ratio = float(options.get(_TOKEN_OPTION + ".renewalratio", tokens.RENEWAL_RATIO))
    if not 0 < ratio <= 1:
        raise errors.ConfigError(f"Invalid value '{ratio}' for option "
                                 "'kchannel.delegationToken.renewalRatio', must be in (0, 1]",
                                 key="kchannel.delegationToken.renewalRatio")
    return {"mechanism": str(options.get(_TOKEN_OPTION + ".mechanism", "SCRAM-SHA-512")),
            "renewers": renewers,
            "max_lifetime_ms": int(options.get(_TOKEN_OPTION + ".maxlifetimems", -1)),
            "renewal_ratio": ratio}


def _split_configs(options, client):
    """(driver configs, executor configs): with ``kchannel.delegationToken``
    the executors get a token login and none of the driver's credentials."""
    return _executor_split(_token_settings(options), client)


def _executor_split(settings, client):
    """(driver configs, executor configs, the token's expiry in ms or None)."""
    if settings is None:
        return client, client, None
    token = tokens.obtain_token(client, settings["renewers"], settings["max_lifetime_ms"],
                                settings["renewal_ratio"])
    return (client, tokens.executor_configs(client, token, settings["mechanism"]),
            token.token_info.expiry_timestamp)


class KChannelDataSource(DataSource):
    """``spark.read.format("kchannel")`` / ``df.write.format("kchannel")``
    with Spark's Kafka options (see :mod:`kchannel.spark`)."""

    def __init__(self, options):
        super().__init__(options)
        self._redacted = False

    @classmethod
    def name(cls):
        return "kchannel"

    def schema(self):
        include = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        return BASE_SCHEMA + (", " + HEADERS_FIELD if include else "")

    def reader(self, schema):
        reader = KChannelReader(self.options, schema)
        self._redact()
        return reader

    def streamReader(self, schema):
        reader = KChannelStreamReader(self.options, schema)
        self._redact()
        return reader

    def writer(self, schema, overwrite):
        if overwrite:
            raise errors.ConfigError("Save mode Overwrite not allowed for Kafka. Allowed save "
                                     "modes are Append and ErrorIfExists (default).")
        writer = KChannelWriter(self.options, schema)
        self._redact()
        return writer

    def streamWriter(self, schema, overwrite):
        # Spark's Kafka sink writes every row of a micro-batch whatever the
        # output mode (append, update and complete alike): nothing to do
        # with ``overwrite`` (complete mode) here either.
        writer = KChannelStreamWriter(self.options, schema)
        self._redact()
        return writer

    def _redact(self):
        # Spark ships this object to the executors with the read/write
        # function: with delegation tokens the driver's credentials stay here.
        if _token_settings(self.options) is not None:
            self._redacted = True

    def __getstate__(self):
        state = dict(self.__dict__)
        if state.get("_redacted"):
            state["options"] = {k: v for k, v in self.options.items()
                                if not tokens.is_secret_option(k)}
        return state


class KafkaInputPartition(InputPartition):
    """Offsets ``[start, end)`` of one topic partition (Spark's
    ``KafkaOffsetRange``)."""

    def __init__(self, topic, partition, start, end, configs=None, token_expiry_ms=None):
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        # A streaming micro-batch's executor configuration (its current
        # delegation token); None: the reader's.
        self.configs = configs
        # That token's expiry as the driver knew it (None: the reader's).
        self.token_expiry_ms = token_expiry_ms

    def __repr__(self):
        return f"KafkaInputPartition({self.topic}-{self.partition}, [{self.start}, {self.end}))"


class _KafkaReading:
    """What the batch and the streaming reader share: options and the
    driver/executor split of client configs, resolving offset specs on the
    driver, and reading an offset range on an executor (cached consumer,
    Arrow batches)."""

    streaming = False

    def __init__(self, options, schema):
        self.options = opts.SourceOptions(options, streaming=self.streaming)
        self.schema = schema
        client = dict(self.options.client)
        self._token = _token_settings(options)
        driver, executor, expiry = _executor_split(self._token, client)
        self._driver_configs = driver
        self.executor_configs = dict(_READ_DEFAULTS, **executor)
        self.token_expiry_ms = expiry

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_driver_configs", None)
        state.pop("_meta", None)
        state["options"] = _ReadSettings(self.options)
        return state

    def _resolve(self, consumer, spec, tps, earliest, latest, starting):
        return _resolve(self.options, consumer, spec, tps, earliest, latest, starting)

    # -- reading (executors) ---------------------------------------------------
    def read(self, partition):
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        # The Arrow schema Spark checks batches against; pyspark.sql.pandas
        # needs pyarrow, which only executors must have.
        from pyspark.sql.pandas.types import to_arrow_schema
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        o = self.options
        configs = getattr(partition, "configs", None)
        expiry = getattr(partition, "token_expiry_ms", None)
        if configs is None:
            configs, expiry = self.executor_configs, getattr(self, "token_expiry_ms", None)
        return _naming_the_token(configs, workers.read_range(
            configs, arrow_schema, partition.topic, partition.partition, partition.start,
            partition.end, o.include_headers, o.poll_timeout_ms, o.fail_on_data_loss,
            token_expiry_ms=expiry))


def _naming_the_token(configs, batches):
    """``batches``, with an executor's failed login re-raised naming the
    delegation token it used (see tokens.login_failure)."""
    try:
        yield from batches
    except workers.TokenExpiredError:
        raise
    except errors.AuthenticationError as exc:
        failure = tokens.login_failure(configs, exc)
        if failure is exc:
            raise
        raise failure from exc


class KChannelReader(_KafkaReading, DataSourceReader):
    """Plans offset ranges on the driver; reads them on the executors with
    cached consumers, yielding Arrow batches."""

    # -- planning (driver) -----------------------------------------------------
    def partitions(self):
        o = self.options
        consumer_configs = dict(_READ_DEFAULTS, **self._driver_configs)
        tps = _topic_partitions(self._driver_configs, o)
        if not tps:
            return []
        consumer = workers.checkout_consumer(consumer_configs)
        clean = False
        try:
            earliest = consumer.beginning_offsets(tps)
            latest = consumer.end_offsets(tps)
            start = self._resolve(consumer, o.starting, tps, earliest, latest, True)
            end = self._resolve(consumer, o.ending, tps, earliest, latest, False)
            clean = True
        finally:
            workers.checkin_consumer(consumer_configs, consumer, clean)
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < earliest[tp]:
                _data_loss(o, f"Cannot fetch offset {s} of {tp.topic}-{tp.partition}: the "
                              f"earliest offset is {earliest[tp]}. Some data may have been "
                              "lost because they are not available in Kafka any more; either "
                              "the data was aged out by Kafka or the topic may have been "
                              "deleted before all the data in the topic was processed.")
                s = earliest[tp]
            if e < s:
                _data_loss(o, f"Partition {tp.topic}-{tp.partition}'s offset was changed from "
                              f"{s} to {e}, some data may have been missed.")
                continue
            ranges.append((tp.topic, tp.partition, s, e))
        ranges = opts.split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        log.debug("Planned %d offset ranges", len(ranges))
        return [KafkaInputPartition(*r) for r in ranges]


class KChannelStreamReader(_KafkaReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of Spark's Kafka source: offsets are Spark's Kafka JSON
    form (``{"topic": {"0": 23}}``), checkpointed by Spark.  Planning runs on
    the driver; each micro-batch's ranges are read by the executors exactly
    as a batch read's (cached consumers, Arrow batches).  Kafka offsets are
    not committed to the group coordinator (nor are they by Spark)."""

    streaming = True

    def __init__(self, options, schema):
        super().__init__(options, schema)
        self._target = None     # Trigger.AvailableNow: the latest offsets when it started

    def _with_consumer(self, fn):
        configs = dict(_READ_DEFAULTS, **self._driver_configs)
        consumer = workers.checkout_consumer(configs)
        clean = False
        try:
            out = fn(consumer)
            clean = True
        finally:
            workers.checkin_consumer(configs, consumer, clean)
        return out

    def _current_partitions(self):
        # Every trigger looks for new partitions: one metadata client kept for
        # the query's life (not a new connection and login per trigger); a
        # failed request is retried once on a new connection (the broker
        # closes idle ones after connections.max.idle.ms).
        for attempt in (0, 1):
            if getattr(self, "_meta", None) is None:
                client = KafkaClient(dict(self._driver_configs))
                client.connect()
                self._meta = client
            try:
                return _topic_partitions(self._driver_configs, self.options, self._meta)
            except (errors.KChannelError, OSError):
                self._close_meta()
                if attempt:
                    raise
                log.debug("Metadata request failed; retrying on a new connection",
                          exc_info=True)

    def _close_meta(self):
        client, self._meta = getattr(self, "_meta", None), None
        if client is not None:
            try:
                client.close()
            except Exception:   # best effort: the client is dropped either way
                log.debug("Closing the metadata client failed", exc_info=True)

    def initialOffset(self):
        tps = self._current_partitions()
        if not tps:
            return {}

        def resolve(consumer):
            earliest = consumer.beginning_offsets(tps)
            latest = consumer.end_offsets(tps)
            return _resolve(self.options, consumer, self.options.starting, tps, earliest,
                            latest, True)
        start = self._with_consumer(resolve)
        log.info("Streaming query starts at %s", start)
        return opts.offsets_json({(tp.topic, tp.partition): o for tp, o in start.items()})

    def _latest(self):
        tps = self._current_partitions()
        if not tps:
            return {}
        ends = self._with_consumer(lambda c: c.end_offsets(tps))
        return {(tp.topic, tp.partition): o for tp, o in ends.items()}

    def _earliest(self, keys):
        if not keys:
            return {}
        tps = [TopicPartition(t, p) for t, p in keys]
        found = self._with_consumer(lambda c: c.beginning_offsets(tps))
        return {(tp.topic, tp.partition): o for tp, o in found.items()}

    def prepareForTriggerAvailableNow(self):
        self._target = self._latest()

    def getDefaultReadLimit(self):
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def latestOffset(self, start=None, limit=None):
        begin = opts.offsets_from_json(start or {})
        latest = dict(self._target) if self._target is not None else self._latest()
        gone = sorted(set(begin) - set(latest))
        if gone:
            _data_loss(self.options, f"Set({', '.join(f'{t}-{p}' for t, p in gone)}) are "
                                     "gone. Some data may have been missed.")
        if isinstance(limit, ReadMaxRows):
            new = self._earliest([k for k in latest if k not in begin])
            latest = opts.rate_limit(limit.max_rows, begin, latest, new)
        return opts.offsets_json(latest)

    def reportLatestOffset(self):
        return opts.offsets_json(self._latest())

    def partitions(self, start, end):
        o = self.options
        begin = opts.offsets_from_json(start or {})
        until = opts.offsets_from_json(end or {})
        new = self._earliest([k for k in until if k not in begin])
        ranges = []
        for (topic, part), e in sorted(until.items()):
            s = begin.get((topic, part))
            if s is None:
                # A partition added since the last micro-batch is read from its start.
                s = new[(topic, part)]
                if s != 0:
                    _data_loss(o, f"Added partition {topic}-{part} starts from {s} instead "
                                  "of 0. Some data may have been missed because of "
                                  "retention.")
            if e < s:
                _data_loss(o, f"Partition {topic}-{part}'s offset was changed from {s} to "
                              f"{e}, some data may have been missed.")
                continue
            ranges.append((topic, part, s, e))
        ranges = opts.split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        log.debug("Planned %d offset ranges for a micro-batch", len(ranges))
        configs = expiry = None
        if self._token is not None:
            # Every micro-batch: the current token (renewed or replaced on
            # the driver as it ages), shipped with the partitions.
            _, executor, expiry = _executor_split(self._token, self._driver_configs)
            configs = dict(_READ_DEFAULTS, **executor)
        return [KafkaInputPartition(*r, configs=configs, token_expiry_ms=expiry) for r in ranges]

    def commit(self, end):
        # Spark's Kafka source keeps its progress in the checkpoint only.
        log.debug("Micro-batch up to %s committed", end)

    def stop(self):
        self._close_meta()


class _ReadSettings:
    """What executors need of the options (no credentials)."""

    def __init__(self, o):
        self.include_headers = o.include_headers
        self.poll_timeout_ms = o.poll_timeout_ms
        self.fail_on_data_loss = o.fail_on_data_loss


def _resolve(o, consumer, spec, tps, earliest, latest, starting):
    name = "startingOffsets" if starting else "endingOffsets"
    if spec.kind == "earliest":
        return dict(earliest)
    if spec.kind == "latest":
        return dict(latest)
    if spec.kind == "offsets":
        given = {(tp.topic, tp.partition): tp for tp in tps}
        if set(spec.value) != set(given):
            raise errors.ConfigError(
                f"If {name} contains specific offsets, you must specify all "
                "TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                f"Specified: {_tp_set(spec.value)} Assigned: {_tp_set(given)}", key=name)
        out = {}
        for key, tp in given.items():
            off = spec.value[key]
            out[tp] = earliest[tp] if off == opts.EARLIEST else \
                latest[tp] if off == opts.LATEST else off
            if not starting and out[tp] > latest[tp]:
                raise errors.ConfigError(
                    f"endingOffsets for {tp.topic}-{tp.partition} is {out[tp]}, beyond the "
                    f"latest offset {latest[tp]}", key=name)
        return out
    if spec.kind == "timestamp":
        query = {tp: spec.value for tp in tps}
    else:
        given = {(tp.topic, tp.partition): tp for tp in tps}
        if set(spec.value) != set(given):
            raise errors.ConfigError(
                f"If {name[:-7]}OffsetsByTimestamp contains specific timestamps, you must "
                f"specify all TopicPartitions.\nSpecified: {_tp_set(spec.value)} "
                f"Assigned: {_tp_set(given)}", key=name)
        query = {tp: spec.value[key] for key, tp in given.items()}
    found = consumer.offsets_for_times(query)
    out = {}
    for tp, ts in query.items():
        hit = found.get(tp)
        if hit is not None:
            out[tp] = hit.offset
        elif starting and o.timestamp_strategy == "error":
            raise errors.KChannelError(
                f"No offset matched from request of topic-partition {tp.topic}-"
                f"{tp.partition} and timestamp {ts}.")
        else:
            out[tp] = latest[tp]
    return out


def _tp_set(keys):
    return "Set(" + ", ".join(sorted(f"{t}-{p}" for t, p in keys)) + ")"


def _data_loss(o, message):
    if o.fail_on_data_loss:
        raise errors.KChannelError(
            message + " If you want your query to continue in spite of it, set the source "
            "option \"failOnDataLoss\" to \"false\".")
    log.warning("%s Skipped (failOnDataLoss=false).", message)


def _topic_partitions(configs, o, client=None):
    """The TopicPartitions the query reads, from a Metadata request (on
    ``client`` when given, else on a client of its own)."""
    if o.strategy == "subscribePattern":
        names = None
    elif o.strategy == "subscribe":
        names = o.subscribe
    else:
        names = sorted({t for t, _ in o.assign})
    body = {"topics": None if names is None else [{"name": t} for t in names],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    if client is not None:
        md = client.request(ApiKey.METADATA, body)
    else:
        with KafkaClient(dict(configs)) as own:
            own.connect()
            md = own.request(ApiKey.METADATA, body)
    partitions = {}
    for t in md["topics"]:
        code = t.get("error_code", 0)
        name = t.get("name")
        if code:
            if names is not None:
                exc = exception_for(code)
                raise errors.KChannelError(f"Cannot read topic {name}: {exc}")
            continue
        if names is None and t.get("is_internal"):
            continue
        partitions[name] = sorted(p["partition_index"] for p in t["partitions"])
    if o.strategy == "subscribe":
        return [TopicPartition(t, p) for t in o.subscribe for p in partitions.get(t, ())]
    if o.strategy == "assign":
        out = []
        for t, p in o.assign:
            if p not in partitions.get(t, ()):
                raise errors.KChannelError(
                    f"Partition {t}-{p} given in 'assign' does not exist (topic {t} has "
                    f"{len(partitions.get(t, ()))} partitions)")
            out.append(TopicPartition(t, p))
        return out
    pattern = re.compile(o.pattern)
    return [TopicPartition(t, p) for t in sorted(partitions) if pattern.fullmatch(t)
            for p in partitions[t]]


class KafkaCommitMessage(WriterCommitMessage):
    """A task's result: ``records`` written; ``skipped`` True when an
    exactly-once task found its part of the micro-batch already in Kafka."""

    def __init__(self, records, skipped=False):
        self.records = records
        self.skipped = skipped


class _KafkaWriting:
    """Writes each task's rows with the worker's shared producer, flushing
    at the end of the task.  At-least-once: a task fails when any of its
    records failed, and Spark's retry writes its rows again; ``abort`` does
    not retract what a task already wrote (Kafka has no way to).

    Streaming writes with ``kchannel.exactlyOnce`` instead write each task's
    rows in a Kafka transaction of their own (see
    :func:`kchannel.spark.workers.write_exactly_once`)."""

    streaming = False

    def __init__(self, options, schema):
        options = {str(k).lower(): v for k, v in dict(options).items()}
        client = opts.client_configs(options, sink=True)
        self.topic = options.get("topic")
        names = {f.name.lower(): f for f in schema.fields}
        if self.topic is None and "topic" not in names:
            raise errors.ConfigError("topic option required when no 'topic' attribute is "
                                     "present. Use the topic option for setting a topic.",
                                     key="topic")
        if "value" not in names:
            raise errors.ConfigError("Required attribute 'value' not found", key="value")
        for col, allowed in (("key", ("string", "binary")), ("value", ("string", "binary")),
                             ("topic", ("string",)), ("partition", ("integer",))):
            f = names.get(col)
            if f is not None and f.dataType.typeName() not in allowed:
                raise errors.ConfigError(
                    f"{col} attribute type must be a " + " or ".join(
                        "int" if a == "integer" else a for a in allowed), key=col)
        if "transactional.id" in client:
            raise errors.ConfigError(
                "Kafka option 'transactional.id' is not supported: set the sink option "
                "'kchannel.exactlyOnce' to 'true' for transactional (exactly-once) streaming "
                "writes; each task then gets a transactional id of its own",
                key="kafka.transactional.id")
        self.exactly_once = opts._bool(options, EXACTLY_ONCE, False)
        self.transactional_id_prefix = options.get(TRANSACTIONAL_ID_PREFIX.lower())
        if self.exactly_once and not self.streaming:
            raise errors.ConfigError(
                "Option 'kchannel.exactlyOnce' is for streaming writes (writeStream): a batch "
                "write has no micro-batch id to make its retries idempotent",
                key=EXACTLY_ONCE)
        _, executor, _ = _split_configs(options, client)
        self.executor_configs = executor

    def write(self, iterator):
        if self.exactly_once:
            return self._write_exactly_once(iterator)
        producer = workers.producer_for(self.executor_configs)
        try:
            count = self._send_rows(producer, iterator)[0]
        except errors.KChannelError as exc:
            if getattr(producer, "_closed", False):
                workers.drop_producer(self.executor_configs, producer)
            raise self._naming_the_token(exc)
        return KafkaCommitMessage(count)

    def _naming_the_token(self, exc):
        if isinstance(exc, errors.AuthenticationError):
            failure = tokens.login_failure(self.executor_configs, exc)
            if failure is not exc:
                failure.__cause__ = exc
                return failure
        return exc

    def _write_exactly_once(self, iterator):
        # Spark sets these local properties on every task of a micro-batch
        # (StreamExecution's query id, stable across restarts from the same
        # checkpoint, and MicroBatchExecution's batch id).
        from pyspark import TaskContext
        task = TaskContext.get()
        batch_id = task.getLocalProperty("streaming.sql.batchId")
        query_id = task.getLocalProperty("sql.streaming.queryId")
        if batch_id is None or query_id is None:
            raise errors.KChannelError("kchannel.exactlyOnce: this task belongs to no "
                                       "micro-batch of a streaming query")
        prefix = self.transactional_id_prefix or f"kchannel-{query_id}"
        transactional_id = f"{prefix}-{task.partitionId()}"

        def drain():
            for _ in iterator:
                pass
        try:
            count = workers.write_exactly_once(
                self.executor_configs, transactional_id, int(batch_id),
                lambda producer: self._send_rows(producer, iterator), drain)
        except errors.KChannelError as exc:
            raise self._naming_the_token(exc)
        return KafkaCommitMessage(count or 0, skipped=count is None)

    def _send_rows(self, producer, iterator):
        """Send the task's rows; (count, a topic written or None).  Raises
        the first record's failure after flushing."""
        failures = []

        def on_done(md, exc):
            if exc is not None and not failures:
                failures.append(exc)
        count = 0
        first_topic = None
        for batch in iterator:
            cols = {name.lower(): batch.column(i).to_pylist()
                    for i, name in enumerate(batch.schema.names)}
            n = batch.num_rows
            values = cols["value"]
            keys = cols.get("key") or [None] * n
            topics = cols.get("topic") or [None] * n
            parts = cols.get("partition") or [None] * n
            headers = cols.get("headers") or [None] * n
            for i in range(n):
                topic = self.topic if self.topic is not None else topics[i]
                if topic is None:
                    raise errors.KChannelError("Null topic present in the data. Use the "
                                               "topic option for setting a topic.")
                h = headers[i]
                if h:
                    h = [(x["key"], x["value"]) if isinstance(x, dict) else tuple(x)
                         for x in h]
                # A record that fails at once (too large...) calls on_done too.
                producer.send(topic, value=_bytes(values[i]), key=_bytes(keys[i]),
                              headers=h or None, partition=parts[i], callback=on_done)
                if first_topic is None:
                    first_topic = topic
                count += 1
            if failures:
                break
        producer.flush()
        if failures:
            raise failures[0]
        return count, first_topic


class KChannelWriter(_KafkaWriting, DataSourceArrowWriter):
    """``df.write.format("kchannel")``: one job's tasks (see _KafkaWriting)."""

    def commit(self, messages):
        log.info("Wrote %d records to Kafka",
                 sum(m.records for m in messages if m is not None))

    def abort(self, messages):
        log.warning("The write job failed after %d records were acknowledged by Kafka; "
                    "Kafka cannot retract them (at-least-once)",
                    sum(m.records for m in messages if m is not None))


class KChannelStreamWriter(_KafkaWriting, DataSourceStreamArrowWriter):
    """Spark creates one for every micro-batch on the driver, so each
    micro-batch's tasks get the driver's current delegation token (renewed
    or replaced as it ages, see :mod:`kchannel.spark.tokens`).

    ``df.writeStream.format("kchannel")``: each micro-batch's tasks write
    as a batch write does (Spark's KafkaStreamingWrite).  At-least-once: a
    micro-batch whose task failed is aborted and, after a restart, run
    again from the checkpoint, so its records may be written twice; nothing
    is retracted."""

    streaming = True

    def commit(self, messages, batchId):
        done = [m for m in messages if m is not None]
        log.info("Micro-batch %s: wrote %d records to Kafka%s", batchId,
                 sum(m.records for m in done),
                 "".join(f" ({n} tasks found theirs already written)" for n in
                         [sum(1 for m in done if getattr(m, "skipped", False))] if n))

    def abort(self, messages, batchId):
        log.warning("Micro-batch %s failed after %d records were acknowledged by Kafka; "
                    "Kafka cannot retract them (at-least-once: the batch is written again "
                    "when the query restarts from its checkpoint)", batchId,
                    sum(m.records for m in messages if m is not None))


def _bytes(v):
    if isinstance(v, str):
        return v.encode("utf-8")
    return v


STATS_FIELDS = ("pid", "tasks", "consumers_created", "consumers_closed", "producers_created",
                "producers_closed", "cached", "authentications")


class KChannelStatsDataSource(DataSource):
    """``spark.read.format("kchannel_stats").load()``: one row per task with
    :func:`kchannel.spark.connection_stats` of the Python worker that ran
    it.  Its reads run in the same worker pool as the ``kchannel`` source's,
    so the rows show the caches those reads used (option ``numPartitions``,
    default 8: how many tasks ask)."""

    @classmethod
    def name(cls):
        return "kchannel_stats"

    def schema(self):
        return ", ".join(f"{f} long" for f in STATS_FIELDS) + ", token_ids string"

    def reader(self, schema):
        return _StatsReader(int(self.options.get("numpartitions", 8)))


class _StatsReader(DataSourceReader):
    def __init__(self, n):
        self.n = n

    def partitions(self):
        return [InputPartition(i) for i in range(self.n)]

    def read(self, partition):
        s = workers.connection_stats()
        yield tuple(int(s[f]) for f in STATS_FIELDS) + (s["token_ids"],)
