"""Kafka's ``Selector.SelectorMetrics``: the sensors of a
:class:`~kchannel.network.selector.Selector` (connections created and
closed, authentications, bytes and requests sent and received, select and
I/O time), with Kafka's metric names in group ``<prefix>-metrics``.  A
send and a poll are recorded through their sensors (compiled, each sensor's
record is one call updating its stats in C: see ``kchannel._metrics_py``).

Moved out of ``selector.py`` unchanged; ``kchannel.network.selector``
still exports it.
"""
from ..metrics import (Avg, CumulativeSum, CumulativeSumCount, Max, MetricName, Rate)
from .. import _impl

# record_poll, run per poll (compiled when built); see
# kchannel.network._netpass_py.
_netpass = _impl.load_twin("netpass")

__all__ = ["SelectorMetrics"]


class SelectorMetrics:
    """Kafka's Selector.SelectorMetrics: sensors with Kafka's metric names in
    group ``<prefix>-metrics``."""

    def __init__(self, metrics, group_prefix="selector", tags=None, connection_count=None):
        self.metrics = metrics
        g = f"{group_prefix}-metrics"
        self.group = g
        tags = dict(tags or {})
        key = f"{group_prefix}:{sorted(tags.items())}:{id(self)}"

        def sensor(name, *parents):
            return metrics.sensor(f"{key}:{name}", *parents)

        def mn(name, desc):
            return MetricName.of(name, g, desc, tags)

        self.connection_closed = sensor("connections-closed").add_meter(
            g, "connection-close", "connections closed", tags)
        self.connection_created = sensor("connections-created").add_meter(
            g, "connection-creation", "new connections established", tags)
        self.successful_authentication = sensor("successful-authentication").add_meter(
            g, "successful-authentication", "connections with successful authentication",
            tags, count=True)
        self.successful_reauthentication = sensor("successful-reauthentication").add_meter(
            g, "successful-reauthentication", "successful re-authentication of connections",
            tags, count=True)
        self.successful_authentication_no_reauth = sensor(
            "successful-authentication-no-reauth").add(
            mn("successful-authentication-no-reauth-total",
               "The total number of connections with successful authentication where the "
               "client does not support re-authentication"), CumulativeSum())
        self.failed_authentication = sensor("failed-authentication").add_meter(
            g, "failed-authentication", "connections with failed authentication", tags,
            count=True)
        self.failed_reauthentication = sensor("failed-reauthentication").add_meter(
            g, "failed-reauthentication", "failed re-authentication of connections", tags,
            count=True)
        self.reauthentication_latency = sensor("reauthentication-latency")
        self.reauthentication_latency.add(
            mn("reauthentication-latency-max", "The max latency observed due to re-authentication"),
            Max(metrics.config))
        self.reauthentication_latency.add(
            mn("reauthentication-latency-avg",
               "The average latency observed due to re-authentication"),
            Avg(metrics.config))
        self.bytes_transferred = sensor("bytes-sent-received").add_meter(
            g, "network-io", "network operations (reads or writes) on all connections", tags,
            count=True)
        # Sends: one Avg (request-size-avg) holds each window's sum and
        # count of the sizes sent, from which request-rate and
        # outgoing-byte-rate are measured; one CumulativeSumCount gives
        # outgoing-byte-total and request-total.  The same values as a
        # stat per metric recorded with the same sizes, for three stats per
        # send instead of eight.  requests_sent records them (and, as its
        # parent, bytes_transferred: network-io counts each send), so a
        # send is one sensor record (see record_sends).
        self.bytes_sent = sensor("bytes-sent")
        self.requests_sent = sensor("requests-sent", self.bytes_transferred)
        self._send_size_avg = Avg(metrics.config)
        self._send_size_max = Max(metrics.config)
        self._send_totals = CumulativeSumCount()
        self.bytes_sent.add_view(mn("outgoing-byte-rate",
                                    "The number of outgoing bytes sent to all servers per second"),
                                 Rate.view_of(self._send_size_avg))
        outgoing_total = mn("outgoing-byte-total",
                            "The total number of outgoing bytes sent to all servers")
        self.bytes_sent.add_view(outgoing_total, self._send_totals)
        self.requests_sent.add_view(mn("request-rate", "The number of requests sent per second"),
                                    Rate.view_of(self._send_size_avg, count=True))
        self.requests_sent.add_view(mn("request-total", "The total number of requests sent"),
                                    self._send_totals.count_view())
        self.requests_sent.add(mn("request-size-avg", "The average size of requests sent."),
                               self._send_size_avg)
        self.requests_sent.add(mn("request-size-max", "The maximum size of any request sent."),
                               self._send_size_max)
        # (registered by bytes_sent above: the same name and stat again,
        # recorded by requests_sent)
        self.requests_sent.add(outgoing_total, self._send_totals)
        self.bytes_received = sensor("bytes-received").add_meter(
            g, "incoming-byte", "bytes read off all sockets", tags)
        self.responses_received = sensor("responses-received").add_meter(
            g, "response", "responses received", tags, count=True)
        # Per poll (see record_poll): select-rate, io-wait-time-ns-avg and
        # io-wait-ratio are measured from one Avg of the wait times,
        # select-total and io-wait-time-ns-total (and its deprecated alias)
        # from one CumulativeSumCount; io-time-ns-avg and io-ratio from one
        # Avg, io-time-ns-total (and alias) from one CumulativeSum: four
        # stats per poll instead of ten, the same values.
        self.select_time = sensor("select-time")
        self.io_time = sensor("io-time")
        self._select_avg = Avg(metrics.config)
        self._select_totals = CumulativeSumCount()
        self._io_avg = Avg(metrics.config)
        self._io_total = CumulativeSum()
        st = self.select_time
        st.add_view(mn("select-rate", "The number of times the I/O layer checked for new I/O "
                                      "to perform per second"),
                    Rate.view_of(self._select_avg, count=True))
        st.add_view(mn("select-total", "The total number of times the I/O layer checked for "
                                       "new I/O to perform"),
                    self._select_totals.count_view())
        st.add(mn("io-wait-time-ns-avg",
                  "The average length of time the I/O thread spent waiting for "
                  "a socket ready for reads or writes in nanoseconds."),
               self._select_avg)
        st.add_view(mn("io-wait-ratio", "The fraction of time the I/O thread spent waiting"),
                    Rate.view_of(self._select_avg, per_ns=True))
        st.add(mn("io-wait-time-ns-total",
                  "The total time the I/O thread spent waiting in nanoseconds"),
               self._select_totals)
        st.add_view(mn("io-waittime-total", "*Deprecated* io-wait-time-ns-total"),
                    self._select_totals)
        it = self.io_time
        it.add(mn("io-time-ns-avg",
                  "The average length of time for I/O per select call in nanoseconds."),
               self._io_avg)
        it.add_view(mn("io-ratio", "The fraction of time the I/O thread spent doing I/O"),
                    Rate.view_of(self._io_avg, per_ns=True))
        it.add(mn("io-time-ns-total",
                  "The total time the I/O thread spent doing I/O in nanoseconds"),
               self._io_total)
        it.add_view(mn("iotime-total", "*Deprecated* io-time-ns-total"), self._io_total)
        self.expired_connections_killed = sensor("expired-connections-killed-count").add(
            mn("expired-connections-killed-count",
               "The number of connections disconnected on a processor due to a client not "
               "re-authenticating and then using the connection beyond its expiration time "
               "for anything other than re-authentication"), CumulativeSum())
        if connection_count is not None:
            metrics.add_gauge(mn("connection-count", "The current number of active connections."),
                              connection_count)


    # (the netpass twin's: once per poll, compiled when built)
    record_poll = _netpass.record_poll

    def record_sends(self, sizes, now):
        """Requests (or responses) of ``sizes`` bytes sent at ``now``."""
        if len(sizes) == 1:
            # (the usual case: a call less than record_many's)
            self.requests_sent.record(sizes[0], now)
        else:
            self.requests_sent.record_many(sizes, now)
