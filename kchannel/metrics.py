"""A small metrics registry with Kafka's sensor/stat model.

Mirrors the parts of ``org.apache.kafka.common.metrics`` the network layer
uses: a :class:`Metrics` registry holds named metrics (``MetricName`` = name,
group, tags), fed by :class:`Sensor` objects that record values into stats:

* :class:`Rate` -- value per second over a sampled window (Kafka's ``Rate``
  with ``SampledStat``: 2 samples of 30 s by default).
* :class:`CumulativeSum` (Kafka's ``*-total``), :class:`CumulativeCount`,
  :class:`Avg`, :class:`Max` (windowed like Kafka), :class:`Value` (last value),
  and :class:`Gauge` (a callable measured on read).
* :func:`meter` -- Kafka's ``Meter``: a ``<base>-rate`` + ``<base>-total`` pair.

Time is epoch milliseconds supplied by the caller (``kchannel.utils.now_ms``
by default), so tests can drive windows deterministically.

``Metrics.snapshot()`` returns ``{metric name: value}`` (the first metric of
each name wins when the same name is registered with different tags).
"""
import json
import threading
from dataclasses import dataclass, field

from .metrics_export import prometheus_label, prometheus_name, prometheus_samples
from .utils import now_ms as _now_ms

__all__ = [
    "MetricName", "MetricConfig", "Metrics", "Sensor", "Rate", "CumulativeSum",
    "CumulativeCount", "CumulativeSumCount", "Avg", "Max", "Value", "Gauge", "meter", "MetricGroup",
]


@dataclass(frozen=True)
class MetricName:
    name: str
    group: str
    description: str = field(default="", compare=False)
    tags: tuple = ()          # sorted tuple of (key, value) pairs, hashable

    @classmethod
    def of(cls, name, group, description="", tags=None):
        return cls(name, group, description, tuple(sorted((tags or {}).items())))

    def __str__(self):
        tags = ",".join(f"{k}={v}" for k, v in self.tags)
        return f"{self.group}:{self.name}" + (f"{{{tags}}}" if tags else "")


@dataclass
class MetricConfig:
    """Window configuration (Kafka's ``metrics.num.samples`` = 2 and
    ``metrics.sample.window.ms`` = 30000)."""
    samples: int = 2
    time_window_ms: int = 30000


class Sample:
    """One window of a sampled stat (Kafka's ``SampledStat.Sample``):
    ``start`` (ms the window opened), ``value`` (what the stat folds the
    window's values into: their sum, their maximum...) and ``count`` (events
    recorded in it).  Recording in the open window only adds to ``value``
    and ``count`` (the Selector inlines that, see
    ``SelectorMetrics.record_poll``)."""

    __slots__ = ("start", "value", "count")

    def __init__(self, start, value, count=0):
        self.start = start
        self.value = value
        self.count = count

    def __repr__(self):
        return f"Sample(start={self.start!r}, value={self.value!r}, count={self.count!r})"

    def __eq__(self, other):
        if other.__class__ is not Sample:
            return NotImplemented
        return (self.start, self.value, self.count) == (other.start, other.value, other.count)

    __hash__ = None


class _SampledStat:
    """Kafka's SampledStat: values fall into ``samples`` rolling windows."""

    def __init__(self, config=None):
        self.config = config or MetricConfig()
        # the windows, oldest first (Sample: start ms, value, event count)
        self._samples = []

    def _initial(self):
        return 0.0

    def _combine_into(self, sample, value):
        sample.value += value

    def record(self, value, now):
        samples = self._samples
        # fast path: the current window is still open
        if samples:
            cur = samples[-1]
            if now - cur.start < self.config.time_window_ms:
                self._combine_into(cur, value)
                cur.count += 1
                return
        cur = self._current(now)
        self._combine_into(cur, value)
        cur.count += 1

    def record_many(self, values, now):
        """``record(v, now)`` for each of ``values``, in order."""
        for v in values:
            self.record(v, now)

    def _rest_into_current(self, values, now):
        """After ``record(values[0], now)``: the current sample to fold the
        remaining values into, or None when they must go one by one (a
        zero-length window opens a sample per value)."""
        if len(values) < 2 or self.config.time_window_ms <= 0:
            return None
        return self._samples[-1]

    def _current(self, now):
        if self._samples:
            cur = self._samples[-1]
            if now - cur.start < self.config.time_window_ms:
                return cur
        cur = Sample(now, self._initial())
        self._samples.append(cur)
        if len(self._samples) > self.config.samples:
            del self._samples[0]
        return cur

    def _live(self, now):
        """Samples still inside the window (read-only: measuring from another
        thread never races with the recording thread's appends)."""
        limit = self.config.samples * self.config.time_window_ms
        return [s for s in list(self._samples) if now - s.start < limit]


