"""The interfaces every SASL mechanism implements (no registry, no mechanisms).

They mirror ``javax.security.sasl.SaslClient`` / ``SaslServer`` (the shape
Kafka's authenticators drive), but are sans-I/O: a mechanism takes the bytes
of one SaslAuthenticate token and returns the bytes of the next one.

The mechanisms (plain, scram, gssapi, oauthbearer) import this module; the
registry that creates them by name, :mod:`kchannel.security.sasl.mechanism`,
imports them, so the dependency points one way.
"""
from dataclasses import dataclass

from kchannel.config.types import reveal
from kchannel.principal import KafkaPrincipal

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
    owner: KafkaPrincipal
    expiry_ms: int
    token_id: str


def jaas_option(jaas_options, name, default=None):
    """A JAAS option value as a plain string (Password unwrapped)."""
    if not jaas_options:
        return default
    value = jaas_options.get(name, default)
    return reveal(value)
