"""A built-in authorizer with the semantics of Kafka's ``StandardAuthorizer``
(``org.apache.kafka.metadata.authorizer``).

Decision for (principal, host, operation, resource type, resource name):

1. a principal of ``super.users`` is allowed everything;
2. the ACLs that apply to the resource are the LITERAL ones on its name, the
   PREFIXED ones whose name starts the resource name, and the LITERAL ``*``
   ones of its type; an ACL counts when its principal is the requester's or
   ``User:*``, its host the client's address or ``*``, and its operation the
   one asked, ALL, or -- for ALLOW ACLs only -- one that implies it
   (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS);
3. a DENY that counts wins; else an ALLOW that counts allows; else, if any
   ACL applies to the resource at all, denied; else
   ``allow.everyone.if.no.acl.found`` decides (default false: denied).

Cost: ACLs are indexed by (resource type, name) for LITERAL patterns and by
resource type then name for PREFIXED ones, with the set of prefix lengths
present, so a decision looks up the literal name, the wildcard and one slice
per distinct prefix length -- never all ACLs.  Decisions are cached until
the ACLs change (the cache is dropped whole; its size is bounded).

ACLs come from an :class:`~kchannel.security.authorizer.store.AclStore`
(shared by every worker process); before each decision the store's change
counter is compared with the one the index was built from (one read of a
shared memory word for the SQLite store) and the index is rebuilt when
another process changed the ACLs.
"""
import threading

from kchannel.config.definitions import AUTHORIZER_CLASS_NAMES as _CLASS_NAMES
from kchannel.log import get_logger
from kchannel.principal import parse_super_users
from kchannel.security.authorizer.acl import (AclOperation, AclPermissionType, PatternType,
                                              ResourceType, WILDCARD_HOST, WILDCARD_PRINCIPAL,
                                              WILDCARD_RESOURCE, validate_binding)
from kchannel.security.authorizer.store import InMemoryAclStore

log = get_logger("kchannel.security.authorizer")

__all__ = ["StandardAuthorizer", "AUTHORIZER_CLASS_NAMES", "ALLOW_EVERYONE_CONFIG",
           "is_standard_authorizer"]

# Names accepted for authorizer.class.name: Kafka's (KRaft and ZooKeeper
# mode) and kchannel's own dotted path.
AUTHORIZER_CLASS_NAMES = frozenset(_CLASS_NAMES)
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"

