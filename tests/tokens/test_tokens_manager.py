"""TokenManager (sans-I/O): Kafka's token arithmetic, request checks, errors,
expiry sweep, SCRAM credentials; token encoding; the memory and SQLite
stores."""
import base64
import hashlib
import hmac
import json
import re

import pytest

from kchannel.principal import ANONYMOUS, KafkaPrincipal
from kchannel.protocol.errors import Errors
from kchannel.tokens.manager import (SuperUserTokenAuthorizer, TokenAuthorizer, TokenManager,
                                     allow_token_requests)
from kchannel.tokens import open_token_store
from kchannel.tokens.store import InMemoryTokenStore, SqliteTokenStore
from kchannel.tokens.token import (TokenInformation, create_hmac, derive_scram_credential,
                                   desanitize, generate_token_id, sanitize,
                                   token_info_from_json, token_info_to_json)

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
CAROL = KafkaPrincipal("User", "carol")
T0 = 1_700_000_000_000
DAY = 86400000
WEEK = 604800000


def manager(**kw):
    kw.setdefault("store", InMemoryTokenStore())
    return TokenManager("testKey", **kw)


# ------------------------------------------------------------- create

def test_create_defaults_and_hmac():
    m = manager()
    r = m.create_token(ALICE, renewers=[BOB], now=T0)
    assert r.error is Errors.NONE
    assert (r.owner, r.token_requester) == (ALICE, ALICE)
    assert (r.issue_timestamp, r.expiry_timestamp, r.max_timestamp) == (T0, T0 + DAY, T0 + WEEK)
    # Uuid.randomUuid().toString(): 22 chars of URL-safe base64, no leading '-'.
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", r.token_id)
    expected = hmac.new(b"testKey", r.token_id.encode(), hashlib.sha512).digest()
    assert r.hmac == expected == create_hmac(r.token_id, "testKey")
    info = m.get_token(r.token_id).token_info
    assert info.renewers == [BOB]


@pytest.mark.parametrize("requested,max_ts,expiry_ts", [
    (-1, T0 + WEEK, T0 + DAY),          # server maximum
    (0, T0 + WEEK, T0 + DAY),           # non-positive: server maximum
    (3600000, T0 + 3600000, T0 + 3600000),   # smaller: expiry capped by max
    (2 * WEEK, T0 + WEEK, T0 + DAY),    # larger than the server's: capped
])
def test_create_lifetimes(requested, max_ts, expiry_ts):
    r = manager().create_token(ALICE, max_lifetime_ms=requested, now=T0)
    assert (r.max_timestamp, r.expiry_timestamp) == (max_ts, expiry_ts)


def test_create_owner_for_someone_else_needs_authorizer():
    m = manager()
    r = m.create_token(ALICE, owner=BOB, now=T0)
    assert r.error is Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert (r.owner, r.token_requester, r.token_id, r.hmac) == (BOB, ALICE, "", b"")
    assert (r.issue_timestamp, r.expiry_timestamp, r.max_timestamp) == (-1, -1, -1)
    # Owner given as oneself is no delegation.
    assert m.create_token(ALICE, owner=ALICE, now=T0).error is Errors.NONE
    m2 = manager(authorizer=SuperUserTokenAuthorizer(["User:alice"]))
    r = m2.create_token(ALICE, owner=BOB, now=T0)
    assert r.error is Errors.NONE and (r.owner, r.token_requester) == (BOB, ALICE)
    # The requester may see it (ownerOrRenewer includes the requester) but
    # not renew it (only owner and renewers may).
    assert [t.token_info.token_id for t in m2.describe_tokens(ALICE, now=T0)[1]] == [r.token_id]
    assert m2.renew_token(ALICE, r.hmac, now=T0)[0] is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    assert m2.renew_token(BOB, r.hmac, now=T0)[0] is Errors.NONE


def test_create_non_user_renewer():
    r = manager().create_token(ALICE, renewers=[BOB, KafkaPrincipal("Group", "Renewer4")], now=T0)
    assert r.error is Errors.INVALID_PRINCIPAL_TYPE


