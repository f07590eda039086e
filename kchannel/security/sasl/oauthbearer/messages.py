"""RFC 7628 messages of the OAUTHBEARER exchange: the client's initial
response (``n,a=...,^Aauth=Bearer ...^A^A``), extension validation and the
server's error JSON."""
import re

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
BYTE_CONTROL_A = b"\x01"
AUTH_KEY = "auth"
NEGOTIATED_PROPERTY_KEY_TOKEN = "OAUTHBEARER.token"
INTERNAL_ERROR_ON_SERVER = ("Authentication could not be performed due to an internal error "
                            "on the server")
# Client-visible message for failures Kafka reports as plain SaslExceptions
# (the detail stays in the server log).
GENERIC_FAILURE_MESSAGE = ("Authentication failed during authentication due to invalid "
                           "credentials with SASL mechanism OAUTHBEARER")

SERVER_CALLBACK_HANDLER_CLASS = "sasl.server.callback.handler.class"
LOGIN_CALLBACK_HANDLER_CLASS = "sasl.login.callback.handler.class"
_JAVA_UNSECURED_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                             "OAuthBearerUnsecuredValidatorCallbackHandler")
_JAVA_UNSECURED_LOGIN = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                         "OAuthBearerUnsecuredLoginCallbackHandler")

# -- RFC 7628 client initial response -----------------------------------------------

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_KVPAIRS = rf"(?:{_KEY}={_VALUE}\x01)*"
_AUTH_PATTERN = re.compile(r"(?P<scheme>[A-Za-z0-9_]+)[ ]+(?P<token>[-_~+/.a-zA-Z0-9]+(=*))")
_CLIENT_INITIAL_RESPONSE_PATTERN = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
EXTENSION_KEY_PATTERN = re.compile(_KEY)
EXTENSION_VALUE_PATTERN = re.compile(_VALUE)


class _ResponseError(Exception):
    """Malformed client message (a SaslException in Kafka)."""


def validate_extensions(extensions):
    """Kafka's ``OAuthBearerClientInitialResponse.validateExtensions``;
    raises ValueError with Kafka's message."""
    if not extensions:
        return
    if AUTH_KEY in extensions:
        raise ValueError(f"Extension name {AUTH_KEY} is invalid")
    for name, value in extensions.items():
        if not EXTENSION_KEY_PATTERN.fullmatch(name):
            raise ValueError(f"Extension name {name} is invalid")
        if not EXTENSION_VALUE_PATTERN.fullmatch(value):
            raise ValueError(f"Extension value ({value}) for extension {name} is invalid")


class ClientInitialResponse:
    """``OAuthBearerClientInitialResponse``: build or parse the first message."""

    __slots__ = ("token_value", "authorization_id", "extensions")

    def __init__(self, token_value, authorization_id="", extensions=None):
        if token_value is None:
            raise ValueError("token value must not be null")
        self.token_value = token_value
        self.authorization_id = authorization_id or ""
        extensions = dict(extensions or {})
        validate_extensions(extensions)
        self.extensions = extensions

    @classmethod
    def parse(cls, response):
        text = bytes(response).decode("utf-8", errors="replace")
        m = _CLIENT_INITIAL_RESPONSE_PATTERN.fullmatch(text)
        if m is None:
            raise _ResponseError("Invalid OAUTHBEARER client first message")
        authzid = m.group("authzid") or ""
        properties = {}
        kvpairs = m.group("kvpairs")
        if kvpairs:
            # Java's String.split drops trailing empty strings.
            for item in kvpairs.rstrip(SEPARATOR).split(SEPARATOR):
                key, _, value = item.partition("=")
                properties[key] = value
        auth = properties.pop(AUTH_KEY, None)
        if auth is None:
            raise _ResponseError("Invalid OAUTHBEARER client first message: 'auth' not specified")
        try:
            validate_extensions(properties)
        except ValueError as exc:
            raise _ResponseError(str(exc)) from None
        am = _AUTH_PATTERN.fullmatch(auth)
        if am is None:
            raise _ResponseError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if am.group("scheme").lower() != "bearer":
            raise _ResponseError(
                f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}")
        return cls(am.group("token"), authzid, properties)

    def to_bytes(self):
        authzid = f"a={self.authorization_id}" if self.authorization_id else ""
        ext = SEPARATOR.join(f"{k}={v}" for k, v in self.extensions.items())
        if ext:
            ext = SEPARATOR + ext
        return (f"n,{authzid},{SEPARATOR}auth=Bearer {self.token_value}{ext}"
                f"{SEPARATOR}{SEPARATOR}").encode("utf-8")


def json_error_response(status, scope=None, openid_configuration=None):
    """The error challenge exactly as Kafka's ``OAuthBearerSaslServer`` formats it."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    if openid_configuration is not None:
        text += f', "openid-configuration":"{openid_configuration}"'
    return text + "}"
