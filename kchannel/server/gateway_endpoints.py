"""The gateway's endpoints in the responses that name brokers (see
:mod:`kchannel.server.gateway`, Endpoints).
"""
from .. import errors
from ..log import get_logger
from ..protocol.api_keys import ApiKey
from ..protocol.errors import Errors

log = get_logger("kchannel.gateway")


class _Endpoints:
    """Metadata, DescribeCluster and FindCoordinator rewritten with the
    gateway's node ports (a mixin of :class:`kchannel.server.gateway.Gateway`)."""

    def _rewrite(self, listener_name, api_key, version, body):
        if api_key == int(ApiKey.METADATA):
            brokers = []
            for b in body.get("brokers") or ():
                self._learn_node(b["node_id"], b["host"], b["port"])
                ep = self._endpoint(listener_name, b["node_id"])
                if ep is not None:
                    brokers.append(dict(b, host=ep[0], port=ep[1]))
            body["brokers"] = brokers
        elif api_key == int(ApiKey.DESCRIBE_CLUSTER):
            brokers = []
            controllers = body.get("endpoint_type", 1) == 2
            for b in body.get("brokers") or ():
                if not controllers:
                    self._learn_node(b["broker_id"], b["host"], b["port"])
                ep = self._endpoint(listener_name, b["broker_id"])
                if ep is not None:
                    brokers.append(dict(b, host=ep[0], port=ep[1]))
            body["brokers"] = brokers
        elif api_key == int(ApiKey.FIND_COORDINATOR):
            entries = body.get("coordinators") if version >= 4 else [body]
            for c in entries or ():
                if c.get("error_code", 0) != 0 or c.get("node_id", -1) < 0:
                    continue
                self._learn_node(c["node_id"], c["host"], c["port"])
                ep = self._endpoint(listener_name, c["node_id"])
                if ep is None:
                    c.update(node_id=-1, host="", port=-1,
                             error_code=int(Errors.COORDINATOR_NOT_AVAILABLE))
                else:
                    c.update(host=ep[0], port=ep[1])

    def _node_port_collision(self, nids):
        """Why the ports of upstream nodes ``nids`` cannot be bound (a
        message naming the listeners), or None.  A node port equal to
        another listener's port, or to another node port, is refused: with
        SO_REUSEPORT (num.network.threads > 1) it would be bound anyway and
        share that listener's connections, whatever its security."""
        taken = {}       # port -> (host, what)
        for l in self.server.listeners:
            if l.upstream_node is None and l.port:
                taken[l.port] = (l.host, f"listener {l.name}")
        for key, l in self.node_listeners.items():
            if l.port:
                taken[l.port] = (l.host, f"the port of upstream node {key[1]} on listener {key[0]}")
        wildcard = ("", "0.0.0.0", "::")
        for l in self.server.listeners:
            if l.upstream_node is not None or not l.port:
                continue
            for nid in nids:
                if (l.name, nid) in self.node_listeners:
                    continue
                port = l.port + 1 + int(nid) - self.node_id_base
                other = taken.get(port)
                if other is not None and (other[0] == l.host or other[0] in wildcard
                                          or l.host in wildcard):
                    return (f"upstream node {nid} would be served on listener {l.name}'s port + "
                            f"{port - l.port} = {port}, which is {other[1]}'s: leave room "
                            "between listener ports for every upstream node (node port = "
                            "listener port + 1 + node id - kchannel.gateway.node.id.base)")
                taken[port] = (l.host, f"the port of upstream node {nid} on listener {l.name}")
        return None

    def _endpoint(self, listener_name, nid):
        """(host, port) clients use for upstream node ``nid`` on
        ``listener_name``, binding its port on first use; None (logged) when
        it cannot be bound."""
        server = self.server
        parent = server.listener(listener_name)
        key = (parent.name, nid)
        l = self.node_listeners.get(key)
        offset = 1 + int(nid) - self.node_id_base
        if l is None:
            if offset < 1 or (parent.port and parent.port + offset > 65535):
                log.error("Upstream node %s has no port on listener %s: node ids start at "
                          "kchannel.gateway.node.id.base=%d and ports at %d", nid, parent.name,
                          self.node_id_base, parent.port + 1)
                return None
            port = parent.port + offset if parent.port else 0
            problem = self._node_port_collision([nid]) if port else None
            if problem:
                log.error("Not serving upstream node %s on listener %s: %s", nid, parent.name,
                          problem)
                return None
            try:
                l = server.add_node_listener(parent.name, int(nid), port)
            except errors.KChannelError as exc:
                log.error("Cannot bind the port of upstream node %s on listener %s: %s",
                          nid, parent.name, exc)
                return None
            self.node_listeners[key] = l
        host, adv_port = server.advertised_endpoint(parent.name)
        port = adv_port + offset if parent.port else l.bound_port
        return host, port
