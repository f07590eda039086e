"""The error messages the README quotes are the ones kchannel really gives,
word for word (issue 22: the README said a missing server gives "Connection
refused" while the text was ``ConnectionError_: Connection failed:
ECONNREFUSED (111)``).  Each test provokes the error, formats it as a
traceback's last line does (``TypeName: message``) and looks for that text,
in backticks, in the README section that promises it (line breaks in the
README count as spaces).
"""
import pathlib
import re
import shutil

import pytest

from kchannel import Producer
from kchannel.errors import ChannelConnectionError, ConnectionError_, KafkaConnectionError
from tests.fixtures.peers import ROOT, free_port, run_kchannel

README = (pathlib.Path(ROOT) / "README.md").read_text(encoding="utf-8")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def section(title):
    """The README section under ``## title`` (up to the next ``## ``), with
    every run of white space made one space."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return " ".join(README[start:end if end >= 0 else None].split())


def assert_quoted(text, title):
    assert f"`{text}`" in section(title), \
        f"README section {title!r} does not quote the real message `{text}`"


def last_line(exc):
    return f"{type(exc).__name__}: {exc}"


def example_code():
    return re.search(r"<!-- snippet: example -->\n```python\n(.*?)```", README, re.S).group(1)


def run_example(code):
    try:
        exec(compile(code, "README:example", "exec"), {})
    except Exception as exc:  # noqa: BLE001 - the error is what is checked
        return exc
    pytest.fail("the README example ran without a server")


def test_example_outside_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # no examples/certs/ca.pem here
    assert_quoted(last_line(run_example(example_code())), "Example")


def test_example_without_a_server(tmp_path, monkeypatch, pki):
    (tmp_path / "examples" / "certs").mkdir(parents=True)
    shutil.copy(pki.ca.cert_path, tmp_path / "examples" / "certs" / "ca.pem")
    monkeypatch.chdir(tmp_path)
    exc = run_example(example_code().replace("localhost:9093", f"localhost:{free_port()}"))
    assert type(exc) is KafkaConnectionError and exc.retriable
    # The older names still catch it.
    assert isinstance(exc, ConnectionError_) and isinstance(exc, ChannelConnectionError)
    assert_quoted(last_line(exc), "Example")


def test_producer_refused_login(kchannel_inprocess_server):
    server = kchannel_inprocess_server({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_alice="alice-secret";'})
    producer = Producer({
        "bootstrap.servers": server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="wrong";'})
    try:
        with pytest.raises(Exception) as info:
            producer.send("t", b"value")
    finally:
        producer.close(0)
    assert_quoted(last_line(info.value), "Producer and consumer")


def test_command_line_tools_on_an_unreachable_broker():
    bootstrap = f"127.0.0.1:{free_port()}"
    r = run_kchannel("console-consumer", "--bootstrap-server", bootstrap, "--topic", "t",
                     "--timeout-ms", "500")
    assert r.returncode == 0, r.stderr
    for line in r.stderr.splitlines()[-2:]:
        assert_quoted(line, "Command-line tools")
    # The README quotes the default --max-block-ms (60 s); 1 s here.
    r = run_kchannel("console-producer", "--bootstrap-server", bootstrap, "--topic", "t",
                     "--max-block-ms", "1000", stdin="one\n")
    assert r.returncode == 1, r.stderr
    (line,) = r.stderr.splitlines()
    assert "after 1000 ms." in line
    assert_quoted(line.replace("after 1000 ms.", "after 60000 ms."), "Command-line tools")
    r = run_kchannel("topics", "--bootstrap-server", bootstrap, "--list")
    assert r.returncode == 1
    (line,) = r.stderr.splitlines()
    assert line.endswith(": Connection refused")
    assert_quoted("Connection refused", "Command-line tools")
