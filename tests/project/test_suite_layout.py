"""The test suite's own structure: test modules live in one folder per layer
(``tests/<layer>/``, each a package), never directly in ``tests/``; helpers
shared between test modules live in ``tests/fixtures/``, never in a collected
``test_*`` module (importing one from another runs its module-level set-up
twice and hides the helper); in a layer folder each subject has one module or
one family ``test_[<layer>_]<subject>_<aspect>.py`` (``naming_problems``)."""
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


# -- one file per subject ------------------------------------------------------------------

# Kafka names written with an underscore that are one word of a module name
# (``kafka-broker-api-versions`` is about the ApiVersions API, not about
# ``--version``).
COMPOUND_WORDS = ("api_versions",)


def _words(layer, stem):
    """(whether the name starts with the layer word, [words after it]) of the
    module ``test_<stem>.py`` in ``tests/<layer>/``: compound words joined,
    each word singular (a trailing ``s`` dropped from words of 4+ letters)."""
    for compound in COMPOUND_WORDS:
        stem = stem.replace(compound, compound.replace("_", ""))
    words = stem.split("_")
    prefixed = len(words) > 1 and words[0] == layer
    if prefixed:
        words = words[1:]
    return prefixed, [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words]


def naming_problems(layer, module_names):
    """What breaks the one-file-per-subject rule among ``module_names``
    (``test_*.py`` files of the folder ``tests/<layer>/``).

    The rule: a module is named ``test_[<layer>_]<subject>[_<aspect>...].py``.
    Its *subject* is the first word after ``test_`` and the optional layer
    word (words compare singular, see ``_words``); the folder's modules of
    one subject are that subject's *family* (``test_scram.py``,
    ``test_scram_store.py``).  Then:

    1. no module has another family's subject among its later words (a
       subject tested under two prefixes: ``test_sasl_scram.py`` beside
       ``test_scram_store.py``, ``test_kafka_reauth.py`` beside
       ``test_reauth.py``);
    2. the layer word, when a module's name has it, comes first
       (``test_cli_serve.py``, not ``test_serve_cli.py``);
    3. one family is named one way: all of its modules with the layer word
       or all without (not ``test_network_selector.py`` beside
       ``test_selector_policies.py``).
    """
    parsed = {}
    for name in module_names:
        stem = name[len("test_"):-len(".py")]
        parsed[name] = _words(layer, stem)
    families = {}
    for name, (prefixed, words) in parsed.items():
        families.setdefault(words[0], []).append(name)
    problems = []
    for name, (prefixed, words) in sorted(parsed.items()):
        for word in words[1:]:
            if word in families and word != words[0]:
                problems.append(f"tests/{layer}/{name}: '{word}' is the subject of "
                                f"{', '.join(sorted(families[word]))}; name it "
                                f"test_{layer}_{word}_<aspect>.py or test_{word}_<aspect>.py")
        if layer in words[1:]:
            problems.append(f"tests/{layer}/{name}: the layer word '{layer}' comes first "
                            f"(test_{layer}_...)")
    for subject, names in sorted(families.items()):
        if len({parsed[n][0] for n in names}) > 1:
            problems.append(f"tests/{layer}/: the family '{subject}' is named with and without "
                            f"the layer word: {', '.join(sorted(names))}")
    return problems


def test_one_family_per_subject():
    problems = []
    for layer in sorted(LAYER_FOLDERS):
        folder = os.path.join(TESTS, layer)
        if os.path.isdir(folder):
            names = sorted(n for n in os.listdir(folder)
                           if n.startswith("test_") and n.endswith(".py"))
            problems += naming_problems(layer, names)
    assert problems == [], ("each subject one module, or one family test_<subject>_<aspect>.py, "
                            "per layer folder (see naming_problems):\n" + "\n".join(problems))


def test_the_subject_rule_catches_a_subject_under_two_prefixes():
    ok = ["test_scram.py", "test_scram_store.py", "test_sasl_plain.py", "test_sasl_e2e.py",
          "test_security_tls.py", "test_security_tokens.py"]
    assert naming_problems("security", ok) == []
    # SCRAM tested under a second prefix (the example), by word or plural
    assert naming_problems("security", ok + ["test_sasl_scram_reauth.py"])
    assert naming_problems("security", ok + ["test_server_scrams.py"])
    # the layer word after the subject
    assert naming_problems("cli", ["test_cli_topics.py", "test_serve_cli.py"])
    # one family with and without the layer word
    assert naming_problems("network", ["test_network_selector.py", "test_selector_policies.py"])
    # Kafka's ApiVersions is one word: not the subject "version"
    assert naming_problems("cli", ["test_cli_version.py",
                                   "test_cli_broker_api_versions_logging.py"]) == []


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
