"""The transport and authenticator interfaces are explicit and checked.

``TransportLayer`` and ``Authenticator`` are abstract base classes declaring
everything the channel and selector use; no code probes a transport or an
authenticator with ``getattr`` (or ``try: ... except AttributeError``), nor
an authenticator the channel's ``AuthIO`` it is handed (``io``), and every
transport or authenticator class in kchannel implements its ABC.
"""
import ast
import importlib
import inspect
import os

import kchannel
from kchannel.network.authenticator import Authenticator
from kchannel.network.transport import TransportLayer
from tests.fixtures.package import parsed_modules

# The imported package (the checkout, or site-packages when the tests run
# against an installed wheel: .ci/wheels --check).
PACKAGE = os.path.dirname(os.path.abspath(kchannel.__file__))
ROOT = os.path.dirname(PACKAGE)

# Names too generic to tell a transport or authenticator probe from any other
# (``getattr(builder, "close", None)`` probes a principal builder).
_GENERIC = {"close", "read", "write", "flush", "ready", "complete", "principal",
            "socket", "fileno", "state", "mode"}
INTERFACE_NAMES = ({n for n in dir(TransportLayer) if not n.startswith("_")}
                   | {n for n in dir(Authenticator) if not n.startswith("_")}
                   | {"transport", "authenticator", "drained"}) - _GENERIC
_SUSPECT_WORDS = ("transport", "authenticator")
# What authenticators call the channel's AuthIO they are given.
_AUTH_IO = {"io", "self._io", "self.io", "auth_io"}


def _where(path, node):
    return f"{os.path.relpath(path, ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}"


def _interface_probes(path, tree):
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args):
            target = ast.unparse(node.args[0]).lower()
            name = node.args[1].value if (len(node.args) > 1 and isinstance(
                node.args[1], ast.Constant) and isinstance(node.args[1].value, str)) else None
            if any(w in target for w in _SUSPECT_WORDS) or name in INTERFACE_NAMES \
                    or target in _AUTH_IO:
                found.append(_where(path, node))
        elif isinstance(node, ast.Try):
            catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not any("AttributeError" in c for c in catches):
                continue
            body = "\n".join(ast.unparse(s) for s in node.body).lower()
            if any(w in body for w in _SUSPECT_WORDS):
                found.append(_where(path, node))
    return found


def test_no_probing_of_transports_or_authenticators():
    found = [p for _, path, tree in parsed_modules() for p in _interface_probes(path, tree)]
    assert not found, "probe the declared interface instead:\n" + "\n".join(found)


def test_the_scan_catches_probes():
    # The scan must fail on each probing form it is meant to reject.
    samples = [
        'fc = getattr(self.transport, "finish_connect", None)',
        'getter = getattr(t, "peer_subject_dn", None)',
        'x = getattr(io, "transport", None)',
        'hasattr(self._authenticator, "reauthenticate")',
        'try:\n    f = self.transport.flush\nexcept AttributeError:\n    f = None',
        'clock = getattr(io, "now", None)',
        'getattr(self._io, "listener_name", None)',
    ]
    for sample in samples:
        assert _interface_probes("kchannel/x.py", ast.parse(sample)), sample
    assert not _interface_probes("kchannel/x.py", ast.parse('getattr(builder, "close", None)'))
    assert not _interface_probes("kchannel/x.py", ast.parse('getattr(ratio, "value", None)'))


def _interface_classes():
    """(module, class name) of every class in kchannel named like a transport
    or an authenticator."""
    for _, path, tree in parsed_modules():
        module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and (
                    node.name.endswith(("TransportLayer", "Transport", "Authenticator"))):
                yield module, node.name


def test_every_transport_and_authenticator_implements_its_abc():
    classes = list(_interface_classes())
    assert len(classes) >= 6, classes
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        base = TransportLayer if "Transport" in name else Authenticator
        assert issubclass(cls, base), f"{module}.{name} does not subclass {base.__name__}"
        if cls not in (TransportLayer, Authenticator) and name != "StateMachineAuthenticator":
            assert not inspect.isabstract(cls), (
                f"{module}.{name} leaves {sorted(cls.__abstractmethods__)} unimplemented")


def test_auth_io_has_what_authenticators_use():
    # The members the authenticators use without probing.
    from kchannel.network.channel import AuthIO
    for name in ("transport", "client_address", "listener_name", "security_protocol",
                 "channel_id", "now", "max_receive_size", "set_max_receive_size",
                 "read_frame", "write_frame", "flush"):
        assert hasattr(AuthIO, name), name


def test_the_abcs_declare_what_the_channel_uses():
    assert inspect.isabstract(TransportLayer) and inspect.isabstract(Authenticator)
    assert {"ready", "handshake", "receive_into", "read_into", "read", "write",
            "has_pending_writes", "flush"} <= TransportLayer.__abstractmethods__
    assert {"authenticate", "complete", "principal"} == Authenticator.__abstractmethods__
    for name in ("write_vectored", "defer_handshake_flush", "has_bytes_buffered",
                 "finish_connect", "peer_subject_dn", "close"):
        assert hasattr(TransportLayer, name), name
