"""The test suite's own structure: helpers shared between test modules live
in ``tests/fixtures/``, never in a collected ``test_*`` module (importing one
from another runs its module-level set-up twice and hides the helper)."""
import ast
import os

TESTS = os.path.dirname(os.path.abspath(__file__))


def test_no_test_module_imports_another():
    offenders = []
    for name in sorted(os.listdir(TESTS)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        with open(os.path.join(TESTS, name), encoding="utf-8") as f:
            tree = ast.parse(f.read(), name)
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
                        module.startswith("tests") and last.startswith("test_")):
                    offenders.append(f"{name}:{node.lineno}: {module}")
    assert offenders == [], ("move the shared helpers into tests/fixtures/ and import them "
                             "from there: " + "; ".join(offenders))
