"""librdkafka-style statistics (``statistics.interval.ms`` + ``stats_cb``)
of a Producer or Consumer: what their poll()/flush() call (see
:class:`kchannel.metrics.StatisticsCallback`)."""
import time

from kchannel.metrics import StatisticsCallback, librdkafka_statistics

__all__ = ["client_statistics"]


def _now_ms():
    return int(time.time() * 1000)


def client_statistics(client, client_type, values, extras):
    """``client``: a Producer or Consumer (``_client`` its ClusterClient,
    ``metadata``, ``client_id``, ``metrics()``); ``values``/``extras``:
    its parsed configs and callables."""
    start = _now_ms()

    def describe(now_ms):
        net = client._client.client
        brokers = [(nid, n.host, n.port, n.state.name) for nid, n in sorted(
            net._nodes.items(), key=lambda kv: str(kv[0]))]
        topics = client.metadata.cluster.topics()
        # Records not yet acknowledged (librdkafka's queue count).
        msg_cnt = sum(b.record_count for b in list(client.accumulator.incomplete)) \
            if client_type == "producer" else 0
        return librdkafka_statistics(client_type, client.client_id, client.metrics(), now_ms,
                                     start, msg_cnt, brokers, topics)
    return StatisticsCallback(values.get("statistics.interval.ms", 0), extras.get("stats_cb"),
                              describe, _now_ms)
