"""Request and response headers, and whole request/response payloads.

Header versions follow Kafka's rules:

* request header v2 (tagged fields) for flexible request versions, else v1;
  v0 (no client id) only for ControlledShutdown v0;
* response header v1 (tagged fields) for flexible response versions, else v0,
  except ApiVersions responses, which always use v0 so that a client that
  sent a version the server does not know can still parse the fallback.

The request header is parsed for every request, so the wire twin (compiled
when built) reads it and nothing but the ``RequestHeader`` itself is built.  It accepts any API key and version, even ones no
schema knows (an unknown key is assumed to use header v1), because a server
must be able to refuse such a request from its header alone.

Payloads here never include the 4-byte size prefix; framing adds it.
"""
from dataclasses import dataclass

from kchannel.errors import InvalidRequestError, UnsupportedVersionError
from kchannel.framing import encode_frame
from kchannel.protocol.api_keys import (
    API_NAMES,
    ApiKey,
    REQUEST_FLEXIBLE_FROM,
    RESPONSE_FLEXIBLE_FROM,
)
from kchannel.protocol.messages import API
from kchannel.protocol.wire import decode_response_header as _decode_response_header
from kchannel.protocol.wire import encode_request_header as _encode_request_header
from kchannel.protocol.wire import encode_response_header as _encode_response_header
from kchannel.protocol.wire import frame_message as _frame_message
from kchannel.protocol.wire import parse_request_header as _parse_request_header

__all__ = [
    "RequestHeader",
    "request_header_parts",
    "request_header_version",
    "response_header_version",
    "parse_request_header",
    "encode_request_header",
    "encode_request",
    "decode_request",
    "encode_response_header",
    "encode_response",
    "decode_response",
    "decode_response_header",
    "request_encoder",
    "response_encoder",
    "response_decoder",
]

_API_VERSIONS = int(ApiKey.API_VERSIONS)
_CONTROLLED_SHUTDOWN = int(ApiKey.CONTROLLED_SHUTDOWN)



@dataclass(slots=True, init=False)
class RequestHeader:
    """A parsed request header.  ``client_id`` is ``None`` when the client sent
    a null client id and ``""`` for header v0 (which has none).
    ``header_version`` is the header version the request used."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int | None

    # Written out instead of the dataclass __init__ + __post_init__: one call
    # per request instead of two (one header is built per request on both
    # sides).  Same fields, defaults, eq and repr.
    def __init__(self, api_key, api_version, correlation_id, client_id=None,
                 header_version=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = (request_header_version(api_key, api_version)
                               if header_version is None else header_version)


def request_header_version(api_key, api_version):
    """Kafka's request header version for this API key and version."""
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    flex = REQUEST_FLEXIBLE_FROM.get(api_key)
    if flex is not None and api_version >= flex:
        return 2
    return 1


def response_header_version(api_key, api_version):
    """Kafka's response header version; ApiVersions responses always use v0."""
    if api_key == _API_VERSIONS:
        return 0
    flex = RESPONSE_FLEXIBLE_FROM.get(api_key)
    if flex is not None and api_version >= flex:
        return 1
    return 0


def parse_request_header(payload):
    """Parse the header at the start of ``payload``.

    Returns ``(RequestHeader, body_offset)``.  Raises ``InvalidRequestError``
    for a truncated or malformed header.  The parsing itself is the wire
    twin's (compiled when built): it runs for every request a server reads.
    """
    api_key, api_version, correlation_id, client_id, hv, off = _parse_request_header(
        payload, REQUEST_FLEXIBLE_FROM)
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv), off


def encode_request_header(header):
    """The header bytes for ``header`` at its API's header version."""
    return _encode_request_header(header.api_key, header.api_version, header.correlation_id,
                                  header.client_id,
                                  request_header_version(header.api_key, header.api_version))


def encode_request(header, body):
    """Header + body bytes (no size prefix).  ``body`` is a dict encoded with the
    API's request schema at ``header.api_version``, or already-encoded bytes."""
    api_key = header.api_key
    version = header.api_version
    head = _encode_request_header(api_key, version, header.correlation_id, header.client_id,
                                  request_header_version(api_key, version))
    if isinstance(body, (bytes, bytearray, memoryview)):
        return head + bytes(body)
    api = API.get(header.api_key)
    if api is None:
        raise UnsupportedVersionError(f"Unsupported API key {header.api_key}")
    return head + api.request.encode(body, header.api_version)


