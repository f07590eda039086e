"""Where delegation tokens live.

A store keeps :class:`~kchannel.tokens.token.TokenInformation` by token id --
never the HMAC, which every server recomputes from the shared
``delegation.token.secret.key`` (as Kafka keeps only the token information in
ZooKeeper or the metadata log).

* :class:`InMemoryTokenStore`: one process (tests, embedded use).
* :class:`SqliteTokenStore` (the default): ``delegation-tokens.db`` in the
  server's data directory (first of ``log.dirs`` / ``log.dir``).  Writes are
  committed (WAL, ``synchronous=FULL``) before they return, so a token is
  acknowledged only once it survives a crash.  Several server processes on
  one host share the file; ``changed()`` is SQLite's ``PRAGMA data_version``,
  which moves whenever another connection commits, so each process reloads
  its cache when -- and only when -- someone else wrote.
* :class:`kchannel.tokens.zk_store.ZkTokenStore`: ZooKeeper, Kafka's layout.

:func:`kchannel.tokens.open_token_store` picks one from the configuration (it
is in the package, above both store modules, because the ZooKeeper store
subclasses :class:`TokenStore`).

Interface (what :class:`~kchannel.tokens.manager.TokenManager` uses):
``load_all() -> {token_id: TokenInformation}``, ``changed() -> bool``,
``put(info)``, ``delete(token_id) -> bool``, ``close()``.
"""
import os
import sqlite3
import threading

from kchannel.tokens.token import token_info_from_json, token_info_to_json
from kchannel.log import get_logger
from kchannel.utils import set_wal_journal

log = get_logger("kchannel.tokens.store")

__all__ = ["TokenStore", "InMemoryTokenStore", "SqliteTokenStore", "STORE_FILE_NAME",
           "STORE_CONFIG"]

STORE_FILE_NAME = "delegation-tokens.db"
STORE_CONFIG = "kchannel.delegation.token.store"


class TokenStore:
    """Base class; see the module docstring."""

    def load_all(self):
        raise NotImplementedError

    def changed(self):
        """True if another process may have changed the tokens since the
        last :meth:`load_all`."""
        return False

    def put(self, info):
        raise NotImplementedError

    def delete(self, token_id):
        raise NotImplementedError

    def close(self):
        pass

    def set_listener(self, fn):
        """``fn()`` is called (from any thread) when the store learns of a
        change made elsewhere.  Optional: polling ``changed()`` suffices."""


class InMemoryTokenStore(TokenStore):
    def __init__(self):
        self._tokens = {}
        self._lock = threading.Lock()

    def load_all(self):
        with self._lock:
            return {k: v.copy() for k, v in self._tokens.items()}

    def put(self, info):
        with self._lock:
            self._tokens[info.token_id] = info.copy()

    def delete(self, token_id):
        with self._lock:
            return self._tokens.pop(token_id, None) is not None


class SqliteTokenStore(TokenStore):
    """Tokens in one SQLite file; rows hold Kafka's token JSON."""

    def __init__(self, path):
        self.path = str(path)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        self._lock = threading.Lock()
        # isolation_level=None: explicit transactions; check_same_thread off
        # because the expiry sweep runs on its own thread (serialised by the
        # lock).
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                   check_same_thread=False)
        try:
            set_wal_journal(self._db)
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("CREATE TABLE IF NOT EXISTS delegation_tokens ("
                             "token_id TEXT PRIMARY KEY, info BLOB NOT NULL)")
        except sqlite3.Error:
            self._db.close()
            raise
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass
        self._seen_version = None

    def _data_version(self):
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    def load_all(self):
        with self._lock:
            self._seen_version = self._data_version()
            rows = self._db.execute("SELECT token_id, info FROM delegation_tokens").fetchall()
        out = {}
        for token_id, data in rows:
            try:
                info = token_info_from_json(data)
            except ValueError as exc:
                log.error("Ignoring unreadable delegation token %s in %s: %s",
                          token_id, self.path, exc)
                continue
            if info is not None:
                out[info.token_id] = info
        return out

    def changed(self):
        with self._lock:
            return self._seen_version is None or self._data_version() != self._seen_version

    def put(self, info):
        data = token_info_to_json(info)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO delegation_tokens(token_id, info) "
                                 "VALUES (?, ?)", (info.token_id, data))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def delete(self, token_id):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute("DELETE FROM delegation_tokens WHERE token_id = ?",
                                       (token_id,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return cur.rowcount > 0

    def close(self):
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass

