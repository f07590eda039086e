#!/usr/bin/env python3
"""Fuzz target: the server-side SASL authenticator (sans-I/O).

A fresh ``SaslServerAuthenticator`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
OAUTHBEARER with Kafka's unsecured validator) is put in one of several
pre-authentication states by legitimate client requests, then gets what the
input says: raw bytes, frames of raw bytes, or well-formed ApiVersions,
SaslHandshake and SaslAuthenticate requests whose fields (software names,
mechanism name, SASL tokens: PLAIN credentials, SCRAM messages, OAuth
tokens) come from the input.  It must fail closed: keep waiting, answer, or
raise a ``KChannelError`` that is not the catch-all for an internal error;
it may complete only for OAUTHBEARER (an unsecured token needs no secret,
any well-formed one is accepted), never for PLAIN or SCRAM (no input knows a
password or key).
"""
import base64
import json
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
    from kchannel.network.ops import OP_READ, OP_WRITE
    from kchannel.security.sasl.server_authenticator import SaslServerAuthenticator
    from tests.fixtures.sasl import NOW, FrameIO, request, server_callbacks


API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
CALLBACKS = server_callbacks()
JAAS = {"OAUTHBEARER": {"unsecuredValidatorAllowableClockSkewMs": "1000"}}

PREFIXES = [
    [],
    [request(API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})],
    [request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})],
    [request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})],
    [request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})],
    [request(SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"}), b"n,,n=alice,r=abcdefgh"],
    [request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}),
     request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abcdefgh"}, 2)],
    [request(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"})],
]


def _server():
    return SaslServerAuthenticator(enabled_mechanisms=MECHANISMS, callbacks=CALLBACKS,
                                   jaas_options=JAAS, max_receive_size=4096)


def _text(fdp, n=64):
    return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, n))


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _ascii(fdp, n=24):
    return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, n)).decode("latin-1").encode(
        "ascii", "replace")


def _oauth_token(fdp):
    """An OAUTHBEARER client-first message (RFC 7628) around a JWT whose
    parts come from the input: sometimes JSON claims, sometimes any bytes."""
    header = b'{"alg":"none"}' if fdp.ConsumeBool() else fdp.ConsumeBytes(
        fdp.ConsumeIntInRange(0, 40))
    if fdp.ConsumeBool():
        claims = {"sub": _text(fdp, 16)}
        if fdp.ConsumeBool():
            claims["iat"] = NOW / 1000 - fdp.ConsumeIntInRange(-100, 100)
        if fdp.ConsumeBool():
            claims["exp"] = NOW / 1000 + fdp.ConsumeIntInRange(-100, 3600) \
                if fdp.ConsumeBool() else _text(fdp, 8)
        if fdp.ConsumeBool():
            claims["scope"] = [_text(fdp, 8)] if fdp.ConsumeBool() else _text(fdp, 8)
        payload = json.dumps(claims).encode()
    else:
        payload = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 80))
    token = _b64url(header) + b"." + _b64url(payload) + b"." + _ascii(fdp, 8)
    gs2 = b"n,a=" + _ascii(fdp, 12) + b"," if fdp.ConsumeBool() else b"n,,"
    extensions = b"".join(b"\x01" + _ascii(fdp, 8) + b"=" + _ascii(fdp, 8)
                          for _ in range(fdp.ConsumeIntInRange(0, 2)))
    return gs2 + b"\x01auth=Bearer " + token + extensions + b"\x01\x01"


def _scram_first(fdp):
    user = b"alice" if fdp.ConsumeBool() else _ascii(fdp, 16)
    gs2 = b"n,a=" + (user if fdp.ConsumeBool() else _ascii(fdp, 8)) + b"," \
        if fdp.ConsumeProbability() < 0.2 else b"n,,"
    extensions = b",tokenauth=true" if fdp.ConsumeProbability() < 0.2 else b""
    return gs2 + b"n=" + user + b",r=" + _ascii(fdp, 24) + extensions


def _scram_final(fdp, io):
    """A client-final message that answers the server's last server-first
    (its nonce), with a proof from the input."""
    nonce = b"x"
    for frame in reversed(io.out):
        start = frame.find(b"r=")
        if start >= 0:
            nonce = frame[start + 2:].split(b",")[0]
            break
    if fdp.ConsumeProbability() < 0.1:
        nonce = _ascii(fdp, 40)
    binding = b"biws" if fdp.ConsumeBool() else base64.b64encode(_ascii(fdp, 8))
    proof = fdp.ConsumeBytes(fdp.PickValueInList([32, 64, fdp.ConsumeIntInRange(0, 80)]))
    return b"c=" + binding + b",r=" + nonce + b",p=" + base64.b64encode(proof)


def _frame(fdp, io):
    """One inbound frame (or raw bytes when the second item is False)."""
    kind = fdp.ConsumeIntInRange(0, 8)
    if kind == 0:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 300)), False
    if kind == 1:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 300)), True
    version = fdp.ConsumeIntInRange(0, 4)
    cid = fdp.ConsumeIntInRange(0, 5)
    try:
        if kind == 2:
            return request(API_VERSIONS, version, {"client_software_name": _text(fdp),
                                                   "client_software_version": _text(fdp)},
                           cid), True
        if kind == 3:
            mechanism = fdp.PickValueInList(MECHANISMS + ["GSSAPI", ""]) \
                if fdp.ConsumeBool() else _text(fdp)
            return request(SASL_HANDSHAKE, version % 2, {"mechanism": mechanism}, cid), True
        if kind == 4:
            token = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 400))
        elif kind == 5:
            token = _oauth_token(fdp)
        elif kind == 6:
            token = _scram_first(fdp)
        elif kind == 7:
            token = _scram_final(fdp, io)
        else:
            token = b"\0".join(_ascii(fdp, 16) for _ in range(3))      # PLAIN
        if fdp.ConsumeProbability() < 0.25:
            return token, True          # a raw token, as after SaslHandshake v0
        return request(SASL_AUTHENTICATE, version % 3, {"auth_bytes": token}, cid), True
    except KChannelError:
        # The version is not one the encoder supports: send junk instead.
        return b"", True


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    io, server = FrameIO(), _server()
    for frame in PREFIXES[fdp.ConsumeIntInRange(0, len(PREFIXES) - 1)]:
        io.feed_frame(frame)
        server.authenticate(io, NOW)
    # io.out keeps the server's answers: a client-final quotes its nonce.
    assert not server.complete()
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        payload, framed = _frame(fdp, io)
        if framed:
            io.feed_frame(payload)
        else:
            io.feed(payload)
        for _ in range(4):
            try:
                ops = server.authenticate(io, NOW)
            except KChannelError as exc:
                assert "Unexpected error during SASL" not in str(exc), repr(exc.__cause__)
                server.handle_authentication_failure()
                assert not server.complete()
                return
            if server.complete():
                assert server.mechanism == "OAUTHBEARER", server.mechanism
                return
            assert ops in (OP_READ, OP_WRITE, OP_READ | OP_WRITE), ops
            if io.decoder.buffered == 0:
                break


if __name__ == "__main__":
    _harness.run(test_one_input)