def _supported_api(api_key, api_version):
    api = API.get(api_key)
    if api is None:
        if api_key not in API_NAMES:
            raise InvalidRequestError(f"Unknown API key {api_key}")
        raise UnsupportedVersionError(
            f"Unsupported API key {api_key} ({API_NAMES[api_key]})")
    if not (api.min_version <= api_version <= api.max_version):
        raise UnsupportedVersionError(
            f"{api.name} version {api_version} is not supported "
            f"(supported: {api.min_version}-{api.max_version})")
    return api


def decode_request(payload):
    """``(RequestHeader, body dict)`` of a whole request payload.

    Raises ``InvalidRequestError`` for junk or an API key Kafka does not
    define, ``UnsupportedVersionError`` for an API or version kchannel does not
    support.  When the header itself parsed, the exception carries it as
    ``exc.header``.  A server answers an ApiVersions request of an unsupported
    version from the header alone (see ``kchannel.protocol.api_versions``):
    check the header with ``parse_request_header`` first.
    """
    header, off = parse_request_header(payload)
    try:
        api = _supported_api(header.api_key, header.api_version)
        body = api.request.decode(payload, header.api_version, off)
    except (InvalidRequestError, UnsupportedVersionError) as exc:
        # The header parsed: callers may still answer (or log) with it.
        exc.header = header
        raise
    return header, body


def encode_response_header(api_key, api_version, correlation_id):
    return _encode_response_header(correlation_id, response_header_version(api_key, api_version))


def encode_response(api_key, api_version, correlation_id, body):
    """Response header + body bytes (no size prefix).  ``body`` is a dict
    encoded with the API's response schema, or already-encoded bytes."""
    head = _encode_response_header(correlation_id, response_header_version(api_key, api_version))
    if isinstance(body, (bytes, bytearray, memoryview)):
        return head + bytes(body)
    api = API.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"Unsupported API key {api_key}")
    return head + api.response.encode(body, api_version)


def decode_response_header(payload, api_key, api_version):
    """``(correlation_id, body_offset)``."""
    return _decode_response_header(payload, response_header_version(api_key, api_version))


def decode_response(payload, api_key, api_version):
    """``(correlation_id, body dict)`` of a response to a request sent at
    ``api_version``.  Raises ``InvalidRequestError`` for junk.

    As Kafka's ApiVersionsResponse.parse: an ApiVersions response that does
    not parse at the requested version is parsed again as v0, because a
    server that does not know the requested version answers with a v0
    UNSUPPORTED_VERSION response.
    """
    correlation_id, off = _decode_response_header(
        payload, response_header_version(api_key, api_version))
    api = API.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"Unsupported API key {api_key}")
    if api_key == _API_VERSIONS and api_version != 0:
        try:
            return correlation_id, api.response.decode(payload, api_version, off)
        except InvalidRequestError:
            return correlation_id, api.response.decode(payload, 0, off)
    return correlation_id, api.response.decode(payload, api_version, off)


# -- per (API key, version) codecs for the request path --------------------
# A client sends and a server answers the same few API versions over and
# over: these build, once per API version, a function doing what
# encode_request / encode_response / decode_response do, with the header
# bytes that never change (API key, version, client id, tagged-field
# section) laid out in advance and the schema looked up once.  A request
# then costs one call and one join instead of a header object, two header
# version look-ups and an API table look-up on each side.

def _message_function(spec, version, part):
    """The schema's generated ``encode_message(body)`` or
    ``decode_message(buf, offset)`` of ``version``, called straight by the
    codecs below (``spec.encode``/``spec.decode`` cost one more call per
    request); a version the schema does not have raises its
    ``UnsupportedVersionError`` when used, as ``spec.encode``/``decode`` do."""
    try:
        return spec._message_function(version, part)
    except UnsupportedVersionError:
        if part == "encode":
            return lambda body: spec.encode(body, version)
        return lambda buf, offset=0: spec.decode(buf, version, offset)


def request_header_parts(api_key, api_version, client_id):
    """``(head, tail)``: the request header's bytes before and after its
    correlation id (API key and version; client id and tagged fields), the
    same for every request of one API version and client: a caller writes
    ``head + correlation id + tail`` without a call per request (the
    network client's request path, for a body given as parts)."""
    whole = _encode_request_header(api_key, api_version, 0, client_id,
                                   request_header_version(api_key, api_version))
    return whole[:4], whole[8:]