def test_disabled_without_secret():
    for secret in (None, ""):
        m = TokenManager(secret)
        assert not m.enabled
        assert m.create_token(ALICE, now=T0).error is Errors.DELEGATION_TOKEN_AUTH_DISABLED
        assert m.renew_token(ALICE, b"x", now=T0) == (Errors.DELEGATION_TOKEN_AUTH_DISABLED, -1)
        assert m.expire_token(ALICE, b"x", now=T0) == (Errors.DELEGATION_TOKEN_AUTH_DISABLED, -1)
        assert m.describe_tokens(ALICE, now=T0) == (Errors.DELEGATION_TOKEN_AUTH_DISABLED, [])
        assert m.token_credential("x", "SCRAM-SHA-256", T0) is None


@pytest.mark.parametrize("principal,protocol,allowed", [
    (ALICE, "PLAINTEXT", False),
    (ANONYMOUS, "SSL", False),                 # 1-way SSL
    (ALICE, "SSL", True),                      # client certificate
    (ALICE, "SASL_PLAINTEXT", True),
    (ALICE, "SASL_SSL", True),
    (ALICE.with_token_authenticated(True), "SASL_SSL", False),
])
def test_allow_token_requests(principal, protocol, allowed):
    assert allow_token_requests(principal, protocol) is allowed
    m = manager()
    want = Errors.NONE if allowed else Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert m.create_token(principal, now=T0, security_protocol=protocol).error is want
    assert m.describe_tokens(principal, now=T0, security_protocol=protocol)[0] is want


def test_request_not_allowed_comes_before_disabled():
    m = TokenManager(None)
    assert m.create_token(ALICE, now=T0, security_protocol="PLAINTEXT").error is \
        Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert m.renew_token(ALICE, b"", now=T0, security_protocol="PLAINTEXT")[0] is \
        Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


# -------------------------------------------------------------- renew

