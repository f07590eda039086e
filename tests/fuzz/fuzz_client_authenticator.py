#!/usr/bin/env python3
"""Fuzz target: the client-side SASL authenticator (sans-I/O).

A ``SaslClientAuthenticator`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, right
or wrong password) talks to a real ``SaslServerAuthenticator``, but the input
decides what reaches the client at each step: the server's genuine answers,
those answers with one byte changed or cut short, a well-formed response to
the client's last request with fields from the input (ApiVersions ranges,
handshake mechanism lists, error codes and messages, SASL tokens, session
lifetimes, correlation ids), or raw bytes.  The client must fail closed:
wait, go on, or raise a ``KChannelError`` that is not the catch-all for an
internal error.  A SCRAM client may complete only if the real server
completed too (it checks the server's signature, which only the real server
can produce); a PLAIN client trusts the server's word, as in Kafka.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402,F401

import atheris  # noqa: E402

# Everything the target can reach is imported here, so that atheris
# instruments it: the mechanisms the registry would import lazily, the
# protocol codec and the framing (pure twins under KCHANNEL_NO_EXTENSIONS=1).
with atheris.instrument_imports(include=["kchannel"]):
    import kchannel._framing_py  # noqa: F401
    import kchannel.protocol._wire_py  # noqa: F401
    import kchannel.protocol.messages  # noqa: F401
    import kchannel.security.sasl.oauthbearer  # noqa: F401
    import kchannel.security.sasl.plain  # noqa: F401
    import kchannel.security.sasl.scram  # noqa: F401
    import kchannel.security.sasl._scram_py  # noqa: F401
    from kchannel.errors import KChannelError
    from kchannel.protocol.headers import encode_response, parse_request_header
    from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator
    from kchannel.security.sasl.server_authenticator import SaslServerAuthenticator
    from tests.fixtures.sasl import NOW, FrameIO, server_callbacks


API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
CALLBACKS = server_callbacks()
GENUINE, MUTATED, TRUNCATED, FORGED, RAW = range(5)


def _int(fdp, bits):
    return fdp.ConsumeIntInRange(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _forged_body(fdp, api_key):
    error_code = _int(fdp, 16) if fdp.ConsumeProbability() < 0.3 else 0
    if api_key == API_VERSIONS:
        keys = []
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            key = fdp.PickValueInList([API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE]) \
                if fdp.ConsumeBool() else _int(fdp, 16)
            keys.append({"api_key": key, "min_version": _int(fdp, 16),
                         "max_version": _int(fdp, 16)})
        return {"error_code": error_code, "api_keys": keys, "throttle_time_ms": _int(fdp, 32)}
    if api_key == SASL_HANDSHAKE:
        mechanisms = [fdp.PickValueInList(MECHANISMS) if fdp.ConsumeBool()
                      else fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 20))
                      for _ in range(fdp.ConsumeIntInRange(0, 3))]
        return {"error_code": error_code, "mechanisms": mechanisms}
    message = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 40)) \
        if fdp.ConsumeBool() else None
    return {"error_code": error_code, "error_message": message,
            "auth_bytes": fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200)),
            "session_lifetime_ms": _int(fdp, 64)}


def _forged(fdp, last_request):
    try:
        header = parse_request_header(last_request)[0]
    except KChannelError:
        header = None
    if header is None or header.api_key not in (API_VERSIONS, SASL_HANDSHAKE,
                                                SASL_AUTHENTICATE):
        # A raw SASL token exchange (SaslHandshake v0): any bytes.
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200))
    cid = header.correlation_id if fdp.ConsumeProbability() < 0.9 else _int(fdp, 32)
    try:
        return encode_response(header.api_key, header.api_version, cid,
                               _forged_body(fdp, header.api_key))
    except KChannelError:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200))


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    mechanism = fdp.PickValueInList(MECHANISMS)
    right_password = fdp.ConsumeBool()
    client = SaslClientAuthenticator(
        mechanism=mechanism,
        jaas_options={"username": "alice",
                      "password": "alice-secret" if right_password else "wrong"})
    server = SaslServerAuthenticator(enabled_mechanisms=[mechanism], callbacks=CALLBACKS)
    client_io, server_io = FrameIO(), FrameIO()
    server_alive = True
    for _ in range(8):
        try:
            client.authenticate(client_io, NOW)
        except KChannelError as exc:
            assert "Unexpected error during SASL" not in str(exc), repr(exc.__cause__)
            assert not client.complete()
            return
        if client.complete():
            if mechanism != "PLAIN":
                assert server.complete() and right_password, "SCRAM client completed alone"
            return
        requests = client_io.take()
        genuine = []
        if server_alive and requests:
            for frame in requests:
                server_io.feed_frame(frame)
            try:
                server.authenticate(server_io, NOW)
            except KChannelError:
                server_alive = False
            genuine = server_io.take()
        choice = fdp.ConsumeIntInRange(0, 4)
        if choice in (MUTATED, TRUNCATED) and genuine:
            i = fdp.ConsumeIntInRange(0, len(genuine) - 1)
            frame = bytearray(genuine[i])
            if frame:
                at = fdp.ConsumeIntInRange(0, len(frame) - 1)
                if choice == MUTATED:
                    frame[at] = fdp.ConsumeIntInRange(0, 255)
                else:
                    del frame[at:]
            genuine[i] = bytes(frame)
            for frame in genuine:
                client_io.feed_frame(frame)
        elif choice == FORGED and requests:
            client_io.feed_frame(_forged(fdp, requests[-1]))
        elif choice == RAW:
            client_io.feed(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200)))
        else:
            for frame in genuine:
                client_io.feed_frame(frame)
        if client_io.decoder.buffered == 0 and not requests:
            return      # nothing more will happen


if __name__ == "__main__":
    _harness.run(test_one_input)
