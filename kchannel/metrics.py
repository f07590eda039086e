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

A sensor records into its parents too (``Metrics.sensor(name, *parents)``,
Kafka's sensor hierarchy).  The stats and :class:`Sensor` are a twin
(``kchannel._metrics_py``, compiled as ``kchannel._cmetrics``): compiled, a
sensor's ``record()`` is one call that updates every stat in C.

Time is epoch milliseconds supplied by the caller (``kchannel.utils.now_ms``
by default), so tests can drive windows deterministically.

``Metrics.snapshot()`` returns ``{metric name: value}`` (the first metric of
each name wins when the same name is registered with different tags).
"""
import json
import threading

from . import _impl
from .metrics_base import MetricConfig, MetricName
from .metrics_export import prometheus_label, prometheus_name, prometheus_samples
from .utils import now_ms as _now_ms

# The stats and Sensor (their record path) are a twin: compiled, each
# sensor's record() updates all its stats in C (see kchannel/_metrics_py.py).
_twin = _impl.load_twin("metrics")
Sample = _twin.Sample
Stat = _twin.Stat
_SampledStat = _twin._SampledStat
Rate = _twin.Rate
Avg = _twin.Avg
Max = _twin.Max
CumulativeSum = _twin.CumulativeSum
CumulativeSumCount = _twin.CumulativeSumCount
CumulativeCount = _twin.CumulativeCount
_CountView = _twin._CountView
Value = _twin.Value
Sensor = _twin.Sensor
_one_by_one = _twin.one_by_one

__all__ = [
    "MetricName", "MetricConfig", "Metrics", "Sensor", "Rate", "CumulativeSum",
    "CumulativeCount", "CumulativeSumCount", "Avg", "Max", "Value", "Gauge", "meter", "MetricGroup",
]


class Gauge:
    """A metric measured by calling ``fn()`` when read."""

    def __init__(self, fn):
        self.fn = fn

    def record(self, value, now):  # gauges are not fed by sensors
        pass

    def measure(self, now):
        return self.fn()


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

    def sensor(self, name, *parents):
        """The sensor called ``name``, created (recording into ``parents``
        as well: Kafka's sensor hierarchy) if there is none yet."""
        s = self._sensors.get(name)
        if s is None:
            s = self._sensors[name] = Sensor(self, name, parents)
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

    def sensor(self, name, *parents):
        return self.metrics.sensor(f"{self._key}:{name}", *parents)

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
