"""``kchannel --version`` and ``kchannel COMMAND --version`` (subprocess)."""
import os
import subprocess
import sys

import kchannel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "kchannel", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=60)


def test_top_level_version_exits_0():
    r = run("--version")
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, kchannel.__version__, "")


def test_subcommand_version_is_kept():
    r = run("broker-api-versions", "--version")
    assert (r.returncode, r.stdout.strip()) == (0, kchannel.__version__)


def test_no_command_is_still_a_usage_error():
    r = run()
    assert r.returncode == 2
    assert "COMMAND" in r.stderr
