"""The test suite's own structure: test modules live in one folder per layer
(``tests/<layer>/``, each a package), never directly in ``tests/``; helpers
shared between test modules live in ``tests/fixtures/``, never in a collected
``test_*`` module (importing one from another runs its module-level set-up
twice and hides the helper)."""
import ast
import os
import pathlib

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One folder per layer of the package (README, "Architecture"), plus core
# (the package's bottom modules) and project (the repository's own rules).
LAYER_FOLDERS = {"project", "core", "protocol", "config", "network", "security", "tokens",
                 "client", "producer", "consumer", "server", "gateway", "aio", "spark", "cli",
                 "interop"}
# Not test folders: shared helpers, fuzz targets, Java probes.
HELPER_FOLDERS = {"fixtures", "fuzz", "java"}


def _test_modules():
    """[(path relative to tests/, absolute path)] of every test module."""
    out = []
    for dirpath, dirnames, filenames in os.walk(TESTS):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.startswith("test_") and name.endswith(".py"):
                path = os.path.join(dirpath, name)
                out.append((os.path.relpath(path, TESTS), path))
    return out


def test_no_test_module_directly_in_tests():
    loose = sorted(n for n in os.listdir(TESTS) if n.startswith("test_") and n.endswith(".py"))
    assert loose == [], ("put each test module into the folder of its layer "
                         f"(tests/<layer>/): {', '.join(loose)}")


def test_test_modules_are_in_layer_folders():
    wrong = [rel for rel, _ in _test_modules()
             if os.path.dirname(rel) not in LAYER_FOLDERS]
    assert wrong == [], ("test modules outside the layer folders "
                         f"{sorted(LAYER_FOLDERS)}: {', '.join(wrong)}")


def test_folders_are_known_packages():
    folders = sorted(d for d in os.listdir(TESTS)
                     if os.path.isdir(os.path.join(TESTS, d)) and d != "__pycache__")
    unknown = [d for d in folders if d not in LAYER_FOLDERS | HELPER_FOLDERS]
    assert unknown == [], f"folders of tests/ that are neither a layer nor helpers: {unknown}"
    missing = [d for d in folders if d in LAYER_FOLDERS
               and not os.path.exists(os.path.join(TESTS, d, "__init__.py"))]
    assert missing == [], f"layer folders without __init__.py: {missing}"


def test_no_test_module_imports_another():
    offenders = []
    for rel, path in _test_modules():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                modules = [("." * node.level) + (node.module or "")]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                continue
            for module in modules:
                last = module.rsplit(".", 1)[-1]
                if module.startswith(("tests.test_", ".test_")) or (
                        module.startswith(("tests", ".")) and last.startswith("test_")):
                    offenders.append(f"{rel}:{node.lineno}: {module}")
    assert offenders == [], ("move the shared helpers into tests/fixtures/ and import them "
                             "from there: " + "; ".join(offenders))


def test_twin_independent_modules_exist():
    # The pure pass of .ci/test leaves these modules out; a stale name would
    # hide that a renamed module now runs in both passes (harmless) or, worse,
    # that the list no longer says what it claims.
    from tests.conftest import TWIN_INDEPENDENT
    root = pathlib.Path(__file__).resolve().parents[2]
    missing = sorted(p for p in TWIN_INDEPENDENT if not (root / p).is_file())
    assert not missing, missing


def test_xdist_groups_name_existing_paths_and_ci_uses_them():
    # .ci/test's parallel passes keep each module, and each group of modules
    # tests/conftest.py names, on one worker only with --dist loadfile; a
    # stale prefix would let those modules spread over workers unnoticed.
    from tests.conftest import XDIST_GROUPS
    root = pathlib.Path(__file__).resolve().parents[2]
    missing = sorted(p for p in XDIST_GROUPS if not (root / p).exists())
    assert not missing, missing
    ci_test = (root / ".ci" / "test").read_text(encoding="utf-8")
    assert "--dist loadfile" in ci_test and "--no-loadscope-reorder" in ci_test


# Helper names (module-level functions other than tests and fixtures) defined
# in more than one test module: the same helper written twice, or two
# helpers sharing a name.  Shared helpers go to tests/fixtures/, a helper
# that does something else gets a name of its own (51 such names in session
# 10, none since).
MAX_DUPLICATED_HELPER_NAMES = 0


def duplicated_helper_names():
    """{helper name: [test modules defining it]} for names defined in more
    than one module of tests/ (tests/fixtures and tests/fuzz excluded)."""
    defined = {}
    for dirpath, dirnames, filenames in os.walk(TESTS):
        dirnames[:] = sorted(d for d in dirnames
                             if d != "__pycache__" and d not in HELPER_FOLDERS)
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in tree.body:
                if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and not node.name.startswith("test")
                        and not any("fixture" in ast.unparse(d) for d in node.decorator_list)):
                    defined.setdefault(node.name, []).append(os.path.relpath(path, TESTS))
    return {name: paths for name, paths in defined.items() if len(paths) > 1}


def test_duplicated_helper_names_do_not_grow():
    dup = duplicated_helper_names()
    assert len(dup) <= MAX_DUPLICATED_HELPER_NAMES, (
        f"{len(dup)} helper names are defined in more than one test module (at most "
        f"{MAX_DUPLICATED_HELPER_NAMES}): import the shared helper from tests/fixtures/ "
        "instead of writing it again, or give a different helper its own name: "
        + "; ".join(f"{n}: {', '.join(p)}" for n, p in sorted(dup.items())))


if __name__ == "__main__":
    for name, paths in sorted(duplicated_helper_names().items()):
        print(f"{name}: {', '.join(paths)}")
    print(len(duplicated_helper_names()), "helper names defined in more than one test module")
