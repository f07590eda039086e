"""Server side of SASL authentication (Kafka's ``SaslServerAuthenticator``).

A sans-I/O state machine driven by the channel: ``authenticate(io, now)``
reads at most the frames it needs through the channel's ``AuthIO``, queues
responses with ``io.write_frame`` and returns the interest ops it still needs
(0 when authentication is complete).

States, in order (Kafka's ``SaslState``)::

    INITIAL_REQUEST                 first frame: ApiVersions, SaslHandshake or a
                                    raw GSSAPI token from a 0.9 client
    HANDSHAKE_OR_VERSIONS_REQUEST   a valid Kafka header was seen
    HANDSHAKE_REQUEST               ApiVersions answered; SaslHandshake next
    AUTHENTICATE                    mechanism tokens: raw size-prefixed
                                    (SaslHandshake v0) or SaslAuthenticate
                                    requests (SaslHandshake v1)
    COMPLETE / FAILED

Re-authentication (KIP-368) starts at REAUTH_PROCESS_HANDSHAKE with the
SaslHandshake the data phase received, may pass through REAUTH_BAD_MECHANISM
(different mechanism: fails on the next token, so the failure is counted as a
failed re-authentication) and otherwise joins AUTHENTICATE.  Kafka's server
has no REAUTH_INITIAL state and neither has this one: the mechanism's first
token is read in AUTHENTICATE exactly as in a first authentication.

``_TRANSITIONS`` below is the complete list of state changes; ``state`` is
written only by ``_set_state`` (see ``StateMachineAuthenticator``), which
refuses any other.  State changes that follow a response take effect only
once that response is flushed (Kafka's ``pendingSaslState``), so
``complete()`` never turns true while the final response is still queued.

Failures: the error response (SaslAuthenticate / SaslHandshake with an error
code) is *built* when the failure is detected but only *sent* by
``handle_authentication_failure()``, which the selector calls after
``connection.failed.authentication.delay.ms`` just before closing: the
authenticator raises the ``AuthenticationError``, the channel raises it on as
``DelayedResponseAuthenticationError`` and the selector delays the close, as
Kafka's ``DelayedResponseAuthenticationException``.

Where this differs from Kafka (deliberately):

* ``sasl.enabled.mechanisms`` are listed in configuration order (Kafka's
  come out in ``HashSet`` order).
* A request other than SaslAuthenticate after SaslHandshake v1 gets an
  ILLEGAL_SASL_STATE error response only when it is ApiVersions or
  SaslHandshake (bodies with a top-level error code); Kafka builds one for
  any API from the parsed body.  Either way the connection then closes.
* After SaslHandshake v0, a mechanism failure that is not a
  ``SaslAuthenticationError`` is still reported as one (and so gets the
  failed-authentication delay) rather than as an I/O error closing at once.
"""
import logging
import re
from types import MappingProxyType

from kchannel.errors import (AuthenticationError, IllegalSaslStateError,
                             InvalidReceiveError, InvalidRequestError, KChannelError,
                             SaslAuthenticationError, UnsupportedSaslMechanismError)
from kchannel.network.authenticator import StateMachineAuthenticator, kept_mapping
from kchannel.network.ops import OP_NONE, OP_READ, OP_WRITE
from kchannel.principal import (DefaultKafkaPrincipalBuilder, KafkaPrincipal,
                                SaslAuthenticationContext)
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.error_responses import error_response_body
from kchannel.protocol.errors import Errors
from kchannel.security.sasl import _wire
from kchannel.security.sasl.state import SaslState
from kchannel.security.sasl.mechanism import CREDENTIAL_LIFETIME_MS, TOKEN_AUTH, create_server
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.server_authenticator")

# API keys handled here (Kafka's ApiKeys ids).
API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)

# Kafka error codes used in pre-auth responses.
NONE = 0
UNSUPPORTED_SASL_MECHANISM = int(Errors.UNSUPPORTED_SASL_MECHANISM)
ILLEGAL_SASL_STATE = int(Errors.ILLEGAL_SASL_STATE)
UNSUPPORTED_VERSION = int(Errors.UNSUPPORTED_VERSION)
INVALID_REQUEST = int(Errors.INVALID_REQUEST)
SASL_AUTHENTICATION_FAILED = int(Errors.SASL_AUTHENTICATION_FAILED)

