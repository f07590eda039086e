"""Kafka's ConnectionQuotas: connections per IP and connection creation rates.

Sans-I/O bookkeeping for the server's acceptor (``kchannel.server``): it
takes addresses, listener names and the time, and answers whether a new
connection may stay and how long accepting must wait.

* ``max.connections.per.ip`` / ``max.connections.per.ip.overrides``: a
  connection from an address that already has its maximum is closed at
  once (Kafka's TooManyConnectionsException: "Rejected connection from
  ...").
* ``max.connection.creation.rate`` broker-wide and per listener (KIP-612,
  ``listener.name.<l>.max.connection.creation.rate``): each accepted
  connection is recorded in a broker-wide and a listener rate sensor; when
  the recorded rate goes over a quota, the connection is held and the
  listener's acceptor waits for the throttle time (the delay that brings
  the rate back to the quota, at most one quota window), as Kafka's acceptor
  thread blocks.  The inter-broker listener (when there are others) is held
  to its listener rate only.

Rates are measured as Kafka's quotas measure them: a ``Rate`` over
``quota.window.num`` (11) samples of ``quota.window.size.seconds`` (1 s), so
a quiet listener may take a burst of about ten seconds' worth of its rate at
once before throttling starts.

Metrics (group ``socket-server-metrics``, Kafka's names):
``broker-connection-accept-rate``, ``connection-accept-rate`` and
``connection-accept-throttle-time`` (average of the non-zero throttle
times) tagged ``listener``.
"""
from ..metrics import Avg, MetricConfig, MetricName, Rate

__all__ = ["ConnectionQuotas", "UNLIMITED"]

# Kafka's Int.MaxValue defaults: no limit.
UNLIMITED = 2147483647
GROUP = "socket-server-metrics"
_RATE_DOC = "Tracking rate of accepting new connections (per second)"


class _RateQuota:
    """A connection-rate sensor with a quota (Kafka's Sensor + Quota and
    QuotaUtils.boundedThrottleTime)."""

    def __init__(self, metrics, name, metric_name, bound, config, max_throttle_ms):
        self.rate = Rate(config)
        metrics.sensor(name).add(metric_name, self.rate)
        self.bound = bound
        self.config = config
        self.max_throttle_ms = max_throttle_ms

    def record(self, now):
        """Record one connection; the throttle time in ms (0 within quota)."""
        self.rate.record(1.0, now)
        if self.bound >= UNLIMITED:
            return 0
        value = self.rate.measure(now)
        if value <= self.bound:
            return 0
        if self.bound <= 0:
            return self.max_throttle_ms
        throttle = round((value - self.bound) / self.bound * self._window_ms(now))
        return min(throttle, self.max_throttle_ms)

    def _window_ms(self, now):
        # The window the rate was measured over (Kafka's Rate.windowSize).
        live = self.rate._live(now)
        elapsed = now - (live[0].start if live else now)
        window = self.config.time_window_ms
        full = elapsed // window
        if full < self.config.samples - 1:
            elapsed += (self.config.samples - 1 - full) * window
        return max(elapsed, 1)


class ConnectionQuotas:
    """Connection counts per address and creation-rate quotas.

    ``overrides``: ``{address: max connections}`` (addresses as accept()
    reports them).  Listeners are added with :meth:`add_listener`.
    """

    def __init__(self, metrics, *, max_connections_per_ip=UNLIMITED, overrides=None,
                 max_connection_creation_rate=UNLIMITED, quota_window_size_seconds=1,
                 quota_window_num=11):
        self.metrics = metrics
        self.max_connections_per_ip = max_connections_per_ip
        self.overrides = dict(overrides or {})
        self._config = MetricConfig(samples=quota_window_num,
                                    time_window_ms=quota_window_size_seconds * 1000)
        self._max_throttle_ms = quota_window_size_seconds * 1000
        self._broker = _RateQuota(metrics, "Connection-Accept-Rate",
                                  MetricName.of("broker-connection-accept-rate", GROUP, _RATE_DOC),
                                  max_connection_creation_rate, self._config,
                                  self._max_throttle_ms)
        self._listeners = {}        # name -> (_RateQuota, throttle-time sensor)
        self._per_ip = max_connections_per_ip < UNLIMITED or bool(self.overrides)
        self._counts = {}           # address -> open connections
        self._address = {}          # connection id -> address counted

    def add_listener(self, name, max_connection_creation_rate=UNLIMITED):
        tags = {"listener": name}
        quota = _RateQuota(self.metrics, f"Connection-Accept-Rate-{name}",
                           MetricName.of("connection-accept-rate", GROUP, _RATE_DOC, tags),
                           max_connection_creation_rate, self._config, self._max_throttle_ms)
        throttle = self.metrics.sensor(f"ConnectionRateThrottleTime-{name}").add(
            MetricName.of("connection-accept-throttle-time", GROUP,
                          "Tracking average throttle-time, out of non-zero throttle times, "
                          "per listener", tags),
            Avg(self.metrics.config))
        self._listeners[name] = (quota, throttle)

    def record_connection(self, listener, protected, now):
        """Record a connection accepted on ``listener``: how long (ms) the
        acceptor must wait before taking it on, to keep the broker-wide and
        the listener's creation rate within their quotas (the broker-wide
        rate does not apply to a ``protected`` listener)."""
        throttle = 0 if protected else self._broker.record(now)
        entry = self._listeners.get(listener)
        if entry is not None:
            throttle = max(throttle, entry[0].record(now))
            if throttle > 0:
                entry[1].record(float(throttle), now)
        return throttle

    def max_for(self, address):
        return self.overrides.get(address, self.max_connections_per_ip)

    def inc(self, connection_id, address):
        """Count a new connection from ``address``; returns None, or the
        address's maximum when it already has that many (the connection must
        then be closed; it is not counted)."""
        if not self._per_ip:
            return None
        count = self._counts.get(address, 0)
        limit = self.max_for(address)
        if count >= limit:
            return limit
        self._counts[address] = count + 1
        self._address[connection_id] = address
        return None

    def dec(self, connection_id):
        address = self._address.pop(connection_id, None)
        if address is None:
            return
        count = self._counts[address] - 1
        if count:
            self._counts[address] = count
        else:
            del self._counts[address]

    def count(self, address):
        return self._counts.get(address, 0)
