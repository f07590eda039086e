"""Kafka's consumer metrics under Kafka's names, tagged ``client-id``, in the
registry the consumer's selector records into.

``consumer-fetch-manager-metrics`` (Kafka's ``FetchMetricsManager``):
``fetch-latency-avg/max``, ``fetch-rate/total``, ``fetch-size-avg/max``,
``bytes-consumed-rate/total``, ``records-consumed-rate/total``, ``records-lag-max``,
``fetch-throttle-time-avg/max``.  ``consumer-coordinator-metrics`` (Kafka's
``ConsumerCoordinatorMetrics`` and ``GroupCoordinatorMetrics``):
``commit-latency-avg/max``, ``commit-rate/total``, ``join-time-avg/max``,
``join-rate/total``, ``sync-time-avg/max``, ``sync-rate/total``,
``heartbeat-response-time-max``, ``heartbeat-rate/total``,
``last-heartbeat-seconds-ago``, ``assigned-partitions``.  Recorded per
request, response or ``poll``, never per record.
"""
from kchannel.metrics import Max, MetricGroup

__all__ = ["ConsumerMetrics"]


class ConsumerMetrics:
    def __init__(self, metrics, client_id, assigned=None, last_heartbeat_ms=None):
        f = MetricGroup(metrics, "consumer-fetch-manager-metrics", client_id)
        self.fetch_latency = f.avg_max(f.sensor("fetch-latency"), "fetch-latency",
                                       "time taken for a fetch request.")
        f.meter(self.fetch_latency, "fetch", "fetch requests", count=True)
        self.bytes_fetched = f.avg_max(f.sensor("bytes-fetched"), "fetch-size",
                                       "number of bytes fetched per request")
        f.meter(self.bytes_fetched, "bytes-consumed", "bytes consumed")
        self.records_consumed = f.meter(f.sensor("records-consumed"), "records-consumed",
                                        "records consumed")
        self.records_lag = f.sensor("records-lag").add(
            f.name("records-lag-max", "The maximum lag in terms of number of records for any "
                   "partition in this window"), Max(metrics.config))
        self.fetch_throttle_time = f.avg_max(f.sensor("fetch-throttle-time"),
                                             "fetch-throttle-time",
                                             "throttle time in ms")
        c = MetricGroup(metrics, "consumer-coordinator-metrics", client_id)
        self.commit_latency = c.avg_max(c.sensor("commit-latency"), "commit-latency",
                                        "time taken for a commit request")
        c.meter(self.commit_latency, "commit", "commit calls", count=True)
        self.join_latency = c.avg_max(c.sensor("join-latency"), "join-time",
                                      "time taken for a group rejoin")
        c.meter(self.join_latency, "join", "group joins", count=True)
        self.sync_latency = c.avg_max(c.sensor("sync-latency"), "sync-time",
                                      "time taken for a group sync")
        c.meter(self.sync_latency, "sync", "group syncs", count=True)
        self.heartbeat_latency = c.sensor("heartbeat-latency").add(
            c.name("heartbeat-response-time-max", "The max time taken to receive a response "
                   "to a heartbeat request"), Max(metrics.config))
        c.meter(self.heartbeat_latency, "heartbeat", "heartbeats", count=True)
        if last_heartbeat_ms is not None:
            def seconds_ago():
                last = last_heartbeat_ms()
                return -1.0 if last is None else (metrics.time() - last) / 1000.0
            c.gauge("last-heartbeat-seconds-ago", "The number of seconds since the last "
                    "coordinator heartbeat was sent", seconds_ago)
        if assigned is not None:
            c.gauge("assigned-partitions", "The number of partitions currently assigned to "
                    "this consumer", assigned)
