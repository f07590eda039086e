"""Authenticators (Kafka's ``org.apache.kafka.common.network.Authenticator``).

An authenticator runs after the transport is ready (TLS handshake done) and
before the channel carries application data.  It reads and writes through the
channel's :class:`~kchannel.network.channel.AuthIO` so that bytes read ahead
during authentication are never lost: the channel's single FrameDecoder is
shared with the data phase.

* :class:`Authenticator` -- the interface, with KIP-368 re-authentication hooks
  that default to "not supported" exactly like Kafka's default methods.
* :class:`DefaultAuthenticator` -- PLAINTEXT and SSL (Kafka's
  ``PlaintextAuthenticator`` and ``SslAuthenticator``): nothing to exchange,
  completes immediately; the principal comes from the principal builder
  (``User:ANONYMOUS`` for PLAINTEXT; SSL: the client certificate's subject DN
  mapped by ``ssl.principal.mapping.rules``, ``User:ANONYMOUS`` without one).
"""
import logging

from ..principal import (
    ANONYMOUS,
    DefaultKafkaPrincipalBuilder,
    PlaintextAuthenticationContext,
    SslAuthenticationContext,
    load_principal_builder,
)
from .ops import OP_NONE

log = logging.getLogger("kchannel.network.authenticator")

__all__ = ["Authenticator", "DefaultAuthenticator", "create_principal_builder"]


class Authenticator:
    """Base class of every authenticator.

    ``authenticate(io, now)`` is called by the channel (through ``prepare``)
    each time the channel is ready for I/O until ``complete()`` is true; it
    returns the readiness ops it is waiting for (``OP_READ``/``OP_WRITE``),
    0 when done.  Failures raise ``kchannel.errors.AuthenticationError``
    subclasses (the selector closes the channel, possibly after
    ``connection.failed.authentication.delay.ms``) or
    ``ChannelConnectionError``/``InvalidReceiveError`` for network faults.
    """

    def authenticate(self, io, now):
        raise NotImplementedError

    def complete(self):
        raise NotImplementedError

    def principal(self):
        raise NotImplementedError

    def close(self):
        pass

    # -- authentication failure (server side) --------------------------------
    def handle_authentication_failure(self):
        """Called when a delayed close after an authentication failure is
        finally carried out (Kafka: send the deferred failure response)."""

    # -- KIP-368 re-authentication hooks (no-op defaults as in Kafka) --------
    def reauthenticate(self, io, first_frame, now, previous=None):
        """Begin re-authentication.  Server side ``first_frame`` is the
        SaslHandshake request payload that started it; client side it is
        None.  ``previous`` is the authenticator being replaced."""
        raise NotImplementedError("re-authentication is not supported by "
                                  f"{type(self).__name__}")

    def server_session_expiration_ms(self):
        """Epoch ms after which the server must close the connection on its
        next non-authentication request, or None (no expiry)."""
        return None

    def client_session_reauth_ms(self):
        """Epoch ms at which the client should re-authenticate, or None."""
        return None

    def reauthentication_latency_ms(self):
        """Duration of the last re-authentication, or None."""
        return None

    def connected_client_supports_reauthentication(self):
        return False

    def get_and_clear_responses_received_during_reauthentication(self):
        """Client side: responses to requests sent before re-authentication
        began that arrived while it was running (payloads)."""
        return []


def create_principal_builder(configs, ssl_principal_mapper=None, kerberos_short_namer=None):
    """Kafka's ``ChannelBuilders.createPrincipalBuilder``.

    ``principal.builder.class`` (dotted path) wins; otherwise the default
    builder with the given mappers.
    """
    configs = configs or {}
    cls = configs.get("principal.builder.class")
    if cls and str(cls) not in ("org.apache.kafka.common.security.authenticator."
                                "DefaultKafkaPrincipalBuilder",):
        return load_principal_builder(str(cls), **dict(configs))
    return DefaultKafkaPrincipalBuilder(ssl_principal_mapper, kerberos_short_namer)


def create_ssl_principal_mapper(configs):
    """``ssl.principal.mapping.rules`` -> mapper object (None = use DN as is)."""
    rules = (configs or {}).get("ssl.principal.mapping.rules")
    if rules is None:
        return None
    if isinstance(rules, (list, tuple)):
        rules = ",".join(rules)
    rules = str(rules).strip()
    if rules in ("", "DEFAULT"):
        return None
    from .ssl_principal import SslPrincipalMapper
    if hasattr(SslPrincipalMapper, "from_rules"):
        return SslPrincipalMapper.from_rules(rules)
    return SslPrincipalMapper(rules)


class DefaultAuthenticator(Authenticator):
    """PLAINTEXT / SSL authenticator: no exchange, completes at once.

    The principal is built once, on the first ``authenticate`` call (the
    TLS handshake is complete by then, so the peer certificate is known).
    """

    def __init__(self, security_protocol="PLAINTEXT", principal_builder=None,
                 listener_name=None, client_address=None):
        self.security_protocol = security_protocol
        self.principal_builder = principal_builder or DefaultKafkaPrincipalBuilder()
        self.listener_name = listener_name
        self.client_address = client_address
        self._principal = None
        self._complete = False

    def authenticate(self, io, now):
        if not self._complete:
            self._principal = self._build_principal(io)
            self._complete = True
        return OP_NONE

    def _build_principal(self, io):
        transport = getattr(io, "transport", None)
        address = getattr(io, "client_address", None) or self.client_address
        listener = getattr(io, "listener_name", None) or self.listener_name
        if self.security_protocol == "SSL":
            der = dn = None
            if transport is not None:
                try:
                    der = transport.peer_certificate_der()
                    dn = transport.peer_subject_dn()
                except Exception:  # no client certificate / no TLS session
                    der = dn = None
            ctx = SslAuthenticationContext(der, dn, address, listener, "SSL")
        else:
            ctx = PlaintextAuthenticationContext(address, listener, self.security_protocol)
        principal = self.principal_builder.build(ctx)
        return principal if principal is not None else ANONYMOUS

    def complete(self):
        return self._complete

    def principal(self):
        return self._principal if self._principal is not None else ANONYMOUS
