"""Client side of SASL authentication (Kafka's ``SaslClientAuthenticator``).

Sans-I/O, driven by the channel through ``authenticate(io, now)``.

States (Kafka's ``SaslState``)::

    SEND_APIVERSIONS_REQUEST       ApiVersions v0 first (brokers treat a request
                                   with a schema error as a GSSAPI token, so v0
                                   is the only safe opener)
    RECEIVE_APIVERSIONS_RESPONSE   pick SaslHandshake / SaslAuthenticate versions
    SEND_HANDSHAKE_REQUEST
    RECEIVE_HANDSHAKE_RESPONSE
    INITIAL                        send the mechanism's first token
    INTERMEDIATE                   challenge / response
    CLIENT_COMPLETE                mechanism done; waiting for the server's
                                   final SaslAuthenticate response
    COMPLETE / FAILED
    REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE, REAUTH_SEND_HANDSHAKE_REQUEST,
    REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE, REAUTH_INITIAL   (KIP-368)

``_TRANSITIONS`` below is the complete list of state changes; ``state`` is
written only by ``_set_state`` (see ``StateMachineAuthenticator``), which
refuses any other, and changes once the request just queued is flushed
(Kafka's ``pendingSaslState``).

SaslHandshake v1 makes tokens travel inside SaslAuthenticate requests (the
highest version both sides support); v0 sends them as raw size-prefixed
frames.  SASL requests use correlation ids from a small reserved range at the
top of the int32 space so that, during re-authentication, a response to an
ordinary in-flight request can never be mistaken for a SASL response: such
responses are kept and handed back through
``get_and_clear_responses_received_during_reauthentication()``.
"""
import logging
import random

from kchannel.errors import (AuthenticationError, IllegalSaslStateError,
                             InvalidRequestError, KChannelError, SaslAuthenticationError,
                             UnsupportedSaslMechanismError)
from kchannel.network.authenticator import StateMachineAuthenticator, kept_mapping
from kchannel.network.ops import OP_NONE, OP_READ, OP_WRITE
from kchannel.principal import KafkaPrincipal
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors, exception_for
from kchannel.security.sasl import _wire
from kchannel.security.sasl.state import SaslState
from kchannel.security.sasl.mechanism import create_client
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.client_authenticator")
# Re-authentication jitter only (not a secret): one generator for every
# authenticator, as seeding a new random.Random() from os.urandom costs ~18 us,
# a noticeable part of a connection's set-up.
_REAUTH_JITTER_RNG = random.Random()

API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)

NONE = 0
UNSUPPORTED_SASL_MECHANISM = int(Errors.UNSUPPORTED_SASL_MECHANISM)
ILLEGAL_SASL_STATE = int(Errors.ILLEGAL_SASL_STATE)
SASL_AUTHENTICATION_FAILED = int(Errors.SASL_AUTHENTICATION_FAILED)

# Kafka's SaslClientAuthenticator: the reserved correlation id range for SASL
# requests.  Only one SASL request is in flight at a time, so 8 ids suffice.
MAX_RESERVED_CORRELATION_ID = 2 ** 31 - 1
MIN_RESERVED_CORRELATION_ID = MAX_RESERVED_CORRELATION_ID - 7

# Sentinel: no SaslAuthenticate headers (SaslHandshake v0 / no handshake).
DISABLE_KAFKA_SASL_AUTHENTICATE_HEADER = -1

GSSAPI = "GSSAPI"


def is_reserved(correlation_id):
    """True if ``correlation_id`` belongs to the SASL reserved range."""
    return correlation_id >= MIN_RESERVED_CORRELATION_ID


# SaslState: one enum for both sides (kchannel.security.sasl.state); this
# side enters CLIENT_STATES only.
_S = SaslState

