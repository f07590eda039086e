"""SASL OAUTHBEARER (RFC 7628, KIP-255) client and server mechanisms.

Mirrors Kafka's ``OAuthBearerSaslClient`` / ``OAuthBearerSaslServer`` and the
development-only unsecured JWS tokens of ``OAuthBearerUnsecuredJws``,
``OAuthBearerUnsecuredLoginCallbackHandler`` (client) and
``OAuthBearerUnsecuredValidatorCallbackHandler`` (server).

Token flow::

    client                                        server
    n,[a=<authzid>],^Aauth=Bearer <token>[^Akey=value...]^A^A  ->
                                 <-   b""  (valid token: complete)
                              or <-   {"status":"invalid_token"}  (error JSON)
    ^A                           ->   (client acknowledges the error)
                                 <-   SaslAuthenticationError(<the JSON>)

Extensions are validated by the server's validator: an extension it marks
invalid fails the authentication with Kafka's message; one it neither
validates nor rejects is ignored (not exposed as a negotiated property).
The unsecured validator accepts every extension, as Kafka's does.

Signed tokens (KIP-768): ``sasl.server.callback.handler.class=
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``
selects :class:`JwtValidator`, which checks RS/PS/ES signatures against the
JWKS at ``sasl.oauthbearer.jwks.endpoint.url`` and the claims as Kafka does.

Real deployments can also plug their own validator in: ``ServerCallbacks.oauth_validate
(token_str, now) -> OAuthBearerToken`` (raise :class:`OAuthBearerValidationError`
for a refused token), or ``sasl.server.callback.handler.class`` naming a
Python class (dotted path) with ``validate(token_str, now)`` and optionally
``validate_extensions(token, extensions) -> (valid: dict, invalid: dict)`` and
``configure(configs, mechanism, jaas_options)``.  On the client,
``sasl.login.callback.handler.class`` names a class with ``token(now) ->
OAuthBearerToken`` and optionally ``extensions() -> dict``.
"""
import base64
import binascii
import importlib
import json
import math
import re
from decimal import Decimal
from urllib.parse import urlparse
from urllib.request import url2pathname, urlopen

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kchannel.config.types import reveal
from kchannel.errors import ConfigError, SaslAuthenticationError
from kchannel.security.sasl.interfaces import (
    CREDENTIAL_LIFETIME_MS, SaslClientMechanism, SaslServerMechanism)
from kchannel.utils import now_ms, run_blocking
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.oauthbearer")

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


class OAuthBearerConfigError(ConfigError):
    """Kafka's OAuthBearerConfigException: bad unsecured login/validator options."""


class OAuthBearerValidationError(Exception):
    """A validator refused a token.  ``status`` / ``scope`` /
    ``openid_configuration`` become the RFC 7628 error JSON sent to the
    client (Kafka's ``OAuthBearerValidatorCallback.error``)."""

    def __init__(self, description, status="invalid_token", scope=None,
                 openid_configuration=None):
        super().__init__(description)
        self.description = description
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


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


# -- Java formatting helpers (for byte-identical tokens) -------------------------------

def java_double_to_string(x):
    """``Double.toString(x)``: shortest round-trip digits, plain notation for
    1e-3 <= |x| < 1e7, otherwise ``d.dddE<n>``."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    sign_, digits, exponent = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, digits))
    # value = 0.digits * 10**point
    point = len(digits) + exponent
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{point - 1}"


def _java_string_hash(s):
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_bucket(key, capacity):
    h = _java_string_hash(key)
    return (h ^ (h >> 16)) & (capacity - 1)


def java_hashmap_order(keys, copied=False):
    """Iteration order of a ``java.util.HashMap`` holding ``keys`` (inserted in
    the given order): built by ``put`` from an empty map, or with
    ``copied=True`` by ``new HashMap<>(otherMap)``."""
    keys = list(dict.fromkeys(keys))
    n = len(keys)
    if n == 0:
        return keys
    if copied:
        t = int(n / 0.75 + 1.0)
        capacity = 1
        while capacity < t:
            capacity <<= 1
    else:
        capacity = 16
    while n > int(capacity * 0.75):
        capacity <<= 1
    order = {k: i for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (_java_bucket(k, capacity), order[k]))


def _java_hashmap(mapping, copied=False):
    return {k: mapping[k] for k in java_hashmap_order(mapping, copied)}


# What Double.valueOf accepts (decimal forms; hexadecimal floats are not supported).
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")


def _b64url_nopad(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# -- tokens -------------------------------------------------------------------------------

class OAuthBearerToken:
    """Kafka's ``OAuthBearerToken``: ``value`` (the compact token),
    ``scope`` (set of str), ``lifetime_ms`` (expiry, epoch ms),
    ``principal_name``, ``start_time_ms`` (or None)."""

    def __init__(self, value, principal_name, lifetime_ms, scope=(), start_time_ms=None):
        self.value = value
        self.principal_name = principal_name
        self.lifetime_ms = lifetime_ms
        self.scope = frozenset(scope)
        self.start_time_ms = start_time_ms

    def __repr__(self):
        # The token value is a bearer secret: never shown.
        return (f"{type(self).__name__}(principal_name={self.principal_name!r}, "
                f"lifetime_ms={self.lifetime_ms}, scope={sorted(self.scope)})")


class OAuthBearerIllegalTokenError(OAuthBearerValidationError):
    """A token failed validation (Kafka's OAuthBearerIllegalTokenException
    carrying an OAuthBearerValidationResult)."""

    def __init__(self, description, failure_scope=None, failure_openid_config=None):
        super().__init__(description,
                         status="insufficient_scope" if failure_scope is not None
                         else "invalid_token",
                         scope=failure_scope, openid_configuration=failure_openid_config)


def _java_type_name(value):
    if isinstance(value, bool):
        return "String"
    if isinstance(value, int):
        if -2 ** 31 <= value < 2 ** 31:
            return "Integer"
        if -2 ** 63 <= value < 2 ** 63:
            return "Long"
        return "BigInteger"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, list):
        return "ArrayList"
    return "String"


def _json_as_text(value):
    """Jackson ``JsonNode.asText()`` of a parsed JSON value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_to_string(value)
    return ""   # objects and arrays


