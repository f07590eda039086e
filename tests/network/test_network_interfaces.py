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


# -- no getattr/hasattr at all in the layers below the clients' and the servers' APIs --------

# The packages where every object a module handles has a declared type
# (ABCs, dataclasses, classes): an attribute is read, never probed.
NO_PROBE_LAYERS = ("kchannel/network/", "kchannel/security/", "kchannel/server/",
                   "kchannel/client/")

# The probes left, each with why it is not an interface probe: (file, the
# call as ast.unparse writes it) -> reason.  An entry that no longer
# matches a call fails the test below (a stale allowance would hide a new
# probe of the same text).
ALLOWED_PROBES = {
    # The platform: stdlib modules whose members depend on the OS.
    ("kchannel/network/_netloop_py.py", "getattr(select, 'EPOLLIN', 0)"):
        "select.EPOLLIN exists on Linux only (the poll loop runs elsewhere too)",
    ("kchannel/network/_netloop_py.py", "getattr(select, 'EPOLLOUT', 0)"):
        "select.EPOLLOUT exists on Linux only",
    ("kchannel/network/ssl_factory.py", "getattr(os, 'memfd_create', None)"):
        "os.memfd_create exists on Linux only (keystores are written to a file elsewhere)",
    ("kchannel/network/ssl_factory.py", "getattr(os, 'MFD_CLOEXEC', 0)"):
        "os.MFD_CLOEXEC exists on Linux only",
    ("kchannel/server/workers.py", "hasattr(socket, 'SO_REUSEPORT')"):
        "socket.SO_REUSEPORT is missing on some platforms (one worker process then)",
    # Objects of other libraries or of Python itself.
    ("kchannel/network/_netpass_py.py", "getattr(exc, 'errno', None)"):
        "any exception a socket call raises: not every one has errno",
    ("kchannel/network/ssl_principal.py", "getattr(attr, '_type', None)"):
        "cryptography's x509 NameAttribute: the ASN.1 string tag is private there and "
        "absent from some versions",
    ("kchannel/network/ssl_principal.py", "getattr(tag_obj, 'value', tag_obj)"):
        "the tag above: an enum member in cryptography, or a plain value",
    ("kchannel/network/authenticator.py", "getattr(current, 'name', current)"):
        "an error message naming a state: an enum member, or the plain value a subclass uses",
    ("kchannel/network/authenticator.py", "getattr(state, 'name', state)"):
        "as above, the state asked for",
    ("kchannel/server/handlers.py", "getattr(self, k)"):
        "repr/eq over the class's own field names (_FIELDS), not a probe",
    ("kchannel/server/handlers.py", "getattr(other, k)"):
        "eq over the same fields of an instance of the same class",
    ("kchannel/security/sasl/oauthbearer/mechanism.py",
     "getattr(importlib.import_module(module_name), cls_name)"):
        "loads the class a config names (module.Name), as Kafka's Class.forName",
    # User plugins named by a config: Kafka's optional Configurable/Closeable
    # and optional hooks; a plugin need not subclass anything of kchannel.
    ("kchannel/security/sasl/oauthbearer/mechanism.py", "hasattr(handler, 'configure')"):
        "sasl.*.callback.handler.class plugin: configure() optional (Kafka's Configurable)",
    ("kchannel/security/sasl/oauthbearer/mechanism.py", "hasattr(self._provider, 'extensions')"):
        "sasl.login.callback.handler.class token provider: SASL extensions optional "
        "(Kafka's SaslExtensionsCallback is optional for a login handler)",
    ("kchannel/security/sasl/oauthbearer/mechanism.py",
     "getattr(self._validator, 'validate_extensions', None)"):
        "sasl.server.callback.handler.class validator: extension support optional "
        "(Kafka's OAuthBearerExtensionsValidatorCallback: unsupported means none kept)",
    ("kchannel/security/sasl/server_authenticator.py",
     "getattr(self._principal_builder, 'close', None)"):
        "principal.builder.class plugin: close() optional (Kafka's Closeable)",
    ("kchannel/server/gateway.py", "hasattr(authorizer, 'configure')"):
        "kchannel.gateway.authorizer.class plugin: configure() optional (Kafka's Configurable)",
    # A value the application hands over as it likes.
    ("kchannel/client/group_metadata.py", "getattr(group_metadata, 'group_id', None)"):
        "send_offsets_to_transaction's argument as the application gives it (Kafka's "
        "message for anything without a group id)",
    ("kchannel/client/network_client.py", "getattr(decode, 'body_decoder', None)"):
        "a response decoder function: the generated ones carry their body decoder as a "
        "function attribute, a hand-written one has none",
}


