"""SCRAM credentials and where the server keeps them.

A :class:`ScramCredential` holds only what RFC 5802 lets a server keep: the
salt, the iteration count, StoredKey and ServerKey.  Neither the password nor
the SaltedPassword (which would let anyone log in) is ever stored.

Stores map ``(user, mechanism)`` to a credential:

* :class:`SqliteScramCredentialStore` (the default): one SQLite file in the
  server's data directory, WAL mode, so several server processes on one host
  and the offline ``kchannel configs --server-config`` tool share it safely.
  Every lookup reads the database, so a credential altered by another process
  is used by the very next authentication (Kafka's brokers likewise apply
  credential changes as soon as they see them).
* :class:`InMemoryScramCredentialStore`: for tests and embedded use.

``credential_to_string`` / ``credential_from_string`` implement Kafka's
``ScramCredentialUtils`` text form
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``; they and
:class:`ScramCredential` live in :mod:`kchannel.security.sasl.scram_credential`
and are re-exported here.
"""
import os
import sqlite3
import threading

from kchannel.log import get_logger
from kchannel.utils import set_wal_journal
from kchannel.security.sasl import scram
from kchannel.security.sasl.scram_credential import (
    DEFAULT_ITERATIONS,
    ScramCredential,
    credential_from_string,
    credential_to_string,
)

log = get_logger("kchannel.security.sasl.scram_store")

__all__ = ["ScramCredential", "credential_to_string", "credential_from_string",
           "credential_from_password", "credential_from_salted_password",
           "ScramCredentialStore", "InMemoryScramCredentialStore",
           "SqliteScramCredentialStore", "default_store_path", "data_dir_from_server_config",
           "open_store", "DEFAULT_ITERATIONS", "SCRAM_MECHANISMS", "STORE_FILE_NAME"]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
STORE_FILE_NAME = "scram-credentials.db"


def credential_from_password(mechanism, password, iterations=DEFAULT_ITERATIONS, salt=None):
    """Build the credential a server stores for ``password``
    (Kafka's ``ScramFormatter.generateCredential``).

    ``salt`` defaults to a fresh random salt in Kafka's format (the UTF-8
    bytes of a 130-bit random number in base 36).
    """
    return scram.generate_credential(mechanism, password, iterations, salt)


def credential_from_salted_password(mechanism, salt, salted_password, iterations):
    """Credential from a client-computed SaltedPassword (AlterUserScramCredentials)."""
    return scram.credential_from_salted_password(mechanism, salt, salted_password, iterations)


class ScramCredentialStore:
    """Where the server looks up SCRAM credentials.

    ``get(user, mechanism)`` is what the SCRAM server mechanism calls (through
    ``ServerCallbacks.scram_credential``); the rest serves the
    Describe/AlterUserScramCredentials APIs and ``kchannel configs``.
    """

    def get(self, user, mechanism):
        """Return the :class:`ScramCredential` or ``None``."""
        raise NotImplementedError

    def put(self, user, mechanism, credential):
        raise NotImplementedError

    def delete(self, user, mechanism):
        """Remove a credential; return True if it existed."""
        raise NotImplementedError

    def list(self, users=None):
        """``{user: {mechanism: ScramCredential}}`` for ``users`` (all if None).

        Users without any credential are absent from the result.
        """
        raise NotImplementedError

    def alter(self, upsertions=(), deletions=()):
        """Apply ``upsertions`` ``[(user, mechanism, credential)]`` and
        ``deletions`` ``[(user, mechanism)]`` atomically."""
        raise NotImplementedError

    def secret(self):
        """32 random bytes kept with the credentials, the same for every
        reader of this store (the SCRAM server derives the salts it shows for
        unknown users from it)."""
        raise NotImplementedError

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InMemoryScramCredentialStore(ScramCredentialStore):
    def __init__(self):
        self._data = {}
        self._lock = threading.Lock()
        self._secret = os.urandom(32)

    def secret(self):
        return self._secret

    def get(self, user, mechanism):
        with self._lock:
            return self._data.get((user, mechanism))

    def put(self, user, mechanism, credential):
        _check_mechanism(mechanism)
        with self._lock:
            self._data[(user, mechanism)] = credential

    def delete(self, user, mechanism):
        with self._lock:
            return self._data.pop((user, mechanism), None) is not None

    def list(self, users=None):
        wanted = None if users is None else set(users)
        out = {}
        with self._lock:
            for (user, mech), cred in self._data.items():
                if wanted is None or user in wanted:
                    out.setdefault(user, {})[mech] = cred
        return out

    def alter(self, upsertions=(), deletions=()):
        for _, mech, _ in upsertions:
            _check_mechanism(mech)
        with self._lock:
            for user, mech in deletions:
                self._data.pop((user, mech), None)
            for user, mech, cred in upsertions:
                self._data[(user, mech)] = cred


_SCHEMA = """
CREATE TABLE IF NOT EXISTS scram_credentials (
    user        TEXT    NOT NULL,
    mechanism   TEXT    NOT NULL,
    salt        BLOB    NOT NULL,
    stored_key  BLOB    NOT NULL,
    server_key  BLOB    NOT NULL,
    iterations  INTEGER NOT NULL,
    PRIMARY KEY (user, mechanism)
);
CREATE TABLE IF NOT EXISTS kchannel_secrets (
    name   TEXT PRIMARY KEY,
    value  BLOB NOT NULL
);
"""


