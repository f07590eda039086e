"""CreateAcls / DescribeAcls / DeleteAcls answered by a server from its
authorizer, as Kafka's ``AclApis`` answers them.

Describing ACLs needs DESCRIBE on the cluster, creating or deleting them
ALTER on the cluster (super users have both).  Without an authorizer every
request is answered SECURITY_DISABLED ("No Authorizer is configured."), as a
Kafka broker without ``authorizer.class.name`` does -- never forwarded: a
gateway would otherwise let its clients change the upstream's ACLs as the
gateway's own principal.
"""
from ..log import get_logger
from ..protocol import messages
from ..protocol.errors import Errors
from ..security.authorizer.acl import (CLUSTER_NAME, AclBinding, AclBindingFilter,
                                              AclOperation, AclPermissionType, PatternType,
                                              ResourceType)

log = get_logger("kchannel.server.acl_handlers")

__all__ = ["register_acl_handlers", "ACL_API_KEYS", "SERVER_MIN_VERSION"]

ACL_API_KEYS = (messages.DESCRIBE_ACLS.api_key, messages.CREATE_ACLS.api_key,
                messages.DELETE_ACLS.api_key)
# Kafka 4 serves the ACL APIs from v1 (KIP-896 removed v0).
SERVER_MIN_VERSION = 1
NO_AUTHORIZER = "No Authorizer is configured."
CAF = int(Errors.CLUSTER_AUTHORIZATION_FAILED)
_CAF_MESSAGE = "Cluster authorization failed."


def _host(ctx):
    addr = ctx.client_address
    return str(addr[0]) if isinstance(addr, (tuple, list)) and addr else str(addr or "")


def _allowed(authorizer, ctx, op):
    return authorizer.authorize(str(ctx.principal), _host(ctx), op, ResourceType.CLUSTER,
                                CLUSTER_NAME)


def _filter(entry, prefix):
    """An ``AclBindingFilter`` from a DescribeAcls request or a DeleteAcls
    filter entry (``prefix`` "" or "_filter" on the resource fields)."""
    return AclBindingFilter(
        ResourceType.parse(entry["resource_type_filter"]),
        entry.get("resource_name_filter"),
        PatternType.parse(entry.get("pattern_type_filter", int(PatternType.LITERAL))),
        entry.get("principal_filter"), entry.get("host_filter"),
        AclOperation.parse(entry["operation"]),
        AclPermissionType.parse(entry["permission_type"]))


def _binding_dict(b):
    return {"resource_type": int(b.resource_type), "resource_name": b.name,
            "pattern_type": int(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": int(b.operation), "permission_type": int(b.permission_type)}


def describe_acls_handler(authorizer):
    def handle(ctx):
        if authorizer is None:
            return {"error_code": int(Errors.SECURITY_DISABLED), "error_message": NO_AUTHORIZER,
                    "resources": []}
        if not _allowed(authorizer, ctx, AclOperation.DESCRIBE):
            return {"error_code": CAF, "error_message": _CAF_MESSAGE, "resources": []}
        body = ctx.body
        flt = AclBindingFilter(
            ResourceType.parse(body["resource_type_filter"]), body.get("resource_name_filter"),
            PatternType.parse(body.get("pattern_type_filter", int(PatternType.LITERAL))),
            body.get("principal_filter"), body.get("host_filter"),
            AclOperation.parse(body["operation"]),
            AclPermissionType.parse(body["permission_type"]))
        reason = flt.invalid_reason()
        if reason is not None:
            return {"error_code": int(Errors.INVALID_REQUEST), "error_message": reason,
                    "resources": []}
        groups = {}
        for b in authorizer.acls(flt):
            groups.setdefault((int(b.resource_type), b.name, int(b.pattern_type)), []).append(
                {"principal": b.principal, "host": b.host, "operation": int(b.operation),
                 "permission_type": int(b.permission_type)})
        return {"error_code": 0, "error_message": None, "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in sorted(groups.items())]}
    return handle


def create_acls_handler(authorizer):
    def handle(ctx):
        creations = ctx.body.get("creations") or ()
        if authorizer is None:
            return {"results": [{"error_code": int(Errors.SECURITY_DISABLED),
                                 "error_message": NO_AUTHORIZER} for _ in creations]}
        if not _allowed(authorizer, ctx, AclOperation.ALTER):
            return {"results": [{"error_code": CAF, "error_message": _CAF_MESSAGE}
                                for _ in creations]}
        bindings = [AclBinding.of(c["resource_type"], c["resource_name"],
                                  c.get("resource_pattern_type", int(PatternType.LITERAL)),
                                  c["principal"], c["host"], c["operation"],
                                  c["permission_type"]) for c in creations]
        results = []
        for reason in authorizer.create_acls(bindings):
            if reason is None:
                results.append({"error_code": 0, "error_message": None})
            else:
                results.append({"error_code": int(Errors.INVALID_REQUEST),
                                "error_message": reason})
        log.info("%s created %d ACLs", ctx.principal,
                 sum(1 for r in results if r["error_code"] == 0))
        return {"results": results}
    return handle


def delete_acls_handler(authorizer):
    def handle(ctx):
        entries = ctx.body.get("filters") or ()
        if authorizer is None:
            return {"filter_results": [{"error_code": int(Errors.SECURITY_DISABLED),
                                        "error_message": NO_AUTHORIZER, "matching_acls": []}
                                       for _ in entries]}
        if not _allowed(authorizer, ctx, AclOperation.ALTER):
            return {"filter_results": [{"error_code": CAF, "error_message": _CAF_MESSAGE,
                                        "matching_acls": []} for _ in entries]}
        filters = [_filter(e, "") for e in entries]
        valid = [f for f in filters if f.invalid_reason() is None]
        matched = iter(authorizer.delete_acls(valid))
        out = []
        for f in filters:
            reason = f.invalid_reason()
            if reason is not None:
                out.append({"error_code": int(Errors.INVALID_REQUEST), "error_message": reason,
                            "matching_acls": []})
                continue
            out.append({"error_code": 0, "error_message": None, "matching_acls": [
                dict(_binding_dict(b), error_code=0, error_message=None)
                for b in next(matched)]})
        return {"filter_results": out}
    return handle


def register_acl_handlers(server, authorizer):
    """Serve the three ACL APIs on ``server`` from ``authorizer`` (a
    ``StandardAuthorizer``, or None: SECURITY_DISABLED)."""
    for api, factory in ((messages.DESCRIBE_ACLS, describe_acls_handler),
                         (messages.CREATE_ACLS, create_acls_handler),
                         (messages.DELETE_ACLS, delete_acls_handler)):
        server.register_handler(api.api_key, factory(authorizer),
                                max(api.min_version, SERVER_MIN_VERSION), api.max_version)