_ALL = int(AclOperation.ALL)
_DESCRIBE = int(AclOperation.DESCRIBE)
_DESCRIBE_CONFIGS = int(AclOperation.DESCRIBE_CONFIGS)
_ALLOW = int(AclPermissionType.ALLOW)
_DENY = int(AclPermissionType.DENY)
_IMPLIES_DESCRIBE = frozenset(int(o) for o in (AclOperation.DESCRIBE, AclOperation.READ,
                                               AclOperation.WRITE, AclOperation.DELETE,
                                               AclOperation.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((int(AclOperation.DESCRIBE_CONFIGS),
                                       int(AclOperation.ALTER_CONFIGS)))
_LITERAL = PatternType.LITERAL
_PREFIXED = PatternType.PREFIXED
CACHE_MAX = 65536


def is_standard_authorizer(name):
    return str(name or "").strip() in AUTHORIZER_CLASS_NAMES


class _Index:
    """An immutable snapshot: literal {(type, name): entries}, prefixed
    {type: {name: entries}}, prefix lengths {type: (lengths...)}; an entry
    is (principal, host, operation, permission) as ints/strs."""
    __slots__ = ("literal", "prefixed", "lengths", "bindings", "by_type")

    def __init__(self, bindings):
        self.bindings = tuple(sorted(set(bindings)))
        literal, prefixed = {}, {}
        # type -> [(name, pattern, entry)]: the names one principal may act
        # on (allowed_names) without walking every ACL
        self.by_type = {}
        for b in self.bindings:
            entry = (b.principal, b.host, int(b.operation), int(b.permission_type))
            self.by_type.setdefault(int(b.resource_type), []).append(
                (b.name, b.pattern_type, entry))
            if b.pattern_type == _LITERAL:
                literal.setdefault((int(b.resource_type), b.name), []).append(entry)
            elif b.pattern_type == _PREFIXED:
                prefixed.setdefault(int(b.resource_type), {}).setdefault(b.name, []).append(entry)
        self.literal = {k: tuple(v) for k, v in literal.items()}
        self.prefixed = {t: {n: tuple(v) for n, v in d.items()} for t, d in prefixed.items()}
        self.lengths = {t: tuple(sorted({len(n) for n in d})) for t, d in self.prefixed.items()}


def _matches(entries, principal, host, op):
    """None (no entry counts), True (an ALLOW counts), False (a DENY counts)."""
    allow = None
    for p, h, o, perm in entries:
        if p != principal and p != WILDCARD_PRINCIPAL:
            continue
        if h != WILDCARD_HOST and h != host:
            continue
        if o != _ALL and o != op:
            if perm != _ALLOW:
                continue
            if op == _DESCRIBE:
                if o not in _IMPLIES_DESCRIBE:
                    continue
            elif op == _DESCRIBE_CONFIGS:
                if o not in _IMPLIES_DESCRIBE_CONFIGS:
                    continue
            else:
                continue
        if perm == _DENY:
            return False
        allow = True
    return allow


class StandardAuthorizer:
    """See the module docstring.  ``store``: an ``AclStore`` (None: ACLs in
    memory, this process only); ``super_users``: ``super.users`` text or
    principals."""

    def __init__(self, store=None, super_users=(), allow_everyone_if_no_acl_found=False):
        if store is None:
            store = InMemoryAclStore()
        self.store = store
        self.super_users = frozenset(str(p) for p in parse_super_users(super_users))
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self._lock = threading.Lock()
        self._version = None
        self._index = _Index(())
        self._cache = {}
        self.reload()

    def __repr__(self):
        return (f"StandardAuthorizer(acls={len(self._index.bindings)}, "
                f"super_users={len(self.super_users)}, store={type(self.store).__name__})")

    # ---------------------------------------------------------------- ACLs
    def reload(self):
        """Rebuild the index from the store (another process changed it)."""
        with self._lock:
            version = self.store.version()
            self._index = _Index(self.store.load())
            self._version = version
            self._cache = {}

    def _fresh(self):
        if self.store.version() != self._version:
            self.reload()
        return self._index

    def acls(self, flt=None):
        """The ACLs matching ``flt`` (an ``AclBindingFilter``; None: all)."""
        index = self._fresh()
        if flt is None:
            return list(index.bindings)
        return [b for b in index.bindings if flt.matches(b)]

    def create_acls(self, bindings):
        """Store ``bindings``; per binding None (created) or the reason it is
        invalid (INVALID_REQUEST).  Valid ones are written in one go."""
        results, good = [], []
        for b in bindings:
            reason = validate_binding(b)
            results.append(reason)
            if reason is None:
                good.append(b)
        if good:
            self.store.add(good)
            self.reload()
            for b in good:
                log.info("Created ACL %s", b)
        return results

    def delete_acls(self, filters):
        """Per filter, the ACLs it matched (all removed in one go)."""
        index = self._fresh()
        matched = [[b for b in index.bindings if f.matches(b)] for f in filters]
        gone = {b for m in matched for b in m}
        if gone:
            self.store.remove(sorted(gone))
            self.reload()
            for b in sorted(gone):
                log.info("Deleted ACL %s", b)
        return matched

    # ----------------------------------------------------------- decisions
    def authorize(self, principal, host, operation, resource_type, name):
        """True when ``principal`` (``Type:name`` text) at ``host`` (IP
        address text) may do ``operation`` on the resource."""
        if self.store.version() != self._version:
            self.reload()
        key = (principal, host, operation, resource_type, name)
        cache = self._cache
        hit = cache.get(key)
        if hit is not None:
            return hit
        result = self._decide(principal, host, int(operation), int(resource_type), name)
        if len(cache) >= CACHE_MAX:
            cache.clear()
        cache[key] = result
        return result

    def _decide(self, principal, host, op, rtype, name):
        if principal in self.super_users:
            return True
        index = self._index
        has_acls = False
        allow = False
        entries = index.literal.get((rtype, name))
        if entries:
            has_acls = True
            r = _matches(entries, principal, host, op)
            if r is False:
                return False
            allow = allow or bool(r)
        lengths = index.lengths.get(rtype)
        if lengths:
            prefixed = index.prefixed[rtype]
            n = len(name)
            for k in lengths:
                if k > n:
                    break
                entries = prefixed.get(name[:k])
                if entries:
                    has_acls = True
                    r = _matches(entries, principal, host, op)
                    if r is False:
                        return False
                    allow = allow or bool(r)
        if name != WILDCARD_RESOURCE:
            entries = index.literal.get((rtype, WILDCARD_RESOURCE))
            if entries:
                has_acls = True
                r = _matches(entries, principal, host, op)
                if r is False:
                    return False
                allow = allow or bool(r)
        if allow:
            return True
        if has_acls:
            return False
        return self.allow_everyone_if_no_acl_found

    def allowed_names(self, principal, host, operation, resource_type):
        """The resources of a type an ALLOW ACL may let ``principal`` do
        ``operation`` on: ``(literal names, everything)`` where
        ``everything`` is True when no finite list says it (a super user, a
        ``*`` or PREFIXED ALLOW, ``allow.everyone.if.no.acl.found``).  A
        superset: each name still needs :meth:`authorize` (a DENY may win).
        Costs a walk of that type's ACLs only (the delegation-token
        Describe asks it once per request instead of once per token)."""
        if principal in self.super_users or self.allow_everyone_if_no_acl_found:
            return frozenset(), True
        index = self._fresh()
        names = set()
        for name, pattern, entry in index.by_type.get(int(resource_type), ()):
            if entry[3] != _ALLOW:
                continue
            if _matches((entry,), principal, host, int(operation)) is not True:
                continue
            if pattern != _LITERAL or name == WILDCARD_RESOURCE:
                return frozenset(), True
            names.add(name)
        return frozenset(names), False

    def authorize_by_resource_type(self, principal, host, operation, resource_type):
        """Kafka's ``Authorizer.authorizeByResourceType``: may ``principal``
        do ``operation`` on at least one resource of the type?  True when an
        ALLOW pattern for it is not covered by a DENY pattern (a DENY on the
        wildcard covers all, a PREFIXED DENY covers the names it starts, a
        LITERAL DENY its own name)."""
        if principal in self.super_users:
            return True
        index = self._fresh()
        rtype = ResourceType(int(resource_type))
        op = int(operation)
        allows = {_LITERAL: set(), _PREFIXED: set()}
        denies = {_LITERAL: set(), _PREFIXED: set()}
        any_acl = False
        for b in index.bindings:
            if b.resource_type != rtype:
                continue
            any_acl = True
            if b.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if b.host not in (host, WILDCARD_HOST):
                continue
            if int(b.operation) not in (op, _ALL):
                continue
            (denies if b.permission_type == AclPermissionType.DENY
             else allows)[b.pattern_type].add(b.name)
        if WILDCARD_RESOURCE in denies[_LITERAL]:
            return False
        deny_prefixes = denies[_PREFIXED]
        for name in allows[_PREFIXED]:
            if not any(name.startswith(d) for d in deny_prefixes):
                return True
        for name in allows[_LITERAL]:
            if name in denies[_LITERAL]:
                continue
            if name != WILDCARD_RESOURCE and any(name.startswith(d) for d in deny_prefixes):
                continue
            # (a wildcard ALLOW leaves the names no DENY covers)
            return True
        if not any_acl and self.allow_everyone_if_no_acl_found:
            return True
        return False