def _convert(value):
    if isinstance(value, list):
        return [_json_as_text(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _json_as_text(value)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def _b64decode(split):
    # Kafka's decoder takes the standard alphabet with optional padding; the
    # tokens Kafka (and every JWS library) produces use the URL-safe
    # alphabet.  Accept both.
    if any(c in split for c in "+/") and any(c in split for c in "-_"):
        raise ValueError("mixed alphabets")
    s = split.replace("-", "+").replace("_", "/")
    stripped = s.rstrip("=")
    if len(stripped) % 4 == 1:
        raise ValueError("truncated")
    padded = stripped + "=" * (-len(stripped) % 4)
    return base64.b64decode(padded, validate=True)


def _to_map(split):
    try:
        raw = _b64decode(split)
    except (ValueError, binascii.Error):
        raise OAuthBearerIllegalTokenError("malformed Base64 URL encoded value") from None
    try:
        text = raw.decode("utf-8")
        decoder = json.JSONDecoder(parse_constant=_reject_constant)
        start = len(text) - len(text.lstrip(" \t\r\n"))
        if start == len(text):
            raise ValueError("empty")
        # Jackson's readTree stops after the first value.
        node, _ = decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        raise OAuthBearerIllegalTokenError("malformed JSON") from None
    if not isinstance(node, dict):
        return {}
    return {k: _convert(v) for k, v in node.items()}


def _is_blank(s):
    return s is None or not s.strip()


class OAuthBearerUnsecuredJws(OAuthBearerToken):
    """An unsecured JWS (``{"alg":"none"}``, empty signature): Kafka's
    ``OAuthBearerUnsecuredJws``.  Raises :class:`OAuthBearerIllegalTokenError`
    with Kafka's messages."""

    def __init__(self, compact_serialization, principal_claim_name="sub",
                 scope_claim_name="scope"):
        if compact_serialization is None:
            raise ValueError("compact serialization must not be null")
        if ".." in compact_serialization:
            raise OAuthBearerIllegalTokenError("Malformed compact serialization contains '..'")
        splits = compact_serialization.split(".")
        # Java's split drops trailing empty strings, then Kafka re-adds one.
        while splits and splits[-1] == "":
            splits.pop()
        if compact_serialization.endswith("."):
            splits.append("")
        if len(splits) != 3:
            raise OAuthBearerIllegalTokenError(
                "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values")
        self.splits = splits
        self.header = _to_map(splits[0])
        self.claims = _to_map(splits[1])
        alg = self.header.get("alg")
        if alg is None:
            raise OAuthBearerIllegalTokenError("JWS header must have an Algorithm value")
        if str(alg) != "none":
            raise OAuthBearerIllegalTokenError("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise OAuthBearerIllegalTokenError("Unsecured JWS must not contain a digital signature")
        principal_claim_name = (principal_claim_name or "").strip()
        if not principal_claim_name:
            raise ValueError("Must specify a non-blank principal claim name")
        scope_claim_name = (scope_claim_name or "").strip()
        if not scope_claim_name:
            raise ValueError("Must specify a non-blank scope claim name")
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = scope_claim_name
        scope = self._calculate_scope()
        exp = self.expiration_time()
        if exp is None:
            raise OAuthBearerIllegalTokenError("No expiration time in JWT")
        principal = self.claim(principal_claim_name, str)
        if _is_blank(principal):
            raise OAuthBearerIllegalTokenError(
                f"No principal name in JWT claim: {principal_claim_name}")
        iat = self.claim("iat", "number")
        super().__init__(compact_serialization, principal, _seconds_to_ms(exp), scope,
                         _seconds_to_ms(iat) if iat is not None else None)

    def is_claim_type(self, name, kind):
        value = self.claims.get(name)
        if value is None:
            return False
        if kind is str:
            return isinstance(value, str)
        if kind == "number":
            return isinstance(value, (int, float))
        return isinstance(value, list)

    def claim(self, name, kind):
        """The claim's value if of ``kind`` (str, "number", list), else Kafka's
        type error; None when absent."""
        value = self.claims.get(name)
        if value is None or self.is_claim_type(name, kind):
            return value
        simple = {str: "String", "number": "Number", list: "List"}[kind]
        raise OAuthBearerIllegalTokenError(
            f"The '{name}' claim was not of type {simple}: {_java_type_name(value)}")

    def expiration_time(self):
        return self.claim("exp", "number")

    def issued_at(self):
        return self.claim("iat", "number")

    def subject(self):
        return self.claim("sub", str)

    def _calculate_scope(self):
        name = self.scope_claim_name
        if self.is_claim_type(name, str):
            value = self.claims[name]
            # A string scope claim is one scope item, not split on spaces (as Kafka).
            return set() if _is_blank(value) else {value.strip()}
        values = self.claim(name, list)
        if not values:
            return set()
        return {v.strip() for v in values if not _is_blank(v)}


_LONG_MAX = 2 ** 63 - 1
_LONG_MIN = -2 ** 63


def _seconds_to_ms(value):
    """``Math.round(seconds * 1000)``: half up, NaN -> 0, clamped to a long."""
    ms = float(value) * 1000
    if math.isnan(ms):
        return 0
    if ms >= _LONG_MAX:
        return _LONG_MAX
    if ms <= _LONG_MIN:
        return _LONG_MIN
    return int(math.floor(ms + 0.5))


# -- scope / validation utilities ------------------------------------------------------------

_SCOPE_ITEM_PATTERN = re.compile(r"[\x23-\x5B\x5D-\x7E\x21]+")


def parse_scope(space_delimited):
    out = []
    for item in space_delimited.split(" "):
        if item:
            if not _SCOPE_ITEM_PATTERN.fullmatch(item):
                raise OAuthBearerConfigError(f"Invalid scope value: {item}")
            out.append(item)
    return out


def _java_list(items):
    return "[" + ", ".join(items) + "]"


def _fmt_f(value):
    return "%f" % float(value)


def validate_issued_at(jws, required, now, skew):
    try:
        value = jws.issued_at()
    except OAuthBearerIllegalTokenError as exc:
        return exc
    if value is None:
        return OAuthBearerIllegalTokenError("Required claim missing: iat") if required else None
    if 1000 * float(value) > now + skew:
        return OAuthBearerIllegalTokenError(
            f"The Issued At value ({_fmt_f(value)} seconds) was after the indicated time "
            f"({now} ms) plus allowable clock skew ({skew} ms)")
    return None


def validate_expiration_time(jws, now, skew):
    try:
        value = jws.expiration_time()
    except OAuthBearerIllegalTokenError as exc:
        return exc
    if value is None:
        return OAuthBearerIllegalTokenError("Required claim missing: exp")
    if now - skew >= 1000 * float(value):
        return OAuthBearerIllegalTokenError(
            f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or "
            f"after the Expiration Time value ({_fmt_f(value)} seconds)")
    return None


def validate_time_consistency(jws):
    try:
        iat = jws.issued_at()
        exp = jws.expiration_time()
    except OAuthBearerIllegalTokenError as exc:
        return exc
    if exp is not None and iat is not None and float(exp) <= float(iat):
        return OAuthBearerIllegalTokenError(
            f"The Expiration Time time ({_fmt_f(exp)} seconds) was not after the Issued At "
            f"time ({_fmt_f(iat)} seconds)")
    return None


def validate_scope(token, required_scope):
    if not required_scope:
        return None
    for item in required_scope:
        if item not in token.scope:
            return OAuthBearerIllegalTokenError(
                f"The provided scope ({_java_list(sorted(token.scope))}) was missing a required "
                f"scope ({item}).  All required scope elements: {_java_list(required_scope)}",
                failure_scope=_java_list(required_scope))
    return None


def _options(jaas_options):
    return {k: reveal(v) for k, v in (jaas_options or {}).items()}


class UnsecuredValidator:
    """``OAuthBearerUnsecuredValidatorCallbackHandler``: validates unsecured
    JWS tokens from the JAAS options ``unsecuredValidatorPrincipalClaimName``
    (default sub), ``unsecuredValidatorScopeClaimName`` (default scope),
    ``unsecuredValidatorRequiredScope`` (space-delimited) and
    ``unsecuredValidatorAllowableClockSkewMs`` (default 0).  Every extension
    is accepted."""

    def __init__(self, jaas_options=None):
        self.configure({}, MECHANISM, jaas_options)

    def configure(self, configs, mechanism, jaas_options):
        opts = _options(jaas_options)
        value = opts.get("unsecuredValidatorPrincipalClaimName")
        self.principal_claim_name = "sub" if _is_blank(value) else value.strip()
        value = opts.get("unsecuredValidatorScopeClaimName")
        self.scope_claim_name = "scope" if _is_blank(value) else value.strip()
        value = opts.get("unsecuredValidatorRequiredScope")
        self.required_scope = [] if _is_blank(value) else parse_scope(value.strip())
        value = opts.get("unsecuredValidatorAllowableClockSkewMs")
        try:
            skew = 0 if _is_blank(value) else int(value.strip())
        except ValueError:
            raise OAuthBearerConfigError(f'For input string: "{value.strip()}"') from None
        if skew < 0:
            raise OAuthBearerConfigError(
                f"Allowable clock skew millis must not be negative: {value}")
        self.allowable_clock_skew_ms = skew

    def validate(self, token_value, now):
        jws = OAuthBearerUnsecuredJws(token_value, self.principal_claim_name,
                                      self.scope_claim_name)
        skew = self.allowable_clock_skew_ms
        for failure in (validate_issued_at(jws, False, now, skew),
                        validate_expiration_time(jws, now, skew),
                        validate_time_consistency(jws),
                        validate_scope(jws, self.required_scope)):
            if failure is not None:
                raise failure
        log.debug("Successfully validated token with principal %s", jws.principal_name)
        return jws

    def validate_extensions(self, token, extensions):
        return dict(extensions), {}


class UnsecuredLogin:
    """``OAuthBearerUnsecuredLoginCallbackHandler``: builds an unsecured JWS
    from the JAAS options ``unsecuredLoginStringClaim_<name>``,
    ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>``
    (first character is the delimiter), ``unsecuredLoginLifetimeSeconds``
    (default 3600), ``unsecuredLoginPrincipalClaimName`` (default sub),
    ``unsecuredLoginScopeClaimName`` (default scope) and SASL extensions from
    ``unsecuredLoginExtension_<name>``.

    Claims are emitted in the order Kafka's option map iterates them (a Java
    HashMap), so the token bytes match Kafka's for the same time.
    """

    _PREFIX = "unsecuredLogin"
    _STRING = "unsecuredLoginStringClaim_"
    _NUMBER = "unsecuredLoginNumberClaim_"
    _LIST = "unsecuredLoginListClaim_"
    _EXTENSION = "unsecuredLoginExtension_"
    _RESERVED = ("iat", "exp")

    def __init__(self, jaas_options=None):
        self.configure({}, MECHANISM, jaas_options)

    def configure(self, configs, mechanism, jaas_options):
        self.options = _java_hashmap(_options(jaas_options))

    @staticmethod
    def _escape(value):
        # Kafka escapes '"' first and then every backslash (including the one it
        # just added); reproduced as is for identical bytes.
        return value.replace('"', '\\"').replace("\\", "\\\\")

    def _string_claim(self, name, value):
        return f'"{self._escape(name)}":"{self._escape(value)}"'

    def _number_claim(self, name, value):
        return f'"{self._escape(name)}":{java_double_to_string(value)}'

    def _not_reserved(self, name):
        if name in self._RESERVED:
            raise OAuthBearerConfigError(f"Cannot explicitly set the '{name}' claim")
        return name

    def _list_json(self, value):
        if len(value) <= 1:
            return "[]"
        delimiter = value[0]
        body = value[1:]
        # Java's String.split drops every trailing empty string ("" alone stays).
        elements = body.split(delimiter)
        if body:
            while elements and elements[-1] == "":
                elements.pop()
        out = ""
        for element in elements:
            out += "[" if not out else ","
            out += f'"{self._escape(element)}"'
        if body.startswith(delimiter) or body.endswith(delimiter) or (delimiter * 2) in body:
            out += ',""'
        return out + "]"

    def _extra_claims(self):
        parts = []
        for key, value in self.options.items():
            if key.startswith(self._STRING) and len(key) > len(self._STRING):
                parts.append(self._string_claim(self._not_reserved(key[len(self._STRING):]), value))
            elif key.startswith(self._NUMBER) and len(key) > len(self._NUMBER):
                name = self._not_reserved(key[len(self._NUMBER):])
                if not _JAVA_DOUBLE.fullmatch(value.strip()):
                    raise OAuthBearerConfigError(f'For input string: "{value}"')
                number = float(value.strip().rstrip("dDfF"))
                parts.append(self._number_claim(name, number))
            elif key.startswith(self._LIST) and len(key) > len(self._LIST):
                name = self._not_reserved(key[len(self._LIST):])
                array = self._list_json(value)
                if not (array.startswith("[") and array.endswith("]")):
                    raise OAuthBearerConfigError(f"Illegal JSON array: {array}")
                parts.append(f'"{self._escape(name)}":{array}')
        return "".join("," + p for p in parts)

    def token(self, now):
        """A fresh unsecured JWS issued at ``now`` (epoch ms)."""
        if not self.options:
            raise OAuthBearerConfigError(
                "Token not provided, this login cannot be used to establish client connections")
        if all(k.startswith(self._EXTENSION) for k in self.options):
            raise OAuthBearerConfigError("Extensions provided in login context without a token")
        value = self.options.get("unsecuredLoginPrincipalClaimName")
        principal_claim = "sub" if _is_blank(value) else value.strip()
        value = self.options.get("unsecuredLoginScopeClaimName")
        scope_claim = "scope" if _is_blank(value) else value.strip()
        header = "{" + self._string_claim("alg", "none") + "}"
        lifetime = self.options.get("unsecuredLoginLifetimeSeconds", "3600")
        try:
            if not re.fullmatch(r"[+-]?[0-9]+", lifetime):
                raise ValueError
            lifetime_s = int(lifetime)
        except ValueError:
            raise OAuthBearerConfigError(f'For input string: "{lifetime}"') from None
        now_s = now / 1000.0
        claims = "{%s,%s%s}" % (self._number_claim("exp", now_s + lifetime_s),
                                self._number_claim("iat", now_s), self._extra_claims())
        compact = (f"{_b64url_nopad(header.encode('utf-8'))}."
                   f"{_b64url_nopad(claims.encode('utf-8'))}.")
        try:
            jws = OAuthBearerUnsecuredJws(compact, principal_claim, scope_claim)
        except OAuthBearerIllegalTokenError as exc:
            raise OAuthBearerConfigError(exc.description) from exc
        log.debug("Retrieved token with principal %s", jws.principal_name)
        return jws

    def extensions(self):
        ext = {}
        for key, value in self.options.items():
            if key.startswith(self._EXTENSION):
                ext[key[len(self._EXTENSION):]] = value
        ext = _java_hashmap(_java_hashmap(ext), copied=True)   # SaslExtensions copies the map
        try:
            validate_extensions(ext)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return ext


# -- signed JWTs validated against a JWKS (KIP-768) ---------------------------------------

JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"
JWKS_ENDPOINT_REFRESH_MS = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"
_JAVA_JWKS_VALIDATOR = ("org.apache.kafka.common.security.oauthbearer."
                        "OAuthBearerValidatorCallbackHandler")


class ValidateError(OAuthBearerValidationError):
    """Kafka's ValidateException: the token is refused as ``invalid_token``."""

    def __init__(self, description):
        super().__init__(description, status="invalid_token")


def _b64url_decode(text):
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url_int(text):
    return int.from_bytes(_b64url_decode(text), "big")


def _cfg(configs, key, default=None):
    value = reveal((configs or {}).get(f"{MECHANISM.lower()}.{key}", (configs or {}).get(key)))
    return default if value is None or value == "" else value


class JwtValidator:
    """Kafka's ``OAuthBearerValidatorCallbackHandler`` (KIP-768): validates
    signed JWTs against the keys of a JWKS.

    Configs: ``sasl.oauthbearer.jwks.endpoint.url`` (``file:`` or
    ``https:``; an ``https`` JWKS is fetched at configure time and again,
    at most every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, when a
    token names an unknown ``kid``), ``sasl.oauthbearer.expected.audience``,
    ``sasl.oauthbearer.expected.issuer``, ``sasl.oauthbearer.scope.claim.name``
    (scope), ``sasl.oauthbearer.sub.claim.name`` (sub),
    ``sasl.oauthbearer.clock.skew.seconds`` (30).  As Kafka (jose4j):
    ``alg: none`` is refused, ``exp`` and ``iat`` are required, a token
    carrying ``aud`` needs an expected audience configured, every refusal is
    ``invalid_token``.  RS*, PS* and ES* signatures are supported.
    """

    def __init__(self, configs=None, jaas_options=None, jwks=None):
        self._jwks = None
        self._fetched_at = None
        self.configure(dict(configs or {}), MECHANISM, jaas_options, jwks=jwks)

    def configure(self, configs, mechanism, jaas_options, jwks=None):
        self.url = _cfg(configs, JWKS_ENDPOINT_URL)
        self.refresh_ms = int(_cfg(configs, JWKS_ENDPOINT_REFRESH_MS, 3600000))
        audience = _cfg(configs, EXPECTED_AUDIENCE)
        if isinstance(audience, str):
            audience = [a.strip() for a in audience.split(",") if a.strip()]
        self.expected_audience = list(audience or [])
        self.expected_issuer = _cfg(configs, EXPECTED_ISSUER)
        self.scope_claim_name = str(_cfg(configs, SCOPE_CLAIM_NAME, "scope")).strip()
        self.sub_claim_name = str(_cfg(configs, SUB_CLAIM_NAME, "sub")).strip()
        self.clock_skew_s = int(_cfg(configs, CLOCK_SKEW_SECONDS, 30))
        if jwks is not None:
            self._jwks = jwks if isinstance(jwks, dict) else json.loads(jwks)
        elif self.url is None:
            raise ConfigError(f"{JWKS_ENDPOINT_URL} is required to validate OAuth tokens",
                              key=JWKS_ENDPOINT_URL)
        else:
            self._load()

    def _load(self, now=None):
        parsed = urlparse(self.url)
        try:
            if parsed.scheme == "file":
                with open(url2pathname(parsed.path), "rb") as f:
                    data = f.read()
            elif parsed.scheme in ("https", "http"):
                with urlopen(self.url, timeout=10) as resp:   # noqa: S310 - configured URL
                    data = resp.read()
            else:
                raise ConfigError(f"{JWKS_ENDPOINT_URL} must be a file: or https: URL, "
                                  f"got {self.url}", key=JWKS_ENDPOINT_URL, value=self.url)
            self._jwks = json.loads(data)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - report the URL and the reason
            raise ConfigError(f"Could not load the JWKS from {self.url}: {exc}",
                              key=JWKS_ENDPOINT_URL, value=self.url) from exc
        self._fetched_at = now

    def _keys(self):
        keys = (self._jwks or {}).get("keys")
        return keys if isinstance(keys, list) else []

    def _candidates(self, header):
        alg, kid = header.get("alg"), header.get("kid")
        kty = {"R": "RSA", "P": "RSA", "E": "EC"}.get(str(alg)[:1])
        out = []
        for jwk in self._keys():
            if not isinstance(jwk, dict) or jwk.get("kty") != kty:
                continue
            if kid is not None and jwk.get("kid") != kid:
                continue
            if jwk.get("use") not in (None, "sig") or jwk.get("alg") not in (None, alg):
                continue
            out.append(jwk)
        return out

    def _verify(self, jwk, alg, signing_input, signature):
        digest = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}[alg[2:]]()
        try:
            if alg[0] in "RP":
                key = rsa.RSAPublicNumbers(_b64url_int(jwk["e"]), _b64url_int(jwk["n"])) \
                    .public_key()
                pad = (padding.PKCS1v15() if alg[0] == "R" else
                       padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size))
                key.verify(signature, signing_input, pad, digest)
            else:
                curve, size = {"ES256": (ec.SECP256R1(), 32), "ES384": (ec.SECP384R1(), 48),
                               "ES512": (ec.SECP521R1(), 66)}[alg]
                if jwk.get("crv") != {32: "P-256", 48: "P-384", 66: "P-521"}[size]:
                    return False
                if len(signature) != 2 * size:
                    return False
                key = ec.EllipticCurvePublicNumbers(
                    _b64url_int(jwk["x"]), _b64url_int(jwk["y"]), curve).public_key()
                der = encode_dss_signature(int.from_bytes(signature[:size], "big"),
                                           int.from_bytes(signature[size:], "big"))
                key.verify(der, signing_input, ec.ECDSA(digest))
            return True
        except (InvalidSignature, KeyError, ValueError, TypeError):
            return False

    def validate(self, token_value, now):
        if not token_value or not token_value.strip():
            raise ValidateError(
                "Empty JWT provided; expected three sections (header, payload, and signature)")
        parts = token_value.strip().split(".")
        if len(parts) != 3:
            raise ValidateError(
                f"Malformed JWT provided ({token_value}); expected three sections (header, "
                f"payload, and signature), but {len(parts)} sections provided")
        try:
            header = json.loads(_b64url_decode(parts[0]))
            claims = json.loads(_b64url_decode(parts[1]))
            signature = _b64url_decode(parts[2])
        except (ValueError, RecursionError):
            raise ValidateError("Could not validate the access token: malformed JWT") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise ValidateError("Could not validate the access token: malformed JWT")
        alg = header.get("alg")
        if alg not in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                       "ES256", "ES384", "ES512"):
            raise ValidateError("Could not validate the access token: 'alg' header "
                                f"value {alg!r} is not permitted")
        candidates = self._candidates(header)
        if not candidates and self.url and not self.url.startswith("file:") and (
                self._fetched_at is None or now - self._fetched_at >= self.refresh_ms):
            self._load(now)            # an unknown kid may be a rotated key
            candidates = self._candidates(header)
        if not candidates:
            raise ValidateError("Could not validate the access token: Unable to find a "
                                f"suitable verification key for JWS w/ header {header}")
        signing_input = f"{parts[0]}.{parts[1]}".encode("ascii")
        if not any(self._verify(jwk, alg, signing_input, signature) for jwk in candidates):
            raise ValidateError("Could not validate the access token: JWS signature is invalid")
        return self._validate_claims(token_value, claims, now)

    def _validate_claims(self, token_value, claims, now):
        now_s = now // 1000
        skew = self.clock_skew_s

        def numeric(name):
            value = claims.get(name)
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValidateError(f"Could not extract the '{name}' claim from the access token")
            return int(value)

        exp, iat, nbf = numeric("exp"), numeric("iat"), numeric("nbf")
        if exp is None:
            raise ValidateError("Could not validate the access token: No Expiration Time "
                                "(exp) claim present.")
        if iat is None:
            raise ValidateError("Could not validate the access token: No Issued At (iat) "
                                "claim present.")
        if now_s >= exp + skew:
            raise ValidateError("Could not validate the access token: The JWT is no longer "
                                f"valid - the evaluation time {now_s} is on or after the "
                                f"Expiration Time (exp={exp}) claim value (even when "
                                f"providing {skew} seconds of leeway to account for clock "
                                "skew).")
        if nbf is not None and now_s + skew < nbf:
            raise ValidateError("Could not validate the access token: The JWT is not yet "
                                f"valid as the evaluation time {now_s} is before the Not "
                                f"Before (nbf={nbf}) claim time.")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise ValidateError("Could not validate the access token: Issuer (iss) claim "
                                f"value ({claims.get('iss')}) doesn't match expected value "
                                f"of {self.expected_issuer}")
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else (aud if isinstance(aud, list) else None)
        if self.expected_audience:
            if not auds or not any(a in self.expected_audience for a in auds):
                raise ValidateError("Could not validate the access token: Audience (aud) "
                                    f"claim {auds} doesn't contain an acceptable identifier. "
                                    f"Expected {self.expected_audience} as an aud value.")
        elif aud is not None:
            raise ValidateError("Could not validate the access token: Audience (aud) claim "
                                f"{auds} present in the JWT but no expected audience value(s) "
                                "were provided to the JWT Consumer.")
        scope_raw = claims.get(self.scope_claim_name)
        scopes = ([scope_raw] if isinstance(scope_raw, str) else
                  scope_raw if isinstance(scope_raw, list) else [])
        scope = set()
        for item in scopes:
            item = self._validate_string(self.scope_claim_name, item)
            if item in scope:
                raise ValidateError(f"{self.scope_claim_name} value must not contain "
                                    f"duplicates - {item} already present")
            scope.add(item)
        sub_raw = claims.get(self.sub_claim_name)
        if sub_raw is not None and not isinstance(sub_raw, str):
            raise ValidateError(
                f"Could not extract the '{self.sub_claim_name}' claim from the access token")
        sub = self._validate_string(self.sub_claim_name, sub_raw)
        if exp < 0:
            raise ValidateError(f'exp value must be non-negative; value given was "{exp * 1000}"')
        if iat < 0:
            raise ValidateError(
                f'iat value must be null or non-negative; value given was "{iat * 1000}"')
        return OAuthBearerToken(token_value, sub, exp * 1000, scope, iat * 1000)

    @staticmethod
    def _validate_string(name, value):
        if value is None:
            raise ValidateError(f"{name} value must be non-null")
        if not isinstance(value, str):
            raise ValidateError(f"{name} value must be a string")
        if value == "":
            raise ValidateError(f"{name} value must be non-empty")
        value = value.strip()
        if not value:
            raise ValidateError(f"{name} value must not contain only whitespace")
        return value

    def validate_extensions(self, token, extensions):
        return dict(extensions), {}


