"""The command-line tools on a newcomer's first runs (issue 22).

* An unreachable broker ends every tool: ``console-consumer --timeout-ms``
  and ``consumer-perf-test --timeout`` bound the whole wait, connected or
  not, and end as Kafka's tools do after their timeout (Kafka's
  ConsoleConsumer logs ``TimeoutException`` and "Processed a total of 0
  messages" and exits 0, in about 4 s for ``--timeout-ms 5000``, JVM start
  included); the others exit 1 with one clear line.  Before, the console
  consumer never exited (killed at 150 s).
* The tools log WARN by default, as Kafka's (no ``Closing the Kafka producer
  with timeoutMillis = ...`` INFO line); ``--log-level`` changes it, before
  or after the subcommand.
"""
import subprocess
import sys
import time

import pytest

from tests.fixtures.peers import ROOT, free_port, subprocess_env
from tests.fixtures.records import topic_name

pytestmark = pytest.mark.interop

KAFKA_TIMEOUT_LINES = [
    "org.apache.kafka.common.errors.TimeoutException", "Processed a total of 0 messages"]


def spawn(*args, stdin=""):
    proc = subprocess.Popen([sys.executable, "-m", "kchannel", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(), cwd=ROOT)
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None       # (written and closed: communicate() leaves it alone)
    return proc


def finish(proc, timeout=60):
    """(exit status, stdout, stderr), failing the test if the tool hangs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"{proc.args[3:]} still running after {timeout} s")
    return proc.returncode, out, err


def test_tools_end_when_the_broker_is_unreachable():
    bootstrap = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    timing_out = {
        "console-consumer (group)": spawn(
            "console-consumer", "--bootstrap-server", bootstrap, "--topic", "t",
            "--timeout-ms", "2000"),
        "console-consumer (partition)": spawn(
            "console-consumer", "--bootstrap-server", bootstrap, "--topic", "t",
            "--partition", "0", "--offset", "earliest", "--timeout-ms", "2000"),
        "consumer-perf-test": spawn(
            "consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", "t",
            "--messages", "10", "--timeout", "2000"),
    }
    failing = {
        "console-producer": spawn(
            "console-producer", "--bootstrap-server", bootstrap, "--topic", "t",
            "--max-block-ms", "2000", stdin="one\n"),
        "producer-perf-test": spawn(
            "producer-perf-test", "--bootstrap-server", bootstrap, "--topic", "t",
            "--num-records", "1", "--record-size", "10", "--throughput", "-1",
            "--producer-props", "max.block.ms=2000"),
        "topics": spawn("topics", "--bootstrap-server", bootstrap, "--list"),
        "broker-api-versions": spawn("broker-api-versions", "--bootstrap-server", bootstrap),
    }
    for name, proc in timing_out.items():
        code, out, err = finish(proc)
        assert code == 0, (name, err)
        if name.startswith("console-consumer"):
            assert err.splitlines()[-2:] == KAFKA_TIMEOUT_LINES, (name, err)
            assert out == ""
        else:
            assert err.splitlines() == [
                "WARNING: Exiting before consuming the expected number of messages: timeout "
                "(2000 ms) exceeded. You can use the --timeout option to increase the timeout."]
            assert out.splitlines()[1].split(", ")[4] == "0"    # data.consumed.in.nMsg
    for name, proc in failing.items():
        code, out, err = finish(proc)
        assert code == 1, (name, err)
        lines = err.splitlines()
        assert len(lines) == 1, (name, err)
        assert "Connection refused" in lines[0] or \
            "Topic t not present in metadata after 2000 ms." in lines[0], (name, err)
    # All ran side by side: the slowest of them bounds this.
    assert time.monotonic() - started < 60


def produce_one(bootstrap, before=(), after=()):
    """console-producer of one line, with ``before``/``after`` the
    subcommand's name as extra arguments."""
    return finish(spawn(*before, "console-producer", "--bootstrap-server", bootstrap,
                        "--topic", topic_name("cli-log"), *after, stdin="one\n"))


CLOSING = ("INFO kchannel.producer: Closing the Kafka producer with timeoutMillis = "
           "9223372036854775807 ms.")


@pytest.mark.kafka
def test_tools_log_warn_by_default(kafka_broker):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    code, out, err = produce_one(bootstrap)
    assert code == 0 and out == "", err
    assert " INFO " not in err and "Closing the Kafka producer" not in err, err
    for before, after in ((("--log-level", "INFO"), ()), ((), ("--log-level", "info"))):
        code, out, err = produce_one(bootstrap, before, after)
        assert code == 0, err
        assert CLOSING in err, (before, after, err)


def test_log_level_usage_error():
    code, out, err = finish(spawn("console-consumer", "--log-level", "LOUD"))
    assert code == 2
    assert "argument --log-level: invalid level 'LOUD'" in err
