"""The package's layers point one way, and no two modules import each other.

Every module's imports are read with ``ast`` (module level and inside
functions alike: an import moved into a function to dodge a cycle is still a
dependency).  Layers, bottom to top (README, "Architecture")::

    core      kchannel, _impl, _twin_protocols, errors, utils, log, principal,
              framing, metrics (its twin _metrics_py, metrics_base), metrics_export
    protocol  kchannel.protocol.*          config  kchannel.config.*
    network   kchannel.network.*
    security  kchannel.security.*
    tokens    kchannel.tokens.*
    client    kchannel.client.*
    producer  kchannel.producer.*          consumer  kchannel.consumer.*
    server    kchannel.server.*
    aio       kchannel.aio.*  (same rank as server; neither imports the other)
    spark     kchannel.spark.*
    cli       kchannel.cli.*, kchannel.__main__

A module may import its own layer and any lower one; protocol and config
share a rank and do not import each other, as do producer and consumer.  Names looked up at run time
(``importlib.import_module`` in the SASL mechanism registry and the twin
loader) are not imports of the importing module and are not checked here.
"""
import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

import kchannel
from tests.fixtures.package import package_modules

PACKAGE_DIR = os.path.dirname(kchannel.__file__)
ROOT = os.path.dirname(PACKAGE_DIR)

# (layer, rank, module-name prefixes).  The longest matching prefix wins.
LAYERS = [
    ("core", 0, ("kchannel", "kchannel._impl", "kchannel.errors", "kchannel.utils",
                 "kchannel.log", "kchannel.principal", "kchannel.framing",
                 "kchannel._framing_py", "kchannel._twin_protocols", "kchannel.metrics",
                 "kchannel._metrics_py", "kchannel.metrics_base", "kchannel.metrics_export")),
    ("protocol", 1, ("kchannel.protocol",)),
    ("config", 1, ("kchannel.config",)),
    ("network", 2, ("kchannel.network",)),
    ("security", 3, ("kchannel.security",)),
    ("tokens", 4, ("kchannel.tokens",)),
    ("client", 5, ("kchannel.client",)),
    ("producer", 6, ("kchannel.producer",)),
    ("consumer", 6, ("kchannel.consumer",)),
    ("server", 7, ("kchannel.server",)),
    ("aio", 7, ("kchannel.aio",)),
    ("spark", 8, ("kchannel.spark",)),
    ("cli", 9, ("kchannel.cli", "kchannel.__main__")),
]


MODULES = package_modules()


def _imports(module, path):
    """[(imported kchannel module, line)] of ``module``: ``from pkg import
    submodule`` counts as the submodule only; the implicit import of parent
    packages is not counted."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    out.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                if not is_package:
                    parts = parts[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            names = [f"{base}.{a.name}" for a in node.names]
            submodules = [n for n in names if n in MODULES]
            out.extend((n, node.lineno) for n in submodules)
            if len(submodules) < len(names) and base in MODULES:
                out.append((base, node.lineno))
    return [(target, line) for target, line in out if target != module]


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def layer_of(module):
    best = None
    for name, rank, prefixes in LAYERS:
        for prefix in prefixes:
            # "kchannel" is the package's __init__ only, not a catch-all.
            if module == prefix or (prefix != "kchannel" and module.startswith(prefix + ".")):
                if best is None or len(prefix) > len(best[2]):
                    best = (name, rank, prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best[0], best[1]


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_higher_layer():
    wrong = []
    for module, imports in sorted(GRAPH.items()):
        layer, rank = layer_of(module)
        for target, line in imports:
            target_layer, target_rank = layer_of(target)
            if target_rank > rank or (target_rank == rank and target_layer != layer):
                wrong.append(f"{MODULES[module]}:{line}: {module} ({layer}) imports "
                             f"{target} ({target_layer})")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    graph = {"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_no_import_cycles():
    graph = {m: sorted({t for t, _ in imports}) for m, imports in GRAPH.items()}
    cycles = _cycles(graph)
    assert not cycles, "modules importing each other: " + "; ".join(
        " <-> ".join(c) for c in cycles)


def _function_imports(tree):
    """Import statements inside a function body."""
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in ast.walk(func):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    yield stmt


def test_imports_inside_functions_are_optional_dependencies_with_a_reason():
    """Imports sit at module top.  One inside a function must be of another
    package (an optional dependency, or one with a measured start-up cost)
    and say why in a comment on it or just above its group of imports; a
    kchannel module there is a hidden dependency (or a hidden cycle)."""
    wrong = []
    for module, path in sorted(MODULES.items()):
        source = open(path, encoding="utf-8").read()
        lines = source.splitlines()
        for stmt in _function_imports(ast.parse(source, path)):
            names = ([a.name for a in stmt.names] if isinstance(stmt, ast.Import)
                     else ["." if stmt.level else stmt.module])
            if any(n == "." or n == "kchannel" or n.startswith("kchannel.") for n in names):
                wrong.append(f"{path}:{stmt.lineno}: kchannel import inside a function")
                continue
            row = stmt.lineno - 1
            if "#" in lines[row]:
                continue
            row -= 1
            while row >= 0 and lines[row].strip().startswith(("import ", "from ")):
                row -= 1
            if row < 0 or not lines[row].strip().startswith("#"):
                wrong.append(f"{path}:{stmt.lineno}: import inside a function without a "
                             "comment saying why")
    assert not wrong, "\n".join(wrong)


def test_no_in_package_import_error_fallbacks():
    """``except ImportError`` may only guard optional third-party packages,
    never hide a kchannel module (a cycle or a layering breach)."""
    wrong = []
    for module, path in sorted(MODULES.items()):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches = any(
                h.type is not None and "ImportError" in ast.unparse(h.type)
                for h in node.handlers)
            if not catches:
                continue
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.ImportFrom) and (
                            sub.level or (sub.module or "").startswith("kchannel")):
                        wrong.append(f"{path}:{sub.lineno}")
                    elif isinstance(sub, ast.Import) and any(
                            a.name.startswith("kchannel") for a in sub.names):
                        wrong.append(f"{path}:{sub.lineno}")
    assert not wrong, "kchannel imports guarded by except ImportError: " + ", ".join(wrong)


_ISOLATED = textwrap.dedent("""
    import importlib, os, sys
    # One forked child per module, as many at once as there are CPUs (each
    # child is independent: it imports one module into the parent's clean
    # state and exits).
    failed = []
    running = {}
    names = sys.argv[1:]
    width = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)

    def reap():
        pid, status = os.wait()
        name = running.pop(pid)
        if status:
            failed.append(name)

    for name in names:
        while len(running) >= width:
            reap()
        pid = os.fork()
        if pid == 0:
            try:
                importlib.import_module(name)
            except BaseException as exc:
                print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
                os._exit(1)
            os._exit(0)
        running[pid] = name
    while running:
        reap()
    sys.exit(1 if failed else 0)