def _load_class(dotted, key):
    module_name, _, cls_name = (dotted or "").rpartition(".")
    if not module_name:
        raise ConfigError(f"{key} must be a Python dotted path, got {dotted!r}",
                          key=key, value=dotted)
    try:
        return getattr(importlib.import_module(module_name), cls_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"Cannot load {key} {dotted}: {exc}", key=key, value=dotted) from exc


def _handler(configs, key, java_default, default_cls, jaas_options):
    configs = configs or {}
    # Broker configs name the handler per mechanism
    # (``[listener.name.<l>.]oauthbearer.sasl.server.callback.handler.class``);
    # the listener prefix is resolved by the channel builder.
    dotted = reveal(configs.get(f"{MECHANISM.lower()}.{key}", configs.get(key)))
    if dotted is None or dotted == java_default:
        return default_cls(jaas_options)
    if dotted == _JAVA_JWKS_VALIDATOR or dotted == f"{__name__}.JwtValidator":
        return JwtValidator(configs, jaas_options)
    if dotted.startswith("org.apache.kafka."):
        raise ConfigError(f"{key} {dotted} is a Java class; give a Python dotted path",
                          key=key, value=dotted)
    handler = _load_class(dotted, key)()
    if hasattr(handler, "configure"):
        handler.configure(dict(configs or {}), MECHANISM, _options(jaas_options))
    return handler


