"""The delegation token manager (KIP-48, KIP-249, KIP-373), sans-I/O.

Mirrors Kafka's token life cycle -- ``KafkaApis``' request checks, the KRaft
``DelegationTokenControlManager`` (or, with ``variant="zk"``, the ZooKeeper
``DelegationTokenManagerZk``) and the ``DelegationTokenCache`` the SCRAM
server reads -- without sockets or clocks: every method takes ``now``
(epoch ms) and returns values.

Request checks, in Kafka's order:

1. ``allowTokenRequests``: refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) on
   PLAINTEXT, on SSL when the principal is ``User:ANONYMOUS`` (no client
   certificate), and on any session authenticated with a delegation token --
   a token must not mint, renew or expire tokens.
2. Create only: owning a token for someone else (KIP-373 ``OwnerPrincipal``)
   needs the authorizer's CREATE_TOKENS on that user, else
   DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer whose type is not
   ``User`` gives INVALID_PRINCIPAL_TYPE.
3. No secret (``delegation.token.secret.key`` unset or empty):
   DELEGATION_TOKEN_AUTH_DISABLED.

Token arithmetic (identical in both variants unless noted):

* create: max lifetime = the server's ``delegation.token.max.lifetime.ms``,
  or the requested one if positive and smaller; expiry = min(max timestamp,
  now + ``delegation.token.expiry.time.ms``).
* renew (owner or renewer): not found -> NOT_FOUND; expired -> EXPIRED;
  otherwise expiry = min(max timestamp, now + period) where period is
  - kraft: the server's expiry time, or the requested period if positive and
    smaller (the controller caps renewals at the configured period);
  - zk: the requested period, or the server's expiry time if negative.
  (kraft checks EXPIRED before OWNER_MISMATCH; zk the other way round.)
* expire (owner or renewer): a negative period removes the token at once
  (expiry timestamp answered = now); otherwise an expired token is EXPIRED
  and a live one gets expiry = min(max timestamp, now + period).
* expiry sweep (``expire_tokens``, every
  ``delegation.token.expiry.check.interval.ms``): removes tokens past their
  expiry or max timestamp.
* describe: ``owners`` None = every token the requester may see; an empty
  list = none; else tokens whose owner, requester or a renewer is one of
  ``owners``.  Owner, requester and renewers see their tokens; others only
  with the authorizer's permission.  Tokens are indexed by the principals
  that may see them: a principal the authorizer lets describe no one
  else's tokens (``TokenAuthorizer.describes_others``) costs a look-up of
  its own tokens, however many tokens there are; one the ACLs let describe
  some tokens (``TokenAuthorizer.describable_tokens``: the token ids of its
  LITERAL DESCRIBE ACLs, the owners of its DESCRIBE_TOKENS ACLs) a look-up
  of those.
* per-owner limit (kchannel-specific, ``max_tokens_per_owner``,
  ``kchannel.delegation.token.max.tokens.per.owner``): creating one more
  live token for an owner that has that many is refused with
  POLICY_VIOLATION.

SCRAM login: :meth:`TokenManager.token_credential` returns the token's SCRAM
credential (password = base64 of the HMAC, 4096 iterations, random salt per
token and process as Kafka's ``prepareScramCredentials``), derived once and
cached -- PBKDF2 does not run per login.
"""
import base64
import binascii
import threading
from dataclasses import dataclass

from kchannel.config.types import reveal
from kchannel.principal import ANONYMOUS, KafkaPrincipal, parse_super_users
from kchannel.protocol.errors import Errors
from kchannel.security.sasl.interfaces import TokenCredential
from kchannel.security.sasl.scram import generate_salt
from kchannel.tokens.store import InMemoryTokenStore
from kchannel.tokens.token import (SCRAM_TOKEN_ITERATIONS, DelegationToken, TokenInformation,
                                   create_hmac, derive_scram_credential, generate_token_id,
                                   hmac_base64)
from kchannel.log import get_logger

