"""A client's own upstream connections (see :mod:`kchannel.server.gateway`,
Upstream connections).
"""
from .. import errors, __version__
from ..client.network_client import CLIENT_SOFTWARE_NAME, RequestTimeoutError
from ..log import get_logger
from ..protocol import messages
from ..protocol.api_keys import ApiKey
from ..protocol.headers import request_encoder
from .gateway_types import REWRITTEN_API_KEYS, _Up

log = get_logger("kchannel.gateway")


class _OwnUpstreams:
    """Per-client mode's upstream connections, driven by the gateway itself,
    and the draining of what clients hold (a mixin of
    :class:`kchannel.server.gateway.Gateway`)."""

    # -------------------------------------------- per-client upstream connections
    def _open_upstream(self, ds, uid):
        """Start ``ds``'s own upstream connection ``uid`` with the gateway's
        ApiVersions queued first (as Kafka's clients open a connection);
        None (the client failed) when it cannot be started."""
        if self._login_error is not None:
            self._login_refused(ds, uid)
            return None
        usel = self.client.selector
        host, port = self._address(uid)
        try:
            usel.connect(uid, (host, port))
        except errors.KChannelError as exc:
            log.warning("Cannot connect to upstream node %s (%s:%s): %s", uid[0], host, port,
                        exc)
            if self._is_bootstrap(uid):
                self._next_bootstrap()
            self._fail_downstream(ds, exc)
            return None
        # the TCP connection, TLS handshake and SASL authentication within
        # socket.connection.setup.timeout.ms (reported as a disconnection)
        usel.set_setup_deadline(uid, self.time() + self.client.connection_setup_timeout_for(uid))
        up = self.ups[uid] = _Up(uid, ds)
        if uid not in ds.uids:
            ds.uids = ds.uids + (uid,)
        frame = self._api_versions_frame
        if frame is None:
            frame = self._api_versions_frame = self._encode_api_versions()
        usel.send(uid, frame, True)
        up.in_flight.append(None)
        self._up_in_flight += 1
        return up

    def _encode_api_versions(self):
        """The ApiVersions request opening each per-client upstream
        connection (the upstream learns the client software, as from any
        Kafka client), at the highest version both sides have."""
        key = int(ApiKey.API_VERSIONS)
        version = messages.API_VERSIONS.max_version
        if self.upstream_versions and key in self.upstream_versions:
            version = min(version, self.upstream_versions[key][1])
        encode = request_encoder(key, version, self.client.client_id, framed=True)
        return encode(0, {"client_software_name": CLIENT_SOFTWARE_NAME,
                          "client_software_version": __version__})

    def _up_ready(self, newly_ready):
        for uid in newly_ready:
            up = self.ups.get(uid)
            if up is None:
                continue
            up.ready = True
            if up.ds.up_muted:
                self.client.selector.mute(uid)    # held back before it was ready

    def _up_receives(self, receives):
        """Responses on the clients' own upstream connections, each
        handed to its client in the order of the requests."""
        ups = self.ups
        now = self.client.selector.poll_time_ms
        sel = self.server.selector
        channels = sel._channels
        # The clients' responses of this upstream poll are queued, then
        # written together by one flush_sends below (a client's several
        # responses in one write, the send metrics recorded once for all):
        # as the server writes its answers to a batch of pipelined requests.
        # Written through one by one, each recorded the selector's send
        # metrics on its own, a sixth of the gateway's instructions per
        # forwarded request.
        batched = sel._writes.batched
        sent = None
        times = self._times
        rewritten = REWRITTEN_API_KEYS
        for uid, frame in receives:
            if type(uid) is not tuple:
                continue
            up = ups.get(uid)
            if up is None:
                continue
            ds = up.ds
            q = up.in_flight
            if not q:
                self._up_protocol_failure(up, "a response with no request in flight")
                continue
            slot = q.popleft()
            self._up_in_flight -= 1
            if slot is None:
                # the gateway's ApiVersions: its error code (bytes 4-6 of
                # a v0 response header's frame) is all that matters
                if len(frame) < 6 or frame[4] or frame[5]:
                    self._up_protocol_failure(up, "its ApiVersions request failed")
                continue
            if ds.closed:
                continue
            if int.from_bytes(frame[0:4], "big", signed=True) != slot.corr:
                self._up_protocol_failure(
                    up, f"a response with correlation id "
                        f"{int.from_bytes(frame[0:4], 'big', signed=True)}, not {slot.corr}")
                continue
            n = slot.req_bytes
            ds.req_bytes -= n
            self.queued_bytes -= n
            slot.req_bytes = 0
            dq = ds.queue
            if (slot.fix is not None or slot.api_key in rewritten or len(dq) != 1
                    or dq[0] is not slot):
                self._deliver(ds, slot, frame, now)
                continue
            # _deliver's pass-through of a client's only request (one in
            # flight: the usual case), inlined: the frame goes to the
            # client's socket as it came (its correlation id the client's),
            # written by the flush below, counted until written if the
            # socket does not take it
            dq.popleft()
            cid = ds.cid
            ch = channels.get(cid)      # (sel.channel(cid))
            if ch is not None:
                batched.add(cid)
                sel.send(cid, frame)
                if sent is None:
                    sent = []
                sent.append((ds, len(frame)))
                # the response's arrival (this upstream poll's clock, the
                # server's) is when it was queued for the client (_record)
                key = slot.api_key
                t = times.get(key)
                if t is None:
                    t = times[key] = []
                t.append(now - slot.start)
            if ds.muted or ds.up_muted or self._total_over:
                self._update_flow(ds)
        if sent is not None:
            sel.flush_sends()
            for ds, n in sent:
                if ds.closed:
                    continue
                ch = channels.get(ds.cid)
                # (ch.has_pending_writes(): a transport holding no bytes,
                # plaintext, is not asked)
                if ch is not None and (ch._sends or (ch.transport.holds_bytes
                                                     and ch.has_pending_writes())):
                    ds.out_bytes += n
                    self.queued_bytes += n
                    self._draining.add(ds)
                    self._update_flow(ds)

    def _up_protocol_failure(self, up, what):
        log.warning("Closing upstream connection %s: %s", up.uid, what)
        self._fail_downstream(up.ds, errors.InvalidRequestError(
            f"its upstream connection to node {up.uid[0]} returned {what}"))

    def _expire_up_requests(self, now):
        """Kafka's request timeout on the clients' own upstream
        connections: a connection whose oldest request waited too long is
        closed, and its client with it."""
        for up in list(self.ups.values()):
            q = up.in_flight
            if not q:
                continue
            slot = q[0]
            if slot is None:
                if len(q) == 1:
                    continue    # nothing of the client's waits on it
                slot = q[1]
            timeout = slot.timeout_ms if slot.timeout_ms is not None else self.request_timeout_ms
            if now - slot.start > timeout:
                log.info("Disconnecting from upstream node %s due to request timeout.", up.uid)
                self._fail_downstream(up.ds, RequestTimeoutError(
                    f"Request {slot.corr} to upstream node {up.uid[0]} timed out after "
                    f"{timeout} ms"))

    def _check_draining(self):
        """Bytes handed to a client's socket (or, acks=0, to its upstream
        connection) stop counting once everything queued there is written."""
        if not self._draining:
            return
        sel, usel = self.server.selector, self.client.selector
        for ds in list(self._draining):
            if ds.closed:
                self._draining.discard(ds)
                continue
            freed = 0
            if ds.out_bytes:
                ch = sel.channel(ds.cid)
                if ch is None or not ch.has_pending_writes():
                    freed += ds.out_bytes
                    ds.out_bytes = 0
            if ds.unacked_bytes:
                pending = False
                for uid in ds.uids or (self._route(ds.node),):
                    uch = usel.channel(uid)
                    if uch is not None and uch.has_pending_writes():
                        pending = True
                        break
                if not pending:
                    freed += ds.unacked_bytes
                    ds.unacked_bytes = 0
            if not ds.out_bytes and not ds.unacked_bytes:
                self._draining.discard(ds)
            if freed:
                self.queued_bytes -= freed
                self._update_flow(ds)