# -- client -------------------------------------------------------------------------------------

class OAuthBearerSaslClient(SaslClientMechanism):
    """Kafka's ``OAuthBearerSaslClient`` state machine."""

    mechanism_name = MECHANISM

    SEND_CLIENT_FIRST_MESSAGE = "SEND_CLIENT_FIRST_MESSAGE"
    RECEIVE_SERVER_FIRST_MESSAGE = "RECEIVE_SERVER_FIRST_MESSAGE"
    RECEIVE_SERVER_MESSAGE_AFTER_FAILURE = "RECEIVE_SERVER_MESSAGE_AFTER_FAILURE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    def __init__(self, token_provider, now=None, authorization_id=""):
        self._provider = token_provider
        self._now = now
        self._authorization_id = authorization_id or ""
        self._token = None
        self.state = self.SEND_CLIENT_FIRST_MESSAGE
        self.error_response = None

    def has_initial_response(self):
        return True

    def _set_state(self, state):
        log.debug("Setting SASL/%s client state to %s", MECHANISM, state)
        self.state = state

    def _failed(self, message, exc=None):
        self._set_state(self.FAILED)
        error = SaslAuthenticationError(message, mechanism=MECHANISM)
        if exc is not None:
            raise error from exc
        raise error

    def evaluate_challenge(self, challenge):
        challenge = bytes(challenge or b"")
        if self.state == self.SEND_CLIENT_FIRST_MESSAGE:
            if challenge:
                self._failed("Expected empty challenge")
            try:
                now = self._now
                if now is None:
                    now = now_ms()
                # A login handler may fetch its token over the network: on
                # an event loop that goes to an executor (run_blocking).
                self._token = run_blocking(self._provider.token, now)
                extensions = (self._provider.extensions()
                              if hasattr(self._provider, "extensions") else {})
                response = ClientInitialResponse(self._token.value, self._authorization_id,
                                                 extensions or {})
            except SaslAuthenticationError:
                self._set_state(self.FAILED)
                raise
            except Exception as exc:  # noqa: BLE001 - login handler failures
                self._failed(str(exc) or type(exc).__name__, exc)
            self._set_state(self.RECEIVE_SERVER_FIRST_MESSAGE)
            return response.to_bytes()
        if self.state == self.RECEIVE_SERVER_FIRST_MESSAGE:
            if challenge:
                self.error_response = challenge.decode("utf-8", errors="replace")
                log.debug("Sending %%x01 response to server after receiving an error: %s",
                          self.error_response)
                self._set_state(self.RECEIVE_SERVER_MESSAGE_AFTER_FAILURE)
                return BYTE_CONTROL_A
            log.debug("Successfully authenticated as %s", self._token.principal_name)
            self._set_state(self.COMPLETE)
            return None
        self._failed(f"Unexpected challenge in Sasl client state {self.state}")

    def is_complete(self):
        return self.state == self.COMPLETE

    def get_negotiated_property(self, name):
        if name == CREDENTIAL_LIFETIME_MS and self._token is not None and self.is_complete():
            return self._token.lifetime_ms
        return None

    def dispose(self):
        self._token = None


