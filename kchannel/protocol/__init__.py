"""Kafka wire protocol: primitives, message schemas, headers and error codes.

* ``kchannel.protocol.wire``: ``Reader`` / ``Writer`` primitives (compiled
  twin when built).
* ``kchannel.protocol.schema``: ``Field``, ``MessageSpec``, ``Api``.
* ``kchannel.protocol.messages``: the schemas; ``messages.API[api_key]``.
* ``kchannel.protocol.headers``: request/response headers and payloads.
* ``kchannel.protocol.errors``: Kafka's error table.
* ``kchannel.protocol.api_versions``: the ApiVersions fallback.
"""
from kchannel.protocol import messages
from kchannel.protocol.api_keys import API_NAMES, ApiKey, api_name
from kchannel.protocol.api_versions import (
    api_versions_fallback,
    api_versions_fallback_body,
    choose_api_versions_version,
    is_unsupported_api_versions_request,
    is_valid_api_versions_request,
)
from kchannel.protocol.errors import Errors, error_message, error_name, exception_for
from kchannel.protocol.headers import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_request_header,
    request_header_version,
    response_header_version,
)
from kchannel.protocol.messages import API
from kchannel.protocol.schema import Api, Field, MessageSpec

__all__ = [
    "API",
    "API_NAMES",
    "Api",
    "ApiKey",
    "Errors",
    "Field",
    "MessageSpec",
    "RequestHeader",
    "api_name",
    "api_versions_fallback",
    "api_versions_fallback_body",
    "choose_api_versions_version",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_message",
    "error_name",
    "exception_for",
    "is_unsupported_api_versions_request",
    "is_valid_api_versions_request",
    "messages",
    "parse_request_header",
    "request_header_version",
    "response_header_version",
]
