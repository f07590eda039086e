"""Routing to the upstream over the gateway's NetworkClient: which upstream
connection serves a request, connecting, and the requests waiting for a
connection (see :mod:`kchannel.server.gateway`, Upstream connections)."""
from .. import errors
from ..log import get_logger
from .gateway_types import BOOTSTRAP_NODE

log = get_logger("kchannel.gateway")


class _Routing:
    """Upstream connections of the shared client: routing, connecting and
    sending what waits for them (a mixin of
    :class:`kchannel.server.gateway.Gateway`)."""

    # --------------------------------------------------------------- routing
    def _route(self, node, cid=None):
        """Upstream connection id for a client of ``node``'s port (None: the
        bootstrap port, served by any ready upstream connection); with
        per-client connections, ``(node, client connection id)``."""
        if cid is not None:
            if node is None:
                node = min(self.nodes) if self.nodes else BOOTSTRAP_NODE
            return (node, cid)
        if node is not None:
            return node
        client = self.client
        for uid in sorted(self.nodes):
            if client.is_ready(uid):
                return uid
        if client.is_ready(BOOTSTRAP_NODE):
            return BOOTSTRAP_NODE
        # none ready: one being set up, else one that may connect now
        for uid in sorted(self.nodes) + [BOOTSTRAP_NODE]:
            if not client.connection_state(uid).is_disconnected():
                return uid
        for uid in sorted(self.nodes):
            if client.can_connect(uid):
                return uid
        return BOOTSTRAP_NODE

    def upstream_addresses(self):
        """(host, port) of the upstream's bootstrap servers and nodes."""
        return list(self.bootstrap) + list(self.nodes.values())

    def _address(self, uid):
        node = uid[0] if isinstance(uid, tuple) else uid
        if node == BOOTSTRAP_NODE or node not in self.nodes:
            return self.bootstrap[self._bootstrap_index % len(self.bootstrap)]
        return self.nodes[node]

    @staticmethod
    def _is_bootstrap(uid):
        return (uid[0] if isinstance(uid, tuple) else uid) == BOOTSTRAP_NODE

    def _next_bootstrap(self):
        self._bootstrap_index = (self._bootstrap_index + 1) % len(self.bootstrap)

    def _ensure_connecting(self, uid):
        client = self.client
        state = client.connection_state(uid)
        if not state.is_disconnected():
            return
        host, port = self._address(uid)
        try:
            started = client.connect(uid, host, port)
        except errors.KChannelError as exc:
            self._fail_waiting(uid, exc)
            if self._is_bootstrap(uid):
                self._next_bootstrap()
            return
        if started:
            self.connecting.add(uid)
        # else in its reconnect backoff: the requests wait for it (at most
        # the upstream request timeout, see _drain_waiting)

    def _drain_waiting(self, uids=None):
        """Send the requests waiting for the upstream connections ``uids``
        (default: all) that are ready now; fail those whose connection
        failed or that waited longer than the request timeout."""
        if not self.waiting:
            return
        client = self.client
        for uid in list(self.waiting) if uids is None else uids:
            if uid not in self.waiting:
                continue
            if client.is_ready(uid):
                self.connecting.discard(uid)
                self._learn_versions(uid)
                queue = self.waiting.pop(uid)
                for ds, slot, frame, expect in queue:
                    if not ds.closed:
                        self._send(uid, ds, slot, frame, expect)
            elif client.connection_state(uid).is_disconnected():
                if uid in self.connecting:
                    self.connecting.discard(uid)
                    auth = client.authentication_exception(uid)
                    exc = (auth or client.connection_exception(uid)
                           or errors.ChannelConnectionError(f"Upstream node {uid} unreachable"))
                    if auth is not None:
                        self._login_failed(uid, auth)     # one ERROR per streak
                    else:
                        log.warning("Upstream connection %s (%s:%s) failed: %s", uid,
                                    *self._address(uid), exc)
                    if self._is_bootstrap(uid):
                        self._next_bootstrap()
                    self._fail_waiting(uid, exc)
                else:
                    queue = self.waiting[uid]
                    if queue and self.time() - queue[0][1].start > self.request_timeout_ms:
                        self._fail_waiting(uid, client.connection_exception(uid) or
                                           errors.ChannelConnectionError(
                                               f"Upstream node {uid} is not reachable"))
                    else:
                        self._ensure_connecting(uid)

    def _fail_waiting(self, uid, exc):
        for ds, slot, frame, expect in self.waiting.pop(uid, ()):
            self._fail_downstream(ds, exc)

    def _send(self, uid, ds, slot, frame, expect):
        try:
            corr = self.client.send_raw(uid, frame, expect_response=expect,
                                        timeout_ms=slot.timeout_ms)
        except errors.KChannelError as exc:
            self._fail_downstream(ds, exc)
            return
        if expect:
            self.in_flight[(uid, corr)] = (ds, slot)
        if ds.up_muted and isinstance(uid, tuple):
            self.client.selector.mute(uid)     # a connection (re)made while held back

    def _learn_versions(self, uid):
        if self.upstream_versions is None:
            versions = self.client.api_versions(uid)
            if versions:
                self.upstream_versions = dict(versions)
                self._ranges_cache = self._offered_cache = None

    def _learn_node(self, nid, host, port):
        if nid is None or nid < 0 or not host or port is None or port < 0:
            return
        self.nodes[int(nid)] = (host, int(port))
