"""SASL/PLAIN (RFC 4616) as Kafka implements it.

The client sends one message, ``[authzid] NUL authcid NUL passwd`` (Kafka's
clients leave authzid empty); the server answers with an empty token.

Server side (Kafka's ``PlainSaslServer``): the message must split into exactly
three tokens; the user name and password must be non-empty; the password is
checked by ``ServerCallbacks.plain_authenticate`` or, without one, against the
JAAS option ``user_<name>="<password>"`` (Kafka's
``PlainServerCallbackHandler``) in constant time; a non-empty authzid must
equal the user name.  A wrong password and an unknown user get the same
message, ``Authentication failed: Invalid username or password``.

PLAIN sends the password in clear: use it over SASL_SSL only.
"""
import hmac

from kchannel import errors
from kchannel.config.types import reveal
from kchannel.security.sasl.interfaces import (
    SaslClientMechanism, SaslServerMechanism, jaas_option)
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.plain")

PLAIN_MECHANISM = "PLAIN"
JAAS_USER_PREFIX = "user_"

# Compared against when the user is unknown, so that both paths do the same
# constant-time comparison.
_DUMMY_PASSWORD = b"\x00" * 32


def _utf8(value):
    return str(value).encode("utf-8")


def jaas_plain_authenticator(jaas_options):
    """``plain_authenticate(username, password) -> bool`` over JAAS options
    ``user_<name>="<password>"`` (Kafka's ``PlainServerCallbackHandler``)."""
    options = dict(jaas_options or {})

    def authenticate(username, password):
        if username is None:
            return False
        expected = reveal(options.get(JAAS_USER_PREFIX + username))
        given = _utf8(reveal(password))
        if expected is None:
            hmac.compare_digest(given, _DUMMY_PASSWORD)
            return False
        return hmac.compare_digest(given, _utf8(expected))

    return authenticate


class PlainSaslClient(SaslClientMechanism):
    """Client side: JAAS options ``username`` / ``password``."""

    mechanism_name = PLAIN_MECHANISM

    def __init__(self, username, password, authorization_id=""):
        self._username = username
        self._password = password
        self._authorization_id = authorization_id or ""
        self._complete = False

    def __repr__(self):
        return f"PlainSaslClient(complete={self._complete})"

    def has_initial_response(self):
        return True

    def evaluate_challenge(self, challenge):
        if self._complete:
            # The server's empty answer to our single message.
            if challenge:
                raise errors.SaslAuthenticationError(
                    "PLAIN authentication already completed", mechanism=PLAIN_MECHANISM)
            return None
        if challenge:
            raise errors.SaslAuthenticationError("Expected empty challenge",
                                                 mechanism=PLAIN_MECHANISM)
        if self._username is None or self._password is None:
            raise errors.SaslAuthenticationError(
                "SASL/PLAIN: JAAS options 'username' and 'password' must be set",
                mechanism=PLAIN_MECHANISM)
        self._complete = True
        message = b"\x00".join((_utf8(self._authorization_id), _utf8(self._username),
                                _utf8(reveal(self._password))))
        return message

    def is_complete(self):
        return self._complete

    def dispose(self):
        self._password = None


class PlainSaslServer(SaslServerMechanism):
    """Kafka's ``PlainSaslServer``."""

    mechanism_name = PLAIN_MECHANISM

    def __init__(self, authenticate):
        self._authenticate = authenticate
        self._complete = False
        self._failed = False
        self._authorization_id = None

    def __repr__(self):
        return f"PlainSaslServer(complete={self._complete})"

    def _fail(self, message, reason=None):
        self._failed = True
        if reason:
            log.debug("SASL/PLAIN authentication failed: %s", reason)
        raise errors.SaslAuthenticationError(message, mechanism=PLAIN_MECHANISM)

    @staticmethod
    def _extract_tokens(text):
        # Kafka's extractTokens: split on NUL, at most 4 pieces, need 3.
        tokens = []
        start = 0
        for _ in range(4):
            end = text.find("\x00", start)
            if end == -1:
                tokens.append(text[start:])
                break
            tokens.append(text[start:end])
            start = end + 1
        return tokens

    def evaluate_response(self, response, now=None):
        if self._complete or self._failed:
            # One message only; anything else fails closed.
            self._fail("Authentication failed: unexpected SASL/PLAIN message")
        text = bytes(response or b"").decode("utf-8", errors="replace")
        tokens = self._extract_tokens(text)
        if len(tokens) != 3:
            self._fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            self._fail("Authentication failed: username not specified")
        if not password:
            self._fail("Authentication failed: password not specified")
        try:
            authenticated = bool(self._authenticate(username, password))
        except Exception as exc:
            log.warning("SASL/PLAIN: credentials could not be verified: %s", exc)
            self._fail("Authentication failed: credentials for user could not be verified")
        if not authenticated:
            self._fail("Authentication failed: Invalid username or password",
                       "invalid username or password")
        if authzid and authzid != username:
            self._fail("Authentication failed: Client requested an authorization id that is "
                       "different from username")
        self._authorization_id = username
        self._complete = True
        return b""

    def is_complete(self):
        return self._complete

    def get_authorization_id(self):
        if not self._complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    def get_negotiated_property(self, name):
        return None

    @property
    def token_authenticated(self):
        return False


def create_client(mechanism, *, jaas_options, configs, server_host, username=None,
                  password=None, authorization_id="", **_kw):
    if username is None:
        username = jaas_option(jaas_options, "username")
    if password is None:
        password = (jaas_options or {}).get("password")
    return PlainSaslClient(username, password, authorization_id)


def create_server(mechanism, *, jaas_options, configs, callbacks, server_host, now, **_kw):
    authenticate = callbacks.plain_authenticate if callbacks is not None else None
    if authenticate is None:
        authenticate = jaas_plain_authenticator(jaas_options)
    return PlainSaslServer(authenticate)

