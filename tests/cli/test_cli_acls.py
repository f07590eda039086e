"""``kchannel acls`` command line: kafka-acls.sh's argument checks (usage
errors exit 2 with Kafka's message, before any connection) and the ACLs
its options stand for (--producer / --consumer / --idempotent shortcuts,
hosts defaulting to '*').  Against servers: tests/gateway/test_gateway_acls.py."""
import contextlib
import io

import pytest

from kchannel.cli import build_parser, main
from kchannel.cli.acls import resource_to_entries
from kchannel.security.authorizer.acl import AclOperation, PatternType, ResourceType


def acls_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["acls", *argv])
    return rc, out.getvalue(), err.getvalue()


B = ("--bootstrap-server", "127.0.0.1:1")


@pytest.mark.parametrize("argv, message", [
    ((), "One of --bootstrap-server or --bootstrap-controller must be specified"),
    (B, "Command must include exactly one action: --list, --add, --remove."),
    (B + ("--add", "--list"), "Command must include exactly one action"),
    (B + ("--list", "--allow-principal", "User:a"),
     'Option "[list]" can\'t be used with option "[allow-principal]"'),
    (B + ("--add", "--producer", "--group", "g", "--allow-principal", "User:a"),
     "With --producer you must specify a --topic"),
    (B + ("--add", "--producer", "--topic", "t", "--operation", "Read",
          "--allow-principal", "User:a"),
     'Option "[producer]" can\'t be used with option "[operation]"'),
    (B + ("--add", "--consumer", "--topic", "t", "--allow-principal", "User:a"),
     "With --consumer you must specify a --topic and a --group"),
    (B + ("--add", "--idempotent", "--topic", "t", "--allow-principal", "User:a"),
     "The --idempotent option is only available if --producer is set"),
    (B + ("--add", "--topic", "t"),
     "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
    (B + ("--add", "--allow-principal", "User:a"), "You must provide at least one resource"),
    (B + ("--add", "--group", "g", "--operation", "Write", "--allow-principal", "User:a"),
     "ResourceType GROUP only supports operations"),
    (B + ("--add", "--topic", "t", "--resource-pattern-type", "match",
          "--allow-principal", "User:a"),
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (B + ("--list", "--principal", "User:a", "--add"), "exactly one action"),
])
def test_usage_errors_exit_2(argv, message):
    rc, out, err = acls_cli(*argv)
    assert rc == 2 and message in err, (out, err)


def _entries(*argv):
    args = build_parser().parse_args(["acls", *B, "--add", *argv])
    return {(r[0], r[1], r[2]): sorted((p, h, o.name, perm.name) for p, h, o, perm in e)
            for r, e in resource_to_entries(args).items()}


def test_shortcuts_expand_as_kafkas_tool():
    got = _entries("--allow-principal", "User:alice", "--producer", "--idempotent",
                   "--topic", "orders", "--transactional-id", "tx")
    assert got == {
        (ResourceType.TOPIC, "orders", PatternType.LITERAL): [
            ("User:alice", "*", op, "ALLOW") for op in ("CREATE", "DESCRIBE", "WRITE")],
        (ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL): [
            ("User:alice", "*", op, "ALLOW") for op in ("DESCRIBE", "WRITE")],
        (ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL): [
            ("User:alice", "*", "IDEMPOTENT_WRITE", "ALLOW")]}
    got = _entries("--allow-principal", "User:bob", "--allow-host", "10.0.0.1", "--consumer",
                   "--topic", "orders", "--group", "billing")
    assert got[(ResourceType.GROUP, "billing", PatternType.LITERAL)] == [
        ("User:bob", "10.0.0.1", "READ", "ALLOW")]
    assert [e[2] for e in got[(ResourceType.TOPIC, "orders", PatternType.LITERAL)]] == \
        ["DESCRIBE", "READ"]
    got = _entries("--deny-principal", "User:eve", "--operation", "DescribeConfigs",
                   "--operation", "all", "--topic", "p-", "--resource-pattern-type", "prefixed")
    assert got == {(ResourceType.TOPIC, "p-", PatternType.PREFIXED): [
        ("User:eve", "*", "ALL", "DENY"), ("User:eve", "*", "DESCRIBE_CONFIGS", "DENY")]}
    assert AclOperation.parse("IdempotentWrite") == AclOperation.IDEMPOTENT_WRITE


def test_connection_failure_exits_1():
    rc, out, _ = acls_cli("--bootstrap-server", "127.0.0.1:1", "--list")
    assert rc == 1 and out.startswith("Error while executing ACL command: ")
