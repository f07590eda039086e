"""SCRAM credential stores: Kafka's credential string, in-memory and SQLite
stores, persistence across instances and concurrent processes."""
import base64
import multiprocessing
import os
import sqlite3

import pytest

from kchannel.security.sasl import scram
from kchannel.security.sasl.scram_store import (
    InMemoryScramCredentialStore, ScramCredential, SqliteScramCredentialStore,
    credential_from_password, credential_from_string, credential_to_string,
    data_dir_from_server_config, open_store)


def test_credential_from_password_matches_rfc7677():
    """Kafka: ScramCredentialUtilsTest.generateCredential."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_password("SCRAM-SHA-256", "pencil", 4096, salt)
    salted = scram.hi(scram.SCRAM_SHA_256, b"pencil", salt, 4096)
    assert cred.salt == salt and cred.iterations == 4096
    assert cred.server_key == scram.server_key(scram.SCRAM_SHA_256, salted)
    assert cred.stored_key == scram.stored_key(scram.SCRAM_SHA_256,
                                               scram.client_key(scram.SCRAM_SHA_256, salted))
    # No field is the password or the salted password.
    assert salted not in (cred.stored_key, cred.server_key)


def test_default_salt_is_kafka_style_and_random():
    a = credential_from_password("SCRAM-SHA-512", "pw")
    b = credential_from_password("SCRAM-SHA-512", "pw")
    assert a.salt != b.salt
    assert a.salt.decode("ascii").isalnum()
    assert a.iterations == 4096 and len(a.stored_key) == 64


def test_credential_string_round_trip_and_format():
    """Kafka: ScramCredentialUtilsTest.stringConversion."""
    cred = ScramCredential(b"salt", b"\x01" * 32, b"\x02" * 32, 8192)
    text = credential_to_string(cred)
    assert text == ("salt=c2FsdA==,stored_key=" + base64.b64encode(b"\x01" * 32).decode()
                    + ",server_key=" + base64.b64encode(b"\x02" * 32).decode()
                    + ",iterations=8192")
    assert credential_from_string(text) == cred


@pytest.mark.parametrize("bad", ["", "salt=c2FsdA==", "salt=a,stored_key=b,server_key=c",
                                 "salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=x",
                                 "salt=!!,stored_key=AA==,server_key=AA==,iterations=1",
                                 "=x,salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=1"])
def test_credential_from_string_rejects(bad):
    """Kafka: ScramCredentialUtilsTest.invalidCredential, missingFields."""
    with pytest.raises(ValueError):
        credential_from_string(bad)


def test_repr_hides_keys():
    cred = credential_from_password("SCRAM-SHA-256", "pw")
    assert repr(cred) == "ScramCredential(iterations=4096)"


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    if request.param == "memory":
        s = InMemoryScramCredentialStore()
    else:
        s = SqliteScramCredentialStore(tmp_path / "creds.db")
    yield s
    s.close()


def test_store_operations(store):
    c1 = credential_from_password("SCRAM-SHA-256", "a", 4096)
    c2 = credential_from_password("SCRAM-SHA-512", "b", 8192)
    assert store.get("alice", "SCRAM-SHA-256") is None
    store.put("alice", "SCRAM-SHA-256", c1)
    store.put("alice", "SCRAM-SHA-512", c2)
    store.put("bob", "SCRAM-SHA-512", c2)
    assert store.get("alice", "SCRAM-SHA-256") == c1
    assert store.list() == {"alice": {"SCRAM-SHA-256": c1, "SCRAM-SHA-512": c2},
                            "bob": {"SCRAM-SHA-512": c2}}
    assert store.list(["bob", "nobody"]) == {"bob": {"SCRAM-SHA-512": c2}}
    assert store.delete("alice", "SCRAM-SHA-256") is True
    assert store.delete("alice", "SCRAM-SHA-256") is False
    store.alter(upsertions=[("carol", "SCRAM-SHA-256", c1)], deletions=[("bob", "SCRAM-SHA-512")])
    assert set(store.list()) == {"alice", "carol"}
    with pytest.raises(ValueError):
        store.put("x", "SCRAM-SHA-1", c1)


def test_sqlite_alter_is_atomic(tmp_path):
    store = SqliteScramCredentialStore(tmp_path / "c.db")
    c1 = credential_from_password("SCRAM-SHA-256", "a")
    store.put("alice", "SCRAM-SHA-256", c1)

    class Boom:
        salt = b"s"
        stored_key = b"k"
        server_key = b"k"

        @property
        def iterations(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.alter(upsertions=[("bob", "SCRAM-SHA-256", c1), ("carol", "SCRAM-SHA-256", Boom())],
                    deletions=[("alice", "SCRAM-SHA-256")])
    assert store.list() == {"alice": {"SCRAM-SHA-256": c1}}


def test_sqlite_persists_across_instances_and_uses_wal(tmp_path):
    path = tmp_path / "data" / "scram-credentials.db"
    cred = credential_from_password("SCRAM-SHA-512", "pw", 4096)
    with SqliteScramCredentialStore(path) as s1:
        s1.put("alice", "SCRAM-SHA-512", cred)
    with SqliteScramCredentialStore(path) as s2:
        assert s2.get("alice", "SCRAM-SHA-512") == cred
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    assert os.stat(path).st_mode & 0o077 == 0


def _writer(path, worker, count, queue):
    try:
        store = SqliteScramCredentialStore(path)
        cred = credential_from_password("SCRAM-SHA-256", "pw", 4096, salt=b"fixed")
        for i in range(count):
            store.alter(upsertions=[(f"user-{worker}-{i}", "SCRAM-SHA-256", cred)])
            assert store.get(f"user-{worker}-{i}", "SCRAM-SHA-256") == cred
        store.close()
        queue.put(None)
    except BaseException as exc:  # report to the parent
        queue.put(repr(exc))


def test_sqlite_two_processes_write_concurrently(tmp_path):
    path = str(tmp_path / "shared.db")
    SqliteScramCredentialStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, 40, queue)) for w in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == [None, None]
    with SqliteScramCredentialStore(path) as s:
        assert len(s.list()) == 80


def test_change_by_another_instance_seen_immediately(tmp_path):
    path = tmp_path / "c.db"
    reader = SqliteScramCredentialStore(path)
    writer = SqliteScramCredentialStore(path)
    cred = credential_from_password("SCRAM-SHA-256", "pw")
    assert reader.get("alice", "SCRAM-SHA-256") is None
    writer.put("alice", "SCRAM-SHA-256", cred)
    assert reader.get("alice", "SCRAM-SHA-256") == cred
    writer.delete("alice", "SCRAM-SHA-256")
    assert reader.get("alice", "SCRAM-SHA-256") is None
    reader.close()
    writer.close()


def test_open_store_from_server_config(tmp_path):
    assert data_dir_from_server_config({"log.dirs": f"{tmp_path}/a,{tmp_path}/b"}) == f"{tmp_path}/a"
    assert data_dir_from_server_config({"log.dir": str(tmp_path)}) == str(tmp_path)
    assert data_dir_from_server_config({"log.dirs": [str(tmp_path)]}) == str(tmp_path)
    assert data_dir_from_server_config({}) == "/tmp/kafka-logs"
    assert data_dir_from_server_config({}, default=None) is None
    with open_store(server_config={"log.dirs": str(tmp_path / "d")}) as s:
        assert s.path == str(tmp_path / "d" / "scram-credentials.db")
    with pytest.raises(ValueError):
        open_store()


def test_secret_shared_by_every_instance_of_a_store(tmp_path):
    with SqliteScramCredentialStore(tmp_path / "a.db") as a1, \
            SqliteScramCredentialStore(tmp_path / "a.db") as a2, \
            SqliteScramCredentialStore(tmp_path / "b.db") as b:
        assert len(a1.secret()) == 32
        assert a1.secret() == a2.secret() != b.secret()
    with SqliteScramCredentialStore(tmp_path / "a.db") as again:
        assert again.secret() == a1.secret()
    m = InMemoryScramCredentialStore()
    assert m.secret() == m.secret() and len(m.secret()) == 32