class Rate(_SampledStat):
    """Value recorded per second (``unit_ns=True`` makes it a ratio of
    nanoseconds per nanosecond, as Kafka's io-ratio / io-wait-ratio)."""

    def __init__(self, config=None, count=False, per_ns=False):
        super().__init__(config)
        self.count = count          # WindowedCount: count events, not values
        self.per_ns = per_ns

    def _combine_into(self, sample, value):
        sample.value += 1 if self.count else value

    def record(self, value, now):
        # Hot path (several sensors per request): _SampledStat.record with
        # _combine_into inlined.
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self.config.time_window_ms:
                cur.value += 1 if self.count else value
                cur.count += 1
                return
        _SampledStat.record(self, value, now)

    def record_many(self, values, now):
        # same sample state as recording the values one by one at ``now``
        if not values:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for v in values[1:]:
                self.record(v, now)
            return
        n = len(values) - 1
        if self.count:
            cur.value += n
        else:
            acc = cur.value
            for v in values[1:]:
                acc += v
            cur.value = acc
        cur.count += n

    @classmethod
    def view_of(cls, stat, count=False, per_ns=False):
        """A Rate measured from ``stat``'s samples (an :class:`Avg`'s hold
        each window's sum and event count), never recorded itself: the same
        value a Rate recorded with the same values at the same times would
        measure, at no cost per record."""
        view = cls(stat.config, count=count, per_ns=per_ns)
        view._samples = stat._samples
        return view

    def measure(self, now):
        live = self._live(now)
        # a count Rate's sample value equals its event count, which a
        # view over an Avg's samples (value = the sum) must use
        total = sum(s.count for s in live) if self.count else sum(s.value for s in live)
        elapsed_ms = now - (live[0].start if live else now)
        full = elapsed_ms // self.config.time_window_ms
        min_full = self.config.samples - 1
        # Kafka pads young windows so a single early event is not reported as
        # a huge rate.
        if full < min_full:
            elapsed_ms += (min_full - full) * self.config.time_window_ms
        if elapsed_ms <= 0:
            return 0.0
        if self.per_ns:
            return total / (elapsed_ms * 1e6)
        return total / (elapsed_ms / 1000.0)


class Avg(_SampledStat):
    def record(self, value, now):
        # _SampledStat.record with the summing _combine_into inlined
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self.config.time_window_ms:
                cur.value += value
                cur.count += 1
                return
        _SampledStat.record(self, value, now)

    def record_many(self, values, now):
        if not values:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for v in values[1:]:
                self.record(v, now)
            return
        acc = cur.value
        for v in values[1:]:
            acc += v
        cur.value = acc
        cur.count += len(values) - 1

    def measure(self, now):
        live = self._live(now)
        count = sum(s.count for s in live)
        if count == 0:
            return float("nan")
        return sum(s.value for s in live) / count


class Max(_SampledStat):
    def _initial(self):
        return float("-inf")

    def _combine_into(self, sample, value):
        sample.value = max(sample.value, value)

    def record(self, value, now):
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self.config.time_window_ms:
                # same result as max(cur.value, value), NaN included
                if value > cur.value:
                    cur.value = value
                cur.count += 1
                return
        _SampledStat.record(self, value, now)

    def record_many(self, values, now):
        if not values:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for v in values[1:]:
                self.record(v, now)
            return
        m = cur.value
        for v in values[1:]:
            if v > m:
                m = v
        cur.value = m
        cur.count += len(values) - 1

    def measure(self, now):
        live = [s for s in self._live(now) if s.count]
        if not live:
            return float("nan")
        return max(s.value for s in live)


