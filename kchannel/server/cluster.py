"""The cluster as clients see it, per listener (KIP-103): Metadata and
DescribeCluster, plus inter-broker client connections.

Kafka answers both APIs from its metadata cache with
``getAliveBrokerNodes(request.context.listenerName)``: every alive broker is
listed at its endpoint *for the listener the request came in on*, and a
broker without that listener is left out.  kchannel has no controller quorum
to learn the other brokers from, so they are configured:

``kchannel.cluster.nodes`` = ``id@LISTENER://host:port,...`` (one entry per
node and listener; a node with several listeners appears once per listener).
This node is never listed there: its own endpoints are ``advertised.listeners``
(defaulting to ``listeners``).  A listener this node binds but does not
advertise is not one of its endpoints, so a request arriving on it gets a
broker list without this node, as from a Kafka broker.

What a Kafka broker answers that does not arise here:

* ``LISTENER_NOT_FOUND`` (Metadata v7+) is a per-partition error for a
  partition whose leader lacks the request's listener.  kchannel hosts no
  topics (named topics are answered ``UNKNOWN_TOPIC_OR_PARTITION``), so no
  partition is ever reported and the error never appears.
* The controller id: a KRaft broker reports a random alive broker (clients
  cannot reach the quorum).  kchannel reports itself, an alive broker, so the
  answer is stable.  DescribeCluster reports -1 if that id is not among the
  listed brokers (this node not advertised on the request's listener), as
  Kafka's ``AuthHelper.computeDescribeClusterResponse``.
* Cluster authorized operations: kchannel has no authorizer, so a request
  asking for them gets every operation Kafka supports on the CLUSTER
  resource, as a Kafka broker without ``authorizer.class.name``.

Inter-broker connections: :func:`connect_inter_broker` opens a
:class:`kchannel.client.KafkaClient` to another broker with this broker's
inter-broker listener settings (``ServerConfig.inter_broker_client_configs``,
Kafka's ``ChannelBuilders.clientChannelBuilder`` with a SERVER JAAS context).
"""
from ..client import KafkaClient
from ..config import ServerConfig
from ..config.listeners import (CLUSTER_NODES_CONFIG, ClusterNode, format_address,
                               parse_cluster_nodes)
from ..errors import ConfigError
from .handlers import handle_metadata as single_node_metadata
from .interface import BrokerServer
from ..log import get_logger
from ..protocol import messages
from ..protocol.errors import Errors

log = get_logger("kchannel.cluster")

__all__ = ["ClusterNode", "ClusterView", "parse_cluster_nodes", "register_cluster_handlers",
           "handle_describe_cluster", "handle_metadata", "connect_inter_broker",
           "CLUSTER_NODES_CONFIG", "ENDPOINT_TYPE_BROKER",
           "ENDPOINT_TYPE_CONTROLLER", "CLUSTER_AUTHORIZED_OPERATIONS_OMITTED",
           "CLUSTER_SUPPORTED_OPERATIONS"]

# org.apache.kafka.clients.admin.EndpointType
ENDPOINT_TYPE_UNKNOWN = 0
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
_ENDPOINT_TYPE_NAMES = {ENDPOINT_TYPE_BROKER: "BROKER", ENDPOINT_TYPE_CONTROLLER: "CONTROLLER"}

# Schema default of ClusterAuthorizedOperations (Int.MinValue): "not requested".
CLUSTER_AUTHORIZED_OPERATIONS_OMITTED = -2147483648

# AclOperation codes of AclEntry.supportedOperations(CLUSTER): CREATE(5),
# ALTER(7), DESCRIBE(8), CLUSTER_ACTION(9), DESCRIBE_CONFIGS(10),
# ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12), as Utils.to32BitField packs them.
_CLUSTER_OPERATION_CODES = (5, 7, 8, 9, 10, 11, 12)
CLUSTER_SUPPORTED_OPERATIONS = sum(1 << c for c in _CLUSTER_OPERATION_CODES)


class ClusterView:
    """Which brokers a request on a given listener is told about."""

    def __init__(self, server: BrokerServer, nodes=()):
        self.server = server
        self.nodes = list(nodes)
        for n in self.nodes:
            if n.node_id == server.node_id:
                raise ConfigError(
                    f"Invalid value for configuration {CLUSTER_NODES_CONFIG}: it lists node "
                    f"{n.node_id}, which is this node (node.id); this node's endpoints are its "
                    f"advertised.listeners", key=CLUSTER_NODES_CONFIG)

    def own_endpoint(self, listener_name):
        """(host, port) of this node on ``listener_name``, or None when this
        node does not advertise that listener."""
        server = self.server
        advertised = server.advertised
        if advertised and str(listener_name).upper() not in advertised:
            return None
        try:
            return server.advertised_endpoint(listener_name)
        except KeyError:
            return None

    def alive_broker_nodes(self, listener_name):
        """Kafka's ``getAliveBrokerNodes(listenerName)``: ``[{"node_id",
        "host", "port", "rack"}]`` sorted by node id."""
        name = str(listener_name).upper()
        out = []
        own = self.own_endpoint(name)
        if own is not None:
            out.append({"node_id": self.server.node_id, "host": own[0], "port": own[1],
                        "rack": self.server.rack})
        for n in self.nodes:
            ep = n.endpoint(name)
            if ep is not None:
                out.append({"node_id": n.node_id, "host": ep[0], "port": ep[1], "rack": n.rack})
        out.sort(key=lambda b: b["node_id"])
        return out

    def controller_id(self):
        return self.server.node_id


