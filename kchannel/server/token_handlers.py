"""Server handlers for the delegation token APIs (38-41) and the wiring that
plugs a :class:`~kchannel.tokens.manager.TokenManager` into a
:class:`kchannel.server.Server`.

:func:`install_server` is what ``kchannel serve`` calls: it registers the
token APIs (always -- without ``delegation.token.secret.key`` they answer
DELEGATION_TOKEN_AUTH_DISABLED, as a Kafka broker does), opens the store named
by ``kchannel.delegation.token.store``, plugs token logins into the SCRAM
callbacks of every SASL listener and starts the expiry sweep.

Each handler turns a decoded request into the manager call Kafka's
``KafkaApis`` makes and the manager's answer into the response body;
version-specific fields (KIP-373's owner/requester, v3) are simply ignored by
the encoder for older versions.
"""
import threading

from kchannel.config import ServerConfig
from kchannel.config.types import reveal
from kchannel.principal import KafkaPrincipal, parse_super_users
from kchannel.protocol import messages
from kchannel.security.sasl.channel_builder import SaslChannelBuilder
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.server.interface import BrokerServer
from kchannel.tokens import config_value, open_token_store
from kchannel.tokens.manager import (DEFAULT_MAX_TOKENS_PER_OWNER, SuperUserTokenAuthorizer,
                                     TokenManager)
from kchannel.utils import now_ms
from kchannel.log import get_logger

# The loggers keep the names they had before the module moved here (log
# configurations and the lines operators grep for name them).
log = get_logger("kchannel.tokens.handlers")
_install_log = get_logger("kchannel.tokens")

# kchannel-specific: the most live tokens one owner may have.
MAX_PER_OWNER_CONFIG = "kchannel.delegation.token.max.tokens.per.owner"

__all__ = ["install_server", "TokenService", "register_token_handlers",
           "attach_token_manager", "TokenExpirySweeper", "create_token_handler",
           "renew_token_handler", "expire_token_handler", "describe_token_handler"]

CREATE = messages.API[38]
RENEW = messages.API[39]
EXPIRE = messages.API[40]
DESCRIBE = messages.API[41]


def _principal(ctx):
    return ctx.principal


def _now(ctx):
    return ctx.now or now_ms()


def create_token_handler(manager):
    def handle(ctx):
        body = ctx.body or {}
        owner = None
        if body.get("owner_principal_name"):
            owner = KafkaPrincipal(body.get("owner_principal_type") or "User",
                                   body["owner_principal_name"])
        renewers = [KafkaPrincipal(r.get("principal_type"), r.get("principal_name"))
                    for r in body.get("renewers") or ()]
        result = manager.create_token(
            _principal(ctx), owner=owner, renewers=renewers,
            max_lifetime_ms=body.get("max_lifetime_ms", -1), now=_now(ctx),
            security_protocol=ctx.security_protocol)
        return {
            "error_code": int(result.error),
            "principal_type": result.owner.principal_type,
            "principal_name": result.owner.name,
            "token_requester_principal_type": result.token_requester.principal_type,
            "token_requester_principal_name": result.token_requester.name,
            "issue_timestamp_ms": result.issue_timestamp,
            "expiry_timestamp_ms": result.expiry_timestamp,
            "max_timestamp_ms": result.max_timestamp,
            "token_id": result.token_id,
            "hmac": result.hmac,
            "throttle_time_ms": 0,
        }
    return handle


