"""Delegation tokens: the HMAC is never stored (only the token's metadata;
the server re-derives the HMAC from the secret key), token ids are random
(128 bits from the OS), and DescribeDelegationToken shows a token (with its
HMAC) only to its owner, requester, renewers and super users."""
import base64
import binascii
import os
import random

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import DelegationTokenError
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.errors import Errors
from kchannel.security.sasl.scram_store import credential_from_password
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.manager import TokenManager
from kchannel.tokens.store import InMemoryTokenStore, SqliteTokenStore
from kchannel.tokens.token import generate_token_id, token_info_to_json
from kchannel.utils import now_ms

from tests.fixtures.tokens import TokenServer, client_configs

ALICE, BOB, CAROL = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))


def hmac_forms(hmac):
    return [hmac, base64.b64encode(hmac), base64.b64encode(hmac).rstrip(b"="),
            base64.urlsafe_b64encode(hmac).rstrip(b"="), binascii.hexlify(hmac)]


def all_bytes_under(path):
    out = []
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                out.append((os.path.join(root, f), fh.read()))
    return out


@pytest.fixture
def token_server(tmp_path, pki):
    s = TokenServer(tmp_path, pki, extra={"super.users": "User:admin"})
    for user in ("bob", "carol", "admin"):
        for mech in ("SCRAM-SHA-256",):
            s.scram.put(user, mech, credential_from_password(mech, f"{user}-secret"))
    try:
        yield s
    finally:
        s.close()


def admin_for(s, pki, user):
    c = KafkaClient(client_configs(pki, "SCRAM-SHA-256", user, f"{user}-secret"))
    c.connect("127.0.0.1", s.port)
    return c, DelegationTokenAdmin(c)


def test_hmac_is_not_stored(token_server, pki, tmp_path):
    s = token_server
    c, admin = admin_for(s, pki, "alice")
    try:
        tokens = [admin.create(renewers=["User:bob"]) for _ in range(3)]
        admin.renew(tokens[0].hmac)
    finally:
        c.close()
    files = all_bytes_under(tmp_path)
    assert files, "no store files to inspect"
    for tok in tokens:
        assert any(tok.token_info.token_id.encode() in data for _, data in files), \
            "the token's metadata was not stored where the test looks"
        for path, data in files:
            for form in hmac_forms(tok.hmac):
                assert form not in data, f"HMAC stored in {path}"
    # The store interface only ever sees TokenInformation (no HMAC field),
    # and the ZooKeeper/SQLite JSON has none either.
    for info in s.service.manager.store.load_all().values():
        assert not any("hmac" in f.lower() for f in vars(info))
        assert b"hmac" not in token_info_to_json(info).lower()


def test_store_kinds_keep_metadata_only(tmp_path):
    secret = "store-test-secret"
    for store in (InMemoryTokenStore(), SqliteTokenStore(tmp_path / "tokens.db")):
        m = TokenManager(secret, store=store)
        r = m.create_token(ALICE, renewers=[BOB], max_lifetime_ms=-1, now=now_ms())
        hmac = r.hmac
        assert hmac and m.get_token(r.token_id).hmac == hmac
        for info in store.load_all().values():
            assert hmac not in repr(vars(info)).encode()
        store.close()
    for _, data in all_bytes_under(tmp_path):
        for form in hmac_forms(hmac):
            assert form not in data


def test_token_ids_are_random_and_not_from_the_random_module():
    ids = [generate_token_id() for _ in range(4000)]
    assert len(set(ids)) == len(ids)
    raw = [base64.urlsafe_b64decode(i + "==") for i in ids]
    assert {len(r) for r in raw} == {16}           # 128 bits, as a UUID's
    # Every bit position is set in about half the ids (4000 samples: a
    # position outside 40-60 % is 12 standard deviations out).
    n = int.from_bytes
    for bit in range(128):
        ones = sum((n(r, "big") >> bit) & 1 for r in raw)
        assert 0.4 * len(raw) < ones < 0.6 * len(raw), bit
    # Seeding Python's PRNG does not make ids repeat.
    random.seed(1234)
    a = [generate_token_id() for _ in range(5)]
    random.seed(1234)
    b = [generate_token_id() for _ in range(5)]
    assert not set(a) & set(b)


def test_describe_shows_tokens_only_to_owner_renewer_and_super_users(token_server, pki):
    s = token_server
    c, alice = admin_for(s, pki, "alice")
    try:
        private = alice.create()
        shared = alice.create(renewers=["User:bob"])
        mine = {t.token_info.token_id: t.hmac for t in alice.describe()}
        assert mine == {private.token_info.token_id: private.hmac,
                        shared.token_info.token_id: shared.hmac}
    finally:
        c.close()
    c, bob = admin_for(s, pki, "bob")
    try:
        seen = bob.describe()
        assert [(t.token_info.token_id, t.hmac) for t in seen] == [
            (shared.token_info.token_id, shared.hmac)]
        assert [t.token_info.token_id for t in bob.describe(owners=["User:alice"])] == [
            shared.token_info.token_id]
    finally:
        c.close()
    c, carol = admin_for(s, pki, "carol")
    try:
        assert carol.describe() == []
        assert carol.describe(owners=["User:alice"]) == []
        # Nor can she renew or expire a token she does not own.
        with pytest.raises(DelegationTokenError) as err:
            carol.renew(private.hmac)
        assert err.value.error_code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH
        with pytest.raises(DelegationTokenError) as err:
            carol.expire(shared.hmac)
        assert err.value.error_code == Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    finally:
        c.close()
    c, admin = admin_for(s, pki, "admin")
    try:
        assert {t.token_info.token_id for t in admin.describe()} == {
            private.token_info.token_id, shared.token_info.token_id}
    finally:
        c.close()
    # A token-authenticated session (even the owner's) sees nothing.
    c = KafkaClient(client_configs(pki, "SCRAM-SHA-256", private.token_info.token_id,
                                   private.hmac_base64, token=True))
    try:
        c.connect("127.0.0.1", s.port)
        with pytest.raises(DelegationTokenError) as err:
            DelegationTokenAdmin(c).describe()
        assert err.value.error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    finally:
        c.close()
