"""The gateway's authorization of forwarded requests (see
:mod:`kchannel.server.gateway`, Authorization).
"""
from .. import errors
from ..log import get_logger
from ..protocol import messages
from ..protocol.api_keys import API_NAMES, ApiKey
from ..protocol.errors import Errors
from ..protocol.headers import encode_response
from .gateway_types import _drop_none, _has_top_level_field

log = get_logger("kchannel.gateway")


class _Authorization:
    """``authorizer.class.name``'s checks and the refusals of the allow-list
    (a mixin of :class:`kchannel.server.gateway.Gateway`)."""

    def _authorize_request(self, ch, ds, slot, header, payload, off):
        """The authorization hook (``authorizer.class.name``): the frame to
        forward (``payload``, or one narrowed to the authorized resources),
        or None when the request was answered here or its connection
        closed."""
        key, version = slot.api_key, slot.version
        principal = ch.principal()
        addr = ch.remote_address
        host = str(addr[0]) if isinstance(addr, (tuple, list)) and addr else str(addr or "")
        try:
            verdict = self.request_authorizer.check(str(principal), host, key, version,
                                                    payload, off)
        except (errors.KChannelError, KeyError, IndexError, TypeError, ValueError) as exc:
            log.info("Closing connection %s from %s: invalid %s v%d request: %s", ds.cid,
                     ch.socket_description(), API_NAMES.get(key, key), version, exc)
            self._fail_downstream(ds, errors.InvalidRequestError(str(exc)))
            return None
        if verdict is None:
            return payload
        if verdict.close:
            log.info("Closing connection %s of %s: %s %s", ds.cid, principal,
                     API_NAMES.get(key, key), verdict.close)
            self._fail_downstream(ds, errors.KafkaError(
                int(Errors.TOPIC_AUTHORIZATION_FAILED), "AUTHORIZATION_FAILED", verdict.close))
            return None
        if verdict.response is not None:
            log.debug("Answering %s v%d of %s from the ACLs", API_NAMES.get(key, key),
                      version, principal)
            slot.response = encode_response(key, version, slot.corr, verdict.response)
            ds.held_bytes += len(slot.response)
            self.queued_bytes += len(slot.response)
            ds.queue.append(slot)
            self._flush(ds)
            return None
        slot.fix = verdict.fix
        if verdict.request is not None:
            body = messages.API[key].request.encode(verdict.request, version)
            return bytes(payload[:off]) + bytes(body)
        return payload

    def _refuse(self, ds, slot, header, payload, off, request):
        key, version = slot.api_key, slot.version
        log.info("Refusing %s v%d of %s on %s (client %s)", request.api_name, version,
                 request.principal, request.listener_name, ds.cid)
        body = None
        api = messages.API.get(key)
        try:
            if key == int(ApiKey.METADATA):
                req = api.request.decode(payload, version, off)
                body = {"brokers": [], "cluster_id": None, "controller_id": -1,
                        "topics": [_drop_none({"error_code": int(Errors.TOPIC_AUTHORIZATION_FAILED),
                                               "name": t.get("name"), "topic_id": t.get("topic_id"),
                                               "is_internal": False, "partitions": []})
                                   for t in req.get("topics") or ()]}
            elif key == int(ApiKey.PRODUCE):
                req = api.request.decode(payload, version, off)
                if req.get("acks") == 0:
                    return
                body = {"responses": [
                    _drop_none({"name": t.get("name"), "topic_id": t.get("topic_id"),
                     "partition_responses": [
                         {"index": p.get("index"),
                          "error_code": int(Errors.TOPIC_AUTHORIZATION_FAILED)}
                         for p in t.get("partition_data") or ()]})
                    for t in req.get("topic_data") or ()]}
            elif api is not None and _has_top_level_field(api.response, "error_code", version):
                body = {"error_code": int(Errors.CLUSTER_AUTHORIZATION_FAILED)}
        except errors.KChannelError as exc:
            log.info("Closing connection %s: invalid %s request: %s", ds.cid,
                     request.api_name, exc)
            body = None
        if body is None:
            self._fail_downstream(ds, errors.KafkaError(
                int(Errors.CLUSTER_AUTHORIZATION_FAILED), "CLUSTER_AUTHORIZATION_FAILED",
                f"{request.principal} may not use {request.api_name} on listener "
                f"{request.listener_name}"))
            return
        slot.response = encode_response(key, version, slot.corr, body)
        ds.held_bytes += len(slot.response)
        self.queued_bytes += len(slot.response)
        ds.queue.append(slot)
        self._flush(ds)