def renew_token_handler(manager):
    def handle(ctx):
        body = ctx.body or {}
        error, expiry = manager.renew_token(
            _principal(ctx), body.get("hmac") or b"", body.get("renew_period_ms", -1),
            now=_now(ctx), security_protocol=ctx.security_protocol)
        return {"error_code": int(error), "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}
    return handle


def expire_token_handler(manager):
    def handle(ctx):
        body = ctx.body or {}
        error, expiry = manager.expire_token(
            _principal(ctx), body.get("hmac") or b"", body.get("expiry_time_period_ms", -1),
            now=_now(ctx), security_protocol=ctx.security_protocol)
        return {"error_code": int(error), "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}
    return handle


def describe_token_handler(manager):
    def handle(ctx):
        body = ctx.body or {}
        owners = body.get("owners")
        if owners is not None:
            owners = [KafkaPrincipal(o.get("principal_type"), o.get("principal_name"))
                      for o in owners]
        error, tokens = manager.describe_tokens(_principal(ctx), owners, now=_now(ctx),
                                                security_protocol=ctx.security_protocol)
        described = []
        for t in tokens:
            info = t.token_info
            described.append({
                "principal_type": info.owner.principal_type,
                "principal_name": info.owner.name,
                "token_requester_principal_type": info.token_requester.principal_type,
                "token_requester_principal_name": info.token_requester.name,
                "issue_timestamp": info.issue_timestamp,
                "expiry_timestamp": info.expiry_timestamp,
                "max_timestamp": info.max_timestamp,
                "token_id": info.token_id,
                "hmac": t.hmac,
                "renewers": [{"principal_type": r.principal_type, "principal_name": r.name}
                             for r in info.renewers],
            })
        return {"error_code": int(error), "tokens": described, "throttle_time_ms": 0}
    return handle


# Kafka 4 no longer serves v0 of APIs 38-41 (KIP-896); the codec keeps v0 so
# that the kchannel client can still talk to older brokers.
SERVER_MIN_VERSION = 1


def register_token_handlers(server: BrokerServer, manager):
    """Serve APIs 38-41 at the versions a Kafka 4 broker serves: from v1 up to
    the highest the codec supports."""
    for api, factory in ((CREATE, create_token_handler), (RENEW, renew_token_handler),
                         (EXPIRE, expire_token_handler), (DESCRIBE, describe_token_handler)):
        server.register_handler(api.api_key, factory(manager),
                                max(api.min_version, SERVER_MIN_VERSION), api.max_version)


def attach_token_manager(server: BrokerServer, manager):
    """Make SCRAM token logins (``tokenauth=true``) on every SASL listener of
    ``server`` use ``manager.token_credential``.  Works on a server whose
    listeners are already bound: the channel builders' server callbacks are
    updated in place (callbacks that already have a token lookup are left
    alone)."""
    server.token_manager = manager
    lookup = manager.token_credential
    for listener in server.listeners:
        builder = listener.channel_builder
        # Only a SASL listener's server builder has callbacks.
        if not isinstance(builder, SaslChannelBuilder) or builder.mode != "server":
            continue
        callbacks = builder.callbacks
        items = callbacks.values() if isinstance(callbacks, dict) else [callbacks]
        for cb in items:
            if isinstance(cb, ServerCallbacks) and cb.token_credential is None:
                cb.token_credential = lookup


class TokenExpirySweeper:
    """Runs ``manager.expire_tokens(now)`` every ``interval_ms``
    (``delegation.token.expiry.check.interval.ms``) on a daemon thread, as
    Kafka's scheduled ``delete-expired-tokens`` task."""

    def __init__(self, manager, interval_ms, time=None):
        self.manager = manager
        self.interval_ms = max(1, int(interval_ms))
        self.time = time or now_ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delegation-token-expiry",
                                        daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(self.interval_ms / 1000.0):
            try:
                self.manager.expire_tokens(self.time())
            except Exception:  # noqa: BLE001 - keep sweeping after a store hiccup
                log.warning("Delegation token expiry check failed", exc_info=True)

    def close(self):
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)


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


def _secret(config, props):
    if isinstance(config, ServerConfig):
        return config.delegation_token_secret_key
    return (config_value(None, props, "delegation.token.secret.key")
            or config_value(None, props, "delegation.token.master.key"))


def install_server(server: BrokerServer, config=None, props=None, *, store=None, authorizer=None,
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
        supers = parse_super_users(config_value(config, props, "super.users"))
        if supers:
            authorizer = SuperUserTokenAuthorizer(supers)
    manager = TokenManager(
        secret if enabled else None,
        int(config_value(config, props, "delegation.token.max.lifetime.ms", 604800000)),
        int(config_value(config, props, "delegation.token.expiry.time.ms", 86400000)),
        store, authorizer=authorizer,
        expiry_check_interval_ms=int(config_value(config, props,
                                            "delegation.token.expiry.check.interval.ms",
                                            3600000)),
        max_tokens_per_owner=int(config_value(config, props, MAX_PER_OWNER_CONFIG,
                                              DEFAULT_MAX_TOKENS_PER_OWNER)))
    register_token_handlers(server, manager)
    sweeper = None
    if enabled:
        attach_token_manager(server, manager)
        if start_sweeper:
            sweeper = TokenExpirySweeper(manager, manager.expiry_check_interval_ms,
                                         server.time).start()
        _install_log.info("Delegation tokens enabled (store: %s)", type(manager.store).__name__)
    return TokenService(manager, sweeper)
