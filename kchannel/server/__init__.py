"""The server layer: a Kafka-protocol broker and security gateway.

* :mod:`kchannel.server.server` -- :class:`Server` (Kafka's SocketServer and
  a small request layer): listeners, TLS, SASL, ApiVersions, Metadata,
  DescribeCluster; its listeners and the properties they stand for in
  :mod:`kchannel.server.server_listeners`, its acceptor and connection limits
  in :mod:`kchannel.server.server_accept`.
* :mod:`kchannel.server.handlers` -- the request context, handler registry and
  the single-node handlers; :mod:`kchannel.server.cluster` -- Metadata and
  DescribeCluster for ``kchannel.cluster.nodes``.
* :mod:`kchannel.server.scram_handlers` -- the SCRAM credential APIs (50/51);
  :mod:`kchannel.server.token_handlers` -- the delegation token APIs (38-41).
* :mod:`kchannel.server.acl_handlers` -- CreateAcls/DescribeAcls/DeleteAcls
  (the ACLs of ``authorizer.class.name``).
* :mod:`kchannel.server.gateway` -- the gateway in front of an upstream cluster
  (its parts in the ``gateway_*`` modules).
* :mod:`kchannel.server.broker` -- :func:`~kchannel.server.broker.assemble`:
  all of the above from ``server.properties``, what ``kchannel serve`` runs
  through ``Server.from_properties``.
* :mod:`kchannel.server.workers` -- :func:`~kchannel.server.workers.serve`:
  run that broker until SIGTERM / SIGINT, with ``num.network.threads`` worker
  processes, the metrics file and the Prometheus endpoint (all of
  ``kchannel serve`` but its argument parsing).
"""
from kchannel.server.server import Listener, Server
from kchannel.server.workers import serve

__all__ = ["Server", "Listener", "build_server", "serve"]


def build_server(props, jaas_text=None, jaas_file_name=None, reuse_port=False):
    """``(Server.from_properties(...), [])``: the earlier spelling, kept for
    its callers.  The server closes its stores at ``shutdown()`` itself, so
    the list of closers is empty."""
    server = Server.from_properties(props, jaas_text, jaas_file_name=jaas_file_name,
                                    reuse_port=reuse_port)
    return server, []
