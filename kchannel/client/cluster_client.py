"""A :class:`~kchannel.client.NetworkClient` that knows the cluster: the
metadata updater and node selection Kafka's ``NetworkClient`` has
(``DefaultMetadataUpdater``, ``leastLoadedNode``), shared by the producer's
Sender and the consumer's Fetcher.

Requests complete through callbacks (``callback(ClientResponse)``), called
from :meth:`ClusterClient.poll` on the caller's thread.  Not thread-safe
except :meth:`wakeup`.
"""

from kchannel import errors
from kchannel.client.connection_state import ConnectionState
from kchannel.client.network_client import NetworkClient, _clientloop
from kchannel.log import get_logger
from kchannel.protocol import messages
from kchannel.protocol.errors import Errors, exception_for

__all__ = ["ClusterClient"]

log = get_logger("kchannel.cluster_client")

_METADATA = messages.METADATA.api_key
_READY = ConnectionState.READY


class ClusterClient:
    """``configs``: client configs for the NetworkClient (security and
    network keys).  ``metadata``: a :class:`~kchannel.client.metadata.Metadata`.
    ``os_selector``: see :class:`~kchannel.network.selector.Selector`."""

    def __init__(self, configs, metadata, *, time=None, metric_group_prefix="client",
                 sasl_kwargs=None, os_selector=None):
        self.client = NetworkClient(configs, time=time, metric_group_prefix=metric_group_prefix,
                                    sasl_kwargs=sasl_kwargs,
                                    authentication_failed=self._authentication_failed,
                                    os_selector=os_selector)
        self.time = self.client.time
        self.metadata = metadata
        # (the NetworkClient's nodes, read by ready_to_send once per node
        # and pass)
        self._nodes = self.client._nodes
        # The network client's own, called straight (a call less per request).
        self.choose_version = self.client.choose_version
        self._callbacks = {}               # (node, corr) -> callback
        self._metadata_in_flight = None    # (node, corr)
        self._bootstrap_index = 0
        # The last fatal error (authentication) seen on any node: producers
        # and consumers fail their pending work with it.
        self.fatal_error = None
        # Nodes outside the metadata (the group coordinator's own id).
        self.extra_nodes = {}

    # -- nodes ---------------------------------------------------------------
    def address(self, node_id):
        extra = self.extra_nodes.get(node_id)
        if extra is not None:
            return extra
        node = self.metadata.cluster.node(node_id)
        if node is not None:
            return node[0], node[1]
        if node_id < 0:
            idx = -node_id - 1
            if idx < len(self.metadata.bootstrap_addresses):
                return self.metadata.bootstrap_addresses[idx]
        return None

    def ready(self, node_id, now=None):
        """True if ``node_id`` can take a request now; otherwise starts
        connecting to it when allowed (Kafka's ``NetworkClient.ready``)."""
        if self.client.is_ready(node_id):
            return True
        addr = self.address(node_id)
        if addr is None:
            return False
        try:
            self.client.connect(node_id, addr[0], addr[1])
        except errors.KChannelError as exc:
            log.debug("Connecting to node %s failed: %s", node_id, exc)
            # As a lost connection (see poll).
            self.metadata.request_update()
        return False

    def is_ready(self, node_id):
        return self.client.is_ready(node_id)

    def can_send_more(self, node_id, max_in_flight):
        node = self._nodes.get(node_id)
        return node is not None and node.state is _READY and len(node.in_flight) < max_in_flight

    def ready_to_send(self, node_id, now, max_in_flight):
        """``ready(node_id, now) and can_send_more(node_id, max_in_flight)``
        in one call (the Sender asks it per ready node and pass; it was five
        Python calls)."""
        node = self._nodes.get(node_id)
        if node is not None and node.state is _READY:
            return len(node.in_flight) < max_in_flight
        self.ready(node_id, now)
        return False

    def connection_delay(self, node_id, now=None):
        return self.client.connection_delay(node_id, now)

    def _candidate_nodes(self):
        cluster = self.metadata.cluster
        nodes = list(cluster.nodes)
        if not nodes or cluster.is_bootstrap:
            nodes = [-(i + 1) for i in range(len(self.metadata.bootstrap_addresses))]
        return nodes

    def least_loaded_node(self, now=None):
        """The ready node with the fewest requests in flight; else a node
        being connected; else one that may be connected now (Kafka's
        ``leastLoadedNode``).  None when every node is backing off."""
        now = self.time() if now is None else now
        nodes = self._candidate_nodes()
        if not nodes:
            return None
        # Start at a rotating offset so load spreads as Kafka's random start does.
        self._bootstrap_index = (self._bootstrap_index + 1) % len(nodes)
        nodes = nodes[self._bootstrap_index:] + nodes[:self._bootstrap_index]
        best, best_in_flight = None, None
        connecting = None
        can_connect = None
        for nid in nodes:
            if self.client.is_ready(nid):
                n = self.client.in_flight_count(nid)
                if best is None or n < best_in_flight:
                    best, best_in_flight = nid, n
            elif not self.client.connection_failed(nid) and \
                    self.client.connection_state(nid).name in ("CONNECTING",
                                                               "CHECKING_API_VERSIONS"):
                connecting = nid if connecting is None else connecting
            elif self.client.can_connect(nid, now):
                can_connect = nid if can_connect is None else can_connect
        if best is not None:
            return best
        return connecting if connecting is not None else can_connect

    # -- requests ------------------------------------------------------------
    def send(self, node_id, api_key, body, callback, version=None, expect_response=True,
             timeout_ms=None):
        corr = self.client.send(node_id, api_key, body, version=version,
                                expect_response=expect_response, timeout_ms=timeout_ms)
        if expect_response:
            self._callbacks[(node_id, corr)] = callback
        return corr

    # choose_version: the NetworkClient's (bound in __init__)

    def in_flight_count(self, node_id=None):
        return self.client.in_flight_count(node_id)

    def _maybe_update_metadata(self, now):
        """Send a Metadata request when one is due; returns ms until the
        next one is due."""
        wait = self.metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        if self._metadata_in_flight is not None:
            return self.client.request_timeout_ms
        node = self.least_loaded_node(now)
        if node is None:
            return self.client.reconnect_backoff_ms
        if not self.ready(node, now):
            return self.client.reconnect_backoff_ms
        corr = self.client.send(node, _METADATA, self.metadata.request_body())
        self._metadata_in_flight = (node, corr)
        # Count the attempt now so a failed one backs off.
        self.metadata.last_refresh_ms = now
        return self.client.request_timeout_ms

    # (the clientloop twin's cluster_poll, once per poll of the client:
    # compiled when built, no interpreted frame)
    poll = _clientloop.cluster_poll

    def _authentication_failed(self, node_id, exc):
        # Kafka's DefaultMetadataUpdater.handleServerDisconnect: whoever
        # waits for metadata gets the error now rather than a timeout later.
        self.fatal_error = exc
        self.metadata.set_fatal_error(exc)

    def _check_fatal(self):
        # Once per poll: most polls have no failed authentication anywhere,
        # and listing the candidate nodes costs more than asking that.
        if not self.client.has_authentication_exception():
            return
        for nid in self._candidate_nodes() + [k[0] for k in list(self._callbacks)]:
            exc = self.client.authentication_exception(nid)
            if exc is not None:
                self.fatal_error = exc
                return

    def _handle_metadata(self, resp, now):
        if resp.exception is not None:
            log.debug("Metadata request to node %s failed: %s", resp.node_id, resp.exception)
            self.metadata.failed_update(now)
            self.metadata.request_update()
            return
        body = resp.body
        self.metadata.update(body, now)
        for name, code in self.metadata.cluster.topic_errors.items():
            if code == Errors.TOPIC_AUTHORIZATION_FAILED:
                log.warning("Not authorized to access topic %s", name)
        log.debug("Updated cluster metadata to %r", self.metadata.cluster)

    def topic_error(self, topic):
        code = self.metadata.cluster.topic_errors.get(topic)
        return exception_for(code) if code else None

    def wakeup(self):
        self.client.selector.wakeup()

    def close(self):
        self.client.close()

