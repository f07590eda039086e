"""Kafka's ACL model: resource, pattern, operation and permission types,
bindings and binding filters (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``), with Kafka's wire codes and names.

Sans-I/O: values in, values out.  The enums carry Kafka's codes (the bytes
of CreateAcls/DescribeAcls/DeleteAcls); ``parse`` accepts Kafka's spellings
(``TOPIC``, ``Topic``, ``topic``, ``DescribeConfigs``, ``DESCRIBE_CONFIGS``)
as ``kafka-acls.sh`` and ZooKeeper's JSON use them.
"""
import enum
from dataclasses import dataclass

__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermissionType",
           "AclBinding", "AclBindingFilter", "WILDCARD_RESOURCE", "WILDCARD_PRINCIPAL",
           "WILDCARD_HOST", "CLUSTER_NAME", "validate_binding"]

WILDCARD_RESOURCE = "*"          # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_PRINCIPAL = "User:*"    # KafkaPrincipal.WILDCARD_PRINCIPAL
WILDCARD_HOST = "*"              # AclEntry.WILDCARD_HOST
CLUSTER_NAME = "kafka-cluster"   # Resource.CLUSTER_NAME


def _norm(text):
    return str(text).replace("_", "").replace("-", "").upper()


class _KafkaEnum(enum.IntEnum):
    @classmethod
    def parse(cls, text):
        """The member named ``text`` in any of Kafka's spellings; UNKNOWN
        for a name Kafka would not know (as Kafka's ``fromString``)."""
        if isinstance(text, cls):
            return text
        if isinstance(text, int):
            try:
                return cls(text)
            except ValueError:
                return cls.UNKNOWN
        key = _norm(text)
        for m in cls:
            if _norm(m.name) == key:
                return m
        return cls.UNKNOWN

    @property
    def camel(self):
        """Kafka's ``SecurityUtils.operationName``-style spelling
        (``DescribeConfigs``), used in ZooKeeper's JSON."""
        return "".join(p.capitalize() for p in self.name.split("_"))


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an entry (Kafka's ``AclBinding``).
    ``principal`` is ``Type:name`` text, ``host`` an IP address or ``*``."""
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self):
        # AclBinding.toString
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={self.name}, patternType={self.pattern_type.name}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name}))")

    def as_tuple(self):
        return (int(self.resource_type), self.name, int(self.pattern_type), self.principal,
                self.host, int(self.operation), int(self.permission_type))

    @classmethod
    def of(cls, resource_type, name, pattern_type, principal, host, operation, permission_type):
        return cls(ResourceType.parse(resource_type), name, PatternType.parse(pattern_type),
                   principal, host, AclOperation.parse(operation),
                   AclPermissionType.parse(permission_type))


def validate_binding(b):
    """None when ``b`` may be stored, else the reason (Kafka answers it
    INVALID_REQUEST), in the order of Kafka's checks (AclApis and
    AclControlManager.validateNewAcl)."""
    if b.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is kafka-cluster"
    if not b.name:
        return "Invalid empty resource name"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"Invalid operation {b.operation.name}"
    if b.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {b.permission_type.name}"
    ptype, sep, pname = (b.principal or "").partition(":")
    if not sep:
        return ("Could not parse principal from `" + str(b.principal) + "` (no colon is "
                "present separating the principal type from the principal name)")
    if not b.host:
        return "Invalid empty host"
    return None


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: None (or ANY) fields match anything;
    ``pattern_type`` MATCH matches the LITERAL and PREFIXED patterns and
    the wildcard that would apply to ``name``."""
    resource_type: ResourceType = ResourceType.ANY
    name: str = None
    pattern_type: PatternType = PatternType.ANY
    principal: str = None
    host: str = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def invalid_reason(self):
        """Kafka's ``findIndefiniteField``-like check for filters: UNKNOWN
        anywhere makes the filter invalid."""
        for label, v in (("resourceType", self.resource_type),
                         ("patternType", self.pattern_type), ("operation", self.operation),
                         ("permissionType", self.permission_type)):
            if v.name == "UNKNOWN":
                return f"Unknown {label}"
        return None

    def matches(self, b):
        rt = self.resource_type
        if rt != ResourceType.ANY and rt != b.resource_type:
            return False
        pt = self.pattern_type
        name = self.name
        if pt == PatternType.MATCH:
            if name is not None:
                if b.pattern_type == PatternType.LITERAL:
                    if b.name != name and b.name != WILDCARD_RESOURCE:
                        return False
                elif b.pattern_type == PatternType.PREFIXED:
                    if not name.startswith(b.name):
                        return False
                else:
                    return False
        else:
            if pt != PatternType.ANY and pt != b.pattern_type:
                return False
            if name is not None and name != b.name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        if (self.permission_type != AclPermissionType.ANY
                and self.permission_type != b.permission_type):
            return False
        return True