# -- server -------------------------------------------------------------------------------------

class OAuthBearerSaslServer(SaslServerMechanism):
    """Kafka's ``OAuthBearerSaslServer``.

    ``validator``: object with ``validate(token_str, now) -> OAuthBearerToken``
    (raising :class:`OAuthBearerValidationError` to refuse) and optionally
    ``validate_extensions(token, extensions) -> (valid, invalid)``.
    """

    mechanism_name = MECHANISM

    def __init__(self, validator):
        self._validator = validator
        self._complete = False
        self._token = None
        self._error_message = None
        self._extensions = {}

    def _fail(self, message, detail=None, exc=None):
        log.warning("OAUTHBEARER authentication failed: %s", detail or message)
        error = SaslAuthenticationError(message, mechanism=MECHANISM)
        error.detail = detail or message
        if exc is not None:
            raise error from exc
        raise error

    def evaluate_response(self, response, now=None):
        response = bytes(response or b"")
        if self._complete:
            self._fail(GENERIC_FAILURE_MESSAGE, "SASL authentication already complete")
        if response == BYTE_CONTROL_A and self._error_message is not None:
            log.debug("Received %%x01 response from client after it received our error")
            # Kafka fails with the error JSON itself as the message.
            self._fail(self._error_message)
        self._error_message = None
        try:
            client_response = ClientInitialResponse.parse(response)
        except _ResponseError as exc:
            self._fail(GENERIC_FAILURE_MESSAGE, str(exc))
        return self._process(client_response, now)

    def _process(self, client_response, now):
        if now is None:
            now = now_ms()
        try:
            token = self._validator.validate(client_response.token_value, now)
        except OAuthBearerValidationError as exc:
            self._error_message = json_error_response(exc.status, exc.scope,
                                                      exc.openid_configuration)
            log.debug("%s (%s)", self._error_message, exc.description)
            return self._error_message.encode("utf-8")
        except SaslAuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken validator fails closed
            self._fail(GENERIC_FAILURE_MESSAGE, f"{INTERNAL_ERROR_ON_SERVER}: {exc}", exc)
        if token is None:
            self._error_message = json_error_response("invalid_token")
            return self._error_message.encode("utf-8")
        authzid = client_response.authorization_id
        if authzid and authzid != token.principal_name:
            self._fail("Authentication failed: Client requested an authorization id "
                       f"({authzid}) that is different from the token's principal name "
                       f"({token.principal_name})")
        valid = self._process_extensions(token, client_response.extensions)
        self._token = token
        self._extensions = valid
        self._complete = True
        log.debug("Successfully authenticate User=%s", token.principal_name)
        return b""

    def _process_extensions(self, token, extensions):
        check = getattr(self._validator, "validate_extensions", None)
        if check is None:
            return {}      # no extension support: none are kept (as Kafka)
        try:
            valid, invalid = check(token, dict(extensions))
        except Exception as exc:  # noqa: BLE001
            self._fail(GENERIC_FAILURE_MESSAGE, f"{INTERNAL_ERROR_ON_SERVER}: {exc}", exc)
        if invalid:
            listing = "; ".join(f"{k}: {v}" for k, v in invalid.items())
            self._fail(f"Authentication failed: {len(invalid)} extensions are invalid! "
                       f"They are: {listing}")
        # Only extensions the client actually sent can be validated.
        return {k: extensions[k] for k in valid if k in extensions}

    def is_complete(self):
        return self._complete

    def get_authorization_id(self):
        if not self._complete:
            raise SaslAuthenticationError("Authentication exchange has not completed",
                                          mechanism=MECHANISM)
        return self._token.principal_name

    def get_negotiated_property(self, name):
        if not self._complete:
            return None
        if name == NEGOTIATED_PROPERTY_KEY_TOKEN:
            return self._token
        if name == CREDENTIAL_LIFETIME_MS:
            return self._token.lifetime_ms
        return self._extensions.get(name)

    @property
    def extensions(self):
        """Validated extensions (name -> value)."""
        return dict(self._extensions)

    def dispose(self):
        self._complete = False
        self._token = None
        self._extensions = {}


