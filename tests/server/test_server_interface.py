"""What the server-side modules use of a Server is explicit and checked.

``kchannel.server.interface.BrokerServer`` lists it; a Server has every
member; the modules that take a server (the handlers, the broker assembly,
the cluster view, the token and SCRAM APIs, the SASL channel builder and the
token store opener) use those members directly: no ``getattr``/``hasattr``
with a fixed name (or ``try: ... except AttributeError``) probes a server,
its configuration or a request context.
"""
import ast
import os

import kchannel
from kchannel.server import Server
from kchannel.server.interface import BrokerServer

PACKAGE = os.path.dirname(os.path.abspath(kchannel.__file__))
ROOT = os.path.dirname(PACKAGE)

# The modules that take a server, its ServerConfig or a request context.
# The gateway (server/gateway.py) is scanned by the package-wide rule only.
SERVER_SIDE = sorted(
    [os.path.join("server", n) for n in os.listdir(os.path.join(PACKAGE, "server"))
     if n.endswith(".py") and not n.startswith("gateway")]
    + [os.path.join("security", "sasl", "channel_builder.py"),
       os.path.join("tokens", "__init__.py")])
# Probes that are not of a server: whether the platform has SO_REUSEPORT.
ALLOWED = {"hasattr(socket, 'SO_REUSEPORT')"}
# Anywhere in the package: a probe whose target is one of these names.
SERVER_TARGETS = {"server", "self.server", "ctx.server", "self._server", "ctx",
                  "server_or_config", "server_config", "self._server_config"}
# In the server-side modules, a try/except AttributeError reading these.
CONFIG_TARGETS = {"config", "self.config", "server.config", "sc"}


def _source(rel):
    with open(os.path.join(PACKAGE, rel), encoding="utf-8") as f:
        return f.read()


def _parse(rel):
    return ast.parse(_source(rel), os.path.join(PACKAGE, rel))


def _probes(rel, tree, strict):
    """``file:line: code`` of each probe in ``tree``; ``strict``: every
    probe by a fixed name, else only those of a server-like target."""
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            code = ast.unparse(node)
            fixed = isinstance(node.args[1], ast.Constant)
            target = ast.unparse(node.args[0])
            if (strict and fixed and code not in ALLOWED) or target in SERVER_TARGETS:
                found.append(f"kchannel/{rel}:{node.lineno}: {code[:100]}")
        elif isinstance(node, ast.Try):
            # Reading a member of a server, a config or a context and
            # catching AttributeError is a probe too.
            catches = any(h.type is not None and "AttributeError" in ast.unparse(h.type)
                          for h in node.handlers)
            reads = {ast.unparse(n.value) for s in node.body for n in ast.walk(s)
                     if isinstance(n, ast.Attribute)}
            if catches and reads & (SERVER_TARGETS | CONFIG_TARGETS):
                found.append(f"kchannel/{rel}:{node.lineno}: try ... except AttributeError")
    return found


def test_a_server_has_every_member_of_the_interface():
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    try:
        members = [n for n in BrokerServer.__annotations__] + [
            n for n, v in vars(BrokerServer).items() if callable(v) and not n.startswith("_")]
        assert {"config", "cluster_view", "time", "register_handler"} <= set(members)
        missing = [n for n in members if not hasattr(server, n)]
        assert missing == [], f"Server lacks {missing} of BrokerServer"
        assert isinstance(server, BrokerServer)
        assert server.cluster_view is not None      # the built-in cluster handlers set it
    finally:
        server.shutdown()


def test_server_side_modules_do_not_probe():
    assert len(SERVER_SIDE) >= 10, SERVER_SIDE
    found = [p for rel in SERVER_SIDE for p in _probes(rel, _parse(rel), strict=True)]
    assert not found, "use the declared interface (BrokerServer, ServerConfig) instead:\n" + \
        "\n".join(found)


def test_nothing_in_the_package_probes_a_server():
    found = []
    for dirpath, _dirs, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), PACKAGE)
                source = _source(rel)
                # (only a module that probes at all is parsed)
                if "getattr(" in source or "hasattr(" in source or "AttributeError" in source:
                    found += _probes(rel, ast.parse(source, rel), strict=False)
    assert not found, "use the declared interface (BrokerServer) instead:\n" + "\n".join(found)


def test_the_scan_catches_probes():
    for sample in ('getattr(server, "config", None)', 'hasattr(config, "get")',
                   'getattr(ctx, "principal", None)', 'getattr(listener, "channel_builder")',
                   'try:\n    t = server.time\nexcept AttributeError:\n    t = None'):
        assert _probes("server/x.py", ast.parse(sample), strict=True), sample
    assert _probes("cli/x.py", ast.parse('getattr(server, "cluster_view", None)'), strict=False)
    assert not _probes("cli/x.py", ast.parse('getattr(args, "topic", None)'), strict=False)
    assert not _probes("server/x.py", ast.parse("getattr(self, k)"), strict=True)
    assert not _probes("server/x.py", ast.parse(
        "try:\n    h = sock.getsockname()[0]\nexcept AttributeError:\n    h = None"), strict=True)
    assert not _probes("server/workers.py", ast.parse('hasattr(socket, "SO_REUSEPORT")'),
                       strict=True)
