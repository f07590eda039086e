"""One vocabulary: Kafka error codes and API keys are named through
``Errors`` and ``ApiKey`` everywhere outside the protocol tables.

An AST scan of kchannel/ flags an integer literal (other than 0, NONE, and
within the range of Kafka's codes and keys) where it stands for an error code
or an API key: compared (``==``, ``!=``, ``in``, ``not in``) with a name
containing ``error``, ``code`` or ``api_key``; passed as a keyword argument so
named; passed first to a call of a name ending in ``Error``
(``KafkaError(29, ...)``); the default of a parameter so named
(``error_code=58``); or assigned to a name spelt as an ``ApiKey``/``Errors`` member
(``API_VERSIONS = 18``) or ending in ``_ERRORS``/``_ERROR_CODES``/
``API_KEY(S)`` or containing ``retriable``.  Lengths, offsets, timestamps and
ordering comparisons (``code <= 255``) are not flagged.
"""
import ast
import builtins
import os
import re

import kchannel
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors

# The imported package (the checkout, or site-packages when the tests run
# against an installed wheel: .ci/wheels --check).
PACKAGE = os.path.dirname(os.path.abspath(kchannel.__file__))
ROOT = os.path.dirname(PACKAGE)

# The protocol tables: message schemas (one API key each) and the two enums.
_TABLE_DIRS = (os.path.join(PACKAGE, "protocol", "messages"),)
_TABLE_CLASSES = {"Errors", "ApiKey"}
_TABLE_ASSIGNMENTS = {"ERROR_TABLE"}

