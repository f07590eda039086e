"""The gateway's authorization of forwarded requests (see
:mod:`kchannel.server.gateway`, Authorization).
"""
from .. import errors
from ..log import get_logger
from ..protocol import messages
from ..protocol.api_keys import API_NAMES, ApiKey
from ..protocol.errors import Errors
from ..protocol.headers import encode_response
from ..security.authorizer.requests import fetch_names, produce_names
from .gateway_types import _drop_none, _FETCH, _has_top_level_field, _PRODUCE

# Decisions kept per client connection (see _authorize_request): at most
# this many requests, of at most AUTHZ_CACHE_TOPICS topics each (names of
# at most 249 bytes: under 128 KiB per connection at worst, a few hundred
# bytes for the usual producer or consumer)
AUTHZ_CACHE_MAX = 16
AUTHZ_CACHE_TOPICS = 32

log = get_logger("kchannel.gateway")


class _Authorization:
    """``authorizer.class.name``'s checks and the refusals of the allow-list
    (a mixin of :class:`kchannel.server.gateway.Gateway`)."""

    def _authorize_request(self, ch, ds, slot, header, payload, off):
        """The authorization hook (``authorizer.class.name``): the frame to
        forward (``payload``, or one narrowed to the authorized resources),
        or None when the request was answered here or its connection
        closed.

        Produce and Fetch (most requests) forwarded as they are go into the
        connection's cache of decisions (``ds.authz``) by (API key,
        transactional id, topic names), a 1-topic Produce v9 by its raw
        bytes up to the end of the topic name: the same request again is then
        forwarded after one lookup instead of a decision per resource.  A
        decision depends only on the principal and address (fixed for a
        connection), the resources and the ACLs (``super.users`` and
        ``allow.everyone.if.no.acl.found`` are fixed at start): the cache
        is dropped whenever the ACL store's change counter (shared by every
        worker process, read per request as the authorizer reads it) moves,
        so an ACL created or deleted anywhere applies to the next request."""
        key, version = slot.api_key, slot.version
        principal = ds.principal
        if principal is None:
            addr = ch.remote_address
            ds.host = (str(addr[0]) if isinstance(addr, (tuple, list)) and addr
                       else str(addr or ""))
            principal = ds.principal = str(ch.principal())
            ds.authz = {}
        host = ds.host
        entry = counter = None
        acl_version = self._acl_version
        if acl_version is not None and (key == _PRODUCE or key == _FETCH):
            try:
                if key == _PRODUCE:
                    b = payload[off]
                    if version == 9 and b < 0x80 and payload[off + (b or 1) + 6] == 2:
                        # v9 with one topic (nearly every Produce): its bytes
                        # up to the end of the topic name (transactional id,
                        # acks, timeout, the name) are the entry, nothing
                        # decoded; a name of 127+ bytes takes the path below
                        pos = off + (b or 1) + 7
                        if payload[pos] < 0x80:
                            entry = bytes(payload[off:pos + payload[pos]])
                    if entry is None and 3 <= version <= 9:
                        tid, _, names = produce_names(payload, off, version)
                        if len(names) <= AUTHZ_CACHE_TOPICS:
                            entry = (key, tid, *names)
                elif 4 <= version <= 12:
                    replica_id, names = fetch_names(payload, off, version)
                    if replica_id < 0 and len(names) <= AUTHZ_CACHE_TOPICS:
                        entry = (key, None, *names)
            except (IndexError, ValueError, UnicodeDecodeError):
                entry = None      # the check below says what is wrong
            if entry is not None:
                counter = acl_version()
                if counter != ds.authz_counter:
                    ds.authz.clear()
                    ds.authz_counter = counter
                elif entry in ds.authz:
                    return payload
        try:
            verdict = self.request_authorizer.check(principal, host, key, version,
                                                    payload, off)
        except (errors.KChannelError, KeyError, IndexError, TypeError, ValueError) as exc:
            log.info("Closing connection %s from %s: invalid %s v%d request: %s", ds.cid,
                     ch.socket_description(), API_NAMES.get(key, key), version, exc)
            self._fail_downstream(ds, errors.InvalidRequestError(str(exc)))
            return None
        if verdict is None:
            if entry is not None:
                cache = ds.authz
                if len(cache) >= AUTHZ_CACHE_MAX:
                    cache.clear()     # a client cycling through many topics
                cache[entry] = True
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
