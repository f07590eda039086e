"""The SASL mechanism registry: mechanisms by Kafka name, and the broker
callbacks they use.

The interfaces a mechanism implements are in
:mod:`kchannel.security.sasl.interfaces` (re-exported here); the mechanisms
import only those, and this registry imports the mechanisms, so the
dependency points one way.

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

PLAIN is registered on import.  SCRAM, GSSAPI and OAUTHBEARER are imported
the first time their name is asked for: GSSAPI needs the optional ``gssapi``
package, and SCRAM (its PBKDF2 twin loads ``cryptography``, about 10 ms) and
OAUTHBEARER's JWT/JWKS machinery would otherwise add that to every ``import
kchannel.client``.  Other mechanisms can be added with :func:`register`.
"""
import importlib
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from kchannel.errors import UnsupportedSaslMechanismError
from kchannel.network.authenticator import kept_mapping
from kchannel.security.sasl import plain
from kchannel.security.sasl.interfaces import (
    CREDENTIAL_LIFETIME_MS,
    TOKEN_AUTH,
    SaslClientMechanism,
    SaslServerMechanism,
    TokenCredential,
    jaas_option,
)
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.mechanism")

__all__ = ["ServerCallbacks", "register", "supported_mechanisms", "create_client",
           "create_server", "CREDENTIAL_LIFETIME_MS", "TOKEN_AUTH", "SaslClientMechanism",
           "SaslServerMechanism", "TokenCredential", "jaas_option"]


@dataclass
class ServerCallbacks:
    """What server mechanisms ask the broker for (Kafka's server callback
    handlers).  Every member is optional; a mechanism whose callback is missing
    falls back to its JAAS options (PLAIN) or fails the authentication.

    * ``plain_authenticate(username, password) -> bool``
    * ``scram_credential(username, mechanism) -> ScramCredential | None``
    * ``token_credential(token_id, mechanism, now) -> TokenCredential | None``
    * ``oauth_validate(token_str, now) -> OAuthBearerToken`` (raises on failure)
    * ``oauth_validate_extensions(token, extensions) -> dict``: the SASL
      extensions kept for a token ``oauth_validate`` accepted (None: none are
      kept, as Kafka without extension support)
    * ``scram_secret``: bytes from which the SCRAM server derives the salt it
      shows for unknown users; taken from the credential store so that all
      servers sharing a store answer alike (a per-process secret otherwise).
    """

    plain_authenticate: Optional[Callable] = None
    scram_credential: Optional[Callable] = None
    token_credential: Optional[Callable] = None
    oauth_validate: Optional[Callable] = None
    oauth_validate_extensions: Optional[Callable] = None
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
        plain_authenticate = None
        if jaas_options is not None:
            plain_authenticate = plain.jaas_plain_authenticator(jaas_options)
        scram_credential = store.get if store is not None else None
        secret = None
        if store is not None:
            secret = store.secret()
        return cls(plain_authenticate=plain_authenticate, scram_credential=scram_credential,
                   token_credential=token_credential, oauth_validate=oauth_validate,
                   scram_secret=secret)


# mechanism name -> (client_factory, server_factory)
_REGISTRY = {plain.PLAIN_MECHANISM: (plain.create_client, plain.create_server)}
_LOCK = threading.Lock()

# Built-in mechanisms imported on first use (see the module docstring): the
# module whose ``create_client`` / ``create_server`` serve the name.
_LAZY = {
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
            module = importlib.import_module(_LAZY[mechanism])
        except ImportError as exc:
            # A missing optional dependency (e.g. gssapi) makes the mechanism
            # unavailable rather than breaking every other mechanism.
            log.warning("SASL mechanism %s is unavailable: %s", mechanism, exc)
            raise UnsupportedSaslMechanismError(
                f"SASL mechanism {mechanism} is unavailable: {exc}") from exc
        with _LOCK:
            entry = _REGISTRY.setdefault(mechanism, (module.create_client, module.create_server))
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
    # A read-only view (what authenticators hold) is passed as it is: copying
    # a client's whole config into a dict per connection cost more than the
    # rest of creating a SCRAM client, and mechanisms only read it.
    return client_factory(mechanism, jaas_options=kept_mapping(jaas_options),
                          configs=kept_mapping(configs), server_host=server_host, **kw)


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
    return server_factory(mechanism, jaas_options=kept_mapping(jaas_options),
                          configs=kept_mapping(configs), callbacks=callbacks,
                          server_host=server_host, now=now, **kw)
