"""``kchannel --version`` and ``kchannel COMMAND --version`` (subprocess)."""

import kchannel
from tests.fixtures.peers import run_kchannel


def test_top_level_version_exits_0():
    r = run_kchannel("--version")
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, kchannel.__version__, "")


def test_subcommand_version_is_kept():
    r = run_kchannel("broker-api-versions", "--version")
    assert (r.returncode, r.stdout.strip()) == (0, kchannel.__version__)


def test_no_command_is_still_a_usage_error():
    r = run_kchannel()
    assert r.returncode == 2
    assert "COMMAND" in r.stderr
