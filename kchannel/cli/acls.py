"""``kchannel acls``: Kafka's ``kafka-acls.sh`` (``AclCommand``).

    kchannel acls --bootstrap-server HOST:PORT [--command-config client.properties]
        --add | --remove | --list
        [--allow-principal P ...] [--deny-principal P ...] [--allow-host H ...] [--deny-host H ...]
        [--operation OP ...] [--topic T ...] [--group G ...] [--cluster]
        [--transactional-id ID ...] [--delegation-token ID ...] [--user-principal P ...]
        [--resource-pattern-type literal|prefixed|any|match]
        [--producer [--idempotent]] [--consumer] [--principal P ...] [--force]

Same flags, checks and output as Kafka's tool; works against any server that
answers CreateAcls/DescribeAcls/DeleteAcls (a Kafka broker with an
authorizer, or ``kchannel serve`` with ``authorizer.class.name``).  Exit
status: 0 success, 1 failure ("Error while executing ACL command: ..."),
2 usage error.  ``--remove`` without ``--force`` asks for confirmation on
the terminal, as Kafka does.
"""
import sys

from kchannel.cli._bootstrap import connect_bootstrap
from kchannel.config.properties import load_properties
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import error_name
from kchannel.security.authorizer.acl import (CLUSTER_NAME, AclOperation, AclPermissionType,
                                              PatternType, ResourceType)

NAME = "acls"
HELP = "This tool helps to manage acls on kafka (kafka-acls.sh)."

_ERRORS_PACKAGE = "org.apache.kafka.common.errors."
# AclEntry.supportedOperations (ALL is added by the tool)
_SUPPORTED = {
    ResourceType.TOPIC: ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER",
                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    ResourceType.GROUP: ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    ResourceType.CLUSTER: ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                           "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"),
    ResourceType.TRANSACTIONAL_ID: ("DESCRIBE", "WRITE", "TWO_PHASE_COMMIT"),
    ResourceType.DELEGATION_TOKEN: ("DESCRIBE",),
    ResourceType.USER: ("CREATE_TOKENS", "DESCRIBE_TOKENS"),
}


