"""Small wire helpers shared by the SASL authenticators.

The authenticators must look at a request header *before* trusting the rest
of the frame: Kafka decides from the API key alone whether a pre-auth request
is allowed (so the body of a disallowed request is never parsed), and a first
frame whose header is not a valid Kafka header is a raw GSSAPI token from a
0.9-era client.  These helpers do that peek, and turn every failure of the
codec into a kchannel error so that no byte sequence can escape as an
unexpected exception.
"""
import struct

from kchannel.errors import InvalidRequestError, KChannelError, UnsupportedVersionError
from kchannel.protocol import headers, messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader

_HEADER_PREFIX = struct.Struct(">hhi")


# Every pre-authentication request header is checked against the known API
# keys: plain lookups instead of an enum call (and a ValueError) per frame.
_API_KEY_NAMES = {k.value: k.name for k in ApiKey}


def api_key_name(api_key):
    """Kafka's enum name of an API key (``METADATA``), as in its messages."""
    name = _API_KEY_NAMES.get(api_key)
    return str(api_key) if name is None else name


def is_known_api_key(api_key):
    return api_key in _API_KEY_NAMES


def supported_range(api_key):
    """(min_version, max_version) kchannel implements for ``api_key``."""
    api = messages.API[api_key]
    return api.min_version, api.max_version


def _request_header_version(api_key, api_version):
    try:
        return headers.request_header_version(api_key, api_version)
    except Exception:
        # Kafka derives the header version from the schema's flexible-version
        # range even for versions it does not implement (a version above the
        # newest keeps the newest version's header).  Mirror that so an
        # ApiVersions request of an unknown future version can still be
        # answered with the v0 fallback.
        try:
            lo, hi = supported_range(api_key)
        except Exception:
            raise InvalidRequestError(f"Unknown API key {api_key}") from None
        clamped = hi if api_version > hi else lo
        return headers.request_header_version(api_key, clamped)


def _read_uvarint(buf, pos):
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise InvalidRequestError("Error parsing request header: truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise InvalidRequestError("Error parsing request header: varint too long")


class PeekedHeader:
    """Request header fields read without trusting the body."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id",
                 "header_version", "body_offset")

    def __init__(self, api_key, api_version, correlation_id, client_id,
                 header_version, body_offset):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version
        self.body_offset = body_offset


def parse_request_header(frame):
    """Parse the request header of ``frame`` as Kafka's ``RequestHeader.parse``.

    Raises ``InvalidRequestError`` for an unknown API key or a malformed
    header (Kafka's "Error parsing request header ..." / "Unknown API key").
    """
    buf = bytes(frame)
    if len(buf) < _HEADER_PREFIX.size:
        guess = struct.unpack(">h", buf[:2])[0] if len(buf) >= 2 else -1
        raise InvalidRequestError(
            f"Error parsing request header. Our best guess of the apiKey is: {guess}")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(buf, 0)
    # (is_known_api_key and _request_header_version's usual path, inlined:
    # this runs for every SASL request a server reads)
    if api_key not in _API_KEY_NAMES:
        raise InvalidRequestError(f"Unknown API key {api_key}")
    try:
        header_version = headers.request_header_version(api_key, api_version)
    except Exception:
        header_version = _request_header_version(api_key, api_version)
    pos = _HEADER_PREFIX.size
    client_id = None
    if header_version >= 1:
        if pos + 2 > len(buf):
            raise InvalidRequestError(
                f"Error parsing request header. Our best guess of the apiKey is: {api_key}")
        (n,) = struct.unpack_from(">h", buf, pos)
        pos += 2
        if n < -1 or pos + max(n, 0) > len(buf):
            raise InvalidRequestError(
                f"Error parsing request header. Our best guess of the apiKey is: {api_key}")
        if n >= 0:
            try:
                client_id = buf[pos:pos + n].decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidRequestError(
                    "Error parsing request header. Our best guess of the apiKey is: "
                    f"{api_key}") from None
            pos += n
    if header_version >= 2:
        count, pos = _read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            pos += size
            if pos > len(buf):
                raise InvalidRequestError(
                    "Error parsing request header. Our best guess of the apiKey is: "
                    f"{api_key}")
    # Kafka treats a null client id as the empty one.
    return PeekedHeader(api_key, api_version, correlation_id, client_id or "",
                        header_version, pos)


def decode_request_body(header, frame):
    """Decode the body of a request whose header was peeked."""
    try:
        spec = messages.API[header.api_key].request
        return spec.decode(bytes(frame), header.api_version, offset=header.body_offset)
    except KChannelError as exc:
        if isinstance(exc, (InvalidRequestError, UnsupportedVersionError)):
            raise InvalidRequestError(
                f"Error getting request for apiKey: {api_key_name(header.api_key)}, "
                f"apiVersion: {header.api_version}: {exc}") from exc
        raise
    except Exception as exc:  # the codec must never leak a bare error
        raise InvalidRequestError(
            f"Error getting request for apiKey: {api_key_name(header.api_key)}, "
            f"apiVersion: {header.api_version}: {exc!r}") from exc


def encode_response(api_key, api_version, correlation_id, body):
    return headers.encode_response(api_key, api_version, correlation_id, body)


def encode_request(api_key, api_version, correlation_id, client_id, body):
    return headers.encode_request(
        RequestHeader(api_key, api_version, correlation_id, client_id), body)


def peek_correlation_id(frame):
    """Correlation id of a response frame (first 4 bytes) or None."""
    if len(frame) < 4:
        return None
    return struct.unpack_from(">i", frame, 0)[0]


def decode_response(frame, api_key, api_version):
    try:
        return headers.decode_response(bytes(frame), api_key, api_version)
    except KChannelError:
        raise
    except Exception as exc:
        raise InvalidRequestError(f"Invalid response: {exc!r}") from exc
