"""``SaslState``: the states of both SASL authenticators, one vocabulary.

Kafka keeps two enums, ``SaslClientAuthenticator.SaslState`` and
``SaslServerAuthenticator.SaslState``; their names are kept here as Kafka
spells them (they appear in state-transition errors and logs).  COMPLETE and
FAILED are shared; every other state belongs to one side, listed in
``CLIENT_STATES`` / ``SERVER_STATES``, and each authenticator's transition
table only ever enters its own side's states.
"""
import enum

__all__ = ["SaslState", "CLIENT_STATES", "SERVER_STATES"]


class SaslState(enum.Enum):
    # Identity hash in C: every state change looks its states up in the
    # transition table, and Enum's own __hash__ is a Python function.
    __hash__ = object.__hash__

    # client side (Kafka's SaslClientAuthenticator.SaslState)
    SEND_APIVERSIONS_REQUEST = "SEND_APIVERSIONS_REQUEST"
    RECEIVE_APIVERSIONS_RESPONSE = "RECEIVE_APIVERSIONS_RESPONSE"
    SEND_HANDSHAKE_REQUEST = "SEND_HANDSHAKE_REQUEST"
    RECEIVE_HANDSHAKE_RESPONSE = "RECEIVE_HANDSHAKE_RESPONSE"
    INITIAL = "INITIAL"
    INTERMEDIATE = "INTERMEDIATE"
    CLIENT_COMPLETE = "CLIENT_COMPLETE"
    REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE = "REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE"
    REAUTH_SEND_HANDSHAKE_REQUEST = "REAUTH_SEND_HANDSHAKE_REQUEST"
    REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE = "REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE"
    REAUTH_INITIAL = "REAUTH_INITIAL"
    # server side (Kafka's SaslServerAuthenticator.SaslState)
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
    # both sides
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


_S = SaslState
CLIENT_STATES = frozenset((
    _S.SEND_APIVERSIONS_REQUEST, _S.RECEIVE_APIVERSIONS_RESPONSE, _S.SEND_HANDSHAKE_REQUEST,
    _S.RECEIVE_HANDSHAKE_RESPONSE, _S.INITIAL, _S.INTERMEDIATE, _S.CLIENT_COMPLETE,
    _S.COMPLETE, _S.FAILED, _S.REAUTH_PROCESS_ORIG_APIVERSIONS_RESPONSE,
    _S.REAUTH_SEND_HANDSHAKE_REQUEST, _S.REAUTH_RECEIVE_HANDSHAKE_OR_OTHER_RESPONSE,
    _S.REAUTH_INITIAL,
))
SERVER_STATES = frozenset((
    _S.INITIAL_REQUEST, _S.HANDSHAKE_OR_VERSIONS_REQUEST, _S.HANDSHAKE_REQUEST,
    _S.AUTHENTICATE, _S.COMPLETE, _S.FAILED, _S.REAUTH_PROCESS_HANDSHAKE,
    _S.REAUTH_BAD_MECHANISM,
))