# Every state change the client makes: state -> the states it may enter
# (None: the initial state).  FAILED is listed where the exchange can fail: a
# refused or malformed response, a mechanism error, or the connection lost
# while a request is being written.  REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE
# only re-reads the original ApiVersions response (no I/O, nothing to fail).
_TRANSITIONS = {
    None: frozenset({
        _S.SEND_APIVERSIONS_REQUEST,
        _S.INITIAL,                         # handshake_request_enable=False
    }),
    _S.SEND_APIVERSIONS_REQUEST: frozenset({
        _S.RECEIVE_APIVERSIONS_RESPONSE,
        _S.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE,   # built to re-authenticate
        _S.FAILED,
    }),
    _S.RECEIVE_APIVERSIONS_RESPONSE: frozenset({_S.SEND_HANDSHAKE_REQUEST, _S.FAILED}),
    _S.SEND_HANDSHAKE_REQUEST: frozenset({_S.RECEIVE_HANDSHAKE_RESPONSE, _S.FAILED}),
    _S.RECEIVE_HANDSHAKE_RESPONSE: frozenset({_S.INITIAL, _S.FAILED}),
    _S.INITIAL: frozenset({_S.INTERMEDIATE, _S.FAILED}),
    _S.INTERMEDIATE: frozenset({
        _S.CLIENT_COMPLETE,                 # last token sent, its response due
        _S.COMPLETE,
        _S.FAILED,
    }),
    _S.CLIENT_COMPLETE: frozenset({_S.COMPLETE, _S.FAILED}),
    # Re-authentication in place (no fresh authenticator from the channel).
    _S.COMPLETE: frozenset({_S.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE}),
    _S.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE: frozenset({
        _S.REAUTH_SEND_HANDSHAKE_REQUEST,
    }),
    _S.REAUTH_SEND_HANDSHAKE_REQUEST: frozenset({
        _S.REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE, _S.FAILED,
    }),
    _S.REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE: frozenset({_S.REAUTH_INITIAL, _S.FAILED}),
    _S.REAUTH_INITIAL: frozenset({_S.INTERMEDIATE, _S.FAILED}),
}


def _sasl_versions(api_versions_body):
    """The part of an ApiVersions response body ``_set_versions`` reads."""
    return {"api_keys": [e for e in api_versions_body.get("api_keys") or ()
                         if e.get("api_key") in (SASL_HANDSHAKE, SASL_AUTHENTICATE)]}


# The last ApiVersions response decoded: (version, its bytes after the
# correlation id, the SASL entries of its body as ``_sasl_versions`` gives
# them).  Every connection to a cluster usually gets the same answer byte
# for byte; decoding its ~60 entries again cost a storm of SASL connections
# tens of microseconds each.  Only the SASL entries are kept (all the
# authenticator reads), shared read-only.
_LAST_API_VERSIONS = [None]
# The same for the SaslHandshake answer (the mechanisms a listener enables:
# the same bytes for every connection to it); its body is only read.
_LAST_HANDSHAKE = [None]


def _decode_body(frame, api_key, version):
    """The body of response ``frame`` (correlation id first) to ``api_key``
    at ``version``; raises KChannelError if it does not decode."""
    if api_key != API_VERSIONS:
        if api_key != SASL_HANDSHAKE:
            return _wire.decode_response(frame, api_key, version)[1]
        rest = frame[4:]
        last = _LAST_HANDSHAKE[0]
        if last is not None and last[0] == version and last[1] == rest:
            return last[2]
        body = _wire.decode_response(frame, api_key, version)[1]
        _LAST_HANDSHAKE[0] = (version, rest, body)
        return body
    rest = frame[4:]
    last = _LAST_API_VERSIONS[0]
    if last is not None and last[0] == version and last[1] == rest:
        return last[2]
    body = _sasl_versions(_wire.decode_response(frame, api_key, version)[1])
    _LAST_API_VERSIONS[0] = (version, rest, body)
    return body


# Request headers by (api_key, version, correlation id, client id), and the
# bodies that are the same for every connection (ApiVersions v0's empty one,
# SaslHandshake's mechanism) by (api_key, version, mechanism): a connection
# uses the same few correlation ids of the reserved range, so its requests
# are mostly the bytes the previous connection sent (encoding them cost ~28
# interpreted calls per connection).  Small: cleared when full.
_REQUEST_PARTS = {}
_REQUEST_PARTS_MAX = 256


def _request_part(key, encode, *args):
    part = _REQUEST_PARTS.get(key)
    if part is None:
        part = encode(*args)
        if len(_REQUEST_PARTS) >= _REQUEST_PARTS_MAX:
            _REQUEST_PARTS.clear()
        _REQUEST_PARTS[key] = part
    return part


def _encode_body(api_key, version, body):
    return messages.API[api_key].request.encode(body, version)