class CumulativeSum:
    def __init__(self, initial=0.0):
        self.total = float(initial)

    def record(self, value, now):
        self.total += value

    def record_many(self, values, now):
        total = self.total
        for v in values:
            total += v
        self.total = total

    def measure(self, now):
        return self.total


class CumulativeSumCount(CumulativeSum):
    """A CumulativeSum that also counts the values recorded; :meth:`count_view`
    is the CumulativeCount of the same records (one record feeds both)."""

    def __init__(self, initial=0.0):
        super().__init__(initial)
        self.count = 0

    def record(self, value, now):
        self.total += value
        self.count += 1

    def record_many(self, values, now):
        total = self.total
        for v in values:
            total += v
        self.total = total
        self.count += len(values)

    def count_view(self):
        return _CountView(self)


class _CountView:
    __slots__ = ("stat",)

    def __init__(self, stat):
        self.stat = stat

    def record(self, value, now):   # fed through the viewed stat
        pass

    def measure(self, now):
        return float(self.stat.count)


class CumulativeCount(CumulativeSum):
    def record(self, value, now):
        self.total += 1

    def record_many(self, values, now):
        self.total += len(values)


class Value:
    def __init__(self):
        self.value = float("nan")

    def record(self, value, now):
        self.value = float(value)

    def measure(self, now):
        return self.value


class Gauge:
    """A metric measured by calling ``fn()`` when read."""

    def __init__(self, fn):
        self.fn = fn

    def record(self, value, now):  # gauges are not fed by sensors
        pass

    def measure(self, now):
        return self.fn()


class Sensor:
    """Records a value into every stat attached to it."""

    def __init__(self, registry, name):
        self.registry = registry
        self.name = name
        self._stats = []
        self._recorders = []    # bound stat.record of every stat, in order
        self._many = []         # the same for several values at once

    def add(self, metric_name, stat):
        self.registry._register(metric_name, stat)
        self._stats.append(stat)
        self._recorders.append(stat.record)
        self._many.append(getattr(stat, "record_many", None) or _one_by_one(stat))
        return self

    def add_view(self, metric_name, stat):
        """Register a metric measured from ``stat`` without recording into
        it from this sensor (a view of a stat fed elsewhere, or an alias of
        one); removed with the sensor."""
        self.registry._register(metric_name, stat)
        self._stats.append(stat)
        return self

    def add_meter(self, group, base, description="", tags=None, count=False):
        """Kafka's Meter: ``<base>-rate`` (per second) and ``<base>-total``."""
        rate_name = MetricName.of(f"{base}-rate", group,
                                  f"The number of {description} per second", tags)
        total_name = MetricName.of(f"{base}-total", group,
                                   f"The total number of {description}", tags)
        self.add(rate_name, Rate(self.registry.config, count=count))
        self.add(total_name, CumulativeCount() if count else CumulativeSum())
        return self

    def recorders(self):
        """The bound ``record(value, now)`` of every stat of this sensor (the
        live list: stats added later are in it), for a hot path recording
        several sensors per event with one call per stat instead of one per
        sensor as well."""
        return self._recorders

    def record(self, value=1.0, now=None):
        # Sensors are recorded from the single I/O thread; readers in other
        # threads only measure, which tolerates a concurrent append under
        # the GIL, so the hot path takes no lock.
        if now is None:
            now = self.registry.time()
        for record in self._recorders:
            record(value, now)

    def record_many(self, values, now=None):
        """``record(v, now)`` for each of ``values`` (a sequence), with one
        call per stat instead of one per stat and value."""
        if not values:
            return
        if now is None:
            now = self.registry.time()
        if len(values) == 1:
            # the usual case (one request or response per poll): one call
            # per stat instead of a stat's record_many calling its record
            value = values[0]
            for record in self._recorders:
                record(value, now)
            return
        for record_many in self._many:
            record_many(values, now)