def add_arguments(parser):
    a = parser.add_argument
    a("--bootstrap-server", metavar="server to connect to",
      help="A list of host/port pairs to use for establishing the connection to the Kafka "
           "cluster. This list should be in the form host1:port1,host2:port2,... This config "
           "is required for acl management using admin client API.")
    a("--bootstrap-controller", metavar="controller to connect to",
      help="A list of host/port pairs of controllers (not supported by kchannel: use "
           "--bootstrap-server).")
    a("--command-config", metavar="command-config",
      help="A property file containing configs to be passed to Admin Client.")
    a("--topic", action="append", metavar="topic",
      help="topic to which ACLs should be added or removed. A value of '*' indicates ACL "
           "should apply to all topics.")
    a("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    a("--group", action="append", metavar="group",
      help="Consumer Group to which the ACLs should be added or removed. A value of '*' "
           "indicates the ACLs should apply to all groups.")
    a("--transactional-id", action="append", metavar="transactional-id",
      help="The transactionalId to which ACLs should be added or removed. A value of '*' "
           "indicates the ACLs should apply to all transactionalIds.")
    a("--idempotent", action="store_true",
      help="Enable idempotence for the producer. This should be used in combination with the "
           "--producer option.")
    a("--delegation-token", action="append", metavar="delegation-token",
      help="Delegation token to which ACLs should be added or removed. A value of '*' "
           "indicates ACL should apply to all tokens.")
    a("--resource-pattern-type", default="LITERAL", metavar="ANY|MATCH|LITERAL|PREFIXED",
      help="The type of the resource pattern or pattern filter (default: LITERAL).")
    a("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    a("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    a("--list", action="store_true",
      help="List ACLs for the specified resource, use --topic <topic> or --group <group> or "
           "--cluster to specify a resource.")
    a("--operation", action="append", metavar="OPERATION",
      help="Operation that is being allowed or denied (default: All).")
    a("--allow-principal", action="append", metavar="allow-principal",
      help="principal is in principalType:name format. For example, User:'*' is the wild "
           "card indicating all users.")
    a("--deny-principal", action="append", metavar="deny-principal",
      help="principal is in principalType:name format. DENY RULES TAKE PRECEDENCE OVER "
           "ALLOW RULES.")
    a("--principal", action="append", nargs="?", const=None, metavar="principal",
      help="List ACLs for the specified principal (only with --list).")
    a("--allow-host", action="append", metavar="allow-host",
      help="Host from which principals listed in --allow-principal will have access "
           "(default '*').")
    a("--deny-host", action="append", metavar="deny-host",
      help="Host from which principals listed in --deny-principal will be denied access "
           "(default '*').")
    a("--producer", action="store_true",
      help="Convenience option to add/remove ACLs for producer role: WRITE, DESCRIBE and "
           "CREATE on topic.")
    a("--consumer", action="store_true",
      help="Convenience option to add/remove ACLs for consumer role: READ, DESCRIBE on topic "
           "and READ on group.")
    a("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    a("--user-principal", action="append", metavar="user-principal",
      help="Specifies a user principal as a resource in relation with the operation.")
    parser.set_defaults(_parser=parser)


class _Usage(Exception):
    pass


class _Failure(Exception):
    pass


# ------------------------------------------------------------ text as Kafka
def pattern_text(rtype, name, ptype):
    return f"ResourcePattern(resourceType={rtype.name}, name={name}, patternType={ptype.name})"


def filter_text(rtype, name, ptype):
    return (f"ResourcePatternFilter(resourceType={rtype.name}, name={name}, "
            f"patternType={ptype.name})")


def entry_text(e):
    principal, host, op, perm = e
    return f"(principal={principal}, host={host}, operation={op.name}, permissionType={perm.name})"


# ------------------------------------------------------------------ parsing
def _check_args(args):
    if args.bootstrap_server and args.bootstrap_controller:
        raise _Usage("Only one of --bootstrap-server or --bootstrap-controller must be specified")
    if not args.bootstrap_server and not args.bootstrap_controller:
        raise _Usage("One of --bootstrap-server or --bootstrap-controller must be specified")
    if sum((args.add, args.remove, args.list)) != 1:
        raise _Usage("Command must include exactly one action: --list, --add, --remove. ")
    if args.list:
        for flag, v in (("--producer", args.producer), ("--consumer", args.consumer),
                        ("--allow-host", args.allow_host), ("--allow-principal",
                                                            args.allow_principal),
                        ("--deny-host", args.deny_host), ("--deny-principal",
                                                          args.deny_principal)):
            if v:
                raise _Usage(f'Option "[list]" can\'t be used with option "[{flag[2:]}]"')
    for role, on in (("producer", args.producer), ("consumer", args.consumer)):
        if on:
            for flag, v in (("operation", args.operation), ("deny-principal",
                                                            args.deny_principal),
                            ("deny-host", args.deny_host)):
                if v:
                    raise _Usage(f'Option "[{role}]" can\'t be used with option "[{flag}]"')
    if args.principal and not args.list:
        raise _Usage("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise _Usage("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise _Usage("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or (
            not args.producer and (args.cluster or args.transactional_id))):
        raise _Usage("With --consumer you must specify a --topic and a --group and no "
                     "--cluster or --transactional-id option should be specified.")


def _pattern_type(args):
    p = PatternType.parse(args.resource_pattern_type)
    if p == PatternType.UNKNOWN:
        raise _Usage(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    return p


def _principals(values):
    out = set()
    for v in values or ():
        text = (v or "").strip()
        if ":" not in text:
            raise _Failure("expected a string in format principalType:principalName but got "
                           f"{text}")
        out.add(text)
    return out


def _operation(text):
    op = AclOperation.parse(text.strip())
    if op in (AclOperation.UNKNOWN,):
        raise _Failure(f"No enum constant org.apache.kafka.common.acl.AclOperation."
                       f"{text.strip().upper()}")
    return op


def _entries(args, operations):
    allowed, denied = _principals(args.allow_principal), _principals(args.deny_principal)
    allow_hosts = ({h.strip() for h in args.allow_host} if args.allow_host
                   else {"*"} if args.allow_principal else set())
    deny_hosts = ({h.strip() for h in args.deny_host} if args.deny_host
                  else {"*"} if args.deny_principal else set())
    out = set()
    for principals, hosts, perm in ((allowed, allow_hosts, AclPermissionType.ALLOW),
                                    (denied, deny_hosts, AclPermissionType.DENY)):
        for p in principals:
            for op in operations:
                for h in hosts:
                    out.add((p, h, op, perm))
    return out


def _resources(args, die_if_none):
    ptype = _pattern_type(args)
    out = []
    for t in args.topic or ():
        out.append((ResourceType.TOPIC, t.strip(), ptype))
    if ptype == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    for g in args.group or ():
        out.append((ResourceType.GROUP, g.strip(), ptype))
    for t in args.transactional_id or ():
        out.append((ResourceType.TRANSACTIONAL_ID, t, ptype))
    for t in args.delegation_token or ():
        out.append((ResourceType.DELEGATION_TOKEN, t.strip(), ptype))
    for u in args.user_principal or ():
        out.append((ResourceType.USER, u.strip(), ptype))
    if not out and die_if_none:
        raise _Usage("You must provide at least one resource: --topic <topic> or --cluster or "
                     "--group <group> or --delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(out))


def resource_to_entries(args):
    """{resource (type, name, pattern): set of entries}, as
    ``getResourceFilterToAcls``."""
    result = {}
    if not args.producer and not args.consumer:
        ops = {_operation(o) for o in (args.operation or ["All"])}
        entries = _entries(args, ops)
        for r in _resources(args, True):
            result[r] = set(entries)
    if args.producer:
        rs = _resources(args, True)
        for r in rs:
            if r[0] == ResourceType.TOPIC:
                result[r] = _entries(args, {AclOperation.WRITE, AclOperation.DESCRIBE,
                                            AclOperation.CREATE})
            elif r[0] == ResourceType.TRANSACTIONAL_ID:
                result[r] = _entries(args, {AclOperation.WRITE, AclOperation.DESCRIBE})
        if args.idempotent:
            result[(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)] = _entries(
                args, {AclOperation.IDEMPOTENT_WRITE})
    if args.consumer:
        for r in _resources(args, True):
            if r[0] == ResourceType.TOPIC:
                result.setdefault(r, set()).update(
                    _entries(args, {AclOperation.READ, AclOperation.DESCRIBE}))
            elif r[0] == ResourceType.GROUP:
                result.setdefault(r, set()).update(_entries(args, {AclOperation.READ}))
    for r, entries in result.items():
        valid = {AclOperation.parse(o) for o in _SUPPORTED.get(r[0], ())} | {AclOperation.ALL}
        if any(e[2] not in valid for e in entries):
            raise _Usage(f"ResourceType {r[0].name} only supports operations "
                         f"{', '.join(sorted(o.name for o in valid))}")
    return result


# ------------------------------------------------------------------ wire
class _Admin:
    def __init__(self, bootstrap, command_config):
        configs = {}
        if command_config:
            try:
                configs = dict(load_properties(command_config))
            except OSError as exc:
                raise _Failure(f"{command_config} ({exc.strerror or exc})") from None
        self.client, self.conn = connect_bootstrap(bootstrap, configs, _Failure)

    def close(self):
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass

    @staticmethod
    def _raise(code, message):
        if code:
            # Kafka's exception class: CLUSTER_AUTHORIZATION_FAILED ->
            # ClusterAuthorizationException, INVALID_REQUEST -> InvalidRequestException
            text = error_name(code)
            text = text[:-len("_FAILED")] if text.endswith("_FAILED") else text
            name = "".join(p.capitalize() for p in text.split("_"))
            name = name.replace("Exception", "") + "Exception"
            raise _Failure(f"{_ERRORS_PACKAGE}{name}: {message or ''}".rstrip(": "))

    def describe(self, rtype, name, ptype, principal=None):
        body = self.conn.request(ApiKey.DESCRIBE_ACLS, {
            "resource_type_filter": int(rtype), "resource_name_filter": name,
            "pattern_type_filter": int(ptype), "principal_filter": principal,
            "host_filter": None, "operation": int(AclOperation.ANY),
            "permission_type": int(AclPermissionType.ANY)})
        self._raise(body.get("error_code"), body.get("error_message"))
        out = {}
        for r in body.get("resources") or ():
            key = (ResourceType.parse(r["resource_type"]), r["resource_name"],
                   PatternType.parse(r.get("pattern_type", 3)))
            for a in r.get("acls") or ():
                out.setdefault(key, set()).add(
                    (a["principal"], a["host"], AclOperation.parse(a["operation"]),
                     AclPermissionType.parse(a["permission_type"])))
        return out

    def create(self, resource, entries):
        rtype, name, ptype = resource
        body = self.conn.request(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": int(rtype), "resource_name": name,
             "resource_pattern_type": int(ptype), "principal": p, "host": h,
             "operation": int(op), "permission_type": int(perm)}
            for p, h, op, perm in entries]})
        for r in body.get("results") or ():
            self._raise(r.get("error_code"), r.get("error_message"))

    def delete(self, resource, entries):
        rtype, name, ptype = resource
        filters = [{"resource_type_filter": int(rtype), "resource_name_filter": name,
                    "pattern_type_filter": int(ptype), "principal_filter": p,
                    "host_filter": h, "operation": int(op), "permission_type": int(perm)}
                   for p, h, op, perm in entries] or [
            {"resource_type_filter": int(rtype), "resource_name_filter": name,
             "pattern_type_filter": int(ptype), "principal_filter": None, "host_filter": None,
             "operation": int(AclOperation.ANY), "permission_type": int(AclPermissionType.ANY)}]
        body = self.conn.request(ApiKey.DELETE_ACLS, {"filters": filters})
        for r in body.get("filter_results") or ():
            self._raise(r.get("error_code"), r.get("error_message"))
            for m in r.get("matching_acls") or ():
                self._raise(m.get("error_code"), m.get("error_message"))