log = get_logger("kchannel.tokens.manager")

__all__ = ["TokenManager", "TokenAuthorizer", "CreateTokenResult", "allow_token_requests",
           "DEFAULT_MAX_LIFETIME_MS", "DEFAULT_EXPIRY_TIME_MS", "DEFAULT_EXPIRY_CHECK_INTERVAL_MS",
           "ERROR_TIMESTAMP"]

DEFAULT_MAX_LIFETIME_MS = 604800000          # delegation.token.max.lifetime.ms
DEFAULT_EXPIRY_TIME_MS = 86400000            # delegation.token.expiry.time.ms
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 3600000   # delegation.token.expiry.check.interval.ms
DEFAULT_MAX_TOKENS_PER_OWNER = 1000    # kchannel.delegation.token.max.tokens.per.owner
ERROR_TIMESTAMP = -1                         # DelegationTokenManager.ErrorTimestamp
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_LONG_MAX = (1 << 63) - 1


def _sum(now, duration):
    """The controller's overflow-safe ``now + duration``."""
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


def allow_token_requests(principal, security_protocol):
    """``KafkaApis.allowTokenRequests``."""
    if principal is None:
        return False
    if getattr(principal, "token_authenticated", False):
        return False
    proto = str(security_protocol or "").upper()
    if proto == "PLAINTEXT":
        return False
    if proto == "SSL" and principal == ANONYMOUS:
        return False
    return True


class TokenAuthorizer:
    """The authorization decisions Kafka asks its authorizer for.

    The default allows only what needs no ACL: a principal creates tokens for
    itself and describes tokens it owns, requested or may renew.  Subclass
    (or pass any object with these methods) to grant more -- e.g. an
    operator principal that creates tokens on behalf of users.
    """

    def authorize_create_tokens(self, requester, owner):
        """CREATE_TOKENS on USER ``owner`` (KIP-373: a token owned by
        someone else than the requester)."""
        return False

    def authorize_describe_token(self, requester, token_info):
        """DESCRIBE on DELEGATION_TOKEN ``token_id`` or DESCRIBE_TOKENS on
        USER ``owner`` (tokens the requester neither owns nor renews)."""
        return False

    def describes_others(self, requester):
        """Whether :meth:`authorize_describe_token` may allow ``requester``
        any token it neither owns, requested nor renews (False: Describe
        only looks up its own tokens).  An authorizer without this method,
        or a subclass that overrides only :meth:`authorize_describe_token`,
        is asked about every token."""
        return type(self).authorize_describe_token is not TokenAuthorizer.authorize_describe_token

    def describable_tokens(self, requester):
        """The tokens besides its own that :meth:`authorize_describe_token`
        may allow ``requester``, for Describe to look up instead of asking
        about every token: None (any token), or ``(token ids, owners)``
        (those tokens and the tokens those principals own; each is still
        asked about).  Default: from :meth:`describes_others`."""
        return None if self.describes_others(requester) else ((), ())


class SuperUserTokenAuthorizer(TokenAuthorizer):
    """Grants everything to the listed principals (Kafka's ``super.users``)."""

    def __init__(self, super_users=()):
        self.super_users = parse_super_users(super_users)

    def authorize_create_tokens(self, requester, owner):
        return requester in self.super_users

    def authorize_describe_token(self, requester, token_info):
        return requester in self.super_users

    def describes_others(self, requester):
        return requester in self.super_users


@dataclass(frozen=True)
class CreateTokenResult:
    """Kafka's ``CreateTokenResult``."""

    error: Errors
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    issue_timestamp: int = ERROR_TIMESTAMP
    expiry_timestamp: int = ERROR_TIMESTAMP
    max_timestamp: int = ERROR_TIMESTAMP
    token_id: str = ""
    hmac: bytes = b""

    def __repr__(self):
        return (f"CreateTokenResult(error={self.error.name}, owner={self.owner}, "
                f"token_id={self.token_id!r})")


