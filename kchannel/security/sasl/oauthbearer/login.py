"""Client login: the unsecured JWS login
(``OAuthBearerUnsecuredLoginCallbackHandler``)."""
import re

from kchannel.errors import ConfigError
from kchannel.security.sasl.oauthbearer.messages import MECHANISM, validate_extensions
from kchannel.security.sasl.oauthbearer.token import (
    OAuthBearerConfigError, OAuthBearerIllegalTokenError, OAuthBearerUnsecuredJws,
    _JAVA_DOUBLE, _b64url_nopad, _is_blank, _java_hashmap, java_double_to_string)
from kchannel.security.sasl.oauthbearer.validation import _options
from kchannel.log import get_logger

# One logger for the whole mechanism, as before the split.
log = get_logger("kchannel.security.sasl.oauthbearer")


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
