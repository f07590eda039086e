"""Delegation tokens (KIP-48, KIP-249, KIP-373).

* :mod:`kchannel.tokens.token` -- token information, HMAC, SCRAM credentials,
  Kafka's ZooKeeper JSON.
* :mod:`kchannel.tokens.manager` -- the sans-I/O :class:`TokenManager`.
* :mod:`kchannel.tokens.store` / :mod:`kchannel.tokens.zk_store` -- where
  tokens live (memory, SQLite, ZooKeeper).
* :mod:`kchannel.tokens.handlers` -- APIs 38-41 on a ``kchannel.server.Server``.
* :mod:`kchannel.tokens.admin` -- the client side (create/renew/expire/describe).

:func:`install_server` is what ``kchannel serve`` calls: it registers the
token APIs (always -- without ``delegation.token.secret.key`` they answer
DELEGATION_TOKEN_AUTH_DISABLED, as a Kafka broker does), opens the store named
by ``kchannel.delegation.token.store``, plugs token logins into the SCRAM
callbacks of every SASL listener and starts the expiry sweep.
"""
import os

from kchannel.config.types import reveal
from kchannel.errors import ConfigError
from kchannel.log import get_logger
from kchannel.principal import parse_super_users
from kchannel.security.sasl.scram_store import data_dir_from_server_config
from kchannel.tokens.handlers import (TokenExpirySweeper, attach_token_manager,
                                      register_token_handlers)
from kchannel.tokens.manager import (DEFAULT_MAX_TOKENS_PER_OWNER, SuperUserTokenAuthorizer,
                                     TokenManager)
from kchannel.tokens.store import (STORE_CONFIG, STORE_FILE_NAME, InMemoryTokenStore,
                                   SqliteTokenStore)
from kchannel.tokens.zk_store import ZkTokenStore

log = get_logger("kchannel.tokens")

__all__ = ["install_server", "open_token_store", "TokenService"]

MAX_PER_OWNER_CONFIG = "kchannel.delegation.token.max.tokens.per.owner"


class TokenService:
    """What :func:`install_server` started; ``close()`` stops the expiry
    sweep and closes the store."""

    def __init__(self, manager, sweeper=None):
        self.manager = manager
        self.sweeper = sweeper

    def close(self):
        if self.sweeper is not None:
            self.sweeper.close()
        self.manager.close()


def _value(config, props, key, default=None):
    if config is not None:
        try:
            value = config.get(key)
        except (KeyError, AttributeError):
            value = None
        if value is not None:
            return value
    if props is not None and props.get(key) not in (None, ""):
        return props[key]
    return default


def _secret(config, props):
    if config is not None and hasattr(config, "delegation_token_secret_key"):
        return config.delegation_token_secret_key
    return (_value(None, props, "delegation.token.secret.key")
            or _value(None, props, "delegation.token.master.key"))


def open_token_store(config=None, props=None):
    """The store named by ``kchannel.delegation.token.store``: ``sqlite``
    (default; first log directory), ``memory`` or ``zookeeper``
    (``zookeeper.connect``, whose chroot is the root of Kafka's
    ``/delegation_token`` tree)."""
    kind = str(_value(config, props, STORE_CONFIG, "sqlite")).strip().lower()
    if kind == "memory":
        return InMemoryTokenStore()
    if kind == "zookeeper":
        connect = _value(config, props, "zookeeper.connect")
        if not connect:
            raise ConfigError(f"{STORE_CONFIG}=zookeeper requires zookeeper.connect",
                              key="zookeeper.connect", value=None)
        timeout = int(_value(config, props, "zookeeper.session.timeout.ms", 18000))
        return ZkTokenStore(str(connect), session_timeout_ms=timeout)
    if kind != "sqlite":
        raise ConfigError(f"Invalid value {kind} for configuration {STORE_CONFIG}: "
                          "String must be one of: sqlite, memory, zookeeper",
                          key=STORE_CONFIG, value=kind)
    data_dir = getattr(config, "data_dir", None) if config is not None else None
    if not data_dir:
        data_dir = data_dir_from_server_config(props or {})
    return SqliteTokenStore(os.path.join(data_dir, STORE_FILE_NAME))


def install_server(server, config=None, props=None, *, store=None, authorizer=None,
                   start_sweeper=True):
    """Enable delegation tokens on ``server`` from its configuration
    (a ``ServerConfig`` and/or the raw properties).  Returns a
    :class:`TokenService`."""
    secret = _secret(config, props)
    enabled = secret is not None and bool(reveal(secret))
    if enabled and store is None:
        store = open_token_store(config, props)
    if authorizer is None:
        # Kafka's super.users: "User:admin;User:ops".
        supers = parse_super_users(_value(config, props, "super.users"))
        if supers:
            authorizer = SuperUserTokenAuthorizer(supers)
    manager = TokenManager(
        secret if enabled else None,
        int(_value(config, props, "delegation.token.max.lifetime.ms", 604800000)),
        int(_value(config, props, "delegation.token.expiry.time.ms", 86400000)),
        store, authorizer=authorizer,
        expiry_check_interval_ms=int(_value(config, props,
                                            "delegation.token.expiry.check.interval.ms",
                                            3600000)),
        max_tokens_per_owner=int(_value(config, props, MAX_PER_OWNER_CONFIG,
                                        DEFAULT_MAX_TOKENS_PER_OWNER)))
    register_token_handlers(server, manager)
    sweeper = None
    if enabled:
        attach_token_manager(server, manager)
        if start_sweeper:
            sweeper = TokenExpirySweeper(manager, manager.expiry_check_interval_ms,
                                         getattr(server, "time", None)).start()
        log.info("Delegation tokens enabled (store: %s)", type(manager.store).__name__)
    return TokenService(manager, sweeper)