# ------------------------------------------------------------------ actions
def _print_resource_acls(out, resource_to_acls):
    for (rtype, name, ptype), acls in resource_to_acls.items():
        out.write(f"Current ACLs for resource `{pattern_text(rtype, name, ptype)}`:\n"
                  + "\n".join("\t" + entry_text(e) for e in sorted(acls, key=entry_text))
                  + "\n\n")


def _resources_to_add(args):
    """``getResourceToAcls``: what --add adds, or a usage error."""
    if _pattern_type(args) not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise _Usage(f"A '--resource-pattern-type' value of '{_pattern_type(args).name}' is "
                     "not valid when adding acls.")
    resource_to_acl = resource_to_entries(args)
    if any(not v for v in resource_to_acl.values()):
        raise _Usage("You must specify one of: --allow-principal, --deny-principal when trying "
                     "to add ACLs.")
    return resource_to_acl


def _add(admin, args, out):
    resource_to_acl = _resources_to_add(args)
    for resource, entries in resource_to_acl.items():
        existing = admin.describe(*resource).get(resource, set())
        new = []
        for e in sorted(entries, key=entry_text):
            if e in existing:
                out.write(f"Acl (pattern={pattern_text(*resource)}, entry={entry_text(e)}) "
                          "already exists.\n")
            else:
                new.append(e)
        if new:
            out.write(f"Adding ACLs for resource `{pattern_text(*resource)}`: \n "
                      + "\n".join("\t" + entry_text(e) for e in new) + "\n\n")
            admin.create(resource, new)