def test_renew_kraft():
    m = manager()
    r = m.create_token(ALICE, renewers=[BOB], now=T0)
    # Positive period: capped at the configured expiry time.
    assert m.renew_token(BOB, r.hmac, 1000, now=T0 + 10) == (Errors.NONE, T0 + 1010)
    assert m.renew_token(ALICE, r.hmac, 2 * DAY, now=T0 + 20) == (Errors.NONE, T0 + 20 + DAY)
    # Non-positive: the configured expiry time.
    assert m.renew_token(ALICE, r.hmac, 0, now=T0 + 30) == (Errors.NONE, T0 + 30 + DAY)
    assert m.renew_token(ALICE, r.hmac, -1, now=T0 + 40) == (Errors.NONE, T0 + 40 + DAY)
    # Never past the max timestamp.
    short = m.create_token(ALICE, max_lifetime_ms=3600000, now=T0)
    assert m.renew_token(ALICE, short.hmac, -1, now=T0 + 3599995) == (Errors.NONE, T0 + 3600000)
    assert m.get_token(short.token_id).token_info.expiry_timestamp == T0 + 3600000
    assert m.renew_token(CAROL, r.hmac, now=T0) == (Errors.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    assert m.renew_token(ALICE, b"nope", now=T0) == (Errors.DELEGATION_TOKEN_NOT_FOUND, -1)
    # Expired is checked before ownership by the KRaft controller.
    assert m.renew_token(CAROL, r.hmac, now=T0 + WEEK + 1) == (Errors.DELEGATION_TOKEN_EXPIRED, -1)


def test_renew_zk_variant():
    m = manager(variant="zk")
    r = m.create_token(ALICE, now=T0)
    assert m.renew_token(ALICE, r.hmac, 2 * DAY, now=T0 + 1) == (Errors.NONE, T0 + 1 + 2 * DAY)
    assert m.renew_token(ALICE, r.hmac, -1, now=T0 + 2) == (Errors.NONE, T0 + 2 + DAY)
    assert m.renew_token(ALICE, r.hmac, 0, now=T0 + 3) == (Errors.NONE, T0 + 3)
    # ZooKeeper mode checks ownership first.
    assert m.renew_token(CAROL, r.hmac, now=T0 + 2 * WEEK) == \
        (Errors.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    assert m.renew_token(ALICE, r.hmac, now=T0 + 2 * WEEK) == (Errors.DELEGATION_TOKEN_EXPIRED, -1)


# ------------------------------------------------------------- expire

def test_expire():
    m = manager()
    r = m.create_token(ALICE, renewers=[BOB], now=T0)
    assert m.expire_token(CAROL, r.hmac, -1, now=T0) == (Errors.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    assert m.expire_token(BOB, r.hmac, 500, now=T0 + 1) == (Errors.NONE, T0 + 501)
    assert m.expire_token(ALICE, r.hmac, 2 * WEEK, now=T0 + 2) == (Errors.NONE, T0 + WEEK)
    assert m.expire_token(ALICE, r.hmac, 0, now=T0 + 3) == (Errors.NONE, T0 + 3)
    # Past expiry: a non-negative period is refused, a negative one removes.
    assert m.expire_token(ALICE, r.hmac, 10, now=T0 + 5) == (Errors.DELEGATION_TOKEN_EXPIRED, -1)
    assert m.renew_token(ALICE, r.hmac, now=T0 + 5) == (Errors.DELEGATION_TOKEN_EXPIRED, -1)
    assert m.expire_token(ALICE, r.hmac, -1, now=T0 + 6) == (Errors.NONE, T0 + 6)
    assert m.get_token(r.token_id) is None
    assert m.expire_token(ALICE, r.hmac, -1, now=T0 + 7) == (Errors.DELEGATION_TOKEN_NOT_FOUND, -1)
    assert m.renew_token(ALICE, r.hmac, now=T0 + 7) == (Errors.DELEGATION_TOKEN_NOT_FOUND, -1)


def test_hmac_as_base64_text_is_accepted_and_garbage_is_not_found():
    m = manager()
    r = m.create_token(ALICE, now=T0)
    assert m.renew_token(ALICE, base64.b64encode(r.hmac).decode(), now=T0)[0] is Errors.NONE
    assert m.renew_token(ALICE, "not base64!", now=T0)[0] is Errors.DELEGATION_TOKEN_NOT_FOUND
    assert m.renew_token(ALICE, r.hmac[:-1], now=T0)[0] is Errors.DELEGATION_TOKEN_NOT_FOUND


# ----------------------------------------------------------- describe

def test_describe_filters():
    m = manager()
    t1 = m.create_token(ALICE, renewers=[KafkaPrincipal("User", "renewer1")], now=T0)
    t2 = m.create_token(ALICE, renewers=[KafkaPrincipal("User", "renewer2")], now=T0 + 1)
    t3 = m.create_token(CAROL, now=T0 + 2)
    ids = lambda res: [t.token_info.token_id for t in res[1]]  # noqa: E731
    assert ids(m.describe_tokens(ALICE, None, now=T0)) == [t1.token_id, t2.token_id]
    assert ids(m.describe_tokens(ALICE, [], now=T0)) == []
    assert ids(m.describe_tokens(ALICE, [KafkaPrincipal("User", "renewer2")], now=T0)) == \
        [t2.token_id]
    assert ids(m.describe_tokens(ALICE, [KafkaPrincipal("User", "Unknown")], now=T0)) == []
    # A renewer sees the token; others don't without the authorizer.
    assert ids(m.describe_tokens(KafkaPrincipal("User", "renewer1"), now=T0)) == [t1.token_id]
    assert ids(m.describe_tokens(BOB, now=T0)) == []
    assert ids(m.describe_tokens(ALICE, [CAROL], now=T0)) == []
    tokens = m.describe_tokens(CAROL, now=T0)[1]
    assert [(t.token_info.token_id, t.hmac) for t in tokens] == [(t3.token_id, t3.hmac)]

    class LetBobSeeAlice(TokenAuthorizer):
        def authorize_describe_token(self, requester, info):
            return requester == BOB and info.owner == ALICE

    m.authorizer = LetBobSeeAlice()
    assert ids(m.describe_tokens(BOB, now=T0)) == [t1.token_id, t2.token_id]


def test_describe_looks_up_only_the_requesters_tokens():
    # An authorizer that lets no one see others' tokens is never asked per
    # token: Describe costs a look-up of the requester's own tokens.
    class Counting(TokenAuthorizer):
        asked = 0

        def authorize_describe_token(self, requester, info):
            Counting.asked += 1
            return False

        def describes_others(self, requester):
            return False

    m = manager(authorizer=Counting())
    mine = m.create_token(BOB, renewers=[ALICE], now=T0)
    for i in range(50):
        m.create_token(KafkaPrincipal("User", f"u{i}"), now=T0)
    ids = lambda res: [t.token_info.token_id for t in res[1]]  # noqa: E731
    assert ids(m.describe_tokens(ALICE, now=T0)) == [mine.token_id]     # a renewer
    assert ids(m.describe_tokens(BOB, [ALICE], now=T0)) == [mine.token_id]
    assert ids(m.describe_tokens(CAROL, now=T0)) == []
    assert Counting.asked == 0
    # A super user still sees every token, and an owner's filter is looked up.
    m.authorizer = SuperUserTokenAuthorizer(["User:carol"])
    assert len(ids(m.describe_tokens(CAROL, now=T0))) == 51
    assert ids(m.describe_tokens(CAROL, [KafkaPrincipal("User", "u7")], now=T0)) == \
        [t.token_id for t in m.tokens() if t.owner.name == "u7"]
    # The index follows expiry and removal.
    assert m.expire_token(BOB, mine.hmac, -1, now=T0)[0] is Errors.NONE
    assert ids(m.describe_tokens(ALICE, now=T0)) == []


def test_per_owner_token_limit():
    m = manager(max_tokens_per_owner=2, expiry_time_ms=1000)
    assert [m.create_token(ALICE, now=T0).error for _ in range(3)] == \
        [Errors.NONE, Errors.NONE, Errors.POLICY_VIOLATION]
    # another owner has its own count; a token alice renews is not hers
    assert m.create_token(BOB, renewers=[ALICE], now=T0).error is Errors.NONE
    # expired tokens (not swept yet) do not count
    assert m.create_token(ALICE, now=T0 + 2000).error is Errors.NONE


# -------------------------------------------------------------- sweep

def test_expire_tokens_sweep():
    m = manager()
    short = m.create_token(ALICE, max_lifetime_ms=1500, now=T0)
    long_ = m.create_token(ALICE, now=T0)
    assert m.expire_tokens(T0 + 1500) == []          # not yet: strictly past
    assert m.expire_tokens(T0 + 1501) == [short.token_id]
    assert [t.token_id for t in m.tokens()] == [long_.token_id]
    assert m.token_credential(short.token_id, "SCRAM-SHA-256", T0) is None


# --------------------------------------------------------------- SCRAM

def _expected_credential(hash_name, password, salt, iterations):
    salted = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return (hashlib.new(hash_name, client_key).digest(),
            hmac.new(salted, b"Server Key", hash_name).digest())


@pytest.mark.parametrize("mechanism,hash_name", [("SCRAM-SHA-256", "sha256"),
                                                 ("SCRAM-SHA-512", "sha512")])
def test_token_credential_bytes(mechanism, hash_name):
    """Fixed secret, token id and salt give the StoredKey/ServerKey of RFC
    5802 computed here independently (password = base64 of the HMAC)."""
    token_id = "fixedTokenId_0123456AB"
    salt = b"2ypd9gb8y6v8k0vqg5at0q6bd"
    m = TokenManager("testKey", store=InMemoryTokenStore(),
                     token_id_factory=lambda: token_id, salt_factory=lambda tid, mech: salt)
    r = m.create_token(ALICE, now=T0)
    assert r.token_id == token_id
    mac = hmac.new(b"testKey", token_id.encode("utf-8"), hashlib.sha512).digest()
    assert r.hmac == mac
    password = base64.b64encode(mac)
    stored, server = _expected_credential(hash_name, password, salt, 4096)
    tc = m.token_credential(token_id, mechanism, T0 + 1)
    assert (tc.credential.salt, tc.credential.iterations) == (salt, 4096)
    assert tc.credential.stored_key == stored
    assert tc.credential.server_key == server
    assert (tc.owner, tc.expiry_ms, tc.token_id) == (ALICE, T0 + DAY, token_id)
    assert derive_scram_credential(mechanism, password.decode(), salt) == tc.credential


def test_token_credential_cached_and_random_salt():
    calls = []

    def salt(tid, mech):
        calls.append((tid, mech))
        return f"salt-{len(calls)}".encode()

    m = manager(salt_factory=salt)
    r = m.create_token(ALICE, now=T0)
    a = m.token_credential(r.token_id, "SCRAM-SHA-512", T0)
    b = m.token_credential(r.token_id, "SCRAM-SHA-512", T0 + 1)
    assert a.credential is b.credential and calls == [(r.token_id, "SCRAM-SHA-512")]
    m.renew_token(ALICE, r.hmac, now=T0 + 2)    # the HMAC does not change: keep it
    assert m.token_credential(r.token_id, "SCRAM-SHA-512", T0 + 3).credential is a.credential
    assert m.token_credential(r.token_id, "PLAIN", T0) is None
    assert m.token_credential("unknown", "SCRAM-SHA-512", T0) is None
    # Default salts are Kafka's: distinct random base-36 strings per token.
    m2 = manager()
    s1 = m2.token_credential(m2.create_token(ALICE, now=T0).token_id, "SCRAM-SHA-256", T0)
    s2 = m2.token_credential(m2.create_token(ALICE, now=T0).token_id, "SCRAM-SHA-256", T0)
    assert s1.credential.salt != s2.credential.salt
    assert re.fullmatch(rb"[0-9a-z]+", s1.credential.salt)


def test_different_secret_different_hmac():
    assert create_hmac("abc", "k1") != create_hmac("abc", "k2")
    m1, m2 = manager(), TokenManager("otherKey", store=InMemoryTokenStore())
    r = m1.create_token(ALICE, now=T0)
    m2.store.put(m1.get_token(r.token_id).token_info)
    m2.sync()
    # Same token information, other secret: the first HMAC is unknown there.
    assert m2.renew_token(ALICE, r.hmac, now=T0)[0] is Errors.DELEGATION_TOKEN_NOT_FOUND


# ----------------------------------------------------- encoding, stores

def test_token_ids_unique_and_never_dash_first():
    ids = {generate_token_id() for _ in range(2000)}
    assert len(ids) == 2000 and not any(i.startswith("-") for i in ids)


def test_sanitize_like_java_urlencoder():
    assert sanitize("User:alice") == "User%3Aalice"
    assert sanitize("User:a b*~+é") == "User%3Aa%20b%2A%7E%2B%C3%A9"
    assert sanitize("a.b-c_d") == "a.b-c_d"
    for text in ("User:a b*~+é", "User:CN=x,O=y"):
        assert desanitize(sanitize(text)) == text
    assert desanitize("User%3Aa+b") == "User:a b"


def test_zk_json_round_trip_and_kafka_versions():
    info = TokenInformation("tid", ALICE, BOB, [CAROL, KafkaPrincipal("User", "x y")], 1, 3, 2)
    doc = json.loads(token_info_to_json(info))
    assert doc == {"version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Abob",
                   "renewers": ["User%3Acarol", "User%3Ax%20y"], "issueTimestamp": 1,
                   "maxTimestamp": 3, "expiryTimestamp": 2, "tokenId": "tid"}
    assert token_info_from_json(token_info_to_json(info)) == info
    # Version 1/2 documents have no tokenRequester: it is the owner.
    v1 = dict(doc, version=1)
    del v1["tokenRequester"]
    old = token_info_from_json(json.dumps(v1).encode())
    assert old.token_requester == ALICE
    for bad in (b"{", json.dumps(dict(doc, version=4)).encode(), b'{"version":3}'):
        with pytest.raises(ValueError):
            token_info_from_json(bad)
    assert token_info_from_json(b"") is None


def test_sqlite_store_survives_reopen_and_sees_other_connections(tmp_path):
    path = tmp_path / "delegation-tokens.db"
    s1, s2 = SqliteTokenStore(path), SqliteTokenStore(path)
    m1 = TokenManager("testKey", store=s1)
    m2 = TokenManager("testKey", store=s2)
    r = m1.create_token(ALICE, renewers=[BOB], now=T0)
    assert m2.get_token(r.token_id).hmac == r.hmac
    assert m2.renew_token(BOB, r.hmac, 1000, now=T0 + 1) == (Errors.NONE, T0 + 1001)
    assert m1.get_token(r.token_id).token_info.expiry_timestamp == T0 + 1001
    assert m1.expire_token(ALICE, r.hmac, -1, now=T0 + 2)[0] is Errors.NONE
    assert m2.token_credential(r.token_id, "SCRAM-SHA-256", T0 + 3) is None
    r2 = m2.create_token(CAROL, now=T0)
    s1.close()
    s2.close()
    s3 = SqliteTokenStore(path)
    m3 = TokenManager("testKey", store=s3)
    assert [t.token_id for t in m3.tokens()] == [r2.token_id]
    assert m3.get_token(r2.token_id).token_info.owner == CAROL
    s3.close()


def test_open_token_store_choices(tmp_path):
    s = open_token_store(props={"log.dirs": f"{tmp_path}/a,{tmp_path}/b"})
    assert isinstance(s, SqliteTokenStore) and s.path == f"{tmp_path}/a/delegation-tokens.db"
    s.close()
    assert isinstance(open_token_store(props={"kchannel.delegation.token.store": "memory"}),
                      InMemoryTokenStore)
    from kchannel.errors import ConfigError
    with pytest.raises(ConfigError):
        open_token_store(props={"kchannel.delegation.token.store": "zookeeper"})
    with pytest.raises(ConfigError):
        open_token_store(props={"kchannel.delegation.token.store": "etcd"})


# ---------------------------------------------------- hostile requests

from hypothesis import given, settings, strategies as st  # noqa: E402

_principals = st.builds(KafkaPrincipal, st.text(max_size=8), st.text(max_size=8))


@settings(max_examples=200, deadline=None)
@given(hmac_=st.binary(max_size=80), period=st.integers(-(1 << 63), (1 << 63) - 1),
       who=_principals, owners=st.none() | st.lists(_principals, max_size=3),
       renewers=st.lists(_principals, max_size=3), life=st.integers(-(1 << 63), (1 << 63) - 1))
def test_any_request_values_get_an_answer(hmac_, period, who, owners, renewers, life):
    """Whatever the values, every call returns a Kafka error code (no
    exception), and only the owner or a renewer ever changes a token."""
    m = manager()
    t = m.create_token(ALICE, renewers=[BOB], now=T0)
    r = m.create_token(who, owner=None, renewers=renewers, max_lifetime_ms=life, now=T0,
                       security_protocol="SASL_SSL")
    assert isinstance(r.error, Errors)
    if r.error is Errors.NONE:
        assert T0 < r.max_timestamp <= T0 + WEEK and r.expiry_timestamp <= r.max_timestamp
    for fn in (m.renew_token, m.expire_token):
        err, ts = fn(who, hmac_, period, now=T0 + 1, security_protocol="SASL_SSL")
        assert isinstance(err, Errors) and isinstance(ts, int)
        err, ts = fn(who, t.hmac, period, now=T0 + 1, security_protocol="SASL_SSL")
        if who not in (ALICE, BOB):
            assert err is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        elif err is Errors.NONE:
            assert ts <= T0 + WEEK
    err, tokens = m.describe_tokens(who, owners, now=T0, security_protocol="SASL_SSL")
    assert err is Errors.NONE
    assert all(x.token_info.owner_or_renewer(who) for x in tokens)
