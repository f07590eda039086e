"""CI builds the environment a newcomer builds, and that environment has
what the tests need.

* ``.ci/run`` makes a new virtual environment and runs the README's own
  install and test commands in it (so a missing install step fails CI
  rather than being covered by a package an earlier run left behind);
* every third-party module the tests import comes from a package that
  ``.ci/install`` installs or that kchannel depends on (``import
  cloudpickle`` once passed only on machines that happened to have it);
* a plain ``pip install`` of the checkout, in a fresh virtual environment,
  reads and writes every compression codec against Apache Kafka (``slow``:
  a venv and a package build, about a minute);
* the missing-peer helper skips outside CI and fails under ``CI=true``.
"""
import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.fixtures.peers import PEER_MODULES, ROOT
from tests.fixtures.readme import README, snippet

CI_RUN = os.path.join(ROOT, ".ci", "run")
CI_INSTALL = os.path.join(ROOT, ".ci", "install")


def _read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _commands(text):
    """Shell lines of ``text`` (comments and blank lines dropped)."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def readme_test_command():
    setup = README[README.index("## Set-up"):README.index("## Example")]
    blocks = re.findall(r"```sh\n(.*?)```", setup, re.S)
    [command] = [b.strip() for b in blocks if ".ci/test" in b]
    return command


def test_ci_run_runs_the_readme_commands_in_a_new_venv():
    run = _commands(_read_text(CI_RUN))
    venv = next(i for i, line in enumerate(run) if line.startswith("python3 -m venv "))
    activate = next(i for i, line in enumerate(run) if line.endswith("/bin/activate\""))
    assert venv < activate
    assert any(line.startswith('rm -rf "$VENV"') for line in run[:venv])
    assert "export CI=true" in run
    # Set-up's first command, without the part that starts the broker.
    install, _ = snippet("setup").strip().rsplit("&&", 1)
    steps = [install.strip()]
    # The test command, in order; .ci/run may check the build in between.
    test_command = readme_test_command()
    steps += [p.strip() for p in test_command.split("&&")]
    joined = [part.strip() for line in run for part in line.split("&&")]
    positions = []
    for step in steps:
        # (`bash .ci/test "$@"`: .ci/run passes its arguments on)
        found = [i for i, part in enumerate(joined) if part == step or part == step + ' "$@"']
        assert found, f".ci/run does not run the README's {step!r}"
        positions.append(found[0])
    assert positions == sorted(positions) and positions[0] > activate, steps


def _installed_by_ci():
    """Distribution names (normalised) that .ci/install installs with pip,
    plus kchannel's runtime dependencies."""
    text = _read_text(CI_INSTALL).replace("\\\n", " ")
    names = set()
    for line in text.splitlines():
        m = re.search(r"-m pip install (.*)", line)
        if m:
            for word in m.group(1).split():
                word = word.strip("\"'")
                if word.startswith("-") or not word:
                    continue
                names.add(re.split(r"[<>=!\[ ]", word)[0])
    pyproject = _read_text(os.path.join(ROOT, "pyproject.toml"))
    deps = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.S | re.M).group(1)
    names |= {re.split(r"[<>=!\[ ]", d)[0] for d in re.findall(r'"([^"]+)"', deps)}
    return {_normalise(n) for n in names}


def _normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _test_imports():
    """{top-level module: [test files importing it]} over tests/."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "tests")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            tree = ast.parse(_read_text(path), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    mods = [node.module]
                else:
                    continue
                for mod in mods:
                    out.setdefault(mod.split(".")[0], []).append(os.path.relpath(path, ROOT))
    return out


def _local(module):
    """A module of this checkout (tests/, benchmarks/, tests/fuzz/)."""
    for base in ("", "tests", "benchmarks", os.path.join("tests", "fuzz")):
        stem = os.path.join(ROOT, base, module)
        if os.path.isdir(stem) or os.path.exists(stem + ".py"):
            return True
    return False


def test_every_module_the_tests_import_is_installed_by_ci():
    wanted = _installed_by_ci()
    providers = importlib.metadata.packages_distributions()
    missing = []
    for module, files in sorted(_test_imports().items()):
        if module in sys.stdlib_module_names or module == "kchannel" or _local(module):
            continue
        # Not installed here (a bare venv): the peers' table knows its package.
        dists = {_normalise(d) for d in
                 providers.get(module) or [PEER_MODULES.get(module) or module]}
        if not dists & wanted:
            missing.append(f"{module} (from {', '.join(sorted(dists)) or 'no installed package'};"
                           f" imported by {files[0]})")
    assert not missing, ".ci/install does not install: " + "; ".join(missing)


_MISSING_PEER = """
import pytest
from tests.fixtures.peers import require_module, skip_missing_peer

def test_module():
    require_module("kchannel_no_such_peer.admin", "no-such-peer")

def test_reason():
    skip_missing_peer("the Frobnicator broker is not installed")
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_peer_skips_outside_ci_and_fails_under_ci(tmp_path, ci):
    (tmp_path / "test_peer.py").write_text(_MISSING_PEER)
    env = dict(os.environ, CI=ci, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
                        "-o", "addopts=", str(tmp_path / "test_peer.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = r.stdout
    if ci:
        assert r.returncode == 1 and "2 failed" in out, out
        assert "CI=true and no-such-peer is not installed (`pip install no-such-peer`" in out
        assert "CI=true and the Frobnicator broker is not installed" in out
    else:
        assert r.returncode == 0 and "2 skipped" in out, out
        assert "no-such-peer is not installed (`pip install no-such-peer`, or .ci/install)" in out
        assert "the Frobnicator broker is not installed" in out


_CODECS = """
import os, sys, kchannel
from kchannel import Consumer, Producer
from kchannel.cli import kafka_dev
# The installed package, not the checkout.
assert not kchannel.__file__.startswith(sys.argv[2]), kchannel.__file__
assert os.path.isfile(kafka_dev.POM), kafka_dev.POM
bootstrap, topic = sys.argv[1], sys.argv[3]
codecs = ["gzip", "snappy", "lz4", "zstd"]
for codec in codecs:
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as p:
        p.send(topic, value=codec.encode() * 100).get(timeout=60)
with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
    c.assign([(topic, 0)])
    records = []
    while len(records) < len(codecs):
        records += c.poll(1.0)
for codec, r in zip(codecs, records):
    assert r.value == codec.encode() * 100, (codec, r)
    print(codec, "ok")
"""


@pytest.mark.slow
@pytest.mark.kafka
def test_a_plain_install_produces_and_consumes_every_codec(tmp_path, kafka_broker):
    """``pip install .`` in a fresh venv (compiled twins skipped to keep it
    short: the dependencies are the point), then every codec both ways."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["KCHANNEL_NO_EXTENSIONS"] = "1"
    r = subprocess.run([python, "-m", "pip", "install", "-q", ROOT], env=env,
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    # A new topic (auto-created, one partition) per run.
    topic = f"plain-install-codecs-{os.getpid()}-{tmp_path.name}"
    r = subprocess.run([python, "-c", textwrap.dedent(_CODECS), kafka_broker.bootstrap(), ROOT,
                        topic], env=env, capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["gzip", "ok", "snappy", "ok", "lz4", "ok", "zstd", "ok"]
