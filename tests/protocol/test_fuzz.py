"""Coverage-guided fuzzing (atheris, libFuzzer underneath) for a bounded time.

Each target in ``tests/fuzz/`` -- the frame decoder (both twins against each
other), the request-header parser and request decoding, the server and the
client SASL authenticators -- runs in a child process for
``KCHANNEL_FUZZ_SECONDS`` seconds (default 3: about half a minute for all
four, start-up and corpus replay included), starting from its seed corpus in ``tests/fuzz/corpus/<target>/``
(kept small and in the repository; inputs found on the way go to a
temporary directory).  libFuzzer first replays the whole corpus, so every
crash once found and fixed stays a regression test.  Any crash, hang
(``-timeout``) or failed invariant fails the test with the input in base64
and the command that replays it.

Fuzz longer by hand, e.g. ``KCHANNEL_NO_EXTENSIONS=1 python
tests/fuzz/fuzz_server_authenticator.py -max_total_time=600 /tmp/new
tests/fuzz/corpus/server_authenticator``.
"""
import base64
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUZZ_DIR = os.path.join(ROOT, "tests", "fuzz")
SECONDS = int(os.environ.get("KCHANNEL_FUZZ_SECONDS", "3"))

# The framing target compares the pure and the compiled twin itself; the
# others run the pure twins, whose Python code atheris instruments (coverage
# of compiled code is invisible to it).
TARGETS = {
    "framing": {},
    "request_header": {"KCHANNEL_NO_EXTENSIONS": "1"},
    "server_authenticator": {"KCHANNEL_NO_EXTENSIONS": "1"},
    "client_authenticator": {"KCHANNEL_NO_EXTENSIONS": "1"},
}

pytestmark = pytest.mark.slow


def _require_atheris():
    try:
        import atheris  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"atheris is not installed (pip install atheris): {exc}")


@pytest.mark.timeout(SECONDS + 240)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_target(target, tmp_path):
    _require_atheris()
    corpus = os.path.join(FUZZ_DIR, "corpus", target)
    assert os.listdir(corpus), f"no seed corpus in {corpus}"
    found = tmp_path / "found"
    found.mkdir()
    script = os.path.join(FUZZ_DIR, f"fuzz_{target}.py")
    cmd = [sys.executable, script, f"-max_total_time={SECONDS}", "-max_len=2048",
           "-timeout=20", "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}{os.sep}",
           "-print_final_stats=1", str(found), corpus]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **TARGETS[target])
    r = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=SECONDS + 180)
    artifacts = sorted(p for p in tmp_path.iterdir()
                       if p.name.startswith(("crash-", "timeout-", "oom-", "leak-")))
    report = [f"exit status {r.returncode}", r.stderr[-6000:]]
    for p in artifacts:
        report.append(f"{p.name} (base64): {base64.b64encode(p.read_bytes()).decode()}")
        report.append(f"replay: {' '.join(cmd[:2])} {p.name}")
    assert r.returncode == 0 and not artifacts, "\n".join(report)
    # It did fuzz: libFuzzer's final statistics count the inputs run.
    assert "stat::number_of_executed_units:" in r.stderr, r.stderr[-3000:]
