"""The client layer: connections to Kafka brokers and what they know of the
cluster.

* :mod:`kchannel.client.network_client` -- :class:`NetworkClient` (many
  non-blocking connections, Kafka's ``NetworkClient``) and
  :class:`KafkaClient` (blocking, one broker at a time).
* :mod:`kchannel.client.cluster_client` -- :class:`ClusterClient`, a
  ``NetworkClient`` with Kafka's metadata updater and node selection, shared
  by the producer and the consumer.
* :mod:`kchannel.client.metadata` -- the sans-I/O cluster view
  (``TopicPartition``, ``Cluster``, ``Metadata``).

The names of ``network_client`` are re-exported here, the import path the
README shows (``from kchannel.client import KafkaClient``).
"""
from kchannel.client.network_client import (CLIENT_SOFTWARE_NAME, ClientResponse,
                                            ConnectionState, ExponentialBackoff, KafkaClient,
                                            NetworkClient, RequestTimeoutError)

__all__ = ["KafkaClient", "NetworkClient", "ClientResponse", "ConnectionState",
           "ExponentialBackoff", "RequestTimeoutError", "CLIENT_SOFTWARE_NAME"]
