"""Delegation tokens in ZooKeeper, in Kafka's layout (kazoo client).

Kafka (ZooKeeper mode) keeps one persistent node per token and announces
every change with a sequential notification node::

    /delegation_token/tokens/<tokenId>                 token JSON (DelegationTokenInfoZNode)
    /delegation_token/token_changes/token_change_NNNN  data = tokenId (change notification)

The JSON is ``DelegationTokenManagerZk.toJsonCompatibleMap`` (version 3:
owner, tokenRequester, renewers as sanitized principal strings, the three
timestamps, tokenId).  HMACs are never written: each server derives them from
the shared secret.

Every :class:`ZkTokenStore` keeps a cache that follows the tree through
watches: a children watch on ``tokens`` (creations and deletions) and one on
``token_changes`` (updates such as renewals, processed in sequence order, as
Kafka's ``ZkNodeChangeNotificationListener``; notifications older than 15
minutes are purged, as Kafka does).  The root of the tree is the chroot of
``zookeeper.connect`` (``host:port/kafka`` puts it under ``/kafka``), exactly
where a Kafka cluster with that connect string keeps it.
"""
import threading
import time

from kchannel.errors import ChannelConnectionError
from kchannel.tokens.store import TokenStore
from kchannel.tokens.token import token_info_from_json, token_info_to_json
from kchannel.log import get_logger

log = get_logger("kchannel.tokens.zk_store")

__all__ = ["ZkTokenStore", "TOKENS_PATH", "CHANGES_PATH", "CHANGE_PREFIX"]

TOKEN_ROOT = "/delegation_token"                      # DelegationTokenAuthZNode
TOKENS_PATH = TOKEN_ROOT + "/tokens"                  # DelegationTokensZNode
CHANGES_PATH = TOKEN_ROOT + "/token_changes"          # DelegationTokenChangeNotificationZNode
CHANGE_PREFIX = "token_change_"                       # ...SequenceZNode.SequenceNumberPrefix
CHANGE_EXPIRATION_MS = 15 * 60 * 1000                 # ZkNodeChangeNotificationListener default


def _seq(name):
    try:
        return int(name[len(CHANGE_PREFIX):])
    except ValueError:
        return -1


class ZkTokenStore(TokenStore):
    """See the module docstring.  ``connect`` is ``zookeeper.connect``."""

    def __init__(self, connect, session_timeout_ms=18000, connection_timeout_ms=None,
                 client=None):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        self.connect = connect
        self._own_client = client is None
        if client is None:
            # Connect without the chroot, create it, then work inside it (as
            # Kafka creates its chroot on first start).
            hosts, slash, chroot = connect.partition("/")
            chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else None
            client = KazooClient(hosts=hosts, timeout=max(session_timeout_ms, 4000) / 1000.0)
            try:
                client.start(timeout=(connection_timeout_ms or session_timeout_ms) / 1000.0)
            except KazooTimeoutError:
                try:
                    client.close()
                except Exception:  # noqa: BLE001
                    pass
                raise ChannelConnectionError(
                    f"Timed out waiting for connection to ZooKeeper at {connect}") from None
            if chroot:
                client.ensure_path(chroot)
                client.chroot = chroot
        self.client = client
        self._lock = threading.Lock()
        self._cache = {}
        self._changed = True
        self._last_seq = None
        self._closed = False
        self._listener = None
        client.ensure_path(TOKENS_PATH)
        client.ensure_path(CHANGES_PATH)
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.recipe.watchers import ChildrenWatch
        # The first call of each watch happens now, synchronously: the tokens
        # watch loads the cache, the changes watch records where to start.
        ChildrenWatch(client, TOKENS_PATH, self._on_tokens)
        ChildrenWatch(client, CHANGES_PATH, self._on_changes)

    def __repr__(self):
        return f"ZkTokenStore({self.connect!r}, tokens={len(self._cache)})"

    # ------------------------------------------------------------ watches
    def _read(self, token_id):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NoNodeError
        try:
            data, _ = self.client.get(f"{TOKENS_PATH}/{token_id}")
        except NoNodeError:
            return None
        try:
            return token_info_from_json(data)
        except ValueError as exc:
            log.error("Error while getting Token for tokenId: %s: %s", token_id, exc)
            return None

    def _refresh(self, token_id):
        info = self._read(token_id)
        with self._lock:
            if info is None:
                self._cache.pop(token_id, None)
            else:
                self._cache[token_id] = info
            self._changed = True
        self._notify()

    def _on_tokens(self, children):
        if self._closed:
            return False
        children = set(children)
        with self._lock:
            known = set(self._cache)
        for token_id in children - known:
            self._refresh(token_id)
        gone = known - children
        if gone:
            with self._lock:
                for token_id in gone:
                    self._cache.pop(token_id, None)
                self._changed = True
            self._notify()
        return True

    def _on_changes(self, children):
        if self._closed:
            return False
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NoNodeError
        names = sorted((c for c in children if c.startswith(CHANGE_PREFIX)), key=_seq)
        if self._last_seq is None:
            # Everything up to here is already in the loaded cache.
            self._last_seq = _seq(names[-1]) if names else -1
            return True
        now = time.time() * 1000
        for name in names:
            seq = _seq(name)
            path = f"{CHANGES_PATH}/{name}"
            if seq <= self._last_seq:
                continue
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                continue
            self._last_seq = seq
            token_id = data.decode("utf-8", "replace")
            log.info("Processing Token Notification for tokenId: %s", token_id)
            self._refresh(token_id)
            self._purge_if_obsolete(path, stat, now)
        return True

    def _purge_if_obsolete(self, path, stat, now):
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NoNodeError
        if stat is not None and stat.ctime < now - CHANGE_EXPIRATION_MS:
            try:
                self.client.delete(path)
            except NoNodeError:
                pass

    def _notify(self):
        fn = self._listener
        if fn is not None:
            try:
                fn()
            except Exception:  # noqa: BLE001
                log.warning("Token change listener failed", exc_info=True)

    def set_listener(self, fn):
        self._listener = fn

    # ---------------------------------------------------------------- API
    def load_all(self):
        with self._lock:
            self._changed = False
            return {k: v.copy() for k, v in self._cache.items()}

    def changed(self):
        with self._lock:
            return self._changed

    def _notify_change(self, token_id):
        """``createTokenChangeNotification``."""
        self.client.create(f"{CHANGES_PATH}/{CHANGE_PREFIX}", token_id.encode("utf-8"),
                           sequence=True, makepath=True)

    def put(self, info):
        """``setOrCreateDelegationToken`` then the change notification."""
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NodeExistsError, NoNodeError
        path = f"{TOKENS_PATH}/{info.token_id}"
        data = token_info_to_json(info)
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:
                self.client.set(path, data)
        with self._lock:
            self._cache[info.token_id] = info.copy()
        self._notify_change(info.token_id)

    def delete(self, token_id):
        """``deleteDelegationToken`` then the change notification."""
        # kazoo is optional (extra "zookeeper"): imported where a ZooKeeper store is used.
        from kazoo.exceptions import NoNodeError
        existed = True
        try:
            self.client.delete(f"{TOKENS_PATH}/{token_id}")
        except NoNodeError:
            existed = False
        with self._lock:
            self._cache.pop(token_id, None)
        self._notify_change(token_id)
        return existed

    def close(self):
        self._closed = True
        if self._own_client:
            try:
                self.client.stop()
                self.client.close()
            except Exception:  # noqa: BLE001
                pass
