"""The authorizer a server's configuration asks for.

``authorizer.class.name`` = Kafka's ``StandardAuthorizer`` (or its older
``AclAuthorizer``, or kchannel's own dotted path) selects the built-in
:class:`~kchannel.security.authorizer.standard.StandardAuthorizer`; any other
class name stops the server (a misconfigured authorizer fails closed).  Its
ACLs live in ``kchannel.acl.store`` (``sqlite`` by default: ``acls.db`` in
the data directory, shared by every worker process; ``memory``; or
``zookeeper``, ``zookeeper.connect``); ``super.users`` and
``allow.everyone.if.no.acl.found`` are read as Kafka reads them.
"""
import os

from kchannel.errors import ConfigError
from kchannel.principal import KafkaPrincipal
from kchannel.security.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType
from kchannel.security.authorizer.standard import (ALLOW_EVERYONE_CONFIG,
                                                   AUTHORIZER_CLASS_NAMES, StandardAuthorizer,
                                                   is_standard_authorizer)
from kchannel.security.authorizer.store import (ACL_STORE_CONFIG, ACL_STORE_FILE_NAME,
                                                InMemoryAclStore, SqliteAclStore)
from kchannel.security.authorizer.zk_store import ZkAclStore

__all__ = ["authorizer_from_config", "AclTokenAuthorizer", "AclClusterAuthorizer",
           "AUTHORIZER_CONFIG"]

AUTHORIZER_CONFIG = "authorizer.class.name"


def _bool(value, key):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(f"Invalid value {value} for configuration {key}: Expected value to be "
                      "either true or false", key=key, value=value)


def authorizer_from_config(value_of, data_dir):
    """A ``StandardAuthorizer`` (None without ``authorizer.class.name``).
    ``value_of(key)``: the configured value or None."""
    name = str(value_of(AUTHORIZER_CONFIG) or "").strip()
    if not name:
        return None
    if not is_standard_authorizer(name):
        raise ConfigError(
            f"Invalid value {name} for configuration {AUTHORIZER_CONFIG}: kchannel has one "
            "built-in authorizer, Kafka's StandardAuthorizer semantics; set it to "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer "
            f"(accepted: {', '.join(sorted(AUTHORIZER_CLASS_NAMES))})",
            key=AUTHORIZER_CONFIG, value=name)
    allow = value_of(ALLOW_EVERYONE_CONFIG)
    allow = False if allow in (None, "") else _bool(allow, ALLOW_EVERYONE_CONFIG)
    kind = str(value_of(ACL_STORE_CONFIG) or "sqlite").strip().lower()
    if kind not in ("sqlite", "memory", "zookeeper"):
        raise ConfigError(f"Invalid value {kind} for configuration {ACL_STORE_CONFIG}: String "
                          "must be one of: sqlite, memory, zookeeper",
                          key=ACL_STORE_CONFIG, value=kind)
    if kind == "zookeeper" and not value_of("zookeeper.connect"):
        raise ConfigError(f"{ACL_STORE_CONFIG}=zookeeper requires zookeeper.connect",
                          key="zookeeper.connect", value=None)
    timeout = int(value_of("zookeeper.session.timeout.ms") or 18000)
    if kind == "memory":
        store = InMemoryAclStore()
    elif kind == "zookeeper":
        store = ZkAclStore(str(value_of("zookeeper.connect")), session_timeout_ms=timeout)
    else:
        store = SqliteAclStore(os.path.join(data_dir, ACL_STORE_FILE_NAME))
    return StandardAuthorizer(store, super_users=value_of("super.users") or (),
                              allow_everyone_if_no_acl_found=allow)


class AclTokenAuthorizer:
    """The delegation-token decisions (``kchannel.tokens.manager.TokenAuthorizer``)
    taken from the ACLs, as Kafka's DelegationTokenManager asks them:
    CREATE_TOKENS on USER ``owner``; DESCRIBE on DELEGATION_TOKEN ``id`` or
    DESCRIBE_TOKENS on USER ``owner``.  The token APIs do not hand the client
    address down: only ACLs for host ``*`` apply to them."""

    HOST = "*"

    def __init__(self, authorizer):
        self.authorizer = authorizer

    def authorize_create_tokens(self, requester, owner):
        return self.authorizer.authorize(str(_plain(requester)), self.HOST,
                                         AclOperation.CREATE_TOKENS, ResourceType.USER,
                                         str(_plain(owner)))

    def authorize_describe_token(self, requester, token_info):
        who = str(_plain(requester))
        if self.authorizer.authorize(who, self.HOST, AclOperation.DESCRIBE,
                                     ResourceType.DELEGATION_TOKEN, token_info.token_id):
            return True
        owner = token_info.owner
        return owner is not None and self.authorizer.authorize(
            who, self.HOST, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(_plain(owner)))

    def describable_tokens(self, requester):
        """Which tokens besides its own ``requester`` may describe, from
        its ALLOW ACLs (``TokenAuthorizer.describable_tokens``): the token
        ids of its LITERAL DESCRIBE ACLs on DELEGATION_TOKEN and the owners
        of its LITERAL DESCRIBE_TOKENS ACLs on USER; None (every token is a
        candidate) for a super user, a ``*`` or PREFIXED ACL, or
        ``allow.everyone.if.no.acl.found``."""
        who = str(_plain(requester))
        ids, every = self.authorizer.allowed_names(who, self.HOST, AclOperation.DESCRIBE,
                                                   ResourceType.DELEGATION_TOKEN)
        if every:
            return None
        owners, every = self.authorizer.allowed_names(who, self.HOST,
                                                      AclOperation.DESCRIBE_TOKENS,
                                                      ResourceType.USER)
        if every:
            return None
        parsed = []
        for o in owners:
            try:
                parsed.append(KafkaPrincipal.from_string(o))
            except (TypeError, ValueError):
                continue      # not a principal: names no token's owner
        return ids, parsed


class AclClusterAuthorizer:
    """``authorize(principal, operation)`` for the SCRAM credential APIs from
    the ACLs, as Kafka asks: DESCRIBE (DescribeUserScramCredentials) or ALTER
    (AlterUserScramCredentials) on the cluster.  Host ``*`` ACLs only (the
    client address is not handed down)."""

    HOST = "*"

    def __init__(self, authorizer):
        self.authorizer = authorizer

    def __call__(self, principal, operation):
        if principal is None:
            return False
        return self.authorizer.authorize(str(_plain(principal)), self.HOST,
                                         AclOperation.parse(operation), ResourceType.CLUSTER,
                                         CLUSTER_NAME)


def _plain(p):
    if isinstance(p, KafkaPrincipal):
        return KafkaPrincipal(p.principal_type, p.name)
    return p
