"""``kchannel serve`` with ``num.network.threads`` = 2: two worker processes
share the listener (SO_REUSEPORT), both take connections, a delegation
token created through one authenticates on the other (shared SQLite
stores), and SIGTERM to the parent stops them all."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from kchannel.tokens.admin import DelegationTokenAdmin
from tests.fixtures.serve import (read_log_until, start_serve_config, stop_serve_config,
                                  write_scram_config)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="worker processes need Linux's SO_REUSEPORT")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
DEADLINE_S = 60


# One SASL_PLAINTEXT listener; its workers share a delegation token secret.
SASL_PLAINTEXT_PROPS = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
    "delegation.token.secret.key": "shared-secret",
}


def write_config(tmp_path, **extra):
    return write_scram_config(tmp_path, **{**SASL_PLAINTEXT_PROPS, **extra})


start = start_serve_config


def sockets_of(pid):
    fd_dir = f"/proc/{pid}/fd"
    n = 0
    for fd in os.listdir(fd_dir):
        try:
            n += os.readlink(os.path.join(fd_dir, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def worker_client(port, username, password, token=False):
    extra = ' tokenauth="true"' if token else ""
    c = KafkaClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.jaas.config": f'{SCRAM} required username="{username}" '
                                         f'password="{password}"{extra};'})
    return c.connect("127.0.0.1", port)


@pytest.mark.slow
def test_two_workers_share_the_listener_and_the_token_store(tmp_path):
    proc = start(write_config(tmp_path))
    clients = []
    try:
        m, buf = read_log_until(proc, rb"(\d+) worker processes \(pids ([\d,]+)\)")
        pids = [int(p) for p in m.group(2).split(b",")]
        assert len(pids) == 2
        # Both workers bound the same port and are serving.
        _, buf = read_log_until(proc, rb"(?s)(Worker \d of 2 \(pid \d+\) serving.*){2}", buf)
        ports = set(re.findall(rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.", buf))
        assert len(ports) == 1
        port = int(ports.pop())
        before = {pid: sockets_of(pid) for pid in pids}

        with worker_client(port, "alice", "alice-secret") as c:
            token = DelegationTokenAdmin(c).create()
        # Sixteen connections logging in with the token, kept open: the
        # kernel spreads them over both workers (each lands on either with
        # probability 1/2), so the one that did not create the token must
        # accept it too.
        deadline = time.monotonic() + DEADLINE_S
        while len(clients) < 16:
            try:
                clients.append(worker_client(port, token.token_info.token_id, token.hmac_base64,
                                             token=True))
            except SaslAuthenticationError:
                # The other worker's token cache may not have seen the new
                # token yet; it refreshes when the store changed.
                assert time.monotonic() < deadline, "token never accepted"
                time.sleep(0.1)
        after = {pid: sockets_of(pid) for pid in pids}
        gained = {pid: after[pid] - before[pid] for pid in pids}
        assert all(g >= 1 for g in gained.values()), gained
        assert sum(gained.values()) >= 16
    finally:
        for c in clients:
            c.close()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        finally:
            proc.stderr.close()
    assert code == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_memory_stores_are_refused_with_workers(tmp_path):
    proc = start(write_config(tmp_path, **{"kchannel.scram.credential.store": "memory"}))
    try:
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert b"num.network.threads=2" in err and b"kchannel.scram.credential.store=memory" in err


def _metric(values, name):
    """The value of the metric called ``name`` (group:name, no tags)."""
    (value,) = [v for k, v in values.items() if k.split(":", 1)[1] == name]
    return value


def _read_json(path, deadline, accept):
    import json
    while True:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if accept(data):
                return data
        except (OSError, ValueError):
            data = None
        assert time.monotonic() < deadline, f"{path}: never as expected; last {data}"
        time.sleep(0.1)


@pytest.mark.slow
def test_metrics_file_per_worker_and_summed(tmp_path):
    """kchannel.metrics.file: each worker's metrics and their sum, rewritten
    while serving and once more after SIGTERM; the per-worker files are gone
    at the end."""
    path = tmp_path / "metrics.json"
    proc = start(write_config(tmp_path, **{"kchannel.metrics.file": str(path),
                                           "kchannel.metrics.file.interval.ms": "200"}))
    clients = []
    try:
        m, buf = read_log_until(proc, rb"(\d+) worker processes \(pids ([\d,]+)\)")
        pids = sorted(int(p) for p in m.group(2).split(b","))
        _, buf = read_log_until(proc, rb"(?s)(Worker \d of 2 \(pid \d+\) serving.*){2}", buf)
        port = int(re.search(rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.",
                             buf).group(1))
        # Twelve logins kept open: the kernel spreads them over both workers.
        for _ in range(12):
            clients.append(worker_client(port, "alice", "alice-secret"))
        deadline = time.monotonic() + DEADLINE_S
        data = _read_json(path, deadline, lambda d: len(d["workers"]) == 2 and _metric(
            d["metrics"], "successful-authentication-total") == 12)
        assert sorted(w["pid"] for w in data["workers"]) == pids
        assert [w["worker"] for w in data["workers"]] == [1, 2]
        per_worker = [_metric(w["metrics"], "successful-authentication-total")
                      for w in data["workers"]]
        assert sum(per_worker) == 12 and all(n >= 1 for n in per_worker), per_worker
        # Gauges sum too: the open connections of both workers.
        assert _metric(data["metrics"], "connection-count") == sum(
            _metric(w["metrics"], "connection-count") for w in data["workers"]) == 12
        # Maxima are maxima, not sums.
        sizes = [_metric(w["metrics"], "request-size-max") for w in data["workers"]]
        assert _metric(data["metrics"], "request-size-max") == max(s for s in sizes if s)
        assert (tmp_path / "metrics.json.worker-1").exists()
    finally:
        for c in clients:
            c.close()
        code = stop_serve_config(proc)
    assert code == 0
    import json
    final = json.loads(path.read_text())
    assert _metric(final["metrics"], "successful-authentication-total") == 12
    assert _metric(final["metrics"], "connection-count") == 0
    assert not list(tmp_path.glob("metrics.json.worker-*"))
    assert not list(tmp_path.glob(".metrics-*"))


def test_metrics_file_single_process(tmp_path):
    path = tmp_path / "m.json"
    proc = start(write_config(tmp_path, **{"num.network.threads": "1",
                                           "kchannel.metrics.file": str(path),
                                           "kchannel.metrics.file.interval.ms": "100"}))
    try:
        m, _ = read_log_until(proc, rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.")
        with worker_client(int(m.group(1)), "alice", "alice-secret"):
            data = _read_json(path, time.monotonic() + DEADLINE_S, lambda d: _metric(
                d["metrics"], "connection-count") == 1)
        assert [w["pid"] for w in data["workers"]] == [proc.pid]
        assert data["metrics"] == data["workers"][0]["metrics"]
        with pytest.raises(Exception):
            # The wrong password is counted as a failed authentication.
            worker_client(int(m.group(1)), "alice", "wrong")
        _read_json(path, time.monotonic() + DEADLINE_S, lambda d: _metric(
            d["metrics"], "failed-authentication-total") == 1)
    finally:
        code = stop_serve_config(proc)
    assert code == 0


# A program embedding the broker: no CLI, just kchannel.server.serve(props).
EMBEDDED = """
import logging, sys
from kchannel.config import load_properties
from kchannel.server import serve
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
sys.exit(serve(dict(load_properties(sys.argv[1]))))
"""


@pytest.mark.slow
def test_server_package_runs_the_workers_without_the_cli(tmp_path):
    """``kchannel.server.serve`` is what ``kchannel serve`` calls: worker
    processes, their summed metrics file and the clean stop on SIGTERM come
    with it, no argument parsing involved."""
    path = tmp_path / "metrics.json"
    cfg = write_config(tmp_path, **{"kchannel.metrics.file": str(path),
                                    "kchannel.metrics.file.interval.ms": "100"})
    proc = subprocess.Popen([sys.executable, "-c", EMBEDDED, str(cfg)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    try:
        m, buf = read_log_until(proc, rb"(\d+) worker processes \(pids ([\d,]+)\)")
        assert m.group(1) == b"2"
        _, buf = read_log_until(proc, rb"(?s)(Worker \d of 2 \(pid \d+\) serving.*){2}", buf)
        port = int(re.search(rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.",
                             buf).group(1))
        with worker_client(port, "alice", "alice-secret"):
            pass
        _read_json(path, time.monotonic() + DEADLINE_S, lambda d: len(d["workers"]) == 2 and
                   _metric(d["metrics"], "successful-authentication-total") == 1)
    finally:
        code = stop_serve_config(proc)
    assert code == 0