class SqliteScramCredentialStore(ScramCredentialStore):
    """SCRAM credentials in one SQLite file (WAL mode).

    Safe for several processes on one host: SQLite's file locking serialises
    writers, WAL lets readers proceed during a write, and ``busy_timeout``
    makes a process wait for a lock instead of failing.  One connection per
    store object, guarded by a lock, so the object may be shared by threads.
    """

    def __init__(self, path, busy_timeout_ms=10000):
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so that
        # alter() is one transaction.
        self._conn = sqlite3.connect(self.path, timeout=busy_timeout_ms / 1000.0,
                                     isolation_level=None, check_same_thread=False)
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            set_wal_journal(self._conn, busy_timeout_ms / 1000.0)
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        self._secret = None
        try:
            # The file holds password-equivalent material for offline attacks.
            os.chmod(self.path, 0o600)
        except OSError:
            pass

    def __repr__(self):
        return f"SqliteScramCredentialStore({self.path!r})"

    @staticmethod
    def _row_to_credential(row):
        return ScramCredential(bytes(row[0]), bytes(row[1]), bytes(row[2]), int(row[3]))

    # Whether or not the user exists, a lookup reads one real row: the
    # user's, else the next one in key order (else the first), a decoy that
    # is decoded into a credential as well and then discarded.  Both index
    # seeks always run (``+ 0 * first`` defeats COALESCE's short cut), so a
    # miss costs what a hit costs and the lookup's timing does not tell an
    # unknown user from a real one (README, SCRAM).
    _GET = ("SELECT c.user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations "
            "FROM (SELECT (SELECT rowid FROM scram_credentials WHERE (user, mechanism) >= (?, ?) "
            "ORDER BY user, mechanism LIMIT 1) AS id) AS nxt, "
            "(SELECT (SELECT rowid FROM scram_credentials ORDER BY user, mechanism LIMIT 1) "
            "AS id) AS fst "
            "JOIN scram_credentials AS c ON c.rowid = COALESCE(nxt.id, fst.id) + 0 * fst.id")

    def get(self, user, mechanism):
        with self._lock:
            row = self._conn.execute(self._GET, (user, mechanism)).fetchone()
        if row is None:  # an empty store: no user to tell apart
            return None
        credential = self._row_to_credential(row[2:])
        # One comparison whose result is used once: no early exit that
        # depends on which field differs.
        found = (row[0] == user) & (row[1] == mechanism)
        return credential if found else None

    def put(self, user, mechanism, credential):
        self.alter(upsertions=[(user, mechanism, credential)])

    def delete(self, user, mechanism):
        with self._lock:
            cur = self._conn.execute(
                "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?",
                (user, mechanism))
            return cur.rowcount > 0

    def list(self, users=None):
        query = ("SELECT user, mechanism, salt, stored_key, server_key, iterations "
                 "FROM scram_credentials")
        with self._lock:
            if users is None:
                rows = self._conn.execute(query).fetchall()
            else:
                rows = []
                for user in set(users):
                    rows.extend(self._conn.execute(query + " WHERE user = ?", (user,)).fetchall())
        out = {}
        for user, mech, *cred in rows:
            out.setdefault(user, {})[mech] = self._row_to_credential(cred)
        return out

    def alter(self, upsertions=(), deletions=()):
        for _, mech, _ in upsertions:
            _check_mechanism(mech)
        with self._lock:
            # BEGIN IMMEDIATE takes the write lock up front, so two processes
            # altering at once serialise instead of failing at commit.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for user, mech in deletions:
                    self._conn.execute(
                        "DELETE FROM scram_credentials WHERE user = ? AND mechanism = ?",
                        (user, mech))
                for user, mech, cred in upsertions:
                    self._conn.execute(
                        "INSERT OR REPLACE INTO scram_credentials "
                        "(user, mechanism, salt, stored_key, server_key, iterations) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (user, mech, cred.salt, cred.stored_key, cred.server_key,
                         int(cred.iterations)))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def secret(self):
        if self._secret is None:
            with self._lock:
                # INSERT OR IGNORE: the first process to get here decides the
                # value; every other one reads it back.
                self._conn.execute(
                    "INSERT OR IGNORE INTO kchannel_secrets (name, value) VALUES (?, ?)",
                    ("scram.unknown.user.salt", os.urandom(32)))
                row = self._conn.execute(
                    "SELECT value FROM kchannel_secrets WHERE name = ?",
                    ("scram.unknown.user.salt",)).fetchone()
            self._secret = bytes(row[0])
        return self._secret

    def close(self):
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _check_mechanism(mechanism):
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")


def default_store_path(data_dir):
    """Path of the credential store inside a server data directory."""
    return os.path.join(os.fspath(data_dir), STORE_FILE_NAME)


# Server config keys that name the data directory, in order of preference.
# ``log.dirs`` / ``log.dir`` are Kafka's (the first directory is used, as
# Kafka keeps its own metadata in the first log dir).
DATA_DIR_KEYS = ("log.dirs", "log.dir")
DEFAULT_LOG_DIR = "/tmp/kafka-logs"   # Kafka's log.dir default


def data_dir_from_server_config(props, default=DEFAULT_LOG_DIR):
    """The data directory of a server config (dict of strings or typed
    values): the first of ``log.dirs``, else ``log.dir``, else Kafka's
    default ``/tmp/kafka-logs`` (``default``)."""
    for key in DATA_DIR_KEYS:
        value = props.get(key)
        if value is None or value == "":
            continue
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        else:
            value = str(value).split(",")[0].strip()
        if value:
            return value
    return default


def open_store(path=None, data_dir=None, server_config=None):
    """Open the SQLite store at ``path``, or in ``data_dir``, or in the data
    directory of ``server_config``."""
    if path is None:
        if data_dir is None and server_config is not None:
            data_dir = data_dir_from_server_config(server_config)
        if data_dir is None:
            raise ValueError("No data directory given for the SCRAM credential store")
        path = default_store_path(data_dir)
    return SqliteScramCredentialStore(path)
