"""Where ACLs live, shared by every worker process of a server.

Interface (what :class:`~kchannel.security.authorizer.standard.StandardAuthorizer`
uses): ``load() -> [AclBinding]``, ``version() -> int`` (changes whenever
any process changed the ACLs; read before every decision, so it must be
cheap), ``add(bindings)``, ``remove(bindings)``, ``close()``.

* :class:`InMemoryAclStore`: one process (tests, embedded use).
* :class:`kchannel.security.authorizer.zk_store.ZkAclStore`: ZooKeeper, in
  the layout of Kafka's ZooKeeper-mode AclAuthorizer.
* :class:`SqliteAclStore` (the default): ``acls.db`` in the server's data
  directory (first of ``log.dirs``), one row per ACL, writes committed
  (WAL, ``synchronous=FULL``) before CreateAcls/DeleteAcls are answered.
  Its change counter is an 8-byte word in ``acls.db.version`` that every
  process maps into memory: a writer bumps it (under ``flock``) after its
  commit, a reader compares one word per decision -- no SQL on the request
  path -- and reloads the table when the word moved.
"""
import fcntl
import mmap
import os
import sqlite3
import struct
import threading

from kchannel.log import get_logger
from kchannel.utils import set_wal_journal
from kchannel.security.authorizer.acl import AclBinding

log = get_logger("kchannel.security.authorizer.store")

__all__ = ["AclStore", "InMemoryAclStore", "SqliteAclStore", "ACL_STORE_CONFIG",
           "ACL_STORE_FILE_NAME"]

ACL_STORE_CONFIG = "kchannel.acl.store"
ACL_STORE_FILE_NAME = "acls.db"
_COUNTER = struct.Struct("<Q")


class AclStore:
    """Base class; see the module docstring."""

    def load(self):
        raise NotImplementedError

    def version(self):
        return 0

    def add(self, bindings):
        raise NotImplementedError

    def remove(self, bindings):
        raise NotImplementedError

    def close(self):
        pass


class InMemoryAclStore(AclStore):
    def __init__(self, bindings=()):
        self._acls = set(bindings)
        self._version = 0
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            return list(self._acls)

    def version(self):
        return self._version

    def add(self, bindings):
        with self._lock:
            self._acls.update(bindings)
            self._version += 1

    def remove(self, bindings):
        with self._lock:
            self._acls.difference_update(bindings)
            self._version += 1


class SqliteAclStore(AclStore):
    """ACLs in one SQLite file; see the module docstring."""

    def __init__(self, path):
        self.path = str(path)
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                                   check_same_thread=False)
        try:
            set_wal_journal(self._db)
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS acls (resource_type INTEGER NOT NULL, "
                "resource_name TEXT NOT NULL, pattern_type INTEGER NOT NULL, "
                "principal TEXT NOT NULL, host TEXT NOT NULL, operation INTEGER NOT NULL, "
                "permission_type INTEGER NOT NULL, PRIMARY KEY (resource_type, resource_name, "
                "pattern_type, principal, host, operation, permission_type))")
        except sqlite3.Error:
            self._db.close()
            raise
        counter_path = self.path + ".version"
        fd = os.open(counter_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_size < _COUNTER.size:
                os.ftruncate(fd, _COUNTER.size)
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._map = mmap.mmap(fd, _COUNTER.size)
        finally:
            os.close(fd)
        self._counter_path = counter_path
        for p in (self.path, counter_path):
            try:
                os.chmod(p, 0o600)
            except OSError:
                pass

    def __repr__(self):
        return f"SqliteAclStore({self.path!r})"

    def version(self):
        return _COUNTER.unpack_from(self._map)[0]

    def load(self):
        with self._lock:
            rows = self._db.execute(
                "SELECT resource_type, resource_name, pattern_type, principal, host, "
                "operation, permission_type FROM acls").fetchall()
        return [AclBinding.of(*row) for row in rows]

    def _bump(self):
        fd = os.open(self._counter_path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            _COUNTER.pack_into(self._map, 0, self.version() + 1)
            self._map.flush()
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _write(self, sql, bindings):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(sql, [b.as_tuple() for b in bindings])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        # after the commit: whoever sees the new count reads the new rows
        self._bump()

    def add(self, bindings):
        self._write("INSERT OR IGNORE INTO acls VALUES (?, ?, ?, ?, ?, ?, ?)", bindings)

    def remove(self, bindings):
        self._write("DELETE FROM acls WHERE resource_type=? AND resource_name=? AND "
                    "pattern_type=? AND principal=? AND host=? AND operation=? AND "
                    "permission_type=?", bindings)

    def close(self):
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            try:
                self._map.close()
            except (ValueError, OSError):
                pass