_COMPARED = re.compile(r"error|code|api_?key", re.I)
_ASSIGNED = re.compile(r"(_ERRORS|_ERROR_CODES|API_KEYS?)$|retriable", re.I)
# A constant named as an ApiKey or Errors member (``API_VERSIONS = 18``).
_MEMBER_NAMES = set(ApiKey.__members__) | set(Errors.__members__) - {"NONE"}
# Kafka's error codes run from -1 to about 130, API keys from 0 to about 90.
_CODE_RANGE = range(-1, 200)


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value
        return _name(node.value)
    if isinstance(node, ast.Call):
        if (_name(node.func) == "get" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            return node.args[0].value
        return _name(node.func)
    return ""


def _literals(node):
    """The integers a literal (int, -int, tuple/list/set of them, or
    frozenset/set/tuple of such) stands for; [] for anything else."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
        return [-node.operand.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out = []
        for element in node.elts:
            values = _literals(element)
            if not values:
                return []
            out += values
        return out
    if (isinstance(node, ast.Call) and _name(node.func) in ("frozenset", "set", "tuple")
            and len(node.args) == 1):
        return _literals(node.args[0])
    return []


def _bare(node):
    values = _literals(node)
    return bool(values) and all(v in _CODE_RANGE for v in values) and any(values)


def _skipped(tree):
    """Nodes inside the protocol tables (the enums' bodies, ERROR_TABLE)."""
    skip = set()
    for node in ast.walk(tree):
        if ((isinstance(node, ast.ClassDef) and node.name in _TABLE_CLASSES)
                or (isinstance(node, ast.Assign) and any(
                    _name(t) in _TABLE_ASSIGNMENTS for t in node.targets))):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def bare_numbers(source, path="kchannel/x.py"):
    tree = ast.parse(source, path)
    skip = _skipped(tree)
    # Class attributes spelt like a member (AclOperation.DESCRIBE_CONFIGS = 10)
    # belong to other Kafka vocabularies: the member-name rule is for
    # module and function constants.
    in_class = {id(stmt) for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                for stmt in node.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        hit = False
        if isinstance(node, ast.Compare) and all(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            sides = [node.left, *node.comparators]
            hit = (any(_COMPARED.search(_name(s)) for s in sides)
                   and any(_bare(s) for s in sides))
        elif (isinstance(node, ast.Call) and node.args and _name(node.func).endswith("Error")
              and not hasattr(builtins, _name(node.func))):
            # KafkaError(29, "TOPIC_AUTHORIZATION_FAILED", ...): the code first
            hit = _bare(node.args[0])
        elif isinstance(node, ast.keyword) and node.arg:
            hit = bool(_COMPARED.search(node.arg)) and _bare(node.value)
        elif isinstance(node, ast.Dict):
            hit = any(isinstance(k, ast.Constant) and isinstance(k.value, str)
                      and _COMPARED.search(k.value) and _bare(v)
                      for k, v in zip(node.keys, node.values))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # def __init__(self, message="", error_code=58): the default
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            hit = any(_COMPARED.search(arg.arg) and _bare(d) for arg, d in pairs)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            member = id(node) not in in_class
            hit = any(_ASSIGNED.search(_name(t))
                      or (member and _name(t).lstrip("_") in _MEMBER_NAMES)
                      for t in targets) and _bare(node.value)
        if hit:
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_no_bare_error_codes_or_api_keys():
    found = []
    for dirpath, _dirs, files in os.walk(PACKAGE):
        if dirpath.startswith(_TABLE_DIRS):
            continue
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    found += bare_numbers(f.read(), os.path.relpath(path, ROOT))
    assert not found, "name them with Errors / ApiKey:\n" + "\n".join(found)


def test_the_scan_catches_bare_numbers():
    for sample in ("if code == 16: pass",
                   "if error_code in (6, 15): pass",
                   "if header.api_key == 3: pass",
                   "if exc.error_code != 1: pass",
                   "if result.get('error_code', 0) == 91: pass",
                   "resp = dict(error_code=35)",
                   "resp = {'error_code': 58}",
                   "RETRIABLE = frozenset({3, 5, 6})",
                   "_COORDINATOR_ERRORS = frozenset({14, 15, 16})",
                   "API_VERSIONS = 18",
                   "_SASL_HANDSHAKE = 17",
                   "raise errors.KafkaError(29, 'TOPIC_AUTHORIZATION_FAILED')",
                   "e = KafkaError(-1, 'UNKNOWN_SERVER_ERROR', 'x')",
                   "def __init__(self, message='', error_code=58): pass",
                   "def f(*, code=34): pass",
                   "f = lambda api_key=18: api_key"):
        assert bare_numbers(sample), sample
    for sample in ("if code == 0: pass",
                   "if code <= 255: pass",
                   "if len(data) == 16: pass",
                   "if offset == 3: pass",
                   "ACCEPT_ERROR_LOG_INTERVAL_MS = 10000",
                   "ERROR_TIMESTAMP = -1",
                   "if code == Errors.NOT_COORDINATOR: pass",
                   "class Errors:\n    NOT_COORDINATOR = 16",
                   "class ApiKey:\n    METADATA = 3",
                   "class AclOperation:\n    DESCRIBE_CONFIGS = 10",
                   "raise KafkaError(Errors.TOPIC_AUTHORIZATION_FAILED, 'x')",
                   "raise ValueError(3)",
                   "def f(message='', error_code=None, retries=3): pass",
                   "def f(code=0): pass",
                   "def f(error_code=CoreErrorCodes.ILLEGAL_SASL_STATE): pass"):
        assert not bare_numbers(sample), sample


def test_core_error_codes_are_kafkas():
    # kchannel.errors sits below the protocol layer, so the codes its
    # exceptions default to are named there (CoreErrorCodes): each must be
    # the Errors member of that name.
    from kchannel.errors import (CoreErrorCodes, IllegalSaslStateError,
                                 SaslAuthenticationError, UnsupportedSaslMechanismError)
    names = [n for n in vars(CoreErrorCodes) if not n.startswith("_")]
    assert names
    for name in names:
        assert getattr(CoreErrorCodes, name) == int(Errors[name]), name
    assert SaslAuthenticationError("x").error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert IllegalSaslStateError("x").error_code == Errors.ILLEGAL_SASL_STATE
    assert UnsupportedSaslMechanismError("x").error_code == Errors.UNSUPPORTED_SASL_MECHANISM


# The error sets kchannel.protocol.errors defines once for every layer.
_SHARED_SETS = ("RETRIABLE_ERRORS", "INVALID_METADATA_ERRORS", "COORDINATOR_ERRORS",
                "COORDINATOR_MOVED_ERRORS")


def written_error_sets(source, path="<string>"):
    """``[(path:line, frozenset)]``: each set, frozenset, tuple or list literal
    of two or more ``Errors.X`` members in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        # (frozenset((Errors.A, Errors.B)) is found as its tuple)
        if not isinstance(node, (ast.Set, ast.Tuple, ast.List)) or len(node.elts) < 2:
            continue
        members = [e.attr for e in node.elts if isinstance(e, ast.Attribute)
                   and isinstance(e.value, ast.Name) and e.value.id == "Errors"
                   and e.attr in Errors.__members__]
        if len(members) == len(node.elts):
            found.append((f"{path}:{node.lineno}", frozenset(Errors[m] for m in members)))
    return found


def test_shared_error_sets_are_not_written_again():
    # A set of error codes that equals one kchannel.protocol.errors shares
    # (the retriable codes, the coordinator's) is written there only: a
    # second copy drifts when one is corrected (Kafka adds a retriable code).
    from kchannel.protocol import errors as protocol_errors
    shared = {getattr(protocol_errors, n): n for n in _SHARED_SETS}
    own = os.path.join(PACKAGE, "protocol", "errors.py")
    copies = []
    for dirpath, _dirs, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(dirpath, name)
            if not name.endswith(".py") or path == own:
                continue
            with open(path, encoding="utf-8") as f:
                for where, codes in written_error_sets(f.read(), os.path.relpath(path, ROOT)):
                    if codes in shared:
                        copies.append(f"{where}: {shared[codes]}")
    assert not copies, ("import the set from kchannel.protocol.errors:\n" + "\n".join(copies))


def test_the_error_set_scan_finds_copies():
    sample = ("_MOVED = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})\n"
              "if code in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE): pass\n"
              "ONE = frozenset({Errors.NOT_COORDINATOR})\n")
    moved = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})
    assert [codes for _, codes in written_error_sets(sample)] == [moved, moved]



def _enum_classes():
    """{class name: [(module path, member names)]} for every ``enum`` class
    defined in kchannel/."""
    found = {}
    for dirpath, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                        (isinstance(b, ast.Attribute) and b.attr.endswith("Enum"))
                        or (isinstance(b, ast.Name) and b.id.endswith("Enum"))
                        for b in node.bases):
                    members = frozenset(t.id for stmt in node.body if isinstance(stmt, ast.Assign)
                                        for t in stmt.targets if isinstance(t, ast.Name))
                    found.setdefault(node.name, []).append((os.path.relpath(path, ROOT), members))
    return found


def _copied_enums(found):
    """Pairs of enums of one name where one's members are all the other's: a
    vocabulary written twice (Kafka's own ``State`` enums of different classes,
    SslTransportLayer's and ChannelState's, share a name but not their states)."""
    copies = []
    for name, defs in found.items():
        for i, (path_a, members_a) in enumerate(defs):
            for path_b, members_b in defs[i + 1:]:
                if members_a <= members_b or members_b <= members_a:
                    copies.append((name, path_a, path_b))
    return copies


def test_each_state_vocabulary_is_one_enum():
    # Two SaslState enums once lived side by side (issue 21): a vocabulary of
    # states is written once, in one enum.
    found = _enum_classes()
    assert "SaslState" in found, "the scan no longer finds the SASL state enum"
    assert not _copied_enums(found), _copied_enums(found)


def test_the_enum_scan_finds_a_copy():
    sasl = _enum_classes()["SaslState"][0]
    planted = {"SaslState": [sasl, ("kchannel/planted.py", sasl[1] | {"EXTRA"})]}
    assert _copied_enums(planted) == [("SaslState", sasl[0], "kchannel/planted.py")]
