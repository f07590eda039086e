"""Signed JWTs validated against a JWKS (KIP-768): Kafka's
``OAuthBearerValidatorCallbackHandler`` with its JWKS endpoint and claim checks."""
import base64
import json
import re
from urllib.parse import urlparse
from urllib.request import url2pathname, urlopen

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kchannel.config.types import reveal
from kchannel.errors import ConfigError
from kchannel.security.sasl.oauthbearer.messages import MECHANISM
from kchannel.security.sasl.oauthbearer.token import (
    OAuthBearerToken, OAuthBearerValidationError)

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