def request_encoder(api_key, api_version, client_id, framed=False, parts=False):
    """A function ``(correlation_id, body) -> bytes`` equal to
    ``encode_request(RequestHeader(api_key, api_version, correlation_id,
    client_id), body)``; with ``framed``, the same bytes behind their 4-byte
    size prefix (a whole frame: the payload is not copied again to frame
    it).  ``body`` may also be a tuple of ``bytes``: the parts of an encoded
    body, joined with the header in one copy (a producer's request carries
    its record batches, ~16 KiB at the defaults, which a joined body would
    copy twice).  With ``framed`` and ``parts``, a tuple body gives the
    frame as a tuple of parts instead (size prefix, header pieces, the
    body's parts: their concatenation is the frame), for a send queue that
    writes the large parts from their own memory (``set_send``).  Raises
    ``UnsupportedVersionError`` at once for an API key no schema knows (as
    ``encode_request`` does on first use)."""
    hv = request_header_version(api_key, api_version)
    whole = _encode_request_header(api_key, api_version, 0, client_id, hv)
    head, tail = whole[:4], whole[8:]
    fixed = len(whole)          # the header's length: 4 + corr id + tail
    api = API.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"Unsupported API key {api_key}")
    encode = api.request.encode
    encode_dict = _message_function(api.request, api_version, "encode")
    join = b"".join

    def encode_request_fast(correlation_id, body):
        if type(body) is tuple:
            if framed and 0 <= correlation_id <= 0x7FFFFFFF:
                n = fixed
                for part in body:
                    n += len(part)
                if n > 0x7FFFFFFF:
                    raise ValueError(f"frame payload too large ({n} bytes)")
                frame = (n.to_bytes(4, "big"), head, correlation_id.to_bytes(4, "big"),
                         tail) + body
                return frame if parts else join(frame)
            data = join(body)
        elif type(body) is dict:
            data = encode_dict(body)
        elif isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
        else:
            data = encode(body, api_version)    # None, or the schema's ValueError
        if not 0 <= correlation_id <= 0x7FFFFFFF:
            whole = _encode_request_header(api_key, api_version, correlation_id, client_id,
                                           hv) + data
            return encode_frame(whole) if framed else whole
        if framed:
            # (size, head, correlation id, tail, body in one allocation:
            # the wire twin's; "frame payload too large" past 2 GiB)
            return _frame_message(head, correlation_id, tail, data)
        return join((head, correlation_id.to_bytes(4, "big"), tail, data))
    return encode_request_fast


def response_encoder(api_key, api_version, framed=False):
    """A function ``(correlation_id, body) -> bytes`` equal to
    ``encode_response(api_key, api_version, correlation_id, body)``; with
    ``framed``, behind its 4-byte size prefix."""
    hv = response_header_version(api_key, api_version)
    api = API.get(api_key)
    encode = api.response.encode if api is not None else None
    encode_dict = (_message_function(api.response, api_version, "encode")
                   if api is not None else None)
    tail = b"\x00" if hv == 1 else b""
    join = b"".join

    def encode_response_fast(correlation_id, body):
        if type(body) is dict and encode_dict is not None:
            data = encode_dict(body)
        elif isinstance(body, (bytes, bytearray, memoryview)):
            data = bytes(body)
        elif encode is None:
            raise UnsupportedVersionError(f"Unsupported API key {api_key}")
        else:
            data = encode(body, api_version)
        if not -0x80000000 <= correlation_id <= 0x7FFFFFFF:
            whole = _encode_response_header(correlation_id, hv) + data
            return encode_frame(whole) if framed else whole
        if framed:
            # (one allocation in the wire twin; ValueError past 2 GiB)
            return _frame_message(b"", correlation_id, tail, data)
        return join((correlation_id.to_bytes(4, "big", signed=True), tail, data))
    return encode_response_fast


def response_decoder(api_key, api_version):
    """A function ``payload -> body dict`` equal to
    ``decode_response(payload, api_key, api_version)[1]`` (the caller has
    read the correlation id already).  Raises ``UnsupportedVersionError`` at
    once for an API key no schema knows."""
    api = API.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"Unsupported API key {api_key}")
    if api_key == _API_VERSIONS:
        def decode_api_versions(payload):
            return decode_response(payload, api_key, api_version)[1]
        return decode_api_versions
    decode = _message_function(api.response, api_version, "decode")
    if response_header_version(api_key, api_version) == 0:
        def decode_v0(payload):
            if len(payload) < 4:
                _decode_response_header(payload, 0)     # raises the usual error
            return decode(payload, 4)
        # The body decoder itself, ``(payload, 4) -> body``, for a caller
        # that has checked the correlation id is there (a NetworkClient:
        # one interpreted call less per response).
        decode_v0.body_decoder = decode
        return decode_v0

    def decode_v1(payload):
        # an empty tagged-field section (one zero byte) is the usual case
        if len(payload) > 4 and payload[4] == 0:
            return decode(payload, 5)
        return decode(payload, _decode_response_header(payload, 1)[1])
    return decode_v1
