"""examples/listeners/ works as written: its certificate script, the SCRAM
user created offline, ``kchannel serve`` with its server.properties and
``kchannel broker-api-versions`` with each listener's client properties
(only the ports are moved, to free ones, with ``--override``)."""
import os
import shutil
import subprocess

import pytest

from tests.fixtures.peers import ROOT, free_ports, start_kchannel_server, subprocess_env

pytestmark = [pytest.mark.slow]

EXAMPLES = os.path.join(ROOT, "examples")
LISTENERS = ("INTERNAL", "EXTERNAL", "REPLICATION")


def _kchannel(cwd, *args):
    import sys
    return subprocess.run([sys.executable, "-m", "kchannel", *args], capture_output=True,
                          text=True, env=subprocess_env(), cwd=cwd, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def example_tree(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    root = tmp_path_factory.mktemp("examples-copy")
    shutil.copytree(EXAMPLES, root / "examples",
                    ignore=shutil.ignore_patterns("certs", "__pycache__"))
    r = subprocess.run([str(root / "examples" / "listeners" / "make-certs.sh")],
                       capture_output=True, text=True, cwd=root, timeout=120)
    assert r.returncode == 0, r.stderr
    return root


def test_example_three_listeners(example_tree, tmp_path):
    root = str(example_tree)
    config = os.path.join(root, "examples", "listeners", "server.properties")
    with open(config, encoding="utf-8") as f:
        text = f.read()
    # The example as written is valid.
    r = _kchannel(root, "config", "validate", "--config", "examples/listeners/server.properties")
    assert r.returncode == 0, r.stdout + r.stderr
    # Move the data directory and ports into the test's sandbox.
    ports = dict(zip(LISTENERS, free_ports(3)))
    text = text.replace("log.dirs=/tmp/kchannel-example-listeners-data",
                        f"log.dirs={tmp_path / 'data'}")
    for name, default in zip(LISTENERS, (9192, 9193, 9194)):
        text = text.replace(f":{default}", f":{ports[name]}")
    with open(config, "w", encoding="utf-8") as f:
        f.write(text)
    r = _kchannel(root, "configs", "--server-config", "examples/listeners/server.properties",
                  "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-scram]",
                  "--entity-type", "users", "--entity-name", "alice")
    assert r.returncode == 0 and "Completed updating config for user alice." in r.stdout, r.stderr
    from kchannel.config import load_properties
    props = dict(load_properties(config))
    serve = start_kchannel_server(root, props)
    try:
        # start_kchannel_server wrote its own copy next to the examples dir
        # and runs from there: relative paths resolve as in the example.
        hosts = {"INTERNAL": "localhost", "EXTERNAL": "127.0.0.1", "REPLICATION": "localhost"}
        for name in LISTENERS:
            r = _kchannel(root, "broker-api-versions", "--bootstrap-server",
                          f"{hosts[name]}:{ports[name]}", "--command-config",
                          f"examples/listeners/client-{name.lower()}.properties")
            assert r.returncode == 0, (name, r.stdout, r.stderr)
            # Each listener's Metadata gives its own advertised address.
            assert r.stdout.startswith(f"{hosts[name]}:{ports[name]} (id: 1 rack: null"), r.stdout
            assert "DescribeCluster(60): 0 to 1 [usable: 1]" in r.stdout, r.stdout
    finally:
        serve.stop_and_check()
