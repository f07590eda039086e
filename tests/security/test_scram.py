"""SCRAM-SHA-256/512 authentication: RFC vectors, Kafka's message rules, real peers
(scramp), delegation-token login, user-existence hiding, fail-closed; Hi()
(PBKDF2) on both twins; the cost of an unknown user; SCRAM over real sockets
with kchannel's and real Kafka clients.
"""
import base64
import hashlib
import hmac
import os

import pytest
import scramp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl import mechanism as registry
from kchannel.security.sasl import scram
from kchannel.security.sasl.mechanism import ServerCallbacks, TokenCredential, create_server
from kchannel.security.sasl.scram_store import (
    InMemoryScramCredentialStore, ScramCredential, SqliteScramCredentialStore,
    credential_from_password)
from kchannel.server import Server
from kchannel.server.scram_handlers import register_scram_handlers
from tests.fixtures.scram import GENERIC, SCRAM_MODULE, kc, make_store


# ----------------------------------------------------------------------
# SCRAM-SHA-256/512 mechanisms: RFC vectors, Kafka's message rules, real
# peers (scramp), delegation-token login, user-existence hiding, fail-closed.
# ----------------------------------------------------------------------

# RFC 7677 section 3 (SCRAM-SHA-256), user "user", password "pencil".
RFC7677 = {
    "client_nonce": "rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "salt": base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
    "client_final": (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def exchange(client, server, now=0):
    """Drive a client and server mechanism to completion; returns server."""
    token = client.evaluate_challenge(b"")
    while True:
        challenge = server.evaluate_response(token, now)
        token = client.evaluate_challenge(challenge)
        if server.is_complete():
            assert client.is_complete()
            assert token is None
            return server


def client(mech, username, password, **kw):
    return registry.create_client(mech, jaas_options={"username": username, "password": password},
                                  server_host="localhost", **kw)


def mech_server(mech, store=None, callbacks=None, **kw):
    if callbacks is None:
        callbacks = ServerCallbacks.default(store=store)
    return registry.create_server(mech, jaas_options={}, configs={}, callbacks=callbacks,
                                  server_host="localhost", now=0, **kw)


# ------------------------------------------------------------ RFC vectors

def test_rfc7677_client_messages_byte_exact():
    """Kafka: ScramFormatterTest.rfc7677Example (the client's messages)."""
    c = client("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["client_nonce"])
    assert c.has_initial_response()
    assert c.evaluate_challenge(b"") == RFC7677["client_first"]
    assert c.evaluate_challenge(RFC7677["server_first"]) == RFC7677["client_final"]
    assert c.evaluate_challenge(RFC7677["server_final"]) is None
    assert c.is_complete()


def test_rfc7677_server_messages_byte_exact():
    """Kafka: ScramFormatterTest.rfc7677Example (the server's messages);
    ScramSaslServerTest.noAuthorizationIdSpecified."""
    store = InMemoryScramCredentialStore()
    store.put("user", "SCRAM-SHA-256",
              credential_from_password("SCRAM-SHA-256", "pencil", 4096, RFC7677["salt"]))
    s = mech_server("SCRAM-SHA-256", store, nonce=RFC7677["server_nonce"])
    assert s.evaluate_response(RFC7677["client_first"], 0) == RFC7677["server_first"]
    assert s.evaluate_response(RFC7677["client_final"], 0) == RFC7677["server_final"]
    assert s.is_complete()
    assert s.get_authorization_id() == "user"
    assert not s.token_authenticated
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") is None


def test_rfc5802_sha1_math_through_formatter():
    # RFC 5802 section 5 uses SCRAM-SHA-1 (not a Kafka mechanism); check the
    # shared math (Hi, keys, proof) against it with a SHA-1 mechanism object.
    sha1 = scram.ScramMechanism("SCRAM-SHA-1", "SCRAM_SHA_1", "sha1", 0, 20)
    salted = hashlib.pbkdf2_hmac("sha1", b"pencil", base64.b64decode("QSXCR+Q6sek8bf92"), 4096)
    ck = scram.client_key(sha1, salted)
    auth = (b"n=user,r=fyko+d2lbbFgONRv9qkxdawL,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
            b"s=QSXCR+Q6sek8bf92,i=4096,c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j")
    proof = scram._xor(ck, hmac.new(scram.stored_key(sha1, ck), auth, "sha1").digest())
    assert base64.b64encode(proof) == b"v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    sig = hmac.new(scram.server_key(sha1, salted), auth, "sha1").digest()
    assert base64.b64encode(sig) == b"rmF9pqV8S7suAoZWja4dJRkFsKQ="


def test_pbkdf2_matches_hashlib_for_both_mechanisms():
    for mech in scram.MECHANISMS.values():
        assert scram.hi(mech, b"pw", b"salt", 4096) == hashlib.pbkdf2_hmac(
            mech.hash_name, b"pw", b"salt", 4096)


# ------------------------------------------------------ full exchanges

def _scram_twins():
    import importlib
    out = [importlib.import_module("kchannel.security.sasl._scram_py")]
    try:
        out.append(importlib.import_module("kchannel._cscram"))
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
    return out


def test_base36_twins_agree_with_python_int_formatting():
    import random
    rng = random.Random(24)
    cases = [b"", b"\0", b"\0\0\x01", bytes(17), b"\xff" * 64, b"\x01" + bytes(63)]
    cases += [rng.randbytes(rng.randrange(65)) for _ in range(3000)]
    for twin in _scram_twins():
        for i, data in enumerate(cases):
            shift = i % 8
            n = int.from_bytes(data, "big") >> shift
            digits = ""
            while n:
                n, r = divmod(n, 36)
                digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
            assert twin.base36(data, shift) == (digits or "0"), (twin.__name__, data, shift)
        with pytest.raises(ValueError):
            twin.base36(bytes(65))
        with pytest.raises(ValueError):
            twin.base36(b"\x01", 8)


def test_secure_random_strings_are_130_bit_base36_and_differ_across_fork():
    for twin in _scram_twins():
        seen = {twin.secure_random_string() for _ in range(2000)}
        assert len(seen) == 2000
        for nonce in seen:
            assert int(nonce, 36) < 2 ** 130
            assert nonce == "0" or not nonce.startswith("0")
        assert max(len(x) for x in seen) == 26
        # A forked child never hands out what the parent will (the
        # compiled twin draws random bytes a block at a time).
        twin.secure_random_string()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.write(w, ",".join(twin.secure_random_string() for _ in range(5)).encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        child = set(os.read(r, 4096).decode().split(","))
        os.close(r)
        parent = {twin.secure_random_string() for _ in range(5)}
        assert len(child) == 5 and not child & parent


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip(mech):
    """Kafka: ScramSaslServerTest.validateNonceExchange."""
    store = make_store({("alice", mech): "alice-secret"})
    s = exchange(client(mech, "alice", "alice-secret"), mech_server(mech, store))
    assert s.get_authorization_id() == "alice"
    assert s.mechanism_name == mech


@pytest.mark.parametrize("username", ["a,b", "a=b", "=2C", "x=3D,=,", "=", ","])
def test_usernames_with_comma_and_equals_are_escaped(username):
    """Kafka: ScramFormatterTest.saslName (through a whole exchange)."""
    store = make_store({(username, "SCRAM-SHA-256"): "pw"})
    c = client("SCRAM-SHA-256", username, "pw")
    first = c.evaluate_challenge(b"")
    bare_name = first.split(b",")[2]
    assert bare_name == b"n=" + scram.sasl_name(username).encode()
    assert b"," not in bare_name[2:] and scram.username_from_sasl_name(bare_name[2:].decode()) == username
    s = mech_server("SCRAM-SHA-256", store)
    c2 = client("SCRAM-SHA-256", username, "pw")
    assert exchange(c2, s).get_authorization_id() == username


def test_sasl_name_escaping_rules():
    """Kafka: ScramFormatterTest.saslName."""
    assert scram.sasl_name("a,b=c") == "a=2Cb=3Dc"
    assert scram.username_from_sasl_name("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        scram.username_from_sasl_name("a=b")
    with pytest.raises(ValueError):
        scram.username_from_sasl_name("a=2")


def test_wrong_password_generic_message():
    store = make_store({("alice", "SCRAM-SHA-256"): "right"})
    s = mech_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslAuthenticationError) as exc:
        exchange(client("SCRAM-SHA-256", "alice", "wrong"), s)
    assert str(exc.value) == GENERIC.format("SCRAM-SHA-256")
    assert not s.is_complete()


def test_unknown_user_indistinguishable_from_wrong_password():
    store = make_store({("alice", "SCRAM-SHA-256"): "right"})

    def run(user):
        s = mech_server("SCRAM-SHA-256", store)
        c = client("SCRAM-SHA-256", user, "wrong", nonce="fixednonce")
        first = c.evaluate_challenge(b"")
        server_first = s.evaluate_response(first, 0)
        final = c.evaluate_challenge(server_first)
        with pytest.raises(SaslAuthenticationError) as exc:
            s.evaluate_response(final, 0)
        return server_first, str(exc.value)

    known_first, known_msg = run("alice")
    unknown_first, unknown_msg = run("mallory")
    assert known_msg == unknown_msg == GENERIC.format("SCRAM-SHA-256")
    parsed_known = scram.ServerFirstMessage.parse(known_first)
    parsed_unknown = scram.ServerFirstMessage.parse(unknown_first)
    assert parsed_unknown.iterations == parsed_known.iterations == 4096
    # A fake salt has the shape of a real one (base36 text) and is stable, so
    # asking twice does not reveal that the user is unknown.
    assert parsed_unknown.salt.isalnum() and parsed_unknown.salt.islower()
    assert run("mallory")[0].split(b",")[1] == unknown_first.split(b",")[1]
    assert run("mallory2")[0].split(b",")[1] != unknown_first.split(b",")[1]


def test_unknown_user_cannot_authenticate_with_any_password():
    s = mech_server("SCRAM-SHA-256", InMemoryScramCredentialStore())
    with pytest.raises(SaslAuthenticationError):
        exchange(client("SCRAM-SHA-256", "ghost", ""), s)


def test_credential_for_only_one_variant():
    """Kafka: SaslAuthenticatorTest.testUserCredentialsUnavailableForScramMechanism."""
    store = make_store({("alice", "SCRAM-SHA-512"): "pw"})
    exchange(client("SCRAM-SHA-512", "alice", "pw"), mech_server("SCRAM-SHA-512", store))
    with pytest.raises(SaslAuthenticationError) as exc:
        exchange(client("SCRAM-SHA-256", "alice", "pw"), mech_server("SCRAM-SHA-256", store))
    assert str(exc.value) == GENERIC.format("SCRAM-SHA-256")


def test_stored_credential_below_minimum_iterations_refused():
    store = InMemoryScramCredentialStore()
    store.put("alice", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "pw", 1000))
    with pytest.raises(SaslAuthenticationError) as exc:
        exchange(client("SCRAM-SHA-256", "alice", "pw"), mech_server("SCRAM-SHA-256", store))
    assert str(exc.value) == GENERIC.format("SCRAM-SHA-256")


def test_authzid_must_match_username():
    """Kafka: ScramSaslServerTest.authorizationIdEqualsAuthenticationId,
    authorizationIdNotEqualsAuthenticationId."""
    store = make_store({("alice", "SCRAM-SHA-256"): "pw"})
    s = mech_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslAuthenticationError) as exc:
        s.evaluate_response(b"n,a=bob,n=alice,r=abc", 0)
    assert str(exc.value) == ("Authentication failed: Client requested an authorization id "
                              "that is different from username")
    # Same answer for a user that does not exist.
    s = mech_server("SCRAM-SHA-256", store)
    with pytest.raises(SaslAuthenticationError) as exc2:
        s.evaluate_response(b"n,a=bob,n=nobody,r=abc", 0)
    assert str(exc2.value) == str(exc.value)
    # Equal authzid is accepted, and the channel binding then covers it.
    s = mech_server("SCRAM-SHA-256", store)
    first = s.evaluate_response(b"n,a=alice,n=alice,r=abc", 0)
    assert first.startswith(b"r=abc")


def test_channel_binding_must_be_gs2_header():
    store = make_store({("alice", "SCRAM-SHA-256"): "pw"})
    c = client("SCRAM-SHA-256", "alice", "pw")
    s = mech_server("SCRAM-SHA-256", store)
    first = s.evaluate_response(c.evaluate_challenge(b""), 0)
    final = c.evaluate_challenge(first)
    assert final.startswith(b"c=biws,")
    tampered = b"c=" + base64.b64encode(b"p=tls-unique,,") + final[len(b"c=biws"):]
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(tampered, 0)


def test_server_refuses_final_nonce_mismatch():
    """Kafka: ScramSaslServerTest.validateFailedNonceExchange."""
    store = make_store({("alice", "SCRAM-SHA-256"): "pw"})
    c = client("SCRAM-SHA-256", "alice", "pw")
    s = mech_server("SCRAM-SHA-256", store)
    first = s.evaluate_response(c.evaluate_challenge(b""), 0)
    final = c.evaluate_challenge(first)
    parts = final.split(b",")
    parts[1] = parts[1] + b"x"
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(b",".join(parts), 0)


def test_server_refuses_mandatory_extension():
    s = mech_server("SCRAM-SHA-256", make_store({("alice", "SCRAM-SHA-256"): "pw"}))
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(b"n,,m=foo,n=alice,r=abc", 0)


# ------------------------------------------------------- client checks

def test_client_nonce_mismatch_refused():
    """Kafka: ScramSaslServerTest.validateFailedNonceExchange (the client's check)."""
    c = client("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    c.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(b"r=XYZabc123,s=QSXCR+Q6sek8bf92,i=4096")
    assert "does not start with client nonce" in str(exc.value)


def test_client_refuses_server_nonce_without_server_part():
    c = client("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    c.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError):
        c.evaluate_challenge(b"r=abc,s=QSXCR+Q6sek8bf92,i=4096")


@pytest.mark.parametrize("iterations", [1, 4095])
def test_client_refuses_low_iterations(iterations):
    c = client("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    c.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=%d" % iterations)
    assert str(exc.value) == (f"Requested iterations {iterations} is less than the minimum "
                              "4096 for SCRAM_SHA_512")


@pytest.mark.parametrize("bad", [b"r=abcdef,s=QSXCR+Q6sek8bf92,i=0",
                                 b"r=abcdef,s=QSXCR+Q6sek8bf92,i=99999999999",
                                 b"r=abcdef,s=not*base64,i=4096",
                                 b"r=abcdef,i=4096", b"", b"e=other-error",
                                 b"m=x,r=abcdef,s=QSXCR+Q6sek8bf92,i=4096"])
def test_client_refuses_malformed_server_first(bad):
    c = client("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    c.evaluate_challenge(b"")
    with pytest.raises(SaslAuthenticationError):
        c.evaluate_challenge(bad)


def test_client_server_final_error_attribute_is_failure():
    c = client("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["client_nonce"])
    c.evaluate_challenge(b"")
    c.evaluate_challenge(RFC7677["server_first"])
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(b"e=invalid-proof")
    assert str(exc.value) == ("Sasl authentication using SCRAM_SHA_256 failed with error: "
                              "invalid-proof")
    assert not c.is_complete()


def test_client_refuses_wrong_server_signature():
    c = client("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["client_nonce"])
    c.evaluate_challenge(b"")
    c.evaluate_challenge(RFC7677["server_first"])
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(b"v=" + base64.b64encode(b"\x00" * 32))
    assert str(exc.value) == "Invalid server signature in server final message"


def test_client_first_challenge_must_be_empty():
    with pytest.raises(SaslAuthenticationError):
        client("SCRAM-SHA-256", "u", "p").evaluate_challenge(b"x")


def test_client_without_credentials_fails_clearly():
    c = registry.create_client("SCRAM-SHA-256", jaas_options={}, server_host="h")
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(b"")
    assert "username" in str(exc.value)


# ------------------------------------------------------- salted-password cache

def test_salted_password_cache_hit_and_no_plaintext_key():
    cache = scram.SaltedPasswordCache(maxsize=2)
    store = make_store({("alice", "SCRAM-SHA-256"): "alice-secret"})
    for _ in range(3):
        exchange(client("SCRAM-SHA-256", "alice", "alice-secret", cache=cache),
                 mech_server("SCRAM-SHA-256", store))
    assert (cache.misses, cache.hits) == (1, 2)
    for key in cache._entries:
        assert b"alice-secret" not in key
    # Another salt is another entry; the LRU stays bounded.
    for i in range(3):
        cache.keys_for(scram.SCRAM_SHA_256, b"pw", b"salt%d" % i, 4096)
    assert len(cache) == 2


def test_cache_entry_depends_on_every_input():
    cache = scram.SaltedPasswordCache()
    base = (scram.SCRAM_SHA_256, b"pw", b"salt", 4096)
    variants = [(scram.SCRAM_SHA_512, b"pw", b"salt", 4096),
                (scram.SCRAM_SHA_256, b"pw2", b"salt", 4096),
                (scram.SCRAM_SHA_256, b"pw", b"salt2", 4096),
                (scram.SCRAM_SHA_256, b"pw", b"salt", 4097)]
    first = cache.keys_for(*base)
    for v in variants:
        assert cache.keys_for(*v) != first
    assert cache.misses == 5 and cache.hits == 0


# ------------------------------------------------------------ token login

def _token_callbacks(tokens, calls=None):
    def token_credential(token_id, mechanism, now):
        if calls is not None:
            calls.append((token_id, mechanism, now))
        return tokens.get((token_id, mechanism))

    def scram_credential(user, mechanism):  # must not be used for token logins
        raise AssertionError("scram_credential called for a token login")

    return ServerCallbacks(token_credential=token_credential, scram_credential=scram_credential)


def test_tokenauth_extension_parsed_and_token_credential_used():
    hmac_b64 = base64.b64encode(b"token-hmac-bytes").decode()
    cred = credential_from_password("SCRAM-SHA-512", hmac_b64, 4096)
    owner = KafkaPrincipal("User", "alice")
    tokens = {("tok1", "SCRAM-SHA-512"): TokenCredential(cred, owner, 5_000, "tok1")}
    calls = []
    c = registry.create_client("SCRAM-SHA-512", server_host="h", jaas_options={
        "username": "tok1", "password": hmac_b64, "tokenauth": "true"})
    first = c.evaluate_challenge(b"")
    assert first.endswith(b",tokenauth=true")
    s = mech_server("SCRAM-SHA-512", callbacks=_token_callbacks(tokens, calls))
    token = first
    challenge = s.evaluate_response(token, 1_000)
    c.evaluate_challenge(s.evaluate_response(c.evaluate_challenge(challenge), 1_000))
    assert c.is_complete() and s.is_complete()
    assert calls == [("tok1", "SCRAM-SHA-512", 1_000)]
    assert s.get_authorization_id() == "alice"
    assert s.token_authenticated is True
    assert s.get_negotiated_property("tokenauth") is True
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") == 5_000
    assert s.extensions == {"tokenauth": "true"}


def test_tokenauth_false_uses_user_credentials():
    store = make_store({("alice", "SCRAM-SHA-256"): "pw"})
    s = mech_server("SCRAM-SHA-256", store)
    c = client("SCRAM-SHA-256", "alice", "pw", extensions={"tokenauth": "false", "other": "x"})
    exchange(c, s)
    assert not s.token_authenticated
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") is None


@pytest.mark.parametrize("case", ["unknown", "expired", "wrong-password"])
def test_token_failures_are_generic(case):
    cred = credential_from_password("SCRAM-SHA-256", "hmac", 4096)
    expiry = 500 if case == "expired" else 5_000
    tokens = {("tok1", "SCRAM-SHA-256"): TokenCredential(
        cred, KafkaPrincipal("User", "alice"), expiry, "tok1")}
    c = registry.create_client("SCRAM-SHA-256", server_host="h", jaas_options={
        "username": "tok2" if case == "unknown" else "tok1",
        "password": "bad" if case == "wrong-password" else "hmac", "tokenauth": "TRUE"})
    s = mech_server("SCRAM-SHA-256", callbacks=_token_callbacks(tokens))
    with pytest.raises(SaslAuthenticationError) as exc:
        exchange(c, s, now=1_000)
    assert str(exc.value) == GENERIC.format("SCRAM-SHA-256")


# ------------------------------------------------------ real peer: scramp

@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kchannel_client_against_scramp_server(mech):
    m = scramp.ScramMechanism(mech)
    auth_info = m.make_auth_info("s3cret", iteration_count=4096)
    srv = m.make_server(lambda username: auth_info if username == "al,i=ce" else None)
    c = client(mech, "al,i=ce", "s3cret")
    srv.set_client_first(c.evaluate_challenge(b"").decode())
    final = c.evaluate_challenge(srv.get_server_first().encode())
    srv.set_client_final(final.decode())
    assert c.evaluate_challenge(srv.get_server_final().encode()) is None
    assert c.is_complete()


@pytest.mark.interop
def test_kchannel_client_against_scramp_server_wrong_password():
    m = scramp.ScramMechanism("SCRAM-SHA-256")
    auth_info = m.make_auth_info("s3cret", iteration_count=4096)
    srv = m.make_server(lambda username: auth_info)
    c = client("SCRAM-SHA-256", "bob", "nope")
    srv.set_client_first(c.evaluate_challenge(b"").decode())
    final = c.evaluate_challenge(srv.get_server_first().encode())
    with pytest.raises(scramp.ScramException):
        srv.set_client_final(final.decode())
    # scramp's server-final in that case carries e=...; our client fails on it.
    with pytest.raises(SaslAuthenticationError) as exc:
        c.evaluate_challenge(srv.get_server_final().encode())
    assert "failed with error: invalid-proof" in str(exc.value)


@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scramp_client_against_kchannel_server(mech):
    store = make_store({("bob=1,x", mech): "pw"})
    cl = scramp.ScramClient([mech], "bob=1,x", "pw")
    s = mech_server(mech, store)
    cl.set_server_first(s.evaluate_response(cl.get_client_first().encode(), 0).decode())
    cl.set_server_final(s.evaluate_response(cl.get_client_final().encode(), 0).decode())
    assert s.get_authorization_id() == "bob=1,x"


@pytest.mark.interop
def test_scramp_client_wrong_password_against_kchannel_server():
    store = make_store({("bob", "SCRAM-SHA-256"): "pw"})
    cl = scramp.ScramClient(["SCRAM-SHA-256"], "bob", "bad")
    s = mech_server("SCRAM-SHA-256", store)
    cl.set_server_first(s.evaluate_response(cl.get_client_first().encode(), 0).decode())
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(cl.get_client_final().encode(), 0)


@pytest.mark.interop
def test_credentials_made_by_scramp_verify_in_kchannel_server():
    m = scramp.ScramMechanism("SCRAM-SHA-256")
    salt, stored, server_key, iterations = m.make_auth_info("pw", iteration_count=8192)
    store = InMemoryScramCredentialStore()
    store.put("carol", "SCRAM-SHA-256", ScramCredential(salt, stored, server_key, iterations))
    s = exchange(client("SCRAM-SHA-256", "carol", "pw"), mech_server("SCRAM-SHA-256", store))
    assert s.get_authorization_id() == "carol"


# ---------------------------------------------------------- fail closed

def test_server_after_completion_refuses_more():
    store = make_store({("alice", "SCRAM-SHA-256"): "pw"})
    s = exchange(client("SCRAM-SHA-256", "alice", "pw"), mech_server("SCRAM-SHA-256", store))
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(b"n,,n=alice,r=abc", 0)


_STORE = make_store({("alice", "SCRAM-SHA-256"): "pw"})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.one_of(st.binary(max_size=200),
                       st.builds(lambda s: b"n,,n=" + s, st.binary(max_size=80))),
       second=st.binary(max_size=200), step=st.integers(0, 2))
def test_arbitrary_bytes_fail_closed(first, second, step):
    s = mech_server("SCRAM-SHA-256", _STORE)
    ok_first = b"n,,n=alice,r=abc"
    try:
        if step == 0:
            s.evaluate_response(first, 0)
        elif step == 1:
            s.evaluate_response(ok_first, 0)
            s.evaluate_response(second, 0)
        else:
            # After a completed exchange nothing more is accepted.
            exchange(client("SCRAM-SHA-256", "alice", "pw"), s)
            try:
                s.evaluate_response(second, 0)
            except SaslAuthenticationError:
                return
            raise AssertionError("accepted a message after completion")
    except SaslAuthenticationError:
        assert not s.is_complete()
        with pytest.raises(SaslAuthenticationError):
            s.evaluate_response(ok_first, 0)
        return
    # Anything accepted must be a well-formed message, never a completion.
    assert not s.is_complete()


class _Dummy:
    pass


def test_registry_register_replaces_and_lazy_builtins():
    calls = []
    registry.register("X-TEST", lambda m, **kw: calls.append(("client", m, kw)) or _Dummy(),
                      lambda m, **kw: calls.append(("server", m, kw)) or _Dummy())
    try:
        assert isinstance(registry.create_client("X-TEST", jaas_options={"a": "b"},
                                                 server_host="h"), _Dummy)
        assert isinstance(registry.create_server("X-TEST", callbacks=ServerCallbacks(), now=5),
                          _Dummy)
        assert calls[0][2]["jaas_options"] == {"a": "b"} and calls[0][2]["server_host"] == "h"
        assert calls[1][2]["now"] == 5 and isinstance(calls[1][2]["callbacks"], ServerCallbacks)
    finally:
        registry._REGISTRY.pop("X-TEST", None)
    # Built-ins are imported on first use.
    for name in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        c = registry.create_client(name, jaas_options={"username": "u", "password": "p"})
        assert c.mechanism_name == name


def test_registry_lists_scram_and_rejects_unknown():
    from kchannel.errors import UnsupportedSaslMechanismError
    assert {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"} <= set(registry.supported_mechanisms())
    with pytest.raises(UnsupportedSaslMechanismError):
        registry.create_server("SCRAM-SHA-1", callbacks=ServerCallbacks(), now=0)


def test_unknown_user_salt_same_on_every_server_sharing_a_store(tmp_path):
    from kchannel.security.sasl.scram_store import SqliteScramCredentialStore

    def salt_shown(store):
        s = mech_server("SCRAM-SHA-256", store)
        first = s.evaluate_response(b"n,,n=ghost,r=abc", 0)
        return scram.ServerFirstMessage.parse(first).salt

    path = tmp_path / "scram-credentials.db"
    with SqliteScramCredentialStore(path) as one, SqliteScramCredentialStore(path) as two:
        assert salt_shown(one) == salt_shown(two)
        assert ServerCallbacks.default(store=one).scram_secret == one.secret()
    with SqliteScramCredentialStore(path) as restarted:
        assert salt_shown(restarted) == salt_shown(SqliteScramCredentialStore(path))
    with SqliteScramCredentialStore(tmp_path / "other.db") as other:
        assert salt_shown(other) != salt_shown(SqliteScramCredentialStore(path))


# ----------------------------------------------------------------------
# PBKDF2 (SCRAM's Hi) on both twins: pure (cryptography) and compiled
# (kchannel._cscram), against hashlib and RFC test vectors.
# ----------------------------------------------------------------------

def test_rfc7914_vectors(impl):
    hi = impl.scram.pbkdf2_hmac
    assert hi("sha256", b"passwd", b"salt", 1).hex() == \
        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
    assert hi("sha256", b"Password", b"NaCl", 80000).hex() == \
        "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56"


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
@pytest.mark.parametrize("iterations", [1, 2, 3, 4096])
@pytest.mark.parametrize("password", [b"", b"pencil", b"x" * 64, b"y" * 129, bytes(range(256))])
def test_matches_hashlib(impl, hash_name, iterations, password):
    for salt in (b"", b"W22ZaJ0SNY7soEsUEjb6gQ", b"s" * 300):
        assert impl.scram.pbkdf2_hmac(hash_name, password, salt, iterations) == \
            hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)


@settings(max_examples=60, deadline=None)
@given(password=st.binary(max_size=200), salt=st.binary(max_size=100),
       iterations=st.integers(1, 50), hash_name=st.sampled_from(["sha256", "sha512"]))
def test_property_matches_hashlib_both_twins(password, salt, iterations, hash_name):
    from tests.fixtures.impl import import_twin
    pure = import_twin("pure", "scram")
    expected = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    assert pure.pbkdf2_hmac(hash_name, password, salt, iterations) == expected
    try:
        compiled = __import__("kchannel._cscram", fromlist=["x"])
    except ImportError:
        return
    assert compiled.pbkdf2_hmac(hash_name, bytearray(password), memoryview(salt),
                                iterations) == expected


def test_rejects_bad_arguments(impl):
    with pytest.raises(ValueError):
        impl.scram.pbkdf2_hmac("md5", b"p", b"s", 1)
    with pytest.raises(ValueError):
        impl.scram.pbkdf2_hmac("sha256", b"p", b"s", 0)


# ----------------------------------------------------------------------
# An unknown SCRAM user costs the server the work a real one costs.
# 
# No timed assertions here (benchmarks/scram_timing.py prints the two timing
# distributions): these tests check the means.  The server looks up the
# stand-in credential for every login, existing user or not (derived each
# time: a cache would make recently active names faster); the stand-in is a
# deterministic function of (secret, mechanism, user name); and the SQLite
# store reads and decodes one real row for every lookup, hit or miss, whatever
# the name's place in key order.
# ----------------------------------------------------------------------

@pytest.fixture
def stand_in_calls(monkeypatch):
    calls = []
    original = scram.stand_in_credential

    def spy(mech, username, secret=None):
        calls.append((mech.mechanism_name, username, secret))
        return original(mech, username, secret)

    monkeypatch.setattr(scram, "stand_in_credential", spy)
    return calls


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_stand_in_is_derived_for_existing_and_unknown_users(stand_in_calls, tmp_path, kind):
    store = (InMemoryScramCredentialStore() if kind == "memory"
             else SqliteScramCredentialStore(tmp_path / "c.db"))
    store.put("alice", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "pw"))
    callbacks = ServerCallbacks.default(store=store)
    real = store.get("alice", "SCRAM-SHA-512")
    for user in ("alice", "nobody"):
        server = create_server("SCRAM-SHA-512", callbacks=callbacks)
        first = scram.ServerFirstMessage.parse(
            server.evaluate_response(f"n,,n={user},r=abc".encode(), 0))
        # The existing user is shown its own salt, the stand-in is not used.
        assert (first.salt == real.salt) == (user == "alice")
    assert stand_in_calls == [("SCRAM-SHA-512", "alice", store.secret()),
                              ("SCRAM-SHA-512", "nobody", store.secret())]
    store.close()


def test_stand_in_is_derived_at_every_login_of_every_name(tmp_path, monkeypatch):
    # No cache: a name asked recently (an active user) must cost what a name
    # never asked costs, so the stand-in is derived at every login of every
    # name, existing or not (a cache showed as a timing signal).
    derived = []
    original = scram._fake_credential
    monkeypatch.setattr(scram, "_fake_credential",
                        lambda mech, user, secret=None: derived.append(user)
                        or original(mech, user, secret))
    store = SqliteScramCredentialStore(tmp_path / "c.db")
    store.put("alice", "SCRAM-SHA-512", credential_from_password("SCRAM-SHA-512", "pw"))
    callbacks = ServerCallbacks.default(store=store)
    salts = {}
    for _ in range(3):
        for user in ("alice", "nobody"):
            server = create_server("SCRAM-SHA-512", callbacks=callbacks)
            first = scram.ServerFirstMessage.parse(
                server.evaluate_response(f"n,,n={user},r=abc".encode(), 0))
            salts.setdefault(user, set()).add(first.salt)
    assert derived == ["alice", "nobody"] * 3
    # the unknown user is shown one salt, however often it asks
    assert salts["nobody"] == {original(scram.SCRAM_SHA_512, "nobody", store.secret()).salt}
    store.close()


def test_stand_in_is_deterministic_and_keyed():
    secret = b"k" * 32
    sha256, sha512 = scram.SCRAM_SHA_256, scram.SCRAM_SHA_512
    a = scram._fake_credential(sha256, "mallory", secret)
    assert a == scram._fake_credential(sha256, "mallory", secret)
    assert a.iterations == 4096
    assert len(a.stored_key) == len(a.server_key) == 32 != a.stored_key.count(0)
    assert a.stored_key != a.server_key
    assert len(scram._fake_credential(sha512, "mallory", secret).stored_key) == 64
    for other in (scram._fake_credential(sha512, "mallory", secret),
                  scram._fake_credential(sha256, "mallory2", secret),
                  scram._fake_credential(sha256, "mallory", b"j" * 32)):
        assert other.salt != a.salt and other.stored_key != a.stored_key
    # The salt derivation is pinned: servers of different versions sharing
    # a store must show an unknown user the same salt.
    digest = hmac.new(secret, b"SCRAM-SHA-256\0mallory", hashlib.sha256).digest()
    assert a.salt == scram._base36(int.from_bytes(digest[:17], "big") >> 6).encode()


def test_sqlite_lookup_decodes_a_row_for_hits_and_misses(tmp_path, monkeypatch):
    store = SqliteScramCredentialStore(tmp_path / "c.db")
    assert store.get("anyone", "SCRAM-SHA-256") is None      # empty store
    creds = {}
    for user, mech in [("bob", "SCRAM-SHA-256"), ("dave", "SCRAM-SHA-256"),
                       ("dave", "SCRAM-SHA-512")]:
        creds[(user, mech)] = credential_from_password(mech, user)
        store.put(user, mech, creds[(user, mech)])
    decoded = []
    original = SqliteScramCredentialStore._row_to_credential
    monkeypatch.setattr(SqliteScramCredentialStore, "_row_to_credential",
                        staticmethod(lambda row: decoded.append(row) or original(row)))
    # Before the first key, between keys, after the last, same user other
    # mechanism, a prefix of a user, and the hits themselves.
    for user in ("a", "bob", "bo", "bobby", "carol", "dave", "zed", "\U0010ffff"):
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            decoded.clear()
            assert store.get(user, mech) == creds.get((user, mech))
            assert len(decoded) == 1, (user, mech)
    store.close()


# ----------------------------------------------------------------------
# SCRAM over real sockets: kchannel's Server with the SCRAM credential store
# and the Describe/AlterUserScramCredentials handlers, driven by ``kchannel
# configs --bootstrap-server``, kchannel's client, and real Kafka clients
# (librdkafka through confluent-kafka, kafka-python).
# ----------------------------------------------------------------------

@pytest.fixture
def scram_server(tmp_path):
    store = SqliteScramCredentialStore(tmp_path / "scram-credentials.db")
    store.put("admin", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "admin-secret"))
    server = Server({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAIN_TEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAIN_TEXT:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "log.dirs": str(tmp_path),
        "super.users": "User:admin",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }, sasl_kwargs={"scram_store": store})
    register_scram_handlers(server, store)
    server.start()
    try:
        yield server, store, tmp_path
    finally:
        server.shutdown()
        store.close()


def scram_client_configs(mechanism, username, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{SCRAM_MODULE} required username="{username}" '
                                f'password="{password}";'}


def test_configs_cli_over_the_api_then_login(scram_server):
    server, store, tmp_path = scram_server
    port = server.bound_port("SASL_PLAINTEXT")
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f'sasl.jaas.config={SCRAM_MODULE} required username="admin" '
                     'password="admin-secret";\n')
    target = ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(props)]
    r = kc(*target, "--alter", "--add-config",
           "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
           "SCRAM-SHA-512=[password=alice-secret]",
           "--entity-type", "users", "--entity-name", "alice")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user alice.\n"), r.stderr
    r = kc(*target, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert r.stdout == ("SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    r = kc(*target, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=16385,password=x]",
           "--user", "bob")
    assert r.returncode == 1
    assert "UnacceptableCredentialException: Too many iterations" in r.stderr

    # alice can now log in with either mechanism, but as she is not a super
    # user she may neither read nor change credentials.
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        c = KafkaClient(scram_client_configs(mech, "alice", "alice-secret"))
        try:
            c.connect("127.0.0.1", port)
            body = c.request(int(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS), {"users": None})
            assert (body["error_code"], body["error_message"], body["results"]) == (
                31, "Cluster authorization failed.", [])
        finally:
            c.close()
    alice_props = tmp_path / "alice.properties"
    alice_props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                           f'sasl.jaas.config={SCRAM_MODULE} required username="alice" '
                           'password="alice-secret";\n')
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(alice_props),
           "--alter", "--add-config", "SCRAM-SHA-256=[password=stolen]", "--user", "admin")
    assert r.returncode == 1
    assert "ClusterAuthorizationException: Cluster authorization failed." in r.stderr
    r = kc(*target, "--describe", "--entity-type", "users")
    assert r.stdout == ("SCRAM credential configs for user-principal 'admin' are "
                        "SCRAM-SHA-256=iterations=4096\n"
                        "SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")

    r = kc(*target, "--alter", "--delete-config", "SCRAM-SHA-512", "--user", "alice")
    assert r.returncode == 0
    c = KafkaClient(scram_client_configs("SCRAM-SHA-512", "alice", "alice-secret"))
    with pytest.raises(SaslAuthenticationError) as exc:
        c.connect("127.0.0.1", port)
    c.close()
    assert GENERIC.format("SCRAM-SHA-512") in str(exc.value)


@pytest.mark.parametrize("user,password", [("admin", "wrong"), ("nobody", "wrong")])
def test_wrong_password_and_unknown_user_same_error(scram_server, user, password):
    server, _, _ = scram_server
    c = KafkaClient(scram_client_configs("SCRAM-SHA-256", user, password))
    with pytest.raises(SaslAuthenticationError) as exc:
        c.connect("127.0.0.1", server.bound_port("SASL_PLAINTEXT"))
    c.close()
    assert GENERIC.format("SCRAM-SHA-256") in str(exc.value)


def test_anonymous_principal_not_authorized(scram_server):
    server, _, _ = scram_server
    port = server.bound_port("PLAIN_TEXT")
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--describe", "--entity-type", "users")
    assert r.returncode == 1
    assert "ClusterAuthorizationException" in r.stderr
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--alter", "--add-config",
           "SCRAM-SHA-256=[password=x]", "--user", "mallory")
    assert r.returncode == 1
    assert "ClusterAuthorizationException: Cluster authorization failed." in r.stderr


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_scram_client(scram_server, mech):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    server, store, _ = scram_server
    store.put("rdk", mech, credential_from_password(mech, "rdk-secret", 8192))
    port = server.bound_port("SASL_PLAINTEXT")

    errors = []

    def metadata(password, timeout):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                             "sasl.username": "rdk", "sasl.password": password,
                             "error_cb": errors.append})
        try:
            return admin.list_topics(timeout=timeout)
        finally:
            admin.poll(0.5)  # serves error_cb

    md = metadata("rdk-secret", 10)
    assert md.brokers and md.topics == {}
    assert errors == []
    with pytest.raises(confluent_kafka.KafkaException):
        metadata("wrong", 3)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION
               and GENERIC.format(mech) in e.str() for e in errors), errors


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_scram_client(scram_server, mech):
    kafka = pytest.importorskip("kafka")
    server, store, _ = scram_server
    store.put("kp-user", mech, credential_from_password(mech, "kp-secret"))
    port = server.bound_port("SASL_PLAINTEXT")

    def connect(password, timeout_ms=10000):
        return kafka.KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mech, sasl_plain_username="kp-user",
            sasl_plain_password=password, request_timeout_ms=timeout_ms)

    admin = connect("kp-secret")
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()


@pytest.mark.slow
@pytest.mark.interop
def test_librdkafka_admin_alters_and_describes_credentials(scram_server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
        UserScramCredentialUpsertion)
    server, store, _ = scram_server
    port = server.bound_port("SASL_PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    # librdkafka computes the salted password itself (as Kafka's admin client).
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "rdk-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"pw-512"),
        UserScramCredentialUpsertion(
            "rdk-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw-256",
            b"fixed-salt"),
    ])
    for f in futures.values():
        f.result(timeout=10)
    assert store.get("rdk-user", "SCRAM-SHA-256").salt == b"fixed-salt"
    assert store.get("rdk-user", "SCRAM-SHA-512").iterations == 8192

    described = admin.describe_user_scram_credentials(["rdk-user"])["rdk-user"].result(timeout=10)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]

    # The credentials librdkafka created work for logging in.
    for mech, password in (("SCRAM-SHA-256", "pw-256"), ("SCRAM-SHA-512", "pw-512")):
        c = KafkaClient(scram_client_configs(mech, "rdk-user", password))
        try:
            c.connect("127.0.0.1", port)
        finally:
            c.close()

    # Kafka's error codes surface as librdkafka errors.
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "low", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")])
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        futures["low"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        futures["nobody"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