GSSAPI = "GSSAPI"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# BrokerSecurityConfigs.DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE = 524288

# ApiVersionsRequest.isValid(): client software name/version (KIP-511).
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


# SaslState: one enum for both sides (kchannel.security.sasl.state); this
# side enters SERVER_STATES only.
_S = SaslState

# Every state change the server makes: state -> the states it may enter
# (None: the initial state).  FAILED is listed where a frame can be refused;
# COMPLETE fails nothing (the data phase owns the connection by then).
_TRANSITIONS = {
    None: frozenset({_S.INITIAL_REQUEST}),
    _S.INITIAL_REQUEST: frozenset({
        _S.HANDSHAKE_OR_VERSIONS_REQUEST,   # the first frame has a Kafka header
        _S.AUTHENTICATE,                    # a 0.9 client's raw GSSAPI token
        _S.REAUTH_PROCESS_HANDSHAKE,        # built to re-authenticate a channel
        _S.FAILED,
    }),
    _S.HANDSHAKE_OR_VERSIONS_REQUEST: frozenset({
        _S.HANDSHAKE_REQUEST,               # ApiVersions answered
        _S.AUTHENTICATE,                    # SaslHandshake accepted
        _S.FAILED,
    }),
    _S.HANDSHAKE_REQUEST: frozenset({_S.AUTHENTICATE, _S.FAILED}),
    _S.AUTHENTICATE: frozenset({_S.COMPLETE, _S.FAILED}),
    _S.REAUTH_PROCESS_HANDSHAKE: frozenset({
        _S.AUTHENTICATE,                    # same mechanism as the session's
        _S.REAUTH_BAD_MECHANISM,            # answered; fails on the next token
        _S.FAILED,
    }),
    _S.REAUTH_BAD_MECHANISM: frozenset({_S.FAILED}),
    # Re-authentication in place (no fresh authenticator from the channel).
    _S.COMPLETE: frozenset({_S.REAUTH_PROCESS_HANDSHAKE}),
}


class _ReauthInfo:
    """What re-authentication needs to remember (Kafka's ``ReauthInfo``)."""

    def __init__(self):
        self.previous_mechanism = None
        self.previous_principal = None
        self.reauthentication_begin_ms = None
        self.session_expiration_ms = None
        self.connected_client_supports_reauthentication = False
        self.authentication_end_ms = None
        self.bad_mechanism_error_message = None

    def reauthenticating(self):
        return self.previous_mechanism is not None

    def text(self):
        return "re-authentication" if self.reauthenticating() else "authentication"

    def latency_ms(self):
        if not self.reauthenticating() or self.authentication_end_ms is None:
            return None
        latency = self.authentication_end_ms - self.reauthentication_begin_ms
        return max(0, latency)


def _zero_if_negative(value):
    return max(0, value)


