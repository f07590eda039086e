"""SASL mechanism interfaces and the mechanism registry.

The interfaces mirror ``javax.security.sasl.SaslClient`` / ``SaslServer``
(the shape Kafka's authenticators drive), but are sans-I/O: a mechanism takes
the bytes of one SaslAuthenticate token and returns the bytes of the next one.

Client side::

    mech = create_client("SCRAM-SHA-256", jaas_options={...}, configs={...},
                         server_host="broker1")
    token = mech.evaluate_challenge(b"") if mech.has_initial_response() else b""
    ... send token, receive challenge, token = mech.evaluate_challenge(challenge) ...

Server side::

    mech = create_server("PLAIN", jaas_options={...}, configs={...},
                         callbacks=ServerCallbacks(...), server_host="broker1",
                         now=now_ms())
    challenge = mech.evaluate_response(client_token, now)

Failures raise :class:`kchannel.errors.SaslAuthenticationError` whose message
may be shown to the client; it never reveals whether a user exists.

Mechanisms register themselves with :func:`register`.  The built-in ones are
imported lazily the first time their name is asked for, so importing this
module does not pull in GSSAPI (which needs the ``gssapi`` package) or the
OAUTHBEARER machinery.
"""
import importlib
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from kchannel.config.types import reveal
from kchannel.errors import UnsupportedSaslMechanismError
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.mechanism")

# Negotiated property names (Kafka's SaslInternalConfigs / ScramLoginModule).
CREDENTIAL_LIFETIME_MS = "CREDENTIAL.LIFETIME.MS"
TOKEN_AUTH = "tokenauth"


class SaslClientMechanism:
    """Client half of a SASL mechanism (``javax.security.sasl.SaslClient``)."""

    mechanism_name = None

    def has_initial_response(self):
        """True if the client sends the first token (PLAIN, SCRAM, OAUTHBEARER)."""
        return False

    def evaluate_challenge(self, challenge):
        """Process a server challenge and return the next response.

        The first call is made with ``b""`` to obtain the initial response.
        Returns ``None`` when there is nothing (more) to send.
        """
        raise NotImplementedError

    def is_complete(self):
        raise NotImplementedError

    def get_negotiated_property(self, name):
        return None

    def dispose(self):
        """Drop any secret material held by the mechanism."""


class SaslServerMechanism:
    """Server half of a SASL mechanism (``javax.security.sasl.SaslServer``)."""

    mechanism_name = None

    def evaluate_response(self, response, now):
        """Process a client token; return the challenge to send or ``None``.

        ``now`` is epoch milliseconds.  Raises ``SaslAuthenticationError``.
        """
        raise NotImplementedError

    def is_complete(self):
        raise NotImplementedError

    def get_authorization_id(self):
        raise NotImplementedError

    def get_negotiated_property(self, name):
        return None

    @property
    def token_authenticated(self):
        """True when a delegation token authenticated the client (KIP-48)."""
        value = self.get_negotiated_property(TOKEN_AUTH)
        if isinstance(value, str):  # Kafka's mechanisms return "true"/"false"
            return value.lower() == "true"
        return bool(value)

    def dispose(self):
        """Drop any secret material held by the mechanism."""


@dataclass(frozen=True)
class TokenCredential:
    """SCRAM credential of a delegation token (what the token manager returns
    for ``token_credential``).  ``credential`` is a
    :class:`kchannel.security.sasl.scram_store.ScramCredential`; ``owner`` the
    token owner's :class:`kchannel.principal.KafkaPrincipal`; ``expiry_ms`` the
    token's expiry time (epoch ms)."""

    credential: object
    owner: object
    expiry_ms: int
    token_id: str


