#!/usr/bin/env python3
"""Fuzz target: the request-header parser and request decoding.

The input is one request payload (what follows the size prefix).
``parse_request_header`` may only raise ``InvalidRequestError``;
``decode_request`` only ``InvalidRequestError`` or
``UnsupportedVersionError``.  Crashes besides other exceptions: a body
offset outside the payload, a header version other than the API's, a header
``decode_request`` disagrees with, and a header that does not encode back to
the bytes it was parsed from (when those bytes are canonical: valid UTF-8
client id, no tagged fields).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402,F401

import atheris  # noqa: E402

with atheris.instrument_imports(include=["kchannel"]):
    import kchannel.protocol._wire_py  # noqa: F401  (the pure codec twin)
    import kchannel.protocol.messages  # noqa: F401
    import kchannel.protocol.schema  # noqa: F401
    from kchannel.errors import InvalidRequestError, UnsupportedVersionError
    from kchannel.protocol.headers import (decode_request, encode_request_header,
                                           parse_request_header, request_header_version)


def test_one_input(data):
    try:
        header, offset = parse_request_header(data)
    except InvalidRequestError:
        header = None
    if header is not None:
        assert 8 <= offset <= len(data), (offset, len(data))
        hv = header.header_version
        assert hv == request_header_version(header.api_key, header.api_version), header
        if hv == 0:
            canonical = offset == 8
        else:
            client_id = None if header.client_id is None else header.client_id.encode("utf-8")
            end = 10 + (0 if client_id is None else len(client_id))
            # Lossless: the client id was valid UTF-8, and a flexible header
            # has an empty tagged-field section (one zero byte).
            canonical = ((client_id is None or bytes(data[10:end]) == client_id)
                         and offset == end + (1 if hv == 2 else 0))
        if canonical:
            assert encode_request_header(header) == bytes(data[:offset]), header
    try:
        decoded, body = decode_request(data)
    except (InvalidRequestError, UnsupportedVersionError) as exc:
        if header is None:
            assert getattr(exc, "header", None) is None
        return
    assert decoded == header, (decoded, header)
    assert isinstance(body, dict)


if __name__ == "__main__":
    _harness.run(test_one_input)
