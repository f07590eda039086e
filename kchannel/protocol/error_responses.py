"""What a Kafka broker answers to a request it refuses as a whole: the body
of ``AbstractRequest.getErrorResponse(error)`` for the APIs kchannel has
codecs for.

Kafka builds one whenever it must refuse a request it has parsed -- e.g. a
request other than SaslAuthenticate in the middle of a SASL exchange, before
it closes the connection.  Each API fills its response its own way (a
top-level error code and the exception's message, an error per requested
topic or coordinator key, placeholder principals...); the builders below
follow Kafka 4.3.1 field for field, which the differential tests against
Apache Kafka check.  :func:`error_response_body` returns None for an API
without a builder (the caller then only closes).
"""
from .errors import Errors

__all__ = ["error_response_body"]

# Kafka's ClusterAuthorizedOperations / TopicAuthorizedOperations default.
_OPERATIONS_OMITTED = -2147483648


def _metadata(version, request, error_code, message):
    # A null topic name becomes "" (the response does not allow null).
    topics = [{"error_code": error_code, "name": t.get("name") or "",
               "topic_id": t.get("topic_id"), "is_internal": False, "partitions": []}
              for t in request.get("topics") or ()]
    return {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
            "topics": topics}


def _find_coordinator(version, request, error_code, message):
    # The error's own message, not the exception's.
    text = Errors(error_code).message
    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error_code,
             "error_message": text} for key in request.get("coordinator_keys") or ()]}
    return {"throttle_time_ms": 0, "error_code": error_code, "error_message": text,
            "node_id": -1, "host": "", "port": -1}


def _create_token(version, request, error_code, message):
    return {"error_code": error_code, "principal_type": "User", "principal_name": "ANONYMOUS",
            "token_requester_principal_type": "User",
            "token_requester_principal_name": "ANONYMOUS", "issue_timestamp_ms": -1,
            "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "", "hmac": b"",
            "throttle_time_ms": 0}


def _renew_or_expire_token(version, request, error_code, message):
    return {"error_code": error_code, "expiry_timestamp_ms": 0, "throttle_time_ms": 0}


def _describe_tokens(version, request, error_code, message):
    return {"error_code": error_code, "tokens": [], "throttle_time_ms": 0}


def _describe_client_quotas(version, request, error_code, message):
    return {"throttle_time_ms": 0, "error_code": error_code, "error_message": message,
            "entries": None}


def _describe_cluster(version, request, error_code, message):
    return {"throttle_time_ms": 0, "error_code": error_code, "error_message": message,
            "endpoint_type": 1, "cluster_id": "", "controller_id": -1, "brokers": [],
            "cluster_authorized_operations": _OPERATIONS_OMITTED}


_BUILDERS = {
    3: _metadata,
    10: _find_coordinator,
    38: _create_token,
    39: _renew_or_expire_token,
    40: _renew_or_expire_token,
    41: _describe_tokens,
    48: _describe_client_quotas,
    60: _describe_cluster,
}


def error_response_body(api_key, version, request, error_code, message):
    """The response body Kafka sends when it refuses ``request`` (a decoded
    request body) of ``api_key`` at ``version`` with ``error_code`` and the
    exception text ``message``; None when kchannel has no builder for it."""
    build = _BUILDERS.get(int(api_key))
    if build is None:
        return None
    return build(int(version), request or {}, int(error_code), message)
