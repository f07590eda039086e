"""OAUTHBEARER tokens: ``OAuthBearerToken``, the unsecured JWS
(``OAuthBearerUnsecuredJws``), the validation errors, and the Java
formatting helpers that keep the tokens' claims byte-identical to Kafka's."""
import base64
import binascii
import json
import math
import re
from decimal import Decimal

from kchannel.errors import ConfigError

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
