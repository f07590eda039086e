"""The server layer: a Kafka-protocol broker and security gateway.

* :mod:`kchannel.server.server` -- :class:`Server` (Kafka's SocketServer and
  a small request layer): listeners, TLS, SASL, ApiVersions, Metadata,
  DescribeCluster.
* :mod:`kchannel.server.handlers` -- the request context, handler registry and
  the single-node handlers; :mod:`kchannel.server.cluster` -- Metadata and
  DescribeCluster for ``kchannel.cluster.nodes``.
* :mod:`kchannel.server.scram_handlers` -- the SCRAM credential APIs (50/51);
  :mod:`kchannel.server.token_handlers` -- the delegation token APIs (38-41).
* :mod:`kchannel.server.acl_handlers` -- CreateAcls/DescribeAcls/DeleteAcls
  (the ACLs of ``authorizer.class.name``).
* :mod:`kchannel.server.gateway` -- the gateway in front of an upstream cluster.
* :mod:`kchannel.server.broker` -- :func:`build_server`: all of the above from
  ``server.properties``, what ``kchannel serve`` runs.
"""
from kchannel.server.broker import build_server
from kchannel.server.server import Listener, Server

__all__ = ["Server", "Listener", "build_server"]
