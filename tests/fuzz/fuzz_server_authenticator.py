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


def _frame(fdp):
    """One inbound frame (or raw bytes when the second item is False)."""
    kind = fdp.ConsumeIntInRange(0, 5)
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
        return request(SASL_AUTHENTICATE, version % 3,
                       {"auth_bytes": fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 400))},
                       cid), True
    except KChannelError:
        # The version is not one the encoder supports: send junk instead.
        return b"", True


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    io, server = FrameIO(), _server()
    for frame in PREFIXES[fdp.ConsumeIntInRange(0, len(PREFIXES) - 1)]:
        io.feed_frame(frame)
        server.authenticate(io, NOW)
    io.take()
    assert not server.complete()
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        payload, framed = _frame(fdp)
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
            assert ops in (OP_READ, OP_WRITE, OP_READ | OP_WRITE), ops
            if server.complete():
                assert server.mechanism == "OAUTHBEARER", server.mechanism
                return
            if io.decoder.buffered == 0:
                break


if __name__ == "__main__":
    _harness.run(test_one_input)