class _Entry:
    __slots__ = ("info", "hmac", "hmac_b64", "credentials")

    def __init__(self, info, hmac):
        self.info = info
        self.hmac = hmac
        self.hmac_b64 = hmac_base64(hmac)
        self.credentials = {}


def _key(principal):
    """Index key of a principal (its type and name; how it logged in does
    not matter)."""
    return (principal.principal_type, principal.name)


def _as_principal(value):
    if value is None or isinstance(value, KafkaPrincipal):
        return value
    if isinstance(value, (tuple, list)):
        return KafkaPrincipal(str(value[0]), str(value[1]))
    return KafkaPrincipal.from_string(str(value))


class TokenManager:
    """See the module docstring.

    ``secret``: ``delegation.token.secret.key`` (str, bytes or Password);
    None or empty disables tokens.  ``store``: a token store (in memory when
    omitted).  ``authorizer``: a :class:`TokenAuthorizer`.  ``variant``:
    ``"kraft"`` (default) or ``"zk"`` renew semantics.  ``salt_factory``
    (``fn(token_id, mechanism) -> bytes``) and ``token_id_factory`` exist for
    tests; by default salts are Kafka's random base-36 strings.  ``now``:
    initial clock reading (unused except for logging the first load).
    """

    def __init__(self, secret, max_lifetime_ms=DEFAULT_MAX_LIFETIME_MS,
                 expiry_time_ms=DEFAULT_EXPIRY_TIME_MS, store=None, now=None, *,
                 authorizer=None, variant="kraft", salt_factory=None, token_id_factory=None,
                 iterations=SCRAM_TOKEN_ITERATIONS,
                 expiry_check_interval_ms=DEFAULT_EXPIRY_CHECK_INTERVAL_MS,
                 max_tokens_per_owner=DEFAULT_MAX_TOKENS_PER_OWNER):
        raw = reveal(secret) if secret is not None else None
        self._secret = raw if raw not in (None, "", b"") else None
        self.max_lifetime_ms = int(max_lifetime_ms)
        self.expiry_time_ms = int(expiry_time_ms)
        self.expiry_check_interval_ms = int(expiry_check_interval_ms)
        self.max_tokens_per_owner = max(1, int(max_tokens_per_owner))
        if variant not in ("kraft", "zk"):
            raise ValueError(f"variant must be 'kraft' or 'zk', not {variant!r}")
        self.variant = variant
        self.store = store if store is not None else InMemoryTokenStore()
        self.authorizer = authorizer or TokenAuthorizer()
        self._salt_factory = salt_factory
        self._token_id_factory = token_id_factory or generate_token_id
        self.iterations = int(iterations)
        self._lock = threading.RLock()
        self._entries = {}       # token id -> _Entry
        self._by_hmac = {}       # base64 HMAC -> token id
        # (type, name) -> token ids it owns, requested or renews
        self._by_principal = {}
        self._by_owner = {}      # (type, name) -> token ids it owns
        self._loaded = False
        if self.enabled:
            with self._lock:
                self._reload()

    def __repr__(self):
        return (f"TokenManager(enabled={self.enabled}, tokens={len(self._entries)}, "
                f"store={type(self.store).__name__})")

    @property
    def enabled(self):
        """``config.tokenAuthEnabled``."""
        return self._secret is not None

    # ------------------------------------------------------------- cache
    def _reload(self):
        tokens = self.store.load_all()
        old = self._entries
        entries = {}
        for token_id, info in tokens.items():
            prev = old.get(token_id)
            if prev is not None:
                # Same token id means same HMAC; keep derived credentials.
                prev.info = info
                entries[token_id] = prev
            else:
                entries[token_id] = _Entry(info, create_hmac(token_id, self._secret))
        self._entries = entries
        self._by_hmac = {e.hmac_b64: tid for tid, e in entries.items()}
        self._by_principal = {}
        self._by_owner = {}
        for tid, e in entries.items():
            self._index(tid, e.info)
        self._loaded = True

    @staticmethod
    def _principals(info):
        return {_key(p) for p in (info.owner, info.token_requester, *info.renewers)
                if p is not None}

    def _index(self, token_id, info):
        for k in self._principals(info):
            self._by_principal.setdefault(k, set()).add(token_id)
        self._by_owner.setdefault(_key(info.owner), set()).add(token_id)

    def _unindex(self, token_id, info):
        for k in self._principals(info):
            ids = self._by_principal.get(k)
            if ids is not None:
                ids.discard(token_id)
                if not ids:
                    del self._by_principal[k]
        owned = self._by_owner.get(_key(info.owner))
        if owned is not None:
            owned.discard(token_id)
            if not owned:
                del self._by_owner[_key(info.owner)]

    def sync(self):
        """Pick up changes other servers made to the shared store."""
        if not self.enabled:
            return
        with self._lock:
            if not self._loaded or self.store.changed():
                self._reload()

    def _update(self, info):
        """``updateToken``: durable first, then the cache."""
        self.store.put(info)
        entry = self._entries.get(info.token_id)
        if entry is None:
            entry = _Entry(info, create_hmac(info.token_id, self._secret))
            self._entries[info.token_id] = entry
            self._by_hmac[entry.hmac_b64] = info.token_id
        else:
            self._unindex(info.token_id, entry.info)
            entry.info = info
        self._index(info.token_id, info)

    def _remove(self, token_id):
        """``removeToken``."""
        self.store.delete(token_id)
        entry = self._entries.pop(token_id, None)
        if entry is not None:
            self._by_hmac.pop(entry.hmac_b64, None)
            self._unindex(token_id, entry.info)
            entry.credentials.clear()

    def _lookup_hmac(self, hmac):
        """``getToken(hmac)``."""
        if isinstance(hmac, str):
            try:
                hmac = base64.b64decode(hmac, validate=True)
            except (binascii.Error, ValueError):
                return None
        token_id = self._by_hmac.get(hmac_base64(bytes(hmac or b"")))
        return self._entries.get(token_id) if token_id is not None else None

    # ----------------------------------------------------------- create
    def create_token(self, requester, *, owner=None, renewers=(), max_lifetime_ms=-1,
                     now, security_protocol=None):
        """CreateDelegationToken.  ``security_protocol`` given -> the
        ``allowTokenRequests`` check runs too.  Returns
        :class:`CreateTokenResult`."""
        requester = _as_principal(requester)
        owner = _as_principal(owner)
        if owner is None or not owner.name:
            owner = requester
        owner = KafkaPrincipal(owner.principal_type, owner.name)
        plain_requester = KafkaPrincipal(requester.principal_type, requester.name)
        renewers = [_as_principal(r) for r in renewers or ()]
        renewers = [KafkaPrincipal(r.principal_type, r.name) for r in renewers]

        def fail(error):
            return CreateTokenResult(error, owner, plain_requester)

        if security_protocol is not None and not allow_token_requests(requester,
                                                                      security_protocol):
            return fail(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if owner != plain_requester and not self.authorizer.authorize_create_tokens(
                plain_requester, owner):
            return fail(Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
        if any(r.principal_type != KafkaPrincipal.USER_TYPE for r in renewers):
            return fail(Errors.INVALID_PRINCIPAL_TYPE)
        if not self.enabled:
            return fail(Errors.DELEGATION_TOKEN_AUTH_DISABLED)
        with self._lock:
            self.sync()
            if self._live_owned(owner, now) >= self.max_tokens_per_owner:
                log.info("Not creating a delegation token for owner %s: it has %d, "
                         "kchannel.delegation.token.max.tokens.per.owner", owner,
                         self.max_tokens_per_owner)
                return fail(Errors.POLICY_VIOLATION)
            max_life = self.max_lifetime_ms
            if max_lifetime_ms is not None and int(max_lifetime_ms) > 0:
                max_life = min(max_life, int(max_lifetime_ms))
            max_ts = _sum(now, max_life)
            expiry_ts = min(max_ts, _sum(now, self.expiry_time_ms))
            token_id = self._token_id_factory()
            while token_id in self._entries:
                token_id = self._token_id_factory()
            info = TokenInformation(token_id, owner, plain_requester, renewers, now, max_ts,
                                    expiry_ts)
            self._update(info)
            entry = self._entries[token_id]
        log.info("Created a delegation token: %s for owner: %s", token_id, owner)
        return CreateTokenResult(Errors.NONE, owner, plain_requester, now, expiry_ts, max_ts,
                                 token_id, entry.hmac)

    def _live_owned(self, owner, now):
        """How many unexpired tokens ``owner`` owns (expired ones are only
        looked at once it owns as many tokens as it may)."""
        owned = self._by_owner.get(_key(owner), ())
        if len(owned) < self.max_tokens_per_owner:
            return len(owned)
        return sum(1 for tid in owned if not self._entries[tid].info.expired(now))

    # ------------------------------------------------------------ renew
    def renew_token(self, principal, hmac, renew_period_ms=-1, *, now,
                    security_protocol=None):
        """RenewDelegationToken -> ``(Errors, expiry timestamp)``."""
        principal = _as_principal(principal)
        if security_protocol is not None and not allow_token_requests(principal,
                                                                      security_protocol):
            return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
        if not self.enabled:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        renew_period_ms = int(renew_period_ms if renew_period_ms is not None else -1)
        with self._lock:
            self.sync()
            entry = self._lookup_hmac(hmac)
            if entry is None:
                return Errors.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
            info = entry.info
            if self.variant == "kraft":
                if info.expired(now):
                    return Errors.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
                if not info.allowed_to_renew(principal):
                    return Errors.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
                period = self.expiry_time_ms
                if renew_period_ms > 0:
                    period = min(period, renew_period_ms)
            else:
                if not info.allowed_to_renew(principal):
                    return Errors.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
                if info.expired(now):
                    return Errors.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
                period = self.expiry_time_ms if renew_period_ms < 0 else renew_period_ms
            expiry_ts = min(info.max_timestamp, _sum(now, period))
            self._update(info.copy(expiry_timestamp=expiry_ts))
        log.info("Delegation token renewed for token: %s for owner: %s", info.token_id,
                 info.owner)
        return Errors.NONE, expiry_ts

    # ----------------------------------------------------------- expire
    def expire_token(self, principal, hmac, expiry_period_ms=-1, *, now,
                     security_protocol=None):
        """ExpireDelegationToken -> ``(Errors, expiry timestamp)``."""
        principal = _as_principal(principal)
        if security_protocol is not None and not allow_token_requests(principal,
                                                                      security_protocol):
            return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
        if not self.enabled:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        expiry_period_ms = int(expiry_period_ms if expiry_period_ms is not None else -1)
        with self._lock:
            self.sync()
            entry = self._lookup_hmac(hmac)
            if entry is None:
                return Errors.DELEGATION_TOKEN_NOT_FOUND, ERROR_TIMESTAMP
            info = entry.info
            if not info.allowed_to_renew(principal):
                return Errors.DELEGATION_TOKEN_OWNER_MISMATCH, ERROR_TIMESTAMP
            if expiry_period_ms < 0:
                self._remove(info.token_id)
                log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
                return Errors.NONE, now
            if info.expired(now):
                return Errors.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
            expiry_ts = min(info.max_timestamp, _sum(now, expiry_period_ms))
            self._update(info.copy(expiry_timestamp=expiry_ts))
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return Errors.NONE, expiry_ts

    # --------------------------------------------------------- describe
    def describe_tokens(self, principal, owners=None, *, now=None, security_protocol=None):
        """DescribeDelegationToken -> ``(Errors, [DelegationToken])``."""
        principal = _as_principal(principal)
        if security_protocol is not None and not allow_token_requests(principal,
                                                                      security_protocol):
            return Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, []
        if not self.enabled:
            return Errors.DELEGATION_TOKEN_AUTH_DISABLED, []
        if owners is not None:
            owners = [_as_principal(o) for o in owners]
            if not owners:
                return Errors.NONE, []
        scope = getattr(self.authorizer, "describable_tokens", None)
        if scope is not None:
            scope = scope(principal)
        else:
            others = getattr(self.authorizer, "describes_others", None)
            scope = None if others is None or others(principal) else ((), ())
        with self._lock:
            self.sync()
            if scope is not None:
                # its own tokens and those the authorizer may let it see
                # (DESCRIBE on the token id, DESCRIBE_TOKENS on the owner)
                token_ids, scope_owners = scope
                ids = set(self._by_principal.get(_key(principal), ()))
                ids.update(t for t in token_ids if t in self._entries)
                for o in scope_owners:
                    ids.update(self._by_owner.get(_key(o), ()))
                if owners is not None:
                    wanted = set()
                    for o in owners:
                        wanted.update(self._by_principal.get(_key(o), ()))
                    ids &= wanted
            elif owners is not None:
                ids = set()
                for o in owners:
                    ids.update(self._by_principal.get(_key(o), ()))
            else:
                ids = None
            if ids is None:
                entries = list(self._entries.values())
            else:
                entries = [self._entries[tid] for tid in ids]
        out = []
        for e in sorted(entries, key=lambda e: (e.info.issue_timestamp, e.info.token_id)):
            if self._eligible(principal, owners, e.info):
                out.append(DelegationToken(e.info.copy(), e.hmac))
        return Errors.NONE, out

    def _eligible(self, principal, owners, info):
        """``DelegationTokenManager.filterToken``."""
        if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
            return False
        if info.owner_or_renewer(principal):
            return True
        return bool(self.authorizer.authorize_describe_token(principal, info))

    # ------------------------------------------------------------ sweep
    def expire_tokens(self, now):
        """``expireTokens``: remove every token past its expiry or max
        timestamp; returns the removed token ids."""
        if not self.enabled:
            return []
        removed = []
        with self._lock:
            self.sync()
            for token_id, entry in list(self._entries.items()):
                info = entry.info
                if info.expired(now):
                    log.info("Delegation token expired for token: %s for owner: %s",
                             token_id, info.owner)
                    self._remove(token_id)
                    removed.append(token_id)
        return removed

    # ------------------------------------------------------------ lookup
    def get_token(self, token_id):
        """The :class:`DelegationToken` for ``token_id`` or None."""
        if not self.enabled:
            return None
        with self._lock:
            self.sync()
            entry = self._entries.get(token_id)
            return DelegationToken(entry.info.copy(), entry.hmac) if entry else None

    def tokens(self):
        """Every token in the cache (``tokenCache.tokens``)."""
        if not self.enabled:
            return []
        with self._lock:
            self.sync()
            return [e.info.copy() for e in self._entries.values()]

    def token_credential(self, token_id, mechanism, now=None):
        """``ServerCallbacks.token_credential``: the token's SCRAM credential,
        owner and expiry, or None (unknown, expired, disabled, not SCRAM)."""
        if not self.enabled or mechanism not in SCRAM_MECHANISMS:
            return None
        with self._lock:
            self.sync()
            entry = self._entries.get(token_id)
            if entry is None:
                return None
            info = entry.info
            if now is not None and info.expired(now):
                return None
            credential = entry.credentials.get(mechanism)
            if credential is None:
                if self._salt_factory is not None:
                    salt = self._salt_factory(token_id, mechanism)
                else:
                    salt = generate_salt()
                credential = derive_scram_credential(mechanism, entry.hmac_b64, salt,
                                                     self.iterations)
                entry.credentials[mechanism] = credential
        return TokenCredential(credential=credential, owner=info.owner,
                               expiry_ms=info.expiry_timestamp, token_id=token_id)

    def close(self):
        self.store.close()