class SaslServerAuthenticator(StateMachineAuthenticator):
    """Kafka's ``SaslServerAuthenticator`` for one accepted channel.

    Parameters (keywords):

    * ``enabled_mechanisms``: ``sasl.enabled.mechanisms`` of the listener.
    * ``jaas_options``: mechanism -> JAAS options dict (the listener's
      ``<mechanism>.sasl.jaas.config`` login-module options).
    * ``callbacks``: a ``ServerCallbacks`` or mechanism -> ``ServerCallbacks``.
    * ``configs``: effective config dict handed to the mechanisms, or
      mechanism -> config dict.
    * ``principal_builder``: object with ``build(context)``; default
      ``DefaultKafkaPrincipalBuilder(kerberos_short_namer=...)``.
    * ``connections_max_reauth_ms``: int, or mechanism -> int (0/None = off).
    * ``max_receive_size``: ``sasl.server.max.receive.size``.
    * ``api_versions_supplier``: ``fn(version) -> ApiVersions response body``
      with the server's full API list.
    * ``mechanism_factory``: ``fn(mechanism, **kw) -> SaslServerMechanism``;
      default ``kchannel.security.sasl.mechanism.create_server``.
    """

    def __init__(self, *, enabled_mechanisms, jaas_options=None, callbacks=None,
                 configs=None, principal_builder=None, kerberos_short_namer=None,
                 connections_max_reauth_ms=None, max_receive_size=None,
                 api_versions_supplier=None, connection_id=None, listener_name=None,
                 security_protocol=None, client_address=None, server_host=None,
                 mechanism_factory=None, ssl_peer_subject_dn=None):
        mechanisms = []
        for m in enabled_mechanisms or ():
            if m not in mechanisms:
                mechanisms.append(m)
        if not mechanisms:
            raise ValueError("No SASL mechanisms are enabled")
        self.enabled_mechanisms = mechanisms
        self._jaas_options = kept_mapping(jaas_options)
        self._callbacks = callbacks
        # One config dict for every mechanism, or mechanism -> config dict.
        configs = kept_mapping(configs)
        # (a loop, not two generators: six interpreted calls per connection)
        per_mechanism = bool(configs)
        for k, v in (configs.items() if per_mechanism else ()):
            if not isinstance(v, dict) or k not in mechanisms:
                per_mechanism = False
                break
        if per_mechanism:
            self._mechanism_configs = configs
            self._configs = {}
        else:
            self._mechanism_configs = {}
            self._configs = configs
        if principal_builder is None:
            principal_builder = DefaultKafkaPrincipalBuilder(
                kerberos_short_namer=kerberos_short_namer)
        self._principal_builder = principal_builder
        if isinstance(connections_max_reauth_ms, (dict, MappingProxyType)):
            self._max_reauth_ms = kept_mapping(connections_max_reauth_ms)
        else:
            # One value for every mechanism: kept as it is (a dict of it per
            # connection would cost ~200 bytes); see _calc_completion_times.
            self._max_reauth_ms = connections_max_reauth_ms
        self._max_receive_size = (DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
                                  if max_receive_size is None else int(max_receive_size))
        self._api_versions_supplier = api_versions_supplier
        self.connection_id = connection_id
        self._listener_name = listener_name
        self._security_protocol = security_protocol
        self._client_address = client_address
        self._server_host = server_host
        self._ssl_peer_subject_dn = ssl_peer_subject_dn
        if mechanism_factory is None:
            mechanism_factory = create_server
        self._mechanism_factory = mechanism_factory

        self._sasl_server = None
        self.mechanism = None
        # True after SaslHandshake v1+: tokens travel in SaslAuthenticate.
        self._kafka_authenticate_headers = False
        self._failure_response = None
        self._io = None
        self._reauth = _ReauthInfo()
        self._principal = None
        # ClientInformation from ApiVersions v3+ (software name, version).
        self.client_information = None
        self._set_state(SaslState.INITIAL_REQUEST)

    # -- Authenticator API ----------------------------------------------------
    def authenticate(self, io, now):
        """Advance the exchange; returns interest ops (0 when complete).

        Raises ``AuthenticationError`` (after building the client's error
        response, sent by ``handle_authentication_failure``) or another
        ``KChannelError`` for malformed traffic (close at once).
        """
        self._io = io
        while True:
            if self._writes_pending and not self._flush(io):
                return OP_WRITE
            state = self._state
            if state is SaslState.COMPLETE:
                self._restore_receive_size(io)
                return OP_NONE
            if state is SaslState.FAILED:
                raise SaslAuthenticationError("SASL authentication already failed")
            # (only AUTHENTICATE has a mechanism that can be complete: the
            # other states before COMPLETE have none yet, or a refused one)
            if state is SaslState.AUTHENTICATE and self._sasl_server is not None \
                    and self._sasl_server.is_complete():
                self._set_state(SaslState.COMPLETE)
                continue
            # Bound every pre-auth receive (sasl.server.max.receive.size)
            # before its size prefix is examined.
            io.set_max_receive_size(self._max_receive_size)
            try:
                frame = io.read_frame()
            except InvalidReceiveError as exc:
                self._fail()
                err = SaslAuthenticationError(
                    "Failing SASL authentication due to invalid receive size")
                err.__cause__ = exc
                self._log_failure(err)
                raise err
            if frame is None:
                return OP_READ
            # Judge the frame at the time it was read: it may answer a
            # challenge written earlier in this same call, i.e. after `now`.
            now = max(now, io.now())
            self._process_frame(bytes(frame), now)

    @staticmethod
    def _restore_receive_size(io):
        # The SASL bound applies to authentication frames only; the data phase
        # gets the channel's own limit (socket.request.max.bytes) back.
        io.set_max_receive_size(io.max_receive_size)

    def reauthenticate(self, io, first_frame, now, previous=None):
        """Begin server-side re-authentication with the SaslHandshake request
        ``first_frame`` received by the data phase (KIP-368).

        ``previous`` is the authenticator of the original authentication when
        the channel builds a fresh one (Kafka's swap); without it this
        authenticator re-authenticates itself.
        """
        if first_frame is None:
            raise ValueError("Invalid saslHandshakeReceive in server-side "
                             "re-authentication context: null")
        source = previous if previous is not None else self
        prev_mechanism = source.mechanism
        prev_principal = source.principal()
        if source._sasl_server is not None:
            source._sasl_server.dispose()
            source._sasl_server = None
        self._sasl_server = None
        self._reauth = _ReauthInfo()
        self._reauth.previous_mechanism = prev_mechanism
        self._reauth.previous_principal = prev_principal
        self._reauth.reauthentication_begin_ms = now
        self._principal = None
        self._failure_response = None
        self._reset_gate()
        self._kafka_authenticate_headers = False
        log.debug("Beginning re-authentication: %s", self)
        self._set_state(SaslState.REAUTH_PROCESS_HANDSHAKE)
        self._io = io
        self._process_frame(bytes(first_frame), now)
        return self.authenticate(io, now)

    def complete(self):
        return self._state is SaslState.COMPLETE

    def principal(self):
        if self._principal is not None:
            return self._principal
        server = self._sasl_server
        if server is None or not server.is_complete():
            return KafkaPrincipal("User", "ANONYMOUS")
        token_auth = False
        if self.mechanism in SCRAM_MECHANISMS:
            token_auth = _truthy(server.get_negotiated_property(TOKEN_AUTH))
        context = SaslAuthenticationContext(
            mechanism=self.mechanism,
            authorization_id=server.get_authorization_id(),
            token_authenticated=token_auth,
            ssl_peer_subject_dn=self._peer_dn(),
            client_address=self._address(),
            listener_name=self._listener(),
            security_protocol=self._protocol_name(),
        )
        principal = self._principal_builder.build(context)
        if token_auth and isinstance(principal, KafkaPrincipal) \
                and not principal.token_authenticated:
            principal = principal.with_token_authenticated(True)
        if self.complete():
            self._principal = principal
        return principal

    def handle_authentication_failure(self):
        """Send the error response built when authentication failed (called by
        the selector right before the delayed close)."""
        response, self._failure_response = self._failure_response, None
        if response is None or self._io is None:
            return
        try:
            self._io.write_frame(response)
            self._io.flush()
        except KChannelError as exc:
            log.debug("Could not send the authentication failure response: %s", exc)

    def close(self):
        if self._sasl_server is not None:
            self._sasl_server.dispose()
        closer = getattr(self._principal_builder, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception:  # closing must not mask the channel's own error
                log.debug("principal builder close failed", exc_info=True)

    def server_session_expiration_ms(self):
        return self._reauth.session_expiration_ms

    def reauthentication_latency_ms(self):
        return self._reauth.latency_ms()

    def connected_client_supports_reauthentication(self):
        return self._reauth.connected_client_supports_reauthentication

    def reauthenticating(self):
        return self._reauth.reauthenticating()

    def client_session_reauth_ms(self):
        return None

    def get_and_clear_responses_received_during_reauthentication(self):
        return []

    def __repr__(self):
        return (f"SaslServerAuthenticator(state={self.state.name}, "
                f"mechanism={self.mechanism}, connection_id={self.connection_id})")

    # -- state handling ------------------------------------------------------
    TRANSITIONS = _TRANSITIONS
    FAILED = SaslState.FAILED

    def _state_entered(self, state, now):
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Set SASL server state to %s during %s", state.name,
                      self._reauth.text())

    def _process_frame(self, frame, now):
        io = self._io
        try:
            state = self._state
            if state in (SaslState.REAUTH_PROCESS_HANDSHAKE,
                         SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                         SaslState.HANDSHAKE_REQUEST):
                self._handle_kafka_request(io, frame, now)
            elif state == SaslState.REAUTH_BAD_MECHANISM:
                raise SaslAuthenticationError(self._reauth.bad_mechanism_error_message)
            elif state in (SaslState.INITIAL_REQUEST, SaslState.AUTHENTICATE):
                if state == SaslState.INITIAL_REQUEST and \
                        self._handle_kafka_request(io, frame, now):
                    return
                # A 0.9 client's raw GSSAPI token (INITIAL_REQUEST fall through)
                # or a mechanism token.
                self._handle_sasl_token(io, frame, now)
                # The exchange is over when the mechanism says so; the state
                # flips once the last response is flushed.
                if self._sasl_server.is_complete():
                    self._set_state(SaslState.COMPLETE)
                    self._log_success()
        except AuthenticationError as exc:
            self._log_failure(exc)
            # Propagated once any response already queued is flushed.
            self._set_state(SaslState.FAILED, exception=exc)
        except KChannelError as exc:
            self._fail()
            log.debug("Failed during %s: %s", self._reauth.text(), exc)
            raise
        except Exception as exc:
            # Anything else (a mechanism or codec bug) must still fail closed.
            self._fail()
            log.debug("Failed during %s: %r", self._reauth.text(), exc, exc_info=True)
            raise InvalidRequestError(
                f"Unexpected error during SASL {self._reauth.text()}: {exc!r}") from exc

    def _handle_kafka_request(self, io, frame, now):
        """Handle ApiVersions / SaslHandshake.  Returns False if the frame is
        not a Kafka request (raw GSSAPI token in INITIAL_REQUEST)."""
        client_mechanism = None
        try:
            header = _wire.parse_request_header(frame)
        except InvalidRequestError as exc:
            if self._state is not SaslState.INITIAL_REQUEST:
                raise
            log.debug("Received client packet of length %d starting with bytes 0x%s, "
                      "process as GSSAPI packet", len(frame), frame[:10].hex())
            if GSSAPI in self.enabled_mechanisms:
                log.debug("First client packet is not a SASL mechanism request, "
                          "using default mechanism GSSAPI")
                client_mechanism = GSSAPI
            else:
                raise UnsupportedSaslMechanismError(
                    "Exception handling first SASL packet from client, GSSAPI is not "
                    "supported by server", self.enabled_mechanisms) from exc
            self._create_sasl_server(client_mechanism, now)
            self._set_state(SaslState.AUTHENTICATE)
            return False

        # A valid Kafka header: SASL tokens are now expected only after a
        # SaslHandshake (this is not a 0.9 GSSAPI token).
        if self._state is SaslState.INITIAL_REQUEST:
            self._set_state(SaslState.HANDSHAKE_OR_VERSIONS_REQUEST)
        api_key = header.api_key
        # Refuse before parsing the body: keeps the pre-auth attack surface to
        # the two schemas below.
        if api_key not in (API_VERSIONS, SASL_HANDSHAKE):
            raise IllegalSaslStateError(
                f"Unexpected Kafka request of type {_wire.api_key_name(api_key)} "
                "during SASL handshake.")
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Handling Kafka request %s during %s",
                      _wire.api_key_name(api_key), self._reauth.text())
        if api_key == API_VERSIONS:
            self._handle_api_versions(io, header, frame)
            return True
        client_mechanism = self._handle_handshake(io, header, frame)
        if not self._reauth.reauthenticating() or \
                self._mechanism_unchanged(client_mechanism):
            self._create_sasl_server(client_mechanism, now)
            self._set_state(SaslState.AUTHENTICATE)
        return True

    def _handle_api_versions(self, io, header, frame):
        if self._state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
            # Not an AuthenticationError in Kafka either (IllegalStateException):
            # the connection is closed without a response.
            raise InvalidRequestError(
                "Unexpected ApiVersions request received during SASL authentication "
                f"state {self.state.name}")
        lo, hi = _wire.supported_range(API_VERSIONS)
        version = header.api_version
        if version < lo or version > hi:
            # KIP-511: answer in v0 with UNSUPPORTED_VERSION and our range so
            # the client can retry with a version we speak; state unchanged.
            body = {"error_code": UNSUPPORTED_VERSION,
                    "api_keys": [{"api_key": API_VERSIONS, "min_version": lo,
                                  "max_version": hi}]}
            self._send(io, _wire.encode_response(API_VERSIONS, 0, header.correlation_id, body))
            return
        request = _wire.decode_request_body(header, frame)
        if version >= 3:
            name = request.get("client_software_name") or ""
            sw_version = request.get("client_software_version") or ""
            if not (_SOFTWARE_NAME_VERSION.fullmatch(name)
                    and _SOFTWARE_NAME_VERSION.fullmatch(sw_version)):
                body = {"error_code": INVALID_REQUEST, "throttle_time_ms": 0, "api_keys": []}
                self._send(io, _wire.encode_response(API_VERSIONS, version,
                                                     header.correlation_id, body))
                return
            self.client_information = (name, sw_version)
        body = self._api_versions_body(version)
        self._send(io, _wire.encode_response(API_VERSIONS, version, header.correlation_id, body))
        self._set_state(SaslState.HANDSHAKE_REQUEST)

    def _api_versions_body(self, version):
        if self._api_versions_supplier is not None:
            body = self._api_versions_supplier(version)
            if body is not None:
                return body
        # Without a server-supplied list, advertise what this layer answers.
        keys = []
        for key in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            lo, hi = _wire.supported_range(key)
            keys.append({"api_key": key, "min_version": lo, "max_version": hi})
        return {"error_code": NONE, "api_keys": keys, "throttle_time_ms": 0}

    def _handle_handshake(self, io, header, frame):
        request = _wire.decode_request_body(header, frame)
        mechanism = request.get("mechanism")
        if header.api_version >= 1:
            self._kafka_authenticate_headers = True
        if mechanism in self.enabled_mechanisms:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("Using SASL mechanism '%s' provided by client", mechanism)
            body = {"error_code": NONE, "mechanisms": list(self.enabled_mechanisms)}
            self._send(io, _wire.encode_response(SASL_HANDSHAKE, header.api_version,
                                                 header.correlation_id, body))
            return mechanism
        log.debug("SASL mechanism '%s' requested by client is not supported", mechanism)
        body = {"error_code": UNSUPPORTED_SASL_MECHANISM,
                "mechanisms": list(self.enabled_mechanisms)}
        self._failure_response = _wire.encode_response(
            SASL_HANDSHAKE, header.api_version, header.correlation_id, body)
        raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}",
                                            self.enabled_mechanisms)

    def _mechanism_unchanged(self, client_mechanism):
        previous = self._reauth.previous_mechanism
        if previous == client_mechanism:
            return True
        # Kafka answers the handshake normally and fails on the next token so
        # the failure counts as a failed re-authentication.
        self._reauth.bad_mechanism_error_message = (
            f"SASL mechanism '{client_mechanism}' requested by client is not supported "
            f"for re-authentication of mechanism '{previous}'")
        log.debug("%s", self._reauth.bad_mechanism_error_message)
        self._set_state(SaslState.REAUTH_BAD_MECHANISM)
        return False

    def _create_sasl_server(self, mechanism, now):
        self.mechanism = mechanism
        callbacks = self._callbacks
        if isinstance(callbacks, dict):
            callbacks = callbacks.get(mechanism)
        try:
            self._sasl_server = self._mechanism_factory(
                mechanism, jaas_options=self._jaas_options.get(mechanism) or {},
                configs=self._mechanism_configs.get(mechanism, self._configs),
                callbacks=callbacks,
                server_host=self._server_host, now=now)
        except AuthenticationError:
            raise
        except Exception as exc:
            raise SaslAuthenticationError(
                "Kafka Server failed to create a SaslServer to interact with a client "
                f"during session authentication with server mechanism {mechanism}",
                mechanism=mechanism) from exc
        if self._sasl_server is None:
            raise SaslAuthenticationError(
                "Kafka Server failed to create a SaslServer to interact with a client "
                f"during session authentication with server mechanism {mechanism}",
                mechanism=mechanism)

    def _handle_sasl_token(self, io, token, now):
        server = self._sasl_server
        if not self._kafka_authenticate_headers:
            # SaslHandshake v0 (or no handshake): raw size-prefixed tokens.
            try:
                response = server.evaluate_response(token, now)
            except AuthenticationError:
                raise
            except Exception as exc:
                raise SaslAuthenticationError(self._generic_failure_message(),
                                              mechanism=self.mechanism) from exc
            if server.is_complete():
                self._calc_completion_times(now)
                if self._reauth.reauthenticating():
                    self._ensure_principal_unchanged()
            # Kafka sends a frame whenever the SaslServer returned non-null.
            # The JDK's PLAIN/SCRAM/OAUTHBEARER servers return a (possibly
            # empty) array, and v0 clients wait for that final frame; the
            # GSSAPI server returns null after the security-layer step and a
            # v0 GSSAPI client would mistake an extra frame for the first
            # Kafka response.
            if response is None and self.mechanism != GSSAPI:
                response = b""
            if self.mechanism == GSSAPI and server.is_complete() and not response:
                response = None
            if response is not None:
                self._send(io, bytes(response))
            return

        header = _wire.parse_request_header(token)
        api_key = header.api_key
        if api_key != SASL_AUTHENTICATE:
            err = IllegalSaslStateError(
                f"Unexpected Kafka request of type {_wire.api_key_name(api_key)} "
                "during SASL authentication.")
            failure = self._error_response_for(header, ILLEGAL_SASL_STATE, str(err), token)
            if failure is not None:
                self._failure_response = failure
            raise err
        lo, hi = _wire.supported_range(SASL_AUTHENTICATE)
        version = header.api_version
        if version < lo or version > hi:
            # No response is possible for a version we cannot encode.
            raise InvalidRequestError(
                f"Version {version} is not supported for apiKey SASL_AUTHENTICATE")
        request = _wire.decode_request_body(header, token)
        # The client supports re-authentication if any of its SaslAuthenticate
        # requests is v1+.
        if not self._reauth.connected_client_supports_reauthentication:
            self._reauth.connected_client_supports_reauthentication = version > 0
        auth_bytes = request.get("auth_bytes") or b""
        try:
            try:
                response = server.evaluate_response(bytes(auth_bytes), now)
                if self._reauth.reauthenticating() and server.is_complete():
                    self._ensure_principal_unchanged()
            except AuthenticationError:
                raise
            except Exception as exc:
                # Never echo the mechanism's own text: it could tell whether
                # the user exists.
                raise _GenericFailure() from exc
        except _GenericFailure as wrapped:
            message = self._generic_failure_message()
            self._failure_response = _wire.encode_response(
                SASL_AUTHENTICATE, version, header.correlation_id,
                {"error_code": SASL_AUTHENTICATION_FAILED, "error_message": message,
                 "auth_bytes": b"", "session_lifetime_ms": 0})
            raise SaslAuthenticationError(message, mechanism=self.mechanism) \
                from wrapped.__cause__
        except AuthenticationError as exc:
            self._failure_response = _wire.encode_response(
                SASL_AUTHENTICATE, version, header.correlation_id,
                {"error_code": SASL_AUTHENTICATION_FAILED, "error_message": str(exc),
                 "auth_bytes": b"", "session_lifetime_ms": 0})
            if not isinstance(exc, SaslAuthenticationError):
                raise SaslAuthenticationError(str(exc), mechanism=self.mechanism) from exc
            raise
        lifetime = 0
        if server.is_complete():
            lifetime = self._calc_completion_times(now)
        # Kafka leaves ErrorMessage at its schema default, the empty string
        # (not null), in a successful SaslAuthenticate response.
        body = {"error_code": NONE, "error_message": "",
                "auth_bytes": bytes(response) if response is not None else b"",
                "session_lifetime_ms": lifetime}
        self._send(io, _wire.encode_response(SASL_AUTHENTICATE, version,
                                             header.correlation_id, body))

    def _error_response_for(self, header, error_code, message, frame=None):
        """The error response Kafka's ``getErrorResponse`` builds for the
        refused request: SaslHandshake and ApiVersions here, the APIs of
        ``kchannel.protocol.error_responses`` given the request ``frame``;
        None for any other API (the connection then only closes)."""
        try:
            if frame is not None and header.api_key not in (SASL_HANDSHAKE, API_VERSIONS):
                request = _wire.decode_request_body(header, frame)
                body = error_response_body(header.api_key, header.api_version, request,
                                           error_code, message)
                if body is None:
                    return None
                return _wire.encode_response(header.api_key, header.api_version,
                                             header.correlation_id, body)
            if header.api_key == SASL_HANDSHAKE:
                return _wire.encode_response(SASL_HANDSHAKE, header.api_version,
                                             header.correlation_id,
                                             {"error_code": error_code, "mechanisms": []})
            if header.api_key == API_VERSIONS:
                return _wire.encode_response(API_VERSIONS, header.api_version,
                                             header.correlation_id,
                                             {"error_code": error_code, "api_keys": []})
        except Exception:
            return None
        return None

    def _generic_failure_message(self):
        return (f"Authentication failed during {self._reauth.text()} due to invalid "
                f"credentials with SASL mechanism {self.mechanism}")

    def _ensure_principal_unchanged(self):
        previous = self._reauth.previous_principal
        current = self.principal()
        if previous != current:
            raise SaslAuthenticationError(
                "Cannot change principals during re-authentication from "
                f"{previous.principal_type}.{previous.name}: "
                f"{current.principal_type}.{current.name}", mechanism=self.mechanism)

    def _calc_completion_times(self, now):
        """Session lifetime sent to the client and the server-side session
        expiry (Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``)."""
        reauth = self._reauth
        lifetime = 0
        reauth.authentication_end_ms = now
        credential_expiration = self._sasl_server.get_negotiated_property(
            CREDENTIAL_LIFETIME_MS)
        if credential_expiration is not None:
            credential_expiration = int(credential_expiration)
        max_reauth = self._max_reauth_ms
        if isinstance(max_reauth, (dict, MappingProxyType)):
            max_reauth = max_reauth.get(self.mechanism)
        max_reauth_set = max_reauth is not None and max_reauth > 0
        if credential_expiration is not None or max_reauth_set:
            if credential_expiration is None:
                lifetime = _zero_if_negative(max_reauth)
            elif not max_reauth_set:
                lifetime = _zero_if_negative(credential_expiration - now)
            else:
                lifetime = _zero_if_negative(min(credential_expiration - now, max_reauth))
            reauth.session_expiration_ms = now + lifetime
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Authentication complete; session max lifetime from broker config=%s ms, "
                      "credential expiration=%s; session expiration=%s, sending %d ms to client",
                      max_reauth, credential_expiration, reauth.session_expiration_ms, lifetime)
        return lifetime

    # -- context -------------------------------------------------------------
    def _listener(self):
        if self._listener_name is not None:
            return self._listener_name
        return self._io.listener_name

    def _protocol_name(self):
        if self._security_protocol is not None:
            return self._security_protocol
        return self._io.security_protocol or "SASL_PLAINTEXT"

    def _address(self):
        if self._client_address is not None:
            return self._client_address
        return self._io.client_address

    def _peer_dn(self):
        if self._ssl_peer_subject_dn is not None:
            return self._ssl_peer_subject_dn
        transport = self._io.transport
        if transport is not None:
            try:
                return transport.peer_subject_dn()
            except Exception:
                return None
        return None

    def _log_success(self):
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Successfully %s with %s using SASL mechanism %s",
                      "re-authenticated" if self._reauth.reauthenticating()
                      else "authenticated", self._describe_peer(), self.mechanism)

    def _describe_peer(self):
        addr = self._address()
        if isinstance(addr, tuple) and len(addr) >= 2:
            return f"{addr[0]}:{addr[1]}"
        return str(addr)

    def _log_failure(self, exc):
        # DEBUG here: the selector logs the one WARNING line for the closed
        # connection (peer, channel id and this exception's message, which
        # names the mechanism), so an operator sees each failure once.
        log.debug("Failed %s with %s using SASL mechanism %s (%s)", self._reauth.text(),
                    self._describe_peer(), self.mechanism, exc)


class _GenericFailure(Exception):
    """Internal marker: a mechanism failed with something other than a
    ``SaslAuthenticationError``; the client gets Kafka's generic message."""


def _truthy(value):
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)