""")


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork to import each module alone")
def test_every_module_imports_on_its_own():
    """Each module imported first, in a fresh interpreter state (a forked
    child of a process that has imported nothing of kchannel): an import
    order that only works because another module came first fails here."""
    names = sorted(m for m in MODULES if m != "kchannel.__main__")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", _ISOLATED, *names], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


# The repository (README.md, tests/) beside this test, whichever kchannel
# is imported.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _architecture():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    start = readme.index("\n## Architecture\n")
    return readme[start:readme.index("\n## ", start + 1)]


def test_readme_architecture_is_drawn_from_the_tree():
    """The README's "Architecture" names every layer of LAYERS in its
    diagram, every package of kchannel, every module of the client and
    server packages, and every folder of tests/: a package, module or test
    folder added without redrawing it fails here."""
    text = _architecture()
    diagram = text[text.index("```text"):text.index("```", text.index("```text") + 3)]
    drawn = {part.strip() for line in diagram.splitlines()[1:] if line[:1].isalpha()
             for part in line[:20].split("|")}
    missing = [f"layer {name}" for name, _rank, _prefixes in LAYERS if name not in drawn]
    for dirpath, dirnames, filenames in os.walk(PACKAGE_DIR):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        if "__init__.py" in filenames and dirpath != PACKAGE_DIR:
            rel = os.path.relpath(dirpath, os.path.dirname(PACKAGE_DIR)).replace(os.sep, "/")
            top = rel.count("/") == 1
            if (f"{rel}/" if top else f"{os.path.basename(dirpath)}/") not in text:
                missing.append(f"package {rel}")
    for package in ("client", "server"):
        for name in sorted(os.listdir(os.path.join(PACKAGE_DIR, package))):
            stem = name[:-3]
            if name.endswith(".py") and stem != "__init__" and not re.search(
                    rf"\b{stem}\b", text):
                missing.append(f"module kchannel/{package}/{name}")
    tests = os.path.join(REPO, "tests")
    for folder in sorted(os.listdir(tests)):
        if os.path.isdir(os.path.join(tests, folder)) and folder != "__pycache__" and not (
                f"`{folder}`" in text or f"`tests/{folder}`" in text):
            missing.append(f"tests/{folder}")
    assert not missing, "README \"Architecture\" does not name: " + ", ".join(missing)


def _kchannel_imports(tree, module):
    """[(imported module, names)] of the kchannel imports in ``tree`` (the
    module ``module``), relative ones resolved."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level:
                base = module.split(".")[:-node.level]
                name = ".".join(base + ([name] if name else []))
            if name == "kchannel":      # from kchannel import errors: the module
                out += [(f"kchannel.{a.name}", []) for a in node.names]
            elif name.startswith("kchannel"):
                out.append((name, sorted(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.startswith("kchannel")]
    return out


# What ``kchannel serve`` may use: the arguments are parsed here, the broker
# (handlers, stores, authorizer, gateway, workers) is the server package's
# (issue 21, What 1: a program calling kchannel.server gets what the CLI
# runs).
SERVE_CLI_MAY_IMPORT = {"kchannel.errors", "kchannel.config", "kchannel.server.workers"}


def test_kchannel_serve_only_parses_arguments():
    path = os.path.join(PACKAGE_DIR, "cli", "serve.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    imports = _kchannel_imports(tree, "kchannel.cli.serve")
    assert imports, "the scan sees the command's imports"
    extra = [(m, n) for m, n in imports
             if not any(m == ok or m.startswith(ok + ".") for ok in SERVE_CLI_MAY_IMPORT)]
    assert not extra, f"kchannel/cli/serve.py builds part of the broker itself: {extra}"
    assert ("kchannel.server.workers", ["serve"]) in imports
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
