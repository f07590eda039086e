"""The README's Set-up as a newcomer runs it: the first command starts Apache
Kafka with ``kchannel kafka-dev``, it prints the ready line the README shows,
and the README's Producer/Consumer snippet runs unchanged against that fresh
broker over SASL_SSL (SCRAM-SHA-512, the example certificates) and prints
what the README says.

As ``tests/project/test_readme_snippets.py`` does, the README's ports become free
ones (``--plaintext-port``/``--sasl-ssl-port``/``--controller-port`` and
``localhost:9093`` in the snippet); the install part of the first command
(``pip install -e .``) is what ``.ci/run`` runs in a fresh virtual
environment, not here.  The broker is a JVM of its own (about 20 s), hence
``slow``.
"""
import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

from tests.fixtures.kafka import require_kafka
from tests.fixtures.peers import _LogPump, free_ports, subprocess_env
from tests.fixtures.readme import README, snippet

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

READY_TIMEOUT_S = 240


def first_command():
    """The Set-up's first command, split at ``&&``: (install part, the
    ``kchannel`` argv that starts the broker)."""
    setup = README[README.index("## Set-up"):]
    fence = setup.index("```sh\n")
    assert setup.index("<!-- snippet: setup -->") < fence, \
        "the Set-up's first command is not the `setup` snippet"
    parts = [p.strip() for p in snippet("setup").strip().split("&&")]
    return parts[:-1], shlex.split(parts[-1])


class DevBroker:
    def __init__(self, cwd, ports):
        self.cwd = cwd
        self.ports = ports
        self.proc = None
        self.pump = None

    def start(self):
        _, argv = first_command()
        assert argv[:2] == ["kchannel", "kafka-dev"], argv
        plaintext, sasl_ssl, controller = self.ports
        args = [sys.executable, "-m", "kchannel", *argv[1:],
                "--plaintext-port", str(plaintext), "--sasl-ssl-port", str(sasl_ssl),
                "--controller-port", str(controller)]
        self.proc = subprocess.Popen(args, cwd=self.cwd, env=subprocess_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True)
        self.pump = _LogPump(self.proc.stdout)
        ready = self.pump.wait_for(
            lambda lines: next((l for l in lines if " is ready: " in l), None),
            READY_TIMEOUT_S)
        if ready is None:
            self.stop()
            raise AssertionError(f"kchannel kafka-dev printed no ready line:\n{self.pump.text()}")
        self.ready_line = ready.rstrip("\n")
        self.jvm_pid = int(re.search(r"\(pid (\d+)\)", ready).group(1))
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.pump.join(5)
        return self.proc.returncode


def jvm_alive(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"kafka.Kafka" in f.read()
    except OSError:
        return False


def run_snippet(cwd, sasl_ssl_port):
    code = snippet("producer-consumer").replace("localhost:9093", f"localhost:{sasl_ssl_port}")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)


def test_readme_first_command_runs_the_main_job_end_to_end(tmp_path):
    require_kafka()
    install, _ = first_command()
    # The install part installs this checkout (run by .ci/run in a fresh venv).
    assert install == ["pip install -e ."], install
    ports = free_ports(3)
    broker = DevBroker(str(tmp_path), ports).start()
    try:
        # The ready line is the README's, with this run's pid, ports and path.
        client_properties = tmp_path / "kafka-dev" / "client.properties"
        shown = snippet("setup-output").strip()
        expected = (re.escape(shown)
                    .replace("4242", r"\d+")
                    .replace("9092", str(ports[0])).replace("9093", str(ports[1]))
                    .replace(re.escape("/home/me/kchannel/kafka-dev/client.properties"),
                             re.escape(str(client_properties))))
        assert re.fullmatch(expected, broker.ready_line), (shown, broker.ready_line)
        assert client_properties.is_file()

        # The snippet, unchanged but for the port, prints what the README shows.
        first = run_snippet(tmp_path, ports[1])
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines() == snippet("producer-consumer-output").splitlines()
        # Each run writes one more record; the group reads on from its commit.
        second = run_snippet(tmp_path, ports[1])
        assert second.returncode == 0, second.stderr
        assert second.stdout.splitlines() == [
            "written to orders 0 1", "1 b'order-17' b'{\"total\": 42}' [('source', b'web')]"]

        # Ctrl-C stops the broker: exit 0, no JVM left.
        assert broker.stop(signal.SIGINT) == 0, broker.pump.text()
        assert "Apache Kafka stopped" in broker.pump.text()
        assert not jvm_alive(broker.jvm_pid)

        # The directory is kept: a second start reuses storage and
        # certificates, and the records are still there.
        ca = (tmp_path / "kafka-dev" / "certs" / "ca.pem").read_bytes()
        broker = DevBroker(str(tmp_path), ports).start()
        assert (tmp_path / "kafka-dev" / "certs" / "ca.pem").read_bytes() == ca
        third = run_snippet(tmp_path, ports[1])
        assert third.returncode == 0, third.stderr
        assert third.stdout.splitlines()[0] == "written to orders 0 2"
        assert broker.stop(signal.SIGTERM) == 0, broker.pump.text()
        assert not jvm_alive(broker.jvm_pid)
    finally:
        broker.stop(signal.SIGKILL if broker.proc.poll() is None else signal.SIGTERM)
        if jvm_alive(broker.jvm_pid):
            os.kill(broker.jvm_pid, signal.SIGKILL)