class _ReauthInfo:
    __slots__ = ("api_versions_from_original_authentication", "reauthentication_begin_ms",
                 "pending_authenticated_receives", "api_versions_received_from_broker",
                 "positive_session_lifetime_ms", "authentication_end_ms",
                 "client_session_reauthentication_ms")

    def __init__(self):
        self.api_versions_from_original_authentication = None
        self.reauthentication_begin_ms = None
        self.pending_authenticated_receives = []
        self.api_versions_received_from_broker = None
        self.positive_session_lifetime_ms = None
        self.authentication_end_ms = None
        self.client_session_reauthentication_ms = None

    def reauthenticating(self):
        return self.api_versions_from_original_authentication is not None

    def api_versions_response(self):
        if self.reauthenticating():
            return self.api_versions_from_original_authentication
        return self.api_versions_received_from_broker

    def text(self):
        return "re-authentication" if self.reauthenticating() else "authentication"


def _java_list(items):
    return "[" + ", ".join(str(i) for i in (items or [])) + "]"


def _error_name(code):
    try:
        return Errors(code).name
    except Exception:
        return str(code)


def _exception_for(code, message):
    """The kchannel exception for a SaslAuthenticate error code."""
    if code == SASL_AUTHENTICATION_FAILED:
        return SaslAuthenticationError(message or "SASL Authentication failed.")
    if code == ILLEGAL_SASL_STATE:
        return IllegalSaslStateError(
            message or "Request is not valid given the current SASL state.")
    if code == UNSUPPORTED_SASL_MECHANISM:
        return UnsupportedSaslMechanismError(
            message or "The broker does not support the requested SASL mechanism.")
    try:
        exc = exception_for(code, message)
        if isinstance(exc, AuthenticationError):
            return exc
        return SaslAuthenticationError(str(exc), error_code=code)
    except Exception:
        return SaslAuthenticationError(message or f"error code {code}", error_code=code)


