"""Kafka's producer metrics (group ``producer-metrics``, Kafka's
``SenderMetricsRegistry``) under Kafka's names, tagged ``client-id``, in the
registry the producer's selector records into: ``record-send-rate/total``,
``record-error-rate/total``, ``record-retry-rate/total``,
``batch-split-rate/total``,
``request-latency-avg/max``, ``batch-size-avg/max``,
``records-per-request-avg``, ``produce-throttle-time-avg/max``,
``requests-in-flight``.  Recorded per batch and per request, never per
record.  Kafka's ``KafkaProducerMetrics`` (same group): the time the
application's thread spent in the blocking calls, in nanoseconds,
``flush-time-ns-total``, ``metadata-wait-time-ns-total`` and
``txn-init/begin/send-offsets/commit-abort-time-ns-total``, recorded when the
call returns normally as Kafka records them.
"""
from kchannel.metrics import Avg, CumulativeSum, MetricGroup, Rate

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    def __init__(self, metrics, client_id, in_flight=None):
        g = MetricGroup(metrics, "producer-metrics", client_id)
        # Kafka's records-per-request sensor: recorded per batch, it makes
        # record-send-rate/total and records-per-request-avg.  The rate is
        # measured from the average's samples (each window's sum of the
        # values recorded, as the Rate's own would hold): one stat less to
        # record per batch sent, the same values.
        per_request = Avg(metrics.config)
        self.records_sent = g.sensor("records-per-request")
        self.records_sent.add_view(
            g.name("record-send-rate", "The number of records sent per second"),
            Rate.view_of(per_request))
        self.records_sent.add(g.name("record-send-total", "The total number of records sent"),
                              CumulativeSum())
        self.records_sent.add(
            g.name("records-per-request-avg", "The average number of records per request."),
            per_request)
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
        self.flush_time = self._ns_total(g, "flush-time-ns-total",
                                         "Total time producer has spent in flush in nanoseconds.")
        self.metadata_wait_time = self._ns_total(
            g, "metadata-wait-time-ns-total",
            "Total time producer has spent waiting on topic metadata in nanoseconds.")
        self.txn_init_time = self._txn_total(g, "init", "initTransactions")
        self.txn_begin_time = self._txn_total(g, "begin", "beginTransaction")
        self.txn_send_offsets_time = self._txn_total(g, "send-offsets",
                                                     "sendOffsetsToTransaction")
        self.txn_commit_time = self._txn_total(g, "commit", "commitTransaction")
        self.txn_abort_time = self._txn_total(g, "abort", "abortTransaction")
        if in_flight is not None:
            g.gauge("requests-in-flight", "The current number of in-flight requests awaiting "
                    "a response.", in_flight)

    @staticmethod
    def _ns_total(g, name, description):
        sensor = g.sensor(name)
        sensor.add(g.name(name, description), CumulativeSum())
        return sensor

    @classmethod
    def _txn_total(cls, g, what, method):
        return cls._ns_total(g, f"txn-{what}-time-ns-total",
                             f"Total time producer has spent in {method} in nanoseconds.")
