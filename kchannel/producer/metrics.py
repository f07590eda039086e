"""Kafka's producer metrics (group ``producer-metrics``, Kafka's
``SenderMetricsRegistry``) under Kafka's names, tagged ``client-id``, in the
registry the producer's selector records into: ``record-send-rate/total``,
``record-error-rate/total``, ``record-retry-rate/total``,
``batch-split-rate/total``,
``request-latency-avg/max``, ``batch-size-avg/max``,
``records-per-request-avg``, ``produce-throttle-time-avg/max``,
``requests-in-flight``.  Recorded per batch and per request, never per
record.
"""
from kchannel.metrics import Avg, MetricGroup

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    def __init__(self, metrics, client_id, in_flight=None):
        g = MetricGroup(metrics, "producer-metrics", client_id)
        # Kafka's records-per-request sensor: recorded per batch, it makes
        # record-send-rate/total and records-per-request-avg.
        self.records_sent = g.meter(g.sensor("records-per-request"), "record-send",
                                    "records sent")
        self.records_sent.add(
            g.name("records-per-request-avg", "The average number of records per request."),
            Avg(metrics.config))
        self.record_errors = g.meter(g.sensor("record-error"), "record-error",
                                     "record sends that resulted in errors")
        self.record_retries = g.meter(g.sensor("record-retry"), "record-retry",
                                      "retried record sends")
        self.batch_split = g.meter(g.sensor("batch-split"), "batch-split", "batch splits")
        self.request_latency = g.avg_max(g.sensor("request-latency"), "request-latency",
                                         "request latency in ms")
        self.batch_size = g.avg_max(g.sensor("batch-size"), "batch-size",
                                    "number of bytes sent per partition per-request.")
        self.throttle_time = g.avg_max(g.sensor("produce-throttle-time"),
                                       "produce-throttle-time",
                                       "time in ms a request was throttled by a broker")
        if in_flight is not None:
            g.gauge("requests-in-flight", "The current number of in-flight requests awaiting "
                    "a response.", in_flight)
