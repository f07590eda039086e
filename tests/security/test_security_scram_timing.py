"""An unknown SCRAM user costs the server the work a real one costs.

No timed assertions here (benchmarks/scram_timing.py prints the two timing
distributions): these tests check the means.  The server derives the
stand-in credential for every login, existing user or not; the stand-in is a
deterministic function of (secret, mechanism, user name); and the SQLite
store reads and decodes one real row for every lookup, hit or miss, whatever
the name's place in key order.
"""
import hashlib
import hmac

import pytest

from kchannel.security.sasl import scram
from kchannel.security.sasl.mechanism import ServerCallbacks, create_server
from kchannel.security.sasl.scram_store import (
    InMemoryScramCredentialStore, SqliteScramCredentialStore, credential_from_password)


@pytest.fixture
def stand_in_calls(monkeypatch):
    calls = []
    original = scram._fake_credential

    def spy(mech, username, secret=None):
        calls.append((mech.mechanism_name, username, secret))
        return original(mech, username, secret)

    monkeypatch.setattr(scram, "_fake_credential", spy)
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
