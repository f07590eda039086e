"""Delegation token data (KIP-48): Kafka's ``TokenInformation`` and
``DelegationToken``, the token HMAC, the SCRAM credentials derived from it and
the JSON form Kafka keeps under ``/delegation_token/tokens/<tokenId>``.

* token id: ``Uuid.randomUuid().toString()`` -- 16 random bytes in URL-safe
  base64 without padding (22 characters), never starting with ``-`` (Kafka
  re-draws those so a token id is never mistaken for a command-line flag).
* HMAC: HmacSHA512 keyed with the UTF-8 bytes of
  ``delegation.token.secret.key`` over the UTF-8 bytes of the token id.  It
  is never stored: every server recomputes it from the shared secret.
* SCRAM login: the client's password is the HMAC in standard base64
  (``DelegationToken.hmacAsBase64String``); the server keeps a SCRAM
  credential derived from that string with the mechanism's minimum iteration
  count (4096) and a random salt, as ``DelegationTokenManager.prepareScramCredentials``.
"""
import base64
import hashlib
import hmac as _hmac
import json
import os
from dataclasses import dataclass, field, replace
from urllib.parse import unquote_plus

from kchannel.config.types import reveal
from kchannel.principal import KafkaPrincipal
from kchannel.security.sasl.scram_credential import ScramCredential

__all__ = [
    "TokenInformation", "DelegationToken", "generate_token_id", "create_hmac",
    "hmac_base64", "derive_scram_credential", "token_info_to_json",
    "token_info_from_json", "sanitize", "desanitize", "SCRAM_TOKEN_ITERATIONS",
    "ZK_TOKEN_INFO_VERSION",
]

# ScramMechanism.minIterations() for both SCRAM-SHA-256 and SCRAM-SHA-512.
SCRAM_TOKEN_ITERATIONS = 4096
# DelegationTokenManagerZk.CurrentVersion (version 3 added tokenRequester).
ZK_TOKEN_INFO_VERSION = 3
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def _principal(value):
    if isinstance(value, KafkaPrincipal):
        return value
    return KafkaPrincipal.from_string(str(value))


@dataclass
class TokenInformation:
    """Kafka's ``TokenInformation``.  Principals are ``KafkaPrincipal``;
    timestamps are epoch milliseconds."""

    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: list = field(default_factory=list)
    issue_timestamp: int = 0
    max_timestamp: int = 0
    expiry_timestamp: int = 0

    def owner_or_renewer(self, principal):
        """``TokenInformation.ownerOrRenewer``: the owner, the requester and
        the renewers may see (describe) the token."""
        return (principal == self.owner or principal == self.token_requester
                or principal in self.renewers)

    def allowed_to_renew(self, principal):
        """``DelegationTokenManager.allowedToRenew``: owner or a renewer
        (not the requester) may renew or expire."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now):
        """Kafka's test: past either the max or the expiry timestamp."""
        return self.max_timestamp < now or self.expiry_timestamp < now

    @property
    def renewers_as_string(self):
        return [str(r) for r in self.renewers]

    def copy(self, **changes):
        return replace(self, renewers=list(self.renewers), **changes)


@dataclass(frozen=True)
class DelegationToken:
    """Kafka's ``DelegationToken``: the token information and its HMAC."""

    token_info: TokenInformation
    hmac: bytes

    @property
    def hmac_base64(self):
        """``hmacAsBase64String``: standard base64 with padding."""
        return hmac_base64(self.hmac)

    def __repr__(self):
        # The HMAC is the token's password.
        info = self.token_info
        return f"DelegationToken(token_id={info.token_id!r}, owner={info.owner})"


def generate_token_id():
    """``Uuid.randomUuid().toString()``."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")
        # Uuid.randomUuid also rejects the all-zero and metadata-topic ids,
        # which 16 random bytes never realistically produce.
        if not text.startswith("-"):
            return text


def _secret_bytes(secret):
    value = reveal(secret)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8")


def create_hmac(token_id, secret):
    """``DelegationTokenManager.createHmac``: HmacSHA512(secret, token id)."""
    return _hmac.new(_secret_bytes(secret), token_id.encode("utf-8"), hashlib.sha512).digest()


def hmac_base64(hmac_bytes):
    return base64.b64encode(bytes(hmac_bytes)).decode("ascii")


def derive_scram_credential(mechanism, hmac_b64, salt, iterations=SCRAM_TOKEN_ITERATIONS):
    """``ScramFormatter.generateCredential(hmacAsBase64String, iterations)``
    with a given salt: SaltedPassword = PBKDF2(password, salt, iterations),
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key") (RFC 5802)."""
    name = _HASHES.get(mechanism)
    if name is None:
        raise ValueError(f"Not a SCRAM mechanism: {mechanism}")
    password = hmac_b64.encode("utf-8") if isinstance(hmac_b64, str) else bytes(hmac_b64)
    salted = hashlib.pbkdf2_hmac(name, password, bytes(salt), int(iterations))
    client_key = _hmac.new(salted, b"Client Key", name).digest()
    return ScramCredential(
        salt=bytes(salt),
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=_hmac.new(salted, b"Server Key", name).digest(),
        iterations=int(iterations))


# -- Kafka's Sanitizer (java.net.URLEncoder + '*' and '+' fix-ups) ----------

_URL_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name):
    """``Sanitizer.sanitize``: URLEncoder (UTF-8) with ``*`` -> ``%2A`` and
    space -> ``%20``."""
    out = []
    for byte in name.encode("utf-8"):
        if byte in _URL_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("%20")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def desanitize(name):
    """``Sanitizer.desanitize``: java.net.URLDecoder (``+`` is a space)."""
    return unquote_plus(name, encoding="utf-8", errors="strict")


# -- ZooKeeper JSON (DelegationTokenManagerZk.toJsonCompatibleMap / fromBytes)

def token_info_to_json(info):
    """The bytes Kafka writes to ``/delegation_token/tokens/<tokenId>``."""
    doc = {
        "version": ZK_TOKEN_INFO_VERSION,
        "owner": sanitize(str(info.owner)),
        "tokenRequester": sanitize(str(info.token_requester)),
        "renewers": [sanitize(str(r)) for r in info.renewers],
        "issueTimestamp": int(info.issue_timestamp),
        "maxTimestamp": int(info.max_timestamp),
        "expiryTimestamp": int(info.expiry_timestamp),
        "tokenId": info.token_id,
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def token_info_from_json(data):
    """Parse Kafka's token JSON (versions 1-3); None for empty data.  Raises
    ValueError on anything else."""
    if not data:
        return None
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
        version = int(doc["version"])
        if not 0 < version <= ZK_TOKEN_INFO_VERSION:
            raise ValueError(f"Unsupported token info version {version}")
        owner = _principal(desanitize(doc["owner"]))
        requester = owner
        if version >= 3:
            requester = _principal(desanitize(doc["tokenRequester"]))
        renewers = [_principal(desanitize(r)) for r in doc["renewers"]]
        return TokenInformation(
            token_id=str(doc["tokenId"]), owner=owner, token_requester=requester,
            renewers=renewers, issue_timestamp=int(doc["issueTimestamp"]),
            max_timestamp=int(doc["maxTimestamp"]),
            expiry_timestamp=int(doc["expiryTimestamp"]))
    except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"Invalid delegation token information: {exc}") from exc