def _confirm(args, msg, out):
    if args.force:
        return True
    out.write(msg + "\n")
    out.flush()
    line = sys.stdin.readline()
    return line.strip().lower() == "y"


def _remove(admin, args, out):
    for resource, entries in resource_to_entries(args).items():
        if not entries:
            msg = (f"Are you sure you want to delete all ACLs for resource filter "
                   f"`{filter_text(*resource)}`? (y/n)")
        else:
            msg = ("Are you sure you want to remove ACLs: \n "
                   + "\n".join("\t" + entry_text(e) for e in sorted(entries, key=entry_text))
                   + f"\n from resource filter `{filter_text(*resource)}`? (y/n)")
        if _confirm(args, msg, out):
            admin.delete(resource, sorted(entries, key=entry_text))


def _list(admin, args, out):
    resources = _resources(args, False)
    acls = {}
    if not resources:
        resources = [(ResourceType.ANY, None, PatternType.ANY)]
    for r in resources:
        for k, v in admin.describe(*r).items():
            acls.setdefault(k, set()).update(v)
    principals = [p for p in (args.principal or ()) if p]
    if not principals:
        _print_resource_acls(out, acls)
        return
    for p in sorted(_principals(principals)):
        out.write(f"ACLs for principal `{p}`\n")
        _print_resource_acls(out, {k: {e for e in v if e[0] == p} for k, v in acls.items()
                                   if any(e[0] == p for e in v)})


def run(args):
    out = sys.stdout
    try:
        _check_args(args)
        if args.add:
            _resources_to_add(args)        # usage errors before connecting
        elif args.remove:
            resource_to_entries(args)
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        parser = getattr(args, "_parser", None)
        if parser is not None:
            parser.print_usage(sys.stderr)
        return 2
    except _Failure as exc:
        out.write(f"Error while executing ACL command: {exc}\n")
        return 1
    if args.bootstrap_controller:
        out.write("Error while executing ACL command: --bootstrap-controller is not supported "
                  "by kchannel: use --bootstrap-server\n")
        return 1
    admin = None
    try:
        admin = _Admin(args.bootstrap_server, args.command_config)
        if args.add:
            _add(admin, args, out)
        elif args.remove:
            _remove(admin, args, out)
        else:
            _list(admin, args, out)
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the tool's one failure line, as Kafka's
        out.write(f"Error while executing ACL command: {exc}\n")
        return 1
    finally:
        if admin is not None:
            admin.close()
    return 0
