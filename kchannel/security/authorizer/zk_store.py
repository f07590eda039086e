"""ACLs in ZooKeeper, in the layout of Kafka's ZooKeeper-mode ``AclAuthorizer``
(kazoo client)::

    /kafka-acl/<ResourceType>/<name>                      LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    PREFIXED patterns
    /kafka-acl-changes/acl_changes_NNNN                   "<ResourceType>:<name>"
    /kafka-acl-extended-changes/acl_changes_NNNN          {"version":1,"resourceType":...,
                                                           "name":...,"patternType":"PREFIXED"}

A resource node holds ``{"version":1,"acls":[{"principal":"User:alice",
"permissionType":"Allow","operation":"Read","host":"*"}]}``.  Updates are
read-modify-write with the node's version (retried when another writer
won), then announced with a sequential change node.  Every store watches
both change paths: a notification bumps :meth:`version` (an int: free to
read per request) and the next :meth:`load` reads the tree again.
"""
import json
import threading

from kchannel.errors import ChannelConnectionError
from kchannel.log import get_logger
from kchannel.security.authorizer.acl import (AclBinding, AclOperation, AclPermissionType,
                                              PatternType, ResourceType)
from kchannel.security.authorizer.store import AclStore

log = get_logger("kchannel.security.authorizer.zk_store")

__all__ = ["ZkAclStore"]

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
_TYPES = [t for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)]


def _root(pattern_type):
    return LITERAL_ROOT if pattern_type == PatternType.LITERAL else PREFIXED_ROOT


class ZkAclStore(AclStore):
    """See the module docstring.  ``connect``: ``zookeeper.connect``."""

    def __init__(self, connect, session_timeout_ms=18000):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.recipe.watchers import ChildrenWatch
        self.connect = connect
        hosts, slash, chroot = str(connect).partition("/")
        client = KazooClient(hosts=hosts, timeout=max(session_timeout_ms, 4000) / 1000.0)
        try:
            client.start(timeout=session_timeout_ms / 1000.0)
        except KazooTimeoutError:
            client.close()
            raise ChannelConnectionError(
                f"Timed out waiting for connection to ZooKeeper at {connect}") from None
        if slash and chroot.strip("/"):
            client.ensure_path("/" + chroot.strip("/"))
            client.chroot = "/" + chroot.strip("/")
        self.client = client
        self._version = 0
        self._lock = threading.Lock()
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES, LITERAL_ROOT, PREFIXED_ROOT):
            client.ensure_path(path)
        ChildrenWatch(client, LITERAL_CHANGES, self._on_change)
        ChildrenWatch(client, EXTENDED_CHANGES, self._on_change)

    def __repr__(self):
        return f"ZkAclStore({self.connect!r})"

    def _on_change(self, children):
        with self._lock:
            self._version += 1
        return True

    def version(self):
        return self._version

    def load(self):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NoNodeError
        out = []
        for pattern in (PatternType.LITERAL, PatternType.PREFIXED):
            for rtype in _TYPES:
                base = f"{_root(pattern)}/{rtype.camel}"
                try:
                    names = self.client.get_children(base)
                except NoNodeError:
                    continue
                for name in names:
                    try:
                        data, _ = self.client.get(f"{base}/{name}")
                    except NoNodeError:
                        continue
                    out.extend(self._decode(rtype, name, pattern, data))
        return out

    @staticmethod
    def _decode(rtype, name, pattern, data):
        try:
            acls = json.loads(data.decode("utf-8")).get("acls") or ()
        except (ValueError, AttributeError) as exc:
            log.error("Ignoring unreadable ACL node %s:%s: %s", rtype.camel, name, exc)
            return []
        return [AclBinding(rtype, name, pattern, a["principal"], a["host"],
                           AclOperation.parse(a["operation"]),
                           AclPermissionType.parse(a["permissionType"])) for a in acls]

    def _update(self, rtype, name, pattern, change):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
        path = f"{_root(pattern)}/{rtype.camel}/{name}"
        while True:
            try:
                data, stat = self.client.get(path)
                current = set(self._decode(rtype, name, pattern, data))
            except NoNodeError:
                stat, current = None, set()
            wanted = change(current)
            if wanted == current:
                return
            body = json.dumps({"version": 1, "acls": [
                {"principal": b.principal, "permissionType": b.permission_type.camel,
                 "operation": b.operation.camel, "host": b.host} for b in sorted(wanted)]},
                separators=(",", ":")).encode("utf-8")
            try:
                if stat is None:
                    self.client.create(path, body, makepath=True)
                elif wanted:
                    self.client.set(path, body, version=stat.version)
                else:
                    self.client.delete(path, version=stat.version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue        # another writer won: read again
        if pattern == PatternType.LITERAL:
            self.client.create(f"{LITERAL_CHANGES}/{CHANGE_PREFIX}",
                               f"{rtype.camel}:{name}".encode("utf-8"), sequence=True)
        else:
            self.client.create(f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(
                {"version": 1, "resourceType": rtype.camel, "name": name,
                 "patternType": pattern.name}).encode("utf-8"), sequence=True)

    def _by_resource(self, bindings):
        groups = {}
        for b in bindings:
            groups.setdefault((b.resource_type, b.name, b.pattern_type), set()).add(b)
        return groups

    def add(self, bindings):
        for (rtype, name, pattern), group in self._by_resource(bindings).items():
            self._update(rtype, name, pattern, lambda cur, g=group: cur | g)
        with self._lock:
            self._version += 1

    def remove(self, bindings):
        for (rtype, name, pattern), group in self._by_resource(bindings).items():
            self._update(rtype, name, pattern, lambda cur, g=group: cur - g)
        with self._lock:
            self._version += 1

    def close(self):
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # noqa: BLE001
            pass
