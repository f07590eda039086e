"""Responses on their way back to the gateway's clients, in request order,
the flow control of what clients hold, and the request metrics (see
:mod:`kchannel.server.gateway`, Requests, Memory and Metrics)."""
from .. import errors
from ..log import get_logger
from ..metrics import Avg, Max, MetricName, Rate
from ..protocol.api_keys import API_NAMES
from ..protocol.headers import decode_response, encode_response
from .gateway_types import REWRITTEN_API_KEYS

log = get_logger("kchannel.gateway")


class _Responses:
    """Responses to clients, their flow control and the request metrics (a
    mixin of :class:`kchannel.server.gateway.Gateway`)."""

    # -------------------------------------------------------------- responses
    def _on_response(self, resp):
        entry = self.in_flight.pop((resp.node_id, resp.correlation_id), None)
        if entry is None:
            return
        ds, slot = entry
        if ds.closed:
            return
        ds.req_bytes -= slot.req_bytes
        self.queued_bytes -= slot.req_bytes
        slot.req_bytes = 0
        if resp.exception is not None:
            self._fail_downstream(ds, resp.exception)
            return
        if slot.silent:
            self._silent_answer(ds, slot, resp.body)
            return
        frame = resp.body
        if slot.fix is None and slot.api_key not in REWRITTEN_API_KEYS:
            frame = frame if type(frame) is bytearray else bytearray(frame)
            frame[0:4] = slot.corr.to_bytes(4, "big", signed=True)
        self._deliver(ds, slot, frame, resp.receive_time_ms)

    def _deliver(self, ds, slot, frame, receive_time_ms):
        """The upstream's response ``frame`` to ``slot`` (its correlation
        id the client's) on its way to the client, in its turn."""
        if slot.fix is None and slot.api_key not in REWRITTEN_API_KEYS:
            # _response_frame's pass-through, inlined (nearly every response)
            out = frame
            q = ds.queue
            if len(q) == 1 and q[0] is slot:
                # _flush of a client's only request (one in flight: the
                # usual case), inlined: written at once when the socket
                # takes it, counted until written otherwise
                q.popleft()
                sel = self.server.selector
                ch = sel.channel(ds.cid)
                held = False
                if ch is not None:
                    sel.send(ds.cid, out)
                    if ch.has_pending_writes():
                        n = len(out)
                        ds.out_bytes += n
                        self.queued_bytes += n
                        self._draining.add(ds)
                        held = True
                    # the response's arrival (the upstream poll's clock,
                    # the server's) is when it was queued for the client;
                    # (_record, inlined)
                    times = self._times.get(slot.api_key)
                    if times is None:
                        times = self._times[slot.api_key] = []
                    times.append(receive_time_ms - slot.start)
                if held or ds.muted or ds.up_muted or self._total_over:
                    self._update_flow(ds)
                return
            slot.response = out
            ds.held_bytes += len(out)
            self.queued_bytes += len(out)
            self._flush(ds)
            return
        try:
            slot.response = self._response_frame(ds, slot, frame)
        except Exception as exc:  # noqa: BLE001 - an undecodable response closes its client
            log.warning("Closing connection %s: cannot rewrite the upstream's %s v%d "
                        "response: %s", ds.cid, API_NAMES.get(slot.api_key), slot.version, exc)
            self._fail_downstream(ds, exc)
            return
        ds.held_bytes += len(slot.response)
        self.queued_bytes += len(slot.response)
        self._flush(ds)

    def _silent_answer(self, ds, slot, frame):
        """The answer to an acks=0 Produce sent as acks=1 (shared mode): an
        error closes its client's connection, as the broker would have
        closed it; nothing goes to the client otherwise."""
        try:
            _, body = decode_response(frame, slot.api_key, slot.version)
            failed = [p.get("error_code") for t in body.get("responses") or ()
                      for p in t.get("partition_responses") or () if p.get("error_code")]
        except Exception as exc:  # noqa: BLE001
            failed = [str(exc)]
        if failed:
            self._fail_downstream(ds, errors.ChannelConnectionError(
                f"its acks=0 Produce failed upstream ({failed[0]}); a broker closes the "
                "connection then"))
        else:
            self._update_flow(ds)

    def _response_frame(self, ds, slot, frame):
        if slot.fix is not None:
            _, body = decode_response(frame, slot.api_key, slot.version)
            slot.fix(body)
            if slot.api_key in REWRITTEN_API_KEYS:
                self._rewrite(ds.listener_name, slot.api_key, slot.version, body)
            return encode_response(slot.api_key, slot.version, slot.corr, body)
        if slot.api_key not in REWRITTEN_API_KEYS:
            out = frame if isinstance(frame, bytearray) else bytearray(frame)
            out[0:4] = slot.corr.to_bytes(4, "big", signed=True)
            return out
        _, body = decode_response(frame, slot.api_key, slot.version)
        self._rewrite(ds.listener_name, slot.api_key, slot.version, body)
        return encode_response(slot.api_key, slot.version, slot.corr, body)

    # -------------------------------------------------------------- clients
    def _flush(self, ds):
        sel = self.server.selector
        q = ds.queue
        while q and not ds.closed:
            slot = q[0]
            if slot.local is not None:
                q.popleft()
                self.server._process_request(ds.cid, slot.local, local=True)
                continue
            if slot.response is None:
                break
            q.popleft()
            ch = sel.channel(ds.cid)
            if ch is None:
                break
            n = len(slot.response)
            sel.send(ds.cid, slot.response)
            slot.response = b""
            ds.held_bytes -= n
            if ch.has_pending_writes():
                ds.out_bytes += n
                self._draining.add(ds)
            else:
                # written at once (the usual case): nothing left to count
                self.queued_bytes -= n
            self._record(slot)
        self._update_flow(ds)

    def _update_total(self):
        over = self.queued_bytes >= self.total_max_queued_bytes
        if over != self._total_over:
            self._total_over = over
            if over:
                log.warning("Gateway clients hold %d bytes (kchannel.gateway.total.max.queued."
                            "bytes=%d): no client is read until their responses are written",
                            self.queued_bytes, self.total_max_queued_bytes)
            for other in list(self.downstreams.values()):
                self._update_flow(other, False)

    def _update_flow(self, ds, total=True):
        """Read a client (and, per-client mode, its upstream connections)
        only while it holds less than its bounds: fewer than
        max.queued.requests requests waiting, fewer than max.queued.bytes
        bytes; no client is read while all of them together hold
        total.max.queued.bytes.  Its upstream connections are not read
        while its responses waiting to be written reach the bound (or any,
        over the total): the broker then waits on that one connection, as
        it waits on a client that does not read."""
        if total and (self.queued_bytes >= self.total_max_queued_bytes) != self._total_over:
            self._update_total()
        if ds.closed:
            return
        own = ds.req_bytes + ds.held_bytes + ds.out_bytes + ds.unacked_bytes
        over_total = self._total_over
        mute = (len(ds.queue) >= self.max_queued_requests or own >= self.max_queued_bytes
                or over_total)
        sel = self.server.selector
        if mute != ds.muted and sel.channel(ds.cid) is not None:
            ds.muted = mute
            if mute:
                sel.mute(ds.cid)
            else:
                sel.unmute(ds.cid)
        if self.per_client:
            out = ds.held_bytes + ds.out_bytes
            up_mute = out >= self.max_queued_bytes or (over_total and out > 0)
            if up_mute != ds.up_muted:
                ds.up_muted = up_mute
                usel = self.client.selector
                for uid in ds.uids:
                    # (one not ready yet is muted once it is: _up_ready)
                    if usel.is_channel_ready(uid):
                        if up_mute:
                            usel.mute(uid)
                        else:
                            usel.unmute(uid)

    def _fail_downstream(self, ds, exc):
        """Disconnect a client whose request cannot be answered: what its
        library retries on (responses completed before it go out first)."""
        if ds.closed:
            return
        self._flush(ds)
        if ds.closed:
            return
        log.info("Disconnecting %s: %s", ds.cid, exc)
        sel = self.server.selector
        if sel.channel(ds.cid) is not None:
            sel.write_queued(ds.cid)
            sel.close(ds.cid)
        self._forget(ds)

    # -------------------------------------------------------------- metrics
    def _record(self, slot, now=None):
        """Counts ``slot``'s time from request to response (``now``, default
        the current time): recorded by the end of this poll (_record_times)."""
        if now is None:
            now = self.time()
        times = self._times.get(slot.api_key)
        if times is None:
            times = self._times[slot.api_key] = []
        times.append(now - slot.start)

    def _record_times(self):
        """Records the request times counted since the last poll: per API
        key one record_many per stat instead of a sensor record per
        request (a poll forwards tens of responses under load)."""
        times, self._times = self._times, {}
        now = self.time()
        for key, values in times.items():
            self._sensor(key).record_many(values, now)

    def _sensor(self, key):
        sensor = self._sensors.get(key)
        if sensor is None:
            metrics = self.server.metrics
            name = API_NAMES.get(key, str(key))
            tags = {"request": name}
            sensor = metrics.sensor(f"gateway-request:{name}")
            total = Avg(metrics.config)
            # the requests per second are the count of TotalTimeMs's
            # samples: measured from them, one stat less to record
            sensor.add_view(MetricName.of("RequestsPerSec", "RequestMetrics",
                                          "Requests forwarded per second", tags),
                            Rate.view_of(total, count=True))
            sensor.add(MetricName.of("TotalTimeMs", "RequestMetrics",
                                     "Average time from request to response (ms)", tags),
                       total)
            sensor.add(MetricName.of("TotalTimeMs-max", "RequestMetrics",
                                     "Longest time from request to response (ms)", tags),
                       Max(metrics.config))
            self._sensors[key] = sensor
        return sensor