def _one_by_one(stat):
    def record_many(values, now):
        for v in values:
            stat.record(v, now)
    return record_many


def meter(sensor, group, base, description="", tags=None, count=False):
    return sensor.add_meter(group, base, description, tags, count)


class Metrics:
    """Registry of metrics; ``time`` is a ms clock (injectable for tests)."""

    def __init__(self, config=None, time=None):
        self.config = config or MetricConfig()
        self.time = time or _now_ms
        self._metrics = {}       # MetricName -> stat
        self._sensors = {}
        self._lock = threading.Lock()

    def sensor(self, name):
        s = self._sensors.get(name)
        if s is None:
            s = self._sensors[name] = Sensor(self, name)
        return s

    def get_sensor(self, name):
        return self._sensors.get(name)

    def remove_sensor(self, name):
        s = self._sensors.pop(name, None)
        if s is not None:
            with self._lock:
                ids = {id(st) for st in s._stats}
                for k in [k for k, st in self._metrics.items() if id(st) in ids]:
                    del self._metrics[k]

    def add_gauge(self, metric_name, fn):
        self._register(metric_name, Gauge(fn))

    def _register(self, metric_name, stat):
        with self._lock:
            self._metrics[metric_name] = stat

    def metric(self, name, group=None, tags=None):
        """The current value of the first metric called ``name`` (optionally
        restricted to ``group`` / exact ``tags``), or None."""
        now = self.time()
        want_tags = tuple(sorted(tags.items())) if tags is not None else None
        with self._lock:
            for mn, stat in self._metrics.items():
                if mn.name != name:
                    continue
                if group is not None and mn.group != group:
                    continue
                if want_tags is not None and mn.tags != want_tags:
                    continue
                return stat.measure(now)
        return None

    def metrics(self):
        """``{MetricName: value}`` for every registered metric."""
        now = self.time()
        with self._lock:
            return {mn: stat.measure(now) for mn, stat in self._metrics.items()}

    def snapshot(self):
        """``{metric name: value}``; untagged metrics win over tagged ones
        of the same name."""
        out = {}
        now = self.time()
        with self._lock:
            items = sorted(self._metrics.items(), key=lambda kv: len(kv[0].tags))
            for mn, stat in items:
                if mn.name not in out:
                    out[mn.name] = stat.measure(now)
        return out


class MetricGroup:
    """Sensors and metrics of one Kafka metric group for one client: names
    tagged ``client-id`` as Kafka's client metrics are."""

    def __init__(self, metrics, group, client_id):
        self.metrics = metrics
        self.group = group
        self.tags = {"client-id": client_id}
        self._key = f"{group}:{client_id}:{id(self)}"

    def sensor(self, name):
        return self.metrics.sensor(f"{self._key}:{name}")

    def name(self, name, description):
        return MetricName.of(name, self.group, description, self.tags)

    def avg_max(self, sensor, base, what):
        sensor.add(self.name(f"{base}-avg", f"The average {what}"), Avg(self.metrics.config))
        sensor.add(self.name(f"{base}-max", f"The max {what}"), Max(self.metrics.config))
        return sensor

    def meter(self, sensor, base, description, count=False):
        return sensor.add_meter(self.group, base, description, self.tags, count=count)

    def gauge(self, name, description, fn):
        self.metrics.add_gauge(self.name(name, description), fn)


# ------------------------------------------------- librdkafka-style statistics
def _total(values, name, group_suffix=None):
    return int(sum(v for mn, v in values.items()
                   if mn.name == name and v is not None and v == v
                   and (group_suffix is None or mn.group.endswith(group_suffix))))


