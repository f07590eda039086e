"""Delegation tokens (KIP-48, KIP-249, KIP-373).

* :mod:`kchannel.tokens.token` -- token information, HMAC, SCRAM credentials,
  Kafka's ZooKeeper JSON.
* :mod:`kchannel.tokens.manager` -- the sans-I/O :class:`TokenManager`.
* :mod:`kchannel.tokens.store` / :mod:`kchannel.tokens.zk_store` -- where
  tokens live (memory, SQLite, ZooKeeper).
* :mod:`kchannel.tokens.admin` -- the client side (create/renew/expire/describe).

The server side (APIs 38-41 on a ``Server`` and ``install_server``, what
``kchannel serve`` calls) is :mod:`kchannel.server.token_handlers`; this
package keeps what both sides share.
"""
import os

from kchannel.errors import ConfigError
from kchannel.log import get_logger
from kchannel.security.sasl.scram_store import data_dir_from_server_config
from kchannel.tokens.store import (STORE_CONFIG, STORE_FILE_NAME, InMemoryTokenStore,
                                   SqliteTokenStore)
from kchannel.tokens.zk_store import ZkTokenStore

log = get_logger("kchannel.tokens")

__all__ = ["open_token_store", "config_value"]


def config_value(config, props, key, default=None):
    """``key`` from a ``ServerConfig`` when it has a value, else from the raw
    properties, else ``default``."""
    if config is not None:
        try:
            value = config.get(key)
        except KeyError:     # not a key Kafka defines: the raw property alone
            value = None
        if value is not None:
            return value
    if props is not None and props.get(key) not in (None, ""):
        return props[key]
    return default


def open_token_store(config=None, props=None):
    """The store named by ``kchannel.delegation.token.store``: ``sqlite``
    (default; first log directory), ``memory`` or ``zookeeper``
    (``zookeeper.connect``, whose chroot is the root of Kafka's
    ``/delegation_token`` tree)."""
    kind = str(config_value(config, props, STORE_CONFIG, "sqlite")).strip().lower()
    if kind == "memory":
        return InMemoryTokenStore()
    if kind == "zookeeper":
        connect = config_value(config, props, "zookeeper.connect")
        if not connect:
            raise ConfigError(f"{STORE_CONFIG}=zookeeper requires zookeeper.connect",
                              key="zookeeper.connect", value=None)
        timeout = int(config_value(config, props, "zookeeper.session.timeout.ms", 18000))
        return ZkTokenStore(str(connect), session_timeout_ms=timeout)
    if kind != "sqlite":
        raise ConfigError(f"Invalid value {kind} for configuration {STORE_CONFIG}: "
                          "String must be one of: sqlite, memory, zookeeper",
                          key=STORE_CONFIG, value=kind)
    data_dir = config.data_dir if config is not None else None
    if not data_dir:
        data_dir = data_dir_from_server_config(props or {})
    return SqliteTokenStore(os.path.join(data_dir, STORE_FILE_NAME))
