"""Kafka's authorization model (ACLs, ``StandardAuthorizer`` semantics).

* :mod:`.acl` -- resource/pattern/operation/permission types, bindings, filters.
* :mod:`.standard` -- :class:`StandardAuthorizer`, the decisions.
* :mod:`.store` -- where ACLs live (memory, SQLite shared by worker processes,
  ZooKeeper in Kafka's layout).
* :mod:`.requests` -- what each Kafka request needs, per resource, as
  KafkaApis checks it (the gateway's authorization hook).
* :mod:`.setup` -- the authorizer ``authorizer.class.name`` asks for.

CreateAcls / DescribeAcls / DeleteAcls are served by
:mod:`kchannel.server.acl_handlers`.
"""
from kchannel.security.authorizer.acl import (AclBinding, AclBindingFilter, AclOperation,
                                              AclPermissionType, PatternType, ResourceType)
from kchannel.security.authorizer.standard import StandardAuthorizer

__all__ = ["AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType",
           "PatternType", "ResourceType", "StandardAuthorizer"]