class _CallbackValidator:
    """Adapts ``ServerCallbacks.oauth_validate(token_str, now)``."""

    def __init__(self, fn, extensions_fn=None):
        self._fn = fn
        if extensions_fn is not None:
            self.validate_extensions = extensions_fn

    def validate(self, token_value, now):
        return self._fn(token_value, now)


# -- factories ------------------------------------------------------------------------------------

def create_client(mechanism=MECHANISM, *, jaas_options=None, configs=None, server_host=None,
                  **kw):
    provider = kw.get("token_provider")
    if provider is None:
        provider = _handler(configs, LOGIN_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_LOGIN,
                            UnsecuredLogin, jaas_options)
    return OAuthBearerSaslClient(provider, now=kw.get("now"),
                                 authorization_id=kw.get("authorization_id", ""))


def create_server(mechanism=MECHANISM, *, jaas_options=None, configs=None, callbacks=None,
                  server_host=None, now=None, **kw):
    validator = kw.get("validator")
    if validator is None and callbacks is not None and getattr(
            callbacks, "oauth_validate", None) is not None:
        validator = _CallbackValidator(callbacks.oauth_validate,
                                       getattr(callbacks, "oauth_validate_extensions", None))
    if validator is None:
        validator = _handler(configs, SERVER_CALLBACK_HANDLER_CLASS, _JAVA_UNSECURED_VALIDATOR,
                             UnsecuredValidator, jaas_options)
    return OAuthBearerSaslServer(validator)

