"""The gateway's start-up and its upstream login (see
:mod:`kchannel.server.gateway`, Upstream login).
"""
from .. import errors
from ..config.client import ClientConfig
from ..log import get_logger
from ..protocol.api_keys import ApiKey
from .gateway_types import BOOTSTRAP_NODE, START_TIMEOUT_MS

log = get_logger("kchannel.gateway")


class _UpstreamLogin:
    """Gateway's start-up and the check of its upstream login (a mixin of
    :class:`kchannel.server.gateway.Gateway`)."""

    # ------------------------------------------------------------ start-up
    def start(self, timeout_ms=None):
        """Connect to the bootstrap broker and learn the upstream's API
        versions and nodes (binding their ports), waiting at most
        ``timeout_ms`` (default: the upstream request.timeout.ms, at most
        10 s).  Returns True when done; False (logged) when the upstream is
        not reachable yet or refuses the gateway's login: the gateway then
        keeps trying in the background with the upstream reconnect backoff
        (see :meth:`_probe`) and learns it once it can."""
        if timeout_ms is None:
            # the listeners wait meanwhile: not longer than this
            timeout_ms = min(self.request_timeout_ms, START_TIMEOUT_MS)
        deadline = self.time() + timeout_ms
        self._probing = True
        while self.time() < deadline:
            self._probe()
            if not self._probing:
                return True
            if self._login_error is not None:
                # Not waited out here: a wrong credential stays wrong, and
                # clients are better served by a running gateway that fails
                # their requests at once (and recovers by itself) than by
                # listeners that do not answer.
                return False
            for resp in self.client.poll(50):
                if self._probe_corr is not None and \
                        (resp.node_id, resp.correlation_id) == self._probe_corr:
                    self._probe_response(resp, at_start=True)
            self._probe()
            if not self._probing:
                return True
        if self._login_error is None:
            log.warning("Upstream cluster %s not reachable within %d ms; requests are forwarded "
                        "once it is", ",".join(f"{h}:{p}" for h, p in self.bootstrap),
                        timeout_ms)
        return False

    # ------------------------------------------------ the upstream's login
    def _probe(self):
        """One step of the gateway's own check of the upstream, run until it
        succeeds: at start-up, while the upstream's versions and nodes are
        not known, and while its login fails.  A NetworkClient connection
        (so Kafka's reconnect backoff: ``reconnect.backoff.ms`` doubling up
        to ``reconnect.backoff.max.ms``) that logs in, learns the
        upstream's ApiVersions and asks Metadata for its nodes."""
        if not self._probing:
            return
        client = self.client
        uid = self._probe_uid
        if uid is not None:
            if client.is_ready(uid):
                if self._probe_corr is None:
                    self._learn_versions(uid)
                    version = min(client.choose_version(uid, int(ApiKey.METADATA)), 12)
                    corr = client.send(uid, int(ApiKey.METADATA),
                                       {"topics": [], "allow_auto_topic_creation": False,
                                        "include_cluster_authorized_operations": False,
                                        "include_topic_authorized_operations": False},
                                       version)
                    self._probe_corr = (uid, corr)
                return
            if not client.connection_failed(uid):
                return          # being set up
            self._probe_uid = self._probe_corr = None
            auth = client.authentication_exception(uid)
            if auth is not None:
                self._login_failed(uid, auth)
            else:
                log.debug("Upstream connection %s (%s:%s) failed: %s", uid, *self._address(uid),
                          client.connection_exception(uid))
                if self._is_bootstrap(uid):
                    self._next_bootstrap()
        uid = self._probe_node if self._probe_node is not None else self._route(None)
        if client.is_ready(uid):
            self._probe_uid = uid
            return
        try:
            started = client.connect(uid, *self._address(uid))
        except errors.KChannelError as exc:
            log.debug("Cannot connect to upstream %s: %s", self._address(uid), exc)
            self._next_bootstrap()
            return
        if started:             # else in its reconnect backoff
            self._probe_uid = uid

    def _probe_response(self, resp, at_start=False):
        self._probe_corr = None
        if resp.exception is not None:
            return              # its connection failed: _probe sees it
        for b in resp.body.get("brokers") or ():
            self._learn_node(b["node_id"], b["host"], b["port"])
        problem = self._node_port_collision(sorted(self.nodes))
        if problem and at_start:
            raise errors.ConfigError(problem, key="kchannel.gateway.node.id.base")
        for l in list(self.server.listeners):
            if l.upstream_node is None:
                for nid in sorted(self.nodes):
                    self._endpoint(l.name, nid)     # (a collision is logged there)
        upstream = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        if self._login_error is not None:
            # WARN, as serve logs by default: whoever saw the ERROR sees it end
            log.warning("Gateway logged in to upstream cluster %s after %d failed attempts in "
                        "%.1f s: forwarding requests again", upstream, self._login_failures,
                        (self.time() - self._login_failed_since) / 1000.0)
        log.info("Gateway ready: upstream %s, nodes %s", upstream, sorted(self.nodes))
        self._login_error = None
        self._login_failures = 0
        self._probe_node = None
        self._probing = False

    def _login_failed(self, uid, exc):
        """An upstream connection ``uid`` failed authentication: the
        upstream refused the gateway's own credentials (or its TLS
        handshake).  One ERROR per failure streak; until the probe logs in
        again (with the reconnect backoff, never in a loop of its own),
        requests that need a new upstream connection fail at once (their
        clients' connections are closed) instead of each making a login
        that fails the same way."""
        self._probing = True
        self._login_failures += 1
        if isinstance(uid, int):
            self._probe_node = uid     # logs in again where it failed
        if self._login_error is not None:
            self._login_error = exc
            log.debug("Upstream connection %s failed authentication again: %s", uid, exc)
            return
        self._login_error = exc
        self._login_failed_since = self.time()
        host, port = self._address(uid)
        if isinstance(exc, errors.SslAuthenticationError):
            what, keys = "TLS handshake", "kchannel.upstream.ssl.* (truststore, keystore)"
        else:
            what = f"{self._login_name} login" if self._login_name else "login"
            keys = ("kchannel.upstream.sasl.jaas.config and kchannel.upstream.sasl.mechanism "
                    "(the user, or delegation token, must exist on the upstream cluster; "
                    "a new one can take a moment to reach every broker)")
        node = uid[0] if isinstance(uid, tuple) else uid
        where = "" if node == BOOTSTRAP_NODE else f" (node {node} at {host}:{port})"
        log.error("Gateway cannot authenticate to upstream cluster %s%s: %s "
                  "failed: %s. The upstream refused the gateway's own credentials, not a "
                  "client's: fix %s. Retrying with the upstream reconnect backoff "
                  "(kchannel.upstream.reconnect.backoff.ms, reconnect.backoff.max.ms); until "
                  "then client requests that need a new upstream connection fail at once "
                  "(their connections are closed).",
                  ",".join(f"{h}:{p}" for h, p in self.bootstrap), where, what,
                  str(exc).rstrip("."), keys)
        if self.per_client:
            # The start-up connection may still be logged in (idle): the
            # probe must log in afresh to learn that the credential works.
            for nid in [BOOTSTRAP_NODE, *sorted(self.nodes)]:
                if self.client.is_ready(nid):
                    self.client.disconnect(nid)

    @staticmethod
    def _describe_login(configs):
        """What the ERROR says the gateway logs in as: ``SASL/<mechanism> as
        "<user>"`` (a token login names its token id), never a secret."""
        protocol = str(configs.get("security.protocol") or "PLAINTEXT").upper()
        if not protocol.startswith("SASL"):
            return None
        mechanism = str(configs.get("sasl.mechanism") or "GSSAPI").upper()
        try:
            jaas = ClientConfig(dict(configs)).jaas()
            user = jaas.option("username") if jaas is not None else None
            token = jaas is not None and str(jaas.option("tokenauth")).lower() == "true"
        except Exception:  # noqa: BLE001 - a description only: the client reports bad configs
            user, token = None, False
        if user is None:
            return f"SASL/{mechanism}"
        return f'SASL/{mechanism} as {"delegation token" if token else "user"} "{user}"'

    def _login_refused(self, ds, uid):
        """Fail ``ds`` at once: the upstream login is failing (see
        _login_failed)."""
        self._fail_downstream(ds, errors.ChannelConnectionError(
            f"the gateway cannot log in to upstream node "
            f"{uid[0] if isinstance(uid, tuple) else uid} ({self._login_error}); its operator "
            "must fix the gateway's kchannel.upstream credentials"))