def librdkafka_statistics(client_type, client_id, values, now_ms, start_ms, msg_cnt=0,
                          brokers=(), topics=()):
    """The statistics JSON object librdkafka hands its ``stats_cb``, its
    top-level fields where kchannel has the value: ``name``, ``client_id``,
    ``type``, ``ts`` (µs, monotonic here: the ms clock x 1000), ``time``
    (s), ``age`` (µs), ``msg_cnt``, ``tx``/``tx_bytes``/``rx``/``rx_bytes``
    (requests, responses and bytes over all brokers, from the selector's
    ``request-total``... metrics), ``txmsgs``/``rxmsgs`` (records sent /
    consumed), ``brokers`` {name: {name, nodeid, nodename, state}} and
    ``topics`` {topic: {topic}} (:mod:`kchannel.client.statistics` puts
    fuller ones there).  ``values``: the client's ``metrics()``."""
    sent = _total(values, "record-send-total")
    consumed = _total(values, "records-consumed-total")
    return {
        "name": f"{client_id}#{client_type}", "client_id": client_id, "type": client_type,
        "ts": int(now_ms) * 1000, "time": int(now_ms) // 1000,
        "age": max(0, int(now_ms - start_ms)) * 1000, "msg_cnt": int(msg_cnt),
        "tx": _total(values, "request-total"), "tx_bytes": _total(values, "outgoing-byte-total"),
        "rx": _total(values, "response-total"), "rx_bytes": _total(values, "incoming-byte-total"),
        "txmsgs": sent, "rxmsgs": consumed,
        "brokers": {f"{host}:{port}/{node_id}": {
            "name": f"{host}:{port}/{node_id}", "nodeid": node_id, "nodename": f"{host}:{port}",
            "state": state} for node_id, host, port, state in brokers},
        "topics": {t: {"topic": t} for t in sorted(topics)},
    }


class StatisticsCallback:
    """librdkafka's ``statistics.interval.ms`` + ``stats_cb``: ``maybe_emit()``
    (called from the client's poll()/flush(), in the user's thread) calls
    ``stats_cb(json_text)`` at most every ``interval_ms`` (0: never) with
    ``describe(now_ms)``'s object."""

    def __init__(self, interval_ms, stats_cb, describe, time=None):
        self.interval_ms = int(interval_ms or 0)
        self.stats_cb = stats_cb
        self._describe = describe
        self._time = time or _now_ms
        self._next = self._time() + self.interval_ms

    def maybe_emit(self):
        if self.interval_ms <= 0 or self.stats_cb is None:
            return
        now = self._time()
        if now < self._next:
            return
        self._next = now + self.interval_ms
        self.stats_cb(json.dumps(self._describe(now)))


def register_prometheus(client, registry=None, domain=None):
    """Register a ``prometheus_client`` collector of ``client``'s
    ``metrics()`` (a Producer, Consumer, or anything with Kafka's
    ``metrics()``) in ``registry`` (prometheus_client's default registry
    when None); returns the collector (``registry.unregister`` it when the
    client closes).  Names as ``kchannel serve``'s endpoint, under the
    client's JMX domain: ``kafka_producer_producer_metrics_record_send_rate
    {clientId="..."}`` (see :mod:`kchannel.metrics_export`).  Needs the
    ``prometheus`` extra (``pip install 'kchannel[prometheus]'``)."""
    # prometheus_client is an optional dependency (the prometheus extra).
    from prometheus_client import REGISTRY
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    if domain is None:
        kind = type(client).__name__.lower()
        domain = "producer" if "producer" in kind else "consumer" if "consumer" in kind \
            else "admin"

    class Collector:
        def collect(self):
            families = {}
            for group, name, tags, v in prometheus_samples(client.metrics()):
                fname = prometheus_name(domain, group, name)
                labels = sorted(tags)
                key = (fname, tuple(labels))
                fam = families.get(key)
                if fam is None:
                    cls = CounterMetricFamily if name.endswith("-total") else GaugeMetricFamily
                    fam = families[key] = cls(
                        fname[:-len("_total")] if cls is CounterMetricFamily else fname,
                        f"{name} of {group}", labels=[prometheus_label(k) for k in labels])
                fam.add_metric([str(tags[k]) for k in labels],
                               float("nan") if v is None else v)
            return list(families.values())

    collector = Collector()
    (registry if registry is not None else REGISTRY).register(collector)
    return collector