def _probes_in(rel, tree):
    """[(call text, line)] of every getattr/hasattr call in ``tree``."""
    return [(ast.unparse(node), node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")]


def _layer_probes():
    out = []
    for _, path, tree in parsed_modules():
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        if rel.startswith(NO_PROBE_LAYERS):
            out += [(rel, text, line) for text, line in _probes_in(rel, tree)]
    return out


def test_no_getattr_in_network_security_server_client_but_the_allowed():
    found = _layer_probes()
    unexplained = [f"{rel}:{line}: {text}" for rel, text, line in found
                   if (rel, text) not in ALLOWED_PROBES]
    assert not unexplained, (
        "getattr/hasattr in a layer where every object has a declared interface: read the "
        "attribute the interface declares (or add it to the ABC/dataclass), or add the call "
        "to ALLOWED_PROBES saying why it is no interface probe:\n" + "\n".join(unexplained))
    stale = sorted(set(ALLOWED_PROBES) - {(rel, text) for rel, text, _ in found})
    assert not stale, f"ALLOWED_PROBES entries that match no call any more: {stale}"


def test_the_layer_scan_catches_a_new_probe():
    tree = ast.parse('w = getattr(os_selector, "wakeup", None)\nhasattr(store, "version")')
    assert [t for t, _ in _probes_in("kchannel/network/x.py", tree)] == [
        "getattr(os_selector, 'wakeup', None)", "hasattr(store, 'version')"]
    assert all((("kchannel/network/selector.py", t) not in ALLOWED_PROBES)
               for t, _ in _probes_in("kchannel/network/x.py", tree))


def test_a_loop_driven_os_selector_is_told_by_its_type():
    # The aio selector's own wake-up replaces the pipe because it is a
    # LoopDrivenSelector, not because it has a ``wakeup`` attribute.
    import selectors
    from kchannel.network.selector import Selector
    from kchannel.network.wakeup import LoopDrivenSelector

    class _Driven(LoopDrivenSelector):
        woken = 0

        def register(self, fileobj, events, data=None):
            raise AssertionError("no wake-up pipe is registered with a loop-driven selector")

        def unregister(self, fileobj):
            pass

        def select(self, timeout=None):
            return []

        def get_map(self):
            return {}

        def wakeup(self):
            self.woken += 1

    driven = _Driven()
    sel = Selector(os_selector=driven)
    try:
        assert sel._os.waker is None
        sel.wakeup()
        assert driven.woken == 1
    finally:
        sel.close()

    class _Plain(selectors.DefaultSelector):
        def wakeup(self):        # a method of that name is no declaration
            raise AssertionError("called")

    plain = _Plain()
    sel = Selector(os_selector=plain)
    try:
        assert sel._os.waker is not None
        sel.wakeup()             # the pipe
    finally:
        sel.close()


def test_request_authorizer_declares_the_acl_version_the_gateway_reads():
    from kchannel.security.authorizer.requests import RequestAuthorizer
    from kchannel.security.authorizer.standard import StandardAuthorizer
    from kchannel.security.authorizer.store import InMemoryAclStore
    store = InMemoryAclStore()
    ra = RequestAuthorizer(StandardAuthorizer(store))
    before = ra.acl_version()
    store.add([])            # what creating ACLs in any process does to the counter
    assert ra.acl_version() == before + 1 == store.version()