@dataclass
class ServerCallbacks:
    """What server mechanisms ask the broker for (Kafka's server callback
    handlers).  Every member is optional; a mechanism whose callback is missing
    falls back to its JAAS options (PLAIN) or fails the authentication.

    * ``plain_authenticate(username, password) -> bool``
    * ``scram_credential(username, mechanism) -> ScramCredential | None``
    * ``token_credential(token_id, mechanism, now) -> TokenCredential | None``
    * ``oauth_validate(token_str, now) -> OAuthBearerToken`` (raises on failure)
    * ``scram_secret``: bytes from which the SCRAM server derives the salt it
      shows for unknown users; taken from the credential store so that all
      servers sharing a store answer alike (a per-process secret otherwise).
    """

    plain_authenticate: Optional[Callable] = None
    scram_credential: Optional[Callable] = None
    token_credential: Optional[Callable] = None
    oauth_validate: Optional[Callable] = None
    scram_secret: Optional[bytes] = field(default=None, repr=False)

    @classmethod
    def default(cls, jaas_options=None, store=None, token_credential=None,
                oauth_validate=None):
        """Callbacks as Kafka's default handlers build them.

        ``jaas_options``: PLAIN users given as ``user_<name>="<password>"``
        (``PlainServerCallbackHandler``).  ``store``: a
        ``ScramCredentialStore`` for SCRAM users (``ScramServerCallbackHandler``
        reading the credential cache).  ``token_credential``: the token
        manager's lookup for SCRAM delegation-token logins.
        """
        plain = None
        if jaas_options is not None:
            from kchannel.security.sasl.plain import jaas_plain_authenticator
            plain = jaas_plain_authenticator(jaas_options)
        scram = store.get if store is not None else None
        secret = None
        if store is not None and hasattr(store, "secret"):
            secret = store.secret()
        return cls(plain_authenticate=plain, scram_credential=scram,
                   token_credential=token_credential, oauth_validate=oauth_validate,
                   scram_secret=secret)


# mechanism name -> (client_factory, server_factory)
_REGISTRY = {}
_LOCK = threading.Lock()

# Built-in mechanisms: the module that registers each name on import.
_LAZY = {
    "PLAIN": "kchannel.security.sasl.plain",
    "SCRAM-SHA-256": "kchannel.security.sasl.scram",
    "SCRAM-SHA-512": "kchannel.security.sasl.scram",
    "GSSAPI": "kchannel.security.sasl.gssapi",
    "OAUTHBEARER": "kchannel.security.sasl.oauthbearer",
}


def register(mechanism, client_factory, server_factory):
    """Register factories for ``mechanism`` (replacing any earlier ones).

    ``client_factory(mechanism, *, jaas_options, configs, server_host, **kw)``
    returns a :class:`SaslClientMechanism`;
    ``server_factory(mechanism, *, jaas_options, configs, callbacks,
    server_host, now, **kw)`` returns a :class:`SaslServerMechanism`.
    Either may be ``None`` if that side is not implemented.
    """
    with _LOCK:
        _REGISTRY[mechanism] = (client_factory, server_factory)


def _factories(mechanism):
    entry = _REGISTRY.get(mechanism)
    if entry is None and mechanism in _LAZY:
        try:
            importlib.import_module(_LAZY[mechanism])
        except ImportError as exc:
            # A missing optional dependency (e.g. gssapi) makes the mechanism
            # unavailable rather than breaking every other mechanism.
            log.warning("SASL mechanism %s is unavailable: %s", mechanism, exc)
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism} is unavailable: {exc}") from exc
        entry = _REGISTRY.get(mechanism)
    if entry is None:
        raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
    return entry


def supported_mechanisms():
    """Names of registered and built-in mechanisms."""
    return sorted(set(_REGISTRY) | set(_LAZY))


def create_client(mechanism, *, jaas_options=None, configs=None, server_host=None, **kw):
    """Create the client mechanism ``mechanism`` (Kafka's mechanism name)."""
    client_factory, _ = _factories(mechanism)
    if client_factory is None:
        raise UnsupportedSaslMechanismError(
            f"No client implementation for SASL mechanism {mechanism}")
    return client_factory(mechanism, jaas_options=dict(jaas_options or {}),
                          configs=dict(configs or {}), server_host=server_host, **kw)


def create_server(mechanism, *, jaas_options=None, configs=None, callbacks=None,
                  server_host=None, now=None, **kw):
    """Create the server mechanism ``mechanism``.

    Without ``callbacks`` the defaults are built from ``jaas_options`` only.
    """
    _, server_factory = _factories(mechanism)
    if server_factory is None:
        raise UnsupportedSaslMechanismError(
            f"No server implementation for SASL mechanism {mechanism}")
    if callbacks is None:
        callbacks = ServerCallbacks.default(jaas_options=jaas_options)
    return server_factory(mechanism, jaas_options=dict(jaas_options or {}),
                          configs=dict(configs or {}), callbacks=callbacks,
                          server_host=server_host, now=now, **kw)


def jaas_option(jaas_options, name, default=None):
    """A JAAS option value as a plain string (Password unwrapped)."""
    if not jaas_options:
        return default
    value = jaas_options.get(name, default)
    return reveal(value)
