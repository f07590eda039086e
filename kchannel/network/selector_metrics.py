"""Kafka's ``Selector.SelectorMetrics``: the sensors of a
:class:`~kchannel.network.selector.Selector` (connections created and
closed, authentications, bytes and requests sent and received, select and
I/O time), with Kafka's metric names in group ``<prefix>-metrics``; the
per-poll and per-send records inline the open window of their stats.

Moved out of ``selector.py`` unchanged; ``kchannel.network.selector``
still exports it.
"""
from ..metrics import (Avg, CumulativeSum, CumulativeSumCount, Max, MetricName, Rate)

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

        def sensor(name):
            return metrics.sensor(f"{key}:{name}")

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
        # stat per metric recorded with the same sizes, for three records
        # per send instead of eight (see record_sends).
        self.bytes_sent = sensor("bytes-sent")
        self.requests_sent = sensor("requests-sent")
        self._send_size_avg = Avg(metrics.config)
        self._send_size_max = Max(metrics.config)
        self._send_totals = CumulativeSumCount()
        self.bytes_sent.add_view(mn("outgoing-byte-rate",
                                    "The number of outgoing bytes sent to all servers per second"),
                                 Rate.view_of(self._send_size_avg))
        self.bytes_sent.add_view(mn("outgoing-byte-total",
                                    "The total number of outgoing bytes sent to all servers"),
                                 self._send_totals)
        self.requests_sent.add_view(mn("request-rate", "The number of requests sent per second"),
                                    Rate.view_of(self._send_size_avg, count=True))
        self.requests_sent.add_view(mn("request-total", "The total number of requests sent"),
                                    self._send_totals.count_view())
        self.requests_sent.add_view(mn("request-size-avg", "The average size of requests sent."),
                                    self._send_size_avg)
        self.requests_sent.add_view(mn("request-size-max",
                                       "The maximum size of any request sent."),
                                    self._send_size_max)
        self.bytes_received = sensor("bytes-received").add_meter(
            g, "incoming-byte", "bytes read off all sockets", tags)
        self.responses_received = sensor("responses-received").add_meter(
            g, "response", "responses received", tags, count=True)
        # Per poll (see record_poll): select-rate, io-wait-time-ns-avg and
        # io-wait-ratio are measured from one Avg of the wait times,
        # select-total and io-wait-time-ns-total (and its deprecated alias)
        # from one CumulativeSumCount; io-time-ns-avg and io-ratio from one
        # Avg, io-time-ns-total (and alias) from one CumulativeSum: four
        # records per poll instead of ten, the same values.
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
        st.add_view(mn("io-wait-time-ns-avg",
                       "The average length of time the I/O thread spent waiting for "
                       "a socket ready for reads or writes in nanoseconds."),
                    self._select_avg)
        st.add_view(mn("io-wait-ratio", "The fraction of time the I/O thread spent waiting"),
                    Rate.view_of(self._select_avg, per_ns=True))
        st.add_view(mn("io-wait-time-ns-total",
                       "The total time the I/O thread spent waiting in nanoseconds"),
                    self._select_totals)
        st.add_view(mn("io-waittime-total", "*Deprecated* io-wait-time-ns-total"),
                    self._select_totals)
        it = self.io_time
        it.add_view(mn("io-time-ns-avg",
                       "The average length of time for I/O per select call in nanoseconds."),
                    self._io_avg)
        it.add_view(mn("io-ratio", "The fraction of time the I/O thread spent doing I/O"),
                    Rate.view_of(self._io_avg, per_ns=True))
        it.add_view(mn("io-time-ns-total",
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


        # The stats behind the per-poll records (see record_poll and
        # record_sends), recorded directly: their sensors' record() would
        # make two calls per stat.
        self._in_rate, self._in_total = self.bytes_received._stats
        self._resp_rate, self._resp_total = self.responses_received._stats
        self._net_io_rate, self._net_io_total = self.bytes_transferred._stats

    def record_poll(self, select_ns, io_ns, now, bytes_read=0, receives=0, sent=None):
        """One poll: ``select_ns`` waiting in select, ``io_ns`` doing I/O,
        ``bytes_read`` read off the sockets, ``receives`` complete receives
        handed over and ``sent`` the sizes of the sends the poll completed
        (the ``bytes_received``, ``responses_received``, ``bytes_sent``,
        ``requests_sent`` and ``bytes_transferred`` sensors: the same values
        as recording them per channel, since every channel of a poll is
        served at the same ``now``).  Everything is recorded from here, once
        per poll: the stats' usual case (the current window still open)
        inlined, their record() called only to open a window."""
        if sent:
            # (the sends the poll completed, recorded by record_sends: one
            # copy of the stats' inlined update)
            self.record_sends(sent, now)
        window = self._select_avg.config.time_window_ms
        samples = self._select_avg._samples
        if samples and now - samples[-1].start < window:
            cur = samples[-1]
            cur.value += select_ns
            cur.count += 1
        else:
            self._select_avg.record(select_ns, now)
        totals = self._select_totals
        totals.total += select_ns
        totals.count += 1
        samples = self._io_avg._samples
        if samples and now - samples[-1].start < window:
            cur = samples[-1]
            cur.value += io_ns
            cur.count += 1
        else:
            self._io_avg.record(io_ns, now)
        self._io_total.total += io_ns
        if bytes_read:
            # (one event per poll instead of one per channel read: the
            # incoming-byte metrics measure sums only)
            samples = self._in_rate._samples
            if samples and now - samples[-1].start < window:
                cur = samples[-1]
                cur.value += bytes_read
                cur.count += 1
            else:
                self._in_rate.record(bytes_read, now)
            self._in_total.total += bytes_read
        if receives:
            # count Rates: value and event count both grow by one per receive
            samples = self._resp_rate._samples
            if samples and now - samples[-1].start < window:
                cur = samples[-1]
                cur.value += receives
                cur.count += receives
            else:
                self._resp_rate.record_many([1.0] * receives, now)
            self._resp_total.total += receives
            samples = self._net_io_rate._samples
            if samples and now - samples[-1].start < window:
                cur = samples[-1]
                cur.value += receives
                cur.count += receives
            else:
                self._net_io_rate.record_many([1.0] * receives, now)
            self._net_io_total.total += receives

    def record_sends(self, sizes, now):
        """Requests (or responses) of ``sizes`` bytes sent at ``now``."""
        n = len(sizes)
        if n == 1:
            # the usual case, the stats' open window inlined (see record_poll)
            size = sizes[0]
            avg = self._send_size_avg
            samples = avg._samples
            if samples and now - samples[-1].start < avg.config.time_window_ms:
                cur = samples[-1]
                cur.value += size
                cur.count += 1
                samples = self._send_size_max._samples
                cur = samples[-1] if samples else None
                if cur is not None and now - cur.start < avg.config.time_window_ms:
                    if size > cur.value:
                        cur.value = size
                    cur.count += 1
                else:
                    self._send_size_max.record(size, now)
                samples = self._net_io_rate._samples
                cur = samples[-1] if samples else None
                if cur is not None and now - cur.start < avg.config.time_window_ms:
                    cur.value += 1
                    cur.count += 1
                else:
                    self._net_io_rate.record(1.0, now)
            else:
                avg.record(size, now)
                self._send_size_max.record(size, now)
                self._net_io_rate.record(1.0, now)
            totals = self._send_totals
            totals.total += size
            totals.count += 1
            self._net_io_total.total += 1
            return
        # Several sends (a server's or gateway's flush of many channels):
        # the stats' open windows updated with the sum, the largest and the
        # count at once, as recording them one by one at ``now`` would
        # (the sizes are ints: the sum is exact in any order); a window to
        # open goes through the stats' record_many.
        avg = self._send_size_avg
        window = avg.config.time_window_ms
        samples = avg._samples
        mx = self._send_size_max._samples
        io = self._net_io_rate._samples
        if (n and window > 0 and samples and now - samples[-1].start < window
                and mx and now - mx[-1].start < window and io and now - io[-1].start < window):
            total = sum(sizes)
            cur = samples[-1]
            cur.value += total
            cur.count += n
            cur = mx[-1]
            m = max(sizes)
            if m > cur.value:
                cur.value = m
            cur.count += n
            cur = io[-1]
            cur.value += n
            cur.count += n
            totals = self._send_totals
            totals.total += total
            totals.count += n
            self._net_io_total.total += n
            return
        self._send_size_avg.record_many(sizes, now)
        self._send_size_max.record_many(sizes, now)
        self._send_totals.record_many(sizes, now)
        self.bytes_transferred.record_many([1.0] * n, now)
