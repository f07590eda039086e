"""Authenticators (Kafka's ``org.apache.kafka.common.network.Authenticator``).

An authenticator runs after the transport is ready (TLS handshake done) and
before the channel carries application data.  It reads and writes through the
channel's :class:`~kchannel.network.channel.AuthIO` so that bytes read ahead
during authentication are never lost: the channel's single FrameDecoder is
shared with the data phase.

* :class:`Authenticator` -- the interface, with KIP-368 re-authentication hooks
  that default to "not supported" exactly like Kafka's default methods.
* :class:`StateMachineAuthenticator` -- the state machine both SASL
  authenticators share: an explicit transition table, one ``_set_state``
  writer and Kafka's "state changes once the queued response is flushed".
* :class:`DefaultAuthenticator` -- PLAINTEXT and SSL (Kafka's
  ``PlaintextAuthenticator`` and ``SslAuthenticator``): nothing to exchange,
  completes immediately; the principal comes from the principal builder
  (``User:ANONYMOUS`` for PLAINTEXT; SSL: the client certificate's subject DN
  mapped by ``ssl.principal.mapping.rules``, ``User:ANONYMOUS`` without one).
"""

import abc
from types import MappingProxyType

from ..errors import IllegalStateTransitionError
from ..principal import (
    ANONYMOUS,
    DefaultKafkaPrincipalBuilder,
    PlaintextAuthenticationContext,
    SslAuthenticationContext,
    load_principal_builder,
)
from .ops import OP_NONE
from .ssl_principal import SslPrincipalMapper
from ..log import get_logger

log = get_logger("kchannel.network.authenticator")

__all__ = ["Authenticator", "DefaultAuthenticator", "StateMachineAuthenticator",
           "create_principal_builder"]


class Authenticator(abc.ABC):
    """Base class of every authenticator: the interface the channel and
    selector call (they never probe for methods; the hooks below have
    Kafka's no-op defaults).

    ``authenticate(io, now)`` is called by the channel (through ``prepare``)
    each time the channel is ready for I/O until ``complete()`` is true; it
    returns the readiness ops it is waiting for (``OP_READ``/``OP_WRITE``),
    0 when done.  Failures raise ``kchannel.errors.AuthenticationError``
    subclasses (the selector closes the channel, possibly after
    ``connection.failed.authentication.delay.ms``) or
    ``ChannelConnectionError``/``InvalidReceiveError`` for network faults.
    """

    @abc.abstractmethod
    def authenticate(self, io, now):
        raise NotImplementedError

    @abc.abstractmethod
    def complete(self):
        raise NotImplementedError

    @abc.abstractmethod
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


class StateMachineAuthenticator(Authenticator):
    """An authenticator whose ``state`` follows an explicit transition table
    (in the style of h11's ``_state.py``) and whose state changes wait for
    the response it queued (Kafka's ``pendingSaslState``).

    Subclasses define ``TRANSITIONS``: state -> frozenset of the states it
    may change to, the key ``None`` listing the initial states; a state that
    is not a key has no way out.  ``state`` is read-only: ``_set_state`` is
    its only writer, and refuses (``IllegalStateTransitionError``) any change
    the table does not list, so the table is the whole truth about the flow.

    Pending-write gate: ``_send`` queues a frame and tries to flush it; while
    it is not flushed, ``_set_state`` only records the requested state (and
    an exception to raise once it is entered), and ``_flush`` applies it when
    the bytes are out.  ``complete()`` can so never turn true, nor a failure
    propagate, while the response that announces it is still queued.
    ``immediate=True`` bypasses the gate: a network fault or a malformed
    request fails at once (Kafka's server: "fail immediately"), dropping any
    state still waiting for the gate.
    """

    TRANSITIONS = {}
    FAILED = None

    # Class-level defaults: the instance attributes are written by
    # _set_state / the gate only.
    _state = None
    _writes_pending = False
    _pending_state = None
    _pending_exception = None

    @property
    def state(self):
        return self._state

    def _set_state(self, state, now=None, exception=None, *, immediate=False):
        """Change to ``state`` (after the pending write unless ``immediate``),
        then raise ``exception`` if given.  ``now`` is handed to
        ``_state_entered``."""
        current = self._state
        if state not in self.TRANSITIONS.get(current, ()):
            raise IllegalStateTransitionError(
                f"{type(self).__name__}: no transition from "
                f"{getattr(current, 'name', current)} to {getattr(state, 'name', state)}")
        if self._writes_pending and not immediate:
            self._pending_state = state
            self._pending_exception = exception
            return
        self._state = state
        self._pending_state = None
        self._pending_exception = None
        self._state_entered(state, now)
        if exception is not None:
            raise exception

    def _fail(self):
        """Enter FAILED now, unless already there (a second failure report
        of the same exchange changes nothing)."""
        if self._state is not self.FAILED:
            self._set_state(self.FAILED, immediate=True)

    def _state_entered(self, state, now):
        """Hook: ``state`` was just entered (logging, completion times)."""

    def _reset_gate(self):
        """Forget queued-write bookkeeping (a re-authentication starts with
        nothing of the previous exchange pending)."""
        self._writes_pending = False
        self._pending_state = None
        self._pending_exception = None

    def _send(self, io, payload, now=None):
        io.write_frame(payload)
        # (_flush, inlined: once per frame sent)
        if io.flush():
            self._writes_pending = False
            if self._pending_state is not None:
                self._set_state(self._pending_state, now, self._pending_exception)
        else:
            self._writes_pending = True

    def _flush(self, io, now=None):
        """Flush queued frames; True when all are out (a state waiting for
        them is entered, raising its exception if it has one)."""
        if io.flush():
            self._writes_pending = False
            if self._pending_state is not None:
                self._set_state(self._pending_state, now, self._pending_exception)
            return True
        return False


def kept_mapping(mapping):
    """``mapping`` as an authenticator keeps it: a read-only
    ``MappingProxyType`` (what a channel builder passes: a view of its own
    configs, shared by every connection) as it is, anything else as a copy
    (the caller may change it later).  A copy per connection of a client's
    whole config is most of a kilobyte, held as long as the connection."""
    if type(mapping) is MappingProxyType:
        return mapping
    return dict(mapping or {})


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
    return SslPrincipalMapper.from_rules(rules)


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
        transport = io.transport
        address = io.client_address or self.client_address
        listener = io.listener_name or self.listener_name
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