def _configured_nodes(server):
    config = server.config
    value = config.get(CLUSTER_NODES_CONFIG)
    if value is None:
        value = config.originals.get(CLUSTER_NODES_CONFIG)
    if value is None:
        return []
    pmap = config.listener_security_protocol_map
    try:
        return parse_cluster_nodes(value, pmap)
    except ValueError as exc:
        raise ConfigError(f"Invalid value {value if isinstance(value, str) else ','.join(value)} "
                          f"for configuration {CLUSTER_NODES_CONFIG}: {exc}",
                          key=CLUSTER_NODES_CONFIG, value=value) from None


# ------------------------------------------------------------------ handlers
def handle_metadata(ctx):
    """Metadata: the built-in answer (cluster id, topics) with the broker
    list of :meth:`ClusterView.alive_broker_nodes` for the request's
    listener."""
    body = single_node_metadata(ctx)
    view = _view(ctx.server)
    body["brokers"] = view.alive_broker_nodes(ctx.listener_name)
    body["controller_id"] = view.controller_id()
    # Metadata v8-v10 may ask for the cluster's authorized operations, as
    # DescribeCluster does (KafkaApis.handleTopicMetadataRequest); without an
    # authorizer every cluster operation is allowed.
    if (ctx.body or {}).get("include_cluster_authorized_operations"):
        body["cluster_authorized_operations"] = CLUSTER_SUPPORTED_OPERATIONS
    return body


def handle_describe_cluster(ctx):
    """DescribeCluster (API 60) as Kafka's KafkaApis / AuthHelper."""
    server = ctx.server
    body = ctx.body or {}
    version = ctx.api_version
    endpoint_type = body.get("endpoint_type", ENDPOINT_TYPE_BROKER) if version >= 1 \
        else ENDPOINT_TYPE_BROKER
    if endpoint_type not in _ENDPOINT_TYPE_NAMES:
        return _describe_cluster_error(
            Errors.INVALID_REQUEST if version == 0 else Errors.UNSUPPORTED_ENDPOINT_TYPE,
            f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != ENDPOINT_TYPE_BROKER:
        return _describe_cluster_error(
            Errors.INVALID_REQUEST if version == 0 else Errors.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {_ENDPOINT_TYPE_NAMES[endpoint_type]}")
    operations = CLUSTER_AUTHORIZED_OPERATIONS_OMITTED
    if body.get("include_cluster_authorized_operations"):
        operations = CLUSTER_SUPPORTED_OPERATIONS
    view = _view(server)
    brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                "rack": b["rack"]} for b in view.alive_broker_nodes(ctx.listener_name)]
    controller = view.controller_id()
    if not any(b["broker_id"] == controller for b in brokers):
        controller = -1
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": ENDPOINT_TYPE_BROKER,
        "cluster_id": server.cluster_id,
        "controller_id": controller,
        "brokers": brokers,
        "cluster_authorized_operations": operations,
    }


def _describe_cluster_error(error, message):
    return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message,
            "endpoint_type": ENDPOINT_TYPE_BROKER, "cluster_id": "", "controller_id": -1,
            "brokers": [], "cluster_authorized_operations": CLUSTER_AUTHORIZED_OPERATIONS_OMITTED}



def _view(server):
    view = server.cluster_view
    if view is None:
        view = ClusterView(server)
    return view


def register_cluster_handlers(server: BrokerServer, nodes=None):
    """Serve Metadata and DescribeCluster on ``server`` from a
    :class:`ClusterView` of this node plus ``nodes`` (default: the
    server's ``kchannel.cluster.nodes``).  Raises ``ConfigError`` for a bad
    node list.  Sets ``server.cluster_view``."""
    if nodes is None:
        nodes = _configured_nodes(server)
    elif isinstance(nodes, str):
        try:
            nodes = parse_cluster_nodes(nodes)
        except ValueError as exc:
            raise ConfigError(f"Invalid value {nodes} for configuration {CLUSTER_NODES_CONFIG}: "
                              f"{exc}", key=CLUSTER_NODES_CONFIG, value=nodes) from None
    server.cluster_view = ClusterView(server, nodes)
    for n in nodes:
        log.info("Cluster node %d: %s", n.node_id,
                 ", ".join(f"{name}://{format_address(host, port)}"
                           for name, host, port in n.endpoints))
    server.register_handler(messages.METADATA.api_key, handle_metadata)
    server.register_handler(messages.DESCRIBE_CLUSTER.api_key, handle_describe_cluster)
    return server.cluster_view


# ------------------------------------------------------------- inter-broker
def connect_inter_broker(server_or_config, host, port, *, client_configs=None, timeout_ms=None):
    """Connect to another broker's inter-broker listener at ``host:port``
    with this broker's inter-broker client settings; returns a connected
    :class:`kchannel.client.KafkaClient`.

    ``server_or_config``: a ``Server`` (its ``config``) or a
    ``ServerConfig``.  ``client_configs``: extra client keys
    (``request.timeout.ms``, ``client.id``...)."""
    if isinstance(server_or_config, BrokerServer):
        config = server_or_config.config
    else:
        config = server_or_config
    if not isinstance(config, ServerConfig):
        raise ConfigError("Inter-broker connections need the server configuration "
                          "(a Server built from server properties, or a ServerConfig)")
    configs = dict(config.inter_broker_client_configs())
    configs["client.id"] = f"broker-{config.node_id}"
    configs.update(client_configs or {})
    client = KafkaClient(configs)
    try:
        return client.connect(host, port, timeout_ms=timeout_ms)
    except BaseException:
        client.close()
        raise
