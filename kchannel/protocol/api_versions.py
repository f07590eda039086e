"""ApiVersions version negotiation: the server's fallback for a request version
it does not know (KIP-511), and the client's choice of version.

Kafka's behaviour, mirrored here:

* A client does not know which ApiVersions versions a server supports, so it
  sends its newest.  The request header is readable whatever the version
  (the client id is a classic int16 string in every header version).
* A server that does not support that version does not parse the body at
  all (RequestContext.parseRequest treats such a request as an empty v0
  request): a newer body may not be parseable by an older schema.
* It answers with a **v0** ApiVersions response body, error code
  UNSUPPORTED_VERSION (35), whose ``api_keys`` lists only ApiVersions itself
  with the server's supported range (ApiVersionsRequest.getErrorResponse),
  behind a v0 response header (ApiVersions responses always use header v0).
* The client parses the response at the version it sent and, when that fails,
  again as v0 (``headers.decode_response`` does this), then retries with the
  highest version both support.
"""
import re

from kchannel.protocol.errors import Errors
from kchannel.protocol.headers import RequestHeader, encode_response_header
from kchannel.protocol.messages import API_VERSIONS

__all__ = [
    "is_unsupported_api_versions_request",
    "api_versions_fallback_body",
    "api_versions_fallback",
    "choose_api_versions_version",
    "is_valid_api_versions_request",
]

_KEY = API_VERSIONS.api_key


def is_unsupported_api_versions_request(header, max_version=None):
    """True if ``header`` is an ApiVersions request of a version this side
    does not support (answer with ``api_versions_fallback``, without parsing
    the body)."""
    if header.api_key != _KEY:
        return False
    hi = API_VERSIONS.max_version if max_version is None else max_version
    return not (API_VERSIONS.min_version <= header.api_version <= hi)


def api_versions_fallback_body(min_version=None, max_version=None):
    """The v0 UNSUPPORTED_VERSION ApiVersions response body."""
    lo = API_VERSIONS.min_version if min_version is None else min_version
    hi = API_VERSIONS.max_version if max_version is None else max_version
    return {
        "error_code": int(Errors.UNSUPPORTED_VERSION),
        "api_keys": [{"api_key": _KEY, "min_version": lo, "max_version": hi}],
    }


def api_versions_fallback(correlation_id, min_version=None, max_version=None):
    """The whole fallback response payload (response header v0 + v0 body, no
    size prefix) for a request with ``correlation_id``.  Accepts a
    ``RequestHeader`` too."""
    if isinstance(correlation_id, RequestHeader):
        correlation_id = correlation_id.correlation_id
    body = api_versions_fallback_body(min_version, max_version)
    return (encode_response_header(_KEY, 0, correlation_id)
            + API_VERSIONS.response.encode(body, 0))


# Kafka's rule for ClientSoftwareName/ClientSoftwareVersion (KIP-511): letters,
# digits, '-' and '.', starting and ending with a letter or digit.
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def is_valid_api_versions_request(body, version):
    """As Kafka's ApiVersionsRequest.isValid: from v3 on, the client software
    name and version must match Kafka's pattern; a server answers an invalid
    one with INVALID_REQUEST (42) in a response of the request's version."""
    if version < 3:
        return True
    name = body.get("client_software_name") or ""
    ver = body.get("client_software_version") or ""
    return bool(_SOFTWARE_RE.fullmatch(name)) and bool(_SOFTWARE_RE.fullmatch(ver))


def choose_api_versions_version(response_body, max_version=None):
    """Client side: after an UNSUPPORTED_VERSION response, the version to retry
    with (the highest both sides support), or None if there is none."""
    ours = API_VERSIONS.max_version if max_version is None else max_version
    for entry in response_body.get("api_keys") or ():
        if entry.get("api_key") == _KEY:
            v = min(ours, entry.get("max_version", 0))
            if v < max(API_VERSIONS.min_version, entry.get("min_version", 0)):
                return None
            return v
    # Kafka clients fall back to v0 when the server lists nothing.
    return 0
