"""Token validation: Kafka's ``OAuthBearerValidationUtils`` (scope, iat,
exp, time consistency) and the unsecured validator
(``OAuthBearerUnsecuredValidatorCallbackHandler``)."""
import re

from kchannel.config.types import reveal
from kchannel.security.sasl.oauthbearer.messages import MECHANISM
from kchannel.security.sasl.oauthbearer.token import (
    OAuthBearerConfigError, OAuthBearerIllegalTokenError, OAuthBearerUnsecuredJws,
    _is_blank)
from kchannel.log import get_logger

# One logger for the whole mechanism, as before the split.
log = get_logger("kchannel.security.sasl.oauthbearer")


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
