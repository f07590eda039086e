"""Both twins of every implementation pair honour the written contract.

``kchannel._twin_protocols`` states each pair's interface as
``typing.Protocol`` classes.  Here each twin (pure and compiled, through
the ``impl`` fixture) is held to it: the same public names, the same
constant values, and for every function and method the same parameters
(names, kinds, defaults) as ``inspect.signature`` reads them.  A
differential test then compares the two twins with each other directly, so
a name added to both twins but not to the contract fails too.
"""
import ast
import inspect
import sys
import textwrap
import typing

import pytest

from kchannel import _impl
from kchannel._twin_protocols import CONTRACTS
from tests.fixtures.signatures import (FIXED_SIGNATURE_DUNDERS, member_signature, public_members,
                                       public_names, shape)


def _contract_members(proto, of_module=False):
    """{name: "method" | "property" | "attribute" | "constant" | "class"}
    for what a protocol declares, with classes mapped to their protocol.
    A module protocol declares no dunders (Protocol gives it an __init__)."""
    members, classes = {}, {}
    for name, hint in typing.get_type_hints(proto).items():
        if typing.get_origin(hint) is type:
            members[name] = "class"
            classes[name] = typing.get_args(hint)[0]
        elif name in vars(proto):
            members[name] = "constant"
        else:
            members[name] = "attribute"
    for name, value in vars(proto).items():
        if name in members:
            continue
        if isinstance(value, property):
            members[name] = "property"
        elif isinstance(value, staticmethod):
            members[name] = "method"
        elif inspect.isfunction(value) and (
                not name.startswith("_")
                or not of_module and (name == "__init__" or name in FIXED_SIGNATURE_DUNDERS)):
            members[name] = "method"
    return members, classes


def _declared_signature(proto, name):
    """The signature ``proto`` declares for ``name``.  Python 3.10's
    Protocol replaces a protocol class's own ``__init__`` with a
    ``(*args, **kwargs)`` stub, so there the declaration is read back from
    the protocol's source (and compiled alone, in its module's namespace)."""
    func = vars(proto)[name]
    if name == "__init__" and func.__name__ != "__init__":
        tree = ast.parse(textwrap.dedent(inspect.getsource(proto)))
        node = next(n for n in tree.body[0].body
                    if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        node.body, node.decorator_list = [ast.Pass()], []
        module = ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[]))
        namespace = dict(vars(sys.modules[proto.__module__]))
        exec(compile(module, f"<contract {proto.__name__}>", "exec"), namespace)
        func = namespace["__init__"]
    return inspect.signature(func)


def _check_class(cls, proto, where):
    members, _ = _contract_members(proto)
    declared = {n for n in members if not n.startswith("_")}
    assert public_members(cls) == declared, (
        f"{where}: public members differ from the contract {proto.__name__}: "
        f"extra {sorted(public_members(cls) - declared)}, "
        f"missing {sorted(declared - public_members(cls))}")
    for name, kind in sorted(members.items()):
        static = inspect.getattr_static(cls, name)
        if kind == "method":
            assert callable(static), f"{where}.{name} is not a method"
            if name in FIXED_SIGNATURE_DUNDERS:
                continue
            want = shape(_declared_signature(proto, name))
            got = shape(member_signature(cls, name))
            assert got == want, f"{where}.{name}{got} != contract {want}"
        else:
            # A property, slot or C getset: data, not a method.
            assert not callable(static), f"{where}.{name} should be {kind}, not a method"


def _check_module(module, proto):
    members, classes = _contract_members(proto, of_module=True)
    where = module.__name__
    assert public_names(module) == set(members), (
        f"{where}: public names differ from the contract {proto.__name__}: "
        f"extra {sorted(public_names(module) - set(members))}, "
        f"missing {sorted(set(members) - public_names(module))}")
    for name, kind in sorted(members.items()):
        value = getattr(module, name)
        if kind == "constant":
            assert value == vars(proto)[name], f"{where}.{name} = {value!r}"
        elif kind == "class":
            assert isinstance(value, type), f"{where}.{name} is not a class"
            _check_class(value, classes[name], f"{where}.{name}")
        else:
            want = shape(inspect.signature(vars(proto)[name]), drop_self=True)
            got = shape(inspect.signature(value))
            assert got == want, f"{where}.{name}{got} != contract {want}"


def test_every_registered_twin_has_a_contract():
    assert set(_impl.TWINS) == set(CONTRACTS)


@pytest.mark.parametrize("twin", sorted(CONTRACTS))
def test_twin_honours_its_contract(impl, twin):
    _check_module(getattr(impl, twin), CONTRACTS[twin])


@pytest.mark.parametrize("twin", sorted(CONTRACTS))
def test_pure_and_compiled_signatures_are_equal(impl_pair, twin):
    """Every public callable and class method of one twin, compared with
    the other's by name, parameters and defaults."""
    pure, compiled = (getattr(i, twin) for i in impl_pair)
    names = public_names(pure)
    assert names == public_names(compiled)
    compared = 0
    for name in sorted(names):
        p, c = getattr(pure, name), getattr(compiled, name)
        if isinstance(p, type):
            assert public_members(p) == public_members(c), name
            for member in sorted(public_members(p) | {"__init__"}):
                ps, cs = inspect.getattr_static(p, member), inspect.getattr_static(c, member)
                assert callable(ps) == callable(cs), f"{name}.{member}"
                if callable(ps):
                    assert (shape(member_signature(p, member))
                            == shape(member_signature(c, member))), f"{name}.{member}"
                    compared += 1
        elif callable(p):
            assert shape(inspect.signature(p)) == shape(inspect.signature(c)), name
            compared += 1
        else:
            assert p == c, name
    assert compared > 0


def test_compiled_init_signature_is_read_from_the_embedded_signature(impl):
    """The helper reads a cdef class's __init__ parameters, defaults
    evaluated (not the "(self, /, *args, **kwargs)" of the C slot)."""
    pump = impl.tlspump
    sig = member_signature(pump.TlsPump, "__init__")
    assert sig.parameters["write_chunk"].default == pump.DEFAULT_WRITE_CHUNK
    assert list(sig.parameters)[:5] == ["self", "sock", "ssl_object", "incoming", "outgoing"]