class SaslClientAuthenticator(StateMachineAuthenticator):
    """Kafka's ``SaslClientAuthenticator`` for one connection.

    Keywords: ``mechanism`` (``sasl.mechanism``), ``jaas_options`` (the
    client login module's options), ``configs`` (effective client config,
    e.g. ``client.id``, ``sasl.kerberos.service.name``), ``server_host``
    (the broker host name, used by GSSAPI), ``node`` (connection id),
    ``handshake_request_enable`` (False only for 0.9-style GSSAPI without
    SaslHandshake), ``mechanism_factory`` (default
    ``kchannel.security.sasl.mechanism.create_client``), ``rng`` (for the
    re-authentication jitter).
    """

    def __init__(self, *, mechanism, jaas_options=None, configs=None, server_host=None,
                 node=None, handshake_request_enable=True, mechanism_factory=None,
                 rng=None, client_id=None):
        self.mechanism = mechanism
        self._jaas_options = kept_mapping(jaas_options)
        self._configs = kept_mapping(configs)
        self._server_host = server_host
        self.node = node
        self._client_id = client_id if client_id is not None else \
            (self._configs.get("client.id") or "")
        if mechanism_factory is None:
            mechanism_factory = create_client
        self._mechanism_factory = mechanism_factory
        self._rng = rng or _REAUTH_JITTER_RNG
        self._handshake_request_enable = handshake_request_enable
        self._correlation_id = 0
        self._current_request = None   # (api_key, version, correlation_id)
        self._sasl_authenticate_version = DISABLE_KAFKA_SASL_AUTHENTICATE_HEADER
        self._sasl_handshake_version = 0
        self._reauth = _ReauthInfo()
        if mechanism == GSSAPI:
            self._client_principal_name = self._jaas_options.get("principal")
        else:
            self._client_principal_name = None
        self._set_state(SaslState.SEND_APIVERSIONS_REQUEST if handshake_request_enable
                        else SaslState.INITIAL)
        self._sasl_client = self._create_sasl_client()

    def _create_sasl_client(self):
        try:
            client = self._mechanism_factory(
                self.mechanism, jaas_options=self._jaas_options, configs=self._configs,
                server_host=self._server_host)
        except AuthenticationError:
            raise
        except Exception as exc:
            raise SaslAuthenticationError(
                "Failed to configure SaslClientAuthenticator: "
                f"{type(exc).__name__}: {exc}", mechanism=self.mechanism) from exc
        if client is None:
            raise SaslAuthenticationError(
                f"Failed to create SaslClient with mechanism {self.mechanism}",
                mechanism=self.mechanism)
        return client

    # -- Authenticator API ---------------------------------------------------
    def authenticate(self, io, now):
        try:
            return self._authenticate(io, now)
        except AuthenticationError as exc:
            self._fail()
            # The selector reports the failure at WARNING; keep detail here.
            log.debug("Failed %s with %s (%s)", self._reauth.text(),
                      self.node or self._server_host, exc)
            raise
        except KChannelError:
            self._fail()
            raise
        except Exception as exc:
            self._fail()
            raise InvalidRequestError(
                f"Unexpected error during SASL {self._reauth.text()}: {exc!r}") from exc

    def _authenticate(self, io, now):
        while True:
            if self._writes_pending and not self._flush(io, now):
                return OP_WRITE
            state = self._state
            if state == SaslState.SEND_APIVERSIONS_REQUEST:
                self._send_request(io, now, API_VERSIONS, 0, {}, True)
                self._set_state(SaslState.RECEIVE_APIVERSIONS_RESPONSE, now)
            elif state == SaslState.RECEIVE_APIVERSIONS_RESPONSE:
                body = self._receive_kafka_response(io)
                if body is None:
                    return OP_READ
                self._set_versions(body)
                # Kept for a re-authentication, which reads only these two
                # entries: the whole body is ~2 KB per connection.
                self._reauth.api_versions_received_from_broker = _sasl_versions(body)
                self._set_state(SaslState.SEND_HANDSHAKE_REQUEST, now)
            elif state in (SaslState.SEND_HANDSHAKE_REQUEST,
                           SaslState.REAUTH_SEND_HANDSHAKE_REQUEST):
                self._send_request(io, now, SASL_HANDSHAKE, self._sasl_handshake_version,
                                   {"mechanism": self.mechanism}, True)
                self._set_state(SaslState.RECEIVE_HANDSHAKE_RESPONSE
                                if state == SaslState.SEND_HANDSHAKE_REQUEST
                                else SaslState.REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE, now)
            elif state in (SaslState.RECEIVE_HANDSHAKE_RESPONSE,
                           SaslState.REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE):
                body = self._receive_kafka_response(io)
                if body is None:
                    return OP_READ
                self._handle_handshake_response(body, now)
                self._set_state(SaslState.INITIAL if state == SaslState.RECEIVE_HANDSHAKE_RESPONSE
                                else SaslState.REAUTH_INITIAL, now)
            elif state in (SaslState.INITIAL, SaslState.REAUTH_INITIAL):
                self._send_sasl_client_token(io, now, b"", True)
                self._set_state(SaslState.INTERMEDIATE, now)
            elif state == SaslState.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE:
                self._set_versions(self._reauth.api_versions_from_original_authentication)
                self._set_state(SaslState.REAUTH_SEND_HANDSHAKE_REQUEST, now)
            elif state == SaslState.INTERMEDIATE:
                server_token = self._receive_token(io, now)
                if server_token is None:
                    return OP_READ
                no_responses_pending = not self._send_sasl_client_token(
                    io, now, server_token, False)
                # Without SaslAuthenticate headers the exchange may be over as
                # soon as the last token is sent; with them the server always
                # answers each SaslAuthenticate request.
                if self._sasl_client.is_complete():
                    if (self._sasl_authenticate_version == DISABLE_KAFKA_SASL_AUTHENTICATE_HEADER
                            or no_responses_pending):
                        self._set_state(SaslState.COMPLETE, now)
                    else:
                        self._set_state(SaslState.CLIENT_COMPLETE, now)
            elif state == SaslState.CLIENT_COMPLETE:
                if self._receive_token(io, now) is None:
                    return OP_READ
                self._set_state(SaslState.COMPLETE, now)
            elif state == SaslState.COMPLETE:
                return OP_NONE
            elif state == SaslState.FAILED:
                raise IllegalSaslStateError("SASL handshake has already failed")

    def reauthenticate(self, io, first_frame, now, previous=None):
        """Begin client re-authentication (KIP-368): reuse the original
        ApiVersions response, handshake again, run a fresh mechanism.

        ``previous``: the authenticator of the original authentication when
        the channel swaps in a new one; otherwise this one restarts itself.
        """
        source = previous if previous is not None else self
        api_versions = source._reauth.api_versions_response()
        if api_versions is None:
            raise IllegalSaslStateError(
                "Re-authentication requires the ApiVersions response of the "
                "original authentication")
        if previous is not None:
            # This authenticator was just built for the re-authentication and
            # already holds a fresh mechanism (e.g. a new OAuth token).
            if previous._sasl_client is not None:
                previous._sasl_client.dispose()
            self._correlation_id = previous._correlation_id
        else:
            if self._sasl_client is not None:
                self._sasl_client.dispose()
            self._sasl_client = self._create_sasl_client()
        self._reauth = _ReauthInfo()
        self._reauth.api_versions_from_original_authentication = api_versions
        self._reauth.reauthentication_begin_ms = now
        self._current_request = None
        self._reset_gate()
        self._set_state(SaslState.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE, now)
        return self.authenticate(io, now)

    def complete(self):
        return self._state is SaslState.COMPLETE

    def principal(self):
        return KafkaPrincipal("User", self._client_principal_name)

    def close(self):
        if self._sasl_client is not None:
            self._sasl_client.dispose()

    def client_session_reauth_ms(self):
        return self._reauth.client_session_reauthentication_ms

    def server_session_expiration_ms(self):
        return None

    def reauthentication_latency_ms(self):
        r = self._reauth
        if not r.reauthenticating() or r.authentication_end_ms is None:
            return None
        return max(0, r.authentication_end_ms - r.reauthentication_begin_ms)

    def reauthenticating(self):
        return self._reauth.reauthenticating()

    def get_and_clear_responses_received_during_reauthentication(self):
        pending = self._reauth.pending_authenticated_receives
        self._reauth.pending_authenticated_receives = []
        return pending

    def poll_response_received_during_reauthentication(self):
        pending = self._reauth.pending_authenticated_receives
        return pending.pop(0) if pending else None

    def handle_authentication_failure(self):
        return None

    @property
    def sasl_handshake_version(self):
        return self._sasl_handshake_version

    @property
    def sasl_authenticate_version(self):
        return self._sasl_authenticate_version

    @property
    def session_lifetime_ms(self):
        return self._reauth.positive_session_lifetime_ms

    def __repr__(self):
        return (f"SaslClientAuthenticator(state={self.state.name if self.state else None}, "
                f"mechanism={self.mechanism}, node={self.node})")

    # -- internals -----------------------------------------------------------
    def next_correlation_id(self):
        if not is_reserved(self._correlation_id):
            self._correlation_id = MIN_RESERVED_CORRELATION_ID
        cid = self._correlation_id
        self._correlation_id += 1
        if self._correlation_id > MAX_RESERVED_CORRELATION_ID:
            self._correlation_id = MIN_RESERVED_CORRELATION_ID
        return cid

    TRANSITIONS = _TRANSITIONS
    FAILED = SaslState.FAILED

    def _state_entered(self, state, now):
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Set SASL client state to %s", state.name)
        if state is SaslState.COMPLETE:
            self._set_authentication_end(now)
            # The mechanism is done with (a re-authentication makes a new
            # one): its state (SCRAM nonces, salted password, messages) is not
            # kept for the life of the connection.
            if self._sasl_client is not None:
                self._sasl_client.dispose()
                self._sasl_client = None

    def _set_authentication_end(self, now):
        r = self._reauth
        r.authentication_end_ms = now
        if r.positive_session_lifetime_ms is not None and now is not None:
            # A random point in 85%-95% of the session: 85% leaves room for
            # latency and clock drift, the 10% jitter spreads re-authentication
            # of many connections.
            pct = 0.85 + self._rng.random() * 0.10
            use_ms = int(r.positive_session_lifetime_ms * pct)
            r.client_session_reauthentication_ms = now + use_ms
            log.debug("Finished %s with session expiration in %d ms and session "
                      "re-authentication on or after %d ms", r.text(),
                      r.positive_session_lifetime_ms, use_ms)
        else:
            r.client_session_reauthentication_ms = None
            if log.isEnabledFor(logging.DEBUG):
                log.debug("Finished %s with no session expiration and no session "
                          "re-authentication", r.text())

    def _send_request(self, io, now, api_key, version, body, constant=False):
        """Send a request; ``constant``: ``body`` is the same for every
        connection with this mechanism (ApiVersions, SaslHandshake)."""
        # (next_correlation_id, inlined)
        cid = self._correlation_id
        if cid < MIN_RESERVED_CORRELATION_ID:
            cid = MIN_RESERVED_CORRELATION_ID
        self._correlation_id = (cid + 1 if cid < MAX_RESERVED_CORRELATION_ID
                                else MIN_RESERVED_CORRELATION_ID)
        self._current_request = (api_key, version, cid)
        client_id = self._client_id
        # (the header alone: encode_request with an empty, already-encoded body)
        head = _request_part((api_key, version, cid, client_id), _wire.encode_request,
                             api_key, version, cid, client_id, b"")
        if constant:
            payload = head + _request_part((api_key, version, self.mechanism), _encode_body,
                                           api_key, version, body)
        else:
            payload = head + _encode_body(api_key, version, body)
        self._send(io, payload, now)

    def _set_versions(self, api_versions_body):
        for entry in api_versions_body.get("api_keys") or ():
            key = entry.get("api_key")
            if key == SASL_AUTHENTICATE:
                ours = _wire.supported_range(SASL_AUTHENTICATE)[1]
                self._sasl_authenticate_version = min(entry.get("max_version", 0), ours)
            elif key == SASL_HANDSHAKE:
                ours = _wire.supported_range(SASL_HANDSHAKE)[1]
                self._sasl_handshake_version = min(entry.get("max_version", 0), ours)

    def _receive_kafka_response(self, io):
        """The decoded body of the response to the current SASL request, or
        None if it has not fully arrived.  During re-authentication, responses
        to earlier ordinary requests are set aside."""
        while True:
            frame = io.read_frame()
            if frame is None:
                return None
            frame = bytes(frame)
            api_key, version, cid = self._current_request
            try:
                if _wire.peek_correlation_id(frame) != cid:
                    raise InvalidRequestError(
                        f"Correlation id for response ({_wire.peek_correlation_id(frame)}) "
                        f"does not match request ({cid})")
                body = _decode_body(frame, api_key, version)
            except KChannelError as exc:
                if self._reauth.reauthenticating():
                    # Not the SASL response: a response to a request sent
                    # before re-authentication began.  Keep it for the caller.
                    self._reauth.pending_authenticated_receives.append(frame)
                    continue
                log.debug("Invalid SASL mechanism response, server may be expecting "
                          "only GSSAPI tokens")
                raise IllegalSaslStateError(
                    "Invalid SASL mechanism response, server may be expecting a "
                    f"different protocol: {exc}") from exc
            self._current_request = None
            return body

    def _receive_token(self, io, now):
        if self._sasl_authenticate_version == DISABLE_KAFKA_SASL_AUTHENTICATE_HEADER:
            frame = io.read_frame()
            return None if frame is None else bytes(frame)
        body = self._receive_kafka_response(io)
        if body is None:
            return None
        code = body.get("error_code", 0)
        if code != NONE:
            raise _exception_for(code, body.get("error_message"))
        lifetime = body.get("session_lifetime_ms") or 0
        if lifetime > 0:
            self._reauth.positive_session_lifetime_ms = lifetime
        return bytes(body.get("auth_bytes") or b"")

    def _send_sasl_client_token(self, io, now, server_token, is_initial):
        """Send the mechanism's next token if it has one; True if sent."""
        if self._sasl_client.is_complete():
            return False
        token = self._create_sasl_token(server_token, is_initial)
        if token is None:
            return False
        token = bytes(token)
        if self._sasl_authenticate_version == DISABLE_KAFKA_SASL_AUTHENTICATE_HEADER:
            self._send(io, token, now)
        else:
            self._send_request(io, now, SASL_AUTHENTICATE, self._sasl_authenticate_version,
                               {"auth_bytes": token})
        return True

    def _create_sasl_token(self, server_token, is_initial):
        if server_token is None:
            raise IllegalSaslStateError(
                "Error authenticating with the Kafka Broker: received a `null` saslToken.")
        try:
            if is_initial and not self._sasl_client.has_initial_response():
                return server_token
            return self._sasl_client.evaluate_challenge(server_token)
        except Exception as exc:
            raise SaslAuthenticationError(
                f"An error: ({type(exc).__name__}: {exc}) occurred when evaluating SASL "
                "token received from the Kafka Broker. Kafka Client will go to "
                "AUTHENTICATION_FAILED state.", mechanism=self.mechanism) from exc

    def _handle_handshake_response(self, body, now):
        code = body.get("error_code", 0)
        mechanisms = body.get("mechanisms") or []
        if code == NONE:
            return
        if code == UNSUPPORTED_SASL_MECHANISM:
            raise UnsupportedSaslMechanismError(
                f"Client SASL mechanism '{self.mechanism}' not enabled in the server, "
                f"enabled mechanisms are {_java_list(mechanisms)}", mechanisms)
        if code == ILLEGAL_SASL_STATE:
            raise IllegalSaslStateError(
                f"Unexpected handshake request with client mechanism {self.mechanism}, "
                f"enabled mechanisms are {_java_list(mechanisms)}")
        raise IllegalSaslStateError(
            f"Unknown error code {_error_name(code)}, client mechanism is {self.mechanism}, "
            f"enabled mechanisms are {_java_list(mechanisms)}")
