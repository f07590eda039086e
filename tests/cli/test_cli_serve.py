"""``kchannel serve``: a real subprocess, real sockets, real signals."""
import os
import signal
import subprocess
import sys

import pytest

from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.serve import read_listeners, start_serve

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_listens_answers_and_exits_cleanly(tmp_path, sig):
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:0,OTHER://other.example:1234",
        "log.dirs": str(tmp_path / "data"),
    }
    proc = start_serve(tmp_path, props, "--override", "node.id=5")
    try:
        listeners = read_listeners(proc, 2)
        assert listeners["PLAINTEXT"][0] == "PLAINTEXT"
        port = listeners["PLAINTEXT"][2]
        with KafkaClient({"bootstrap.servers": f"127.0.0.1:{port}"}).connect() as c:
            md = c.request(ApiKey.METADATA, {"topics": []})
            assert md["brokers"][0]["node_id"] == 5
            assert md["brokers"][0]["port"] == port
            # the SCRAM credential APIs are served too
            assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS in c.api_versions
        other = listeners["OTHER"][2]
        with KafkaClient({"bootstrap.servers": f"127.0.0.1:{other}"}).connect() as c:
            md = c.request(ApiKey.METADATA, {"topics": []})
            assert (md["brokers"][0]["host"], md["brokers"][0]["port"]) == ("other.example", 1234)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "shut down" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_bad_config_exits_1(tmp_path):
    proc = start_serve(tmp_path, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                  "connections.max.idle.ms": "soon"})
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "connections.max.idle.ms" in out


def test_serve_missing_config_file(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "kchannel", "serve", "--config",
                        str(tmp_path / "nope.properties")], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 1
    assert "nope.properties" in r.stdout + r.stderr


def test_cluster_id_is_stable_across_restarts(tmp_path):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data")}
    ids = []
    for _ in range(2):
        proc = start_serve(tmp_path, props)
        try:
            port = read_listeners(proc, 1)["PLAINTEXT"][2]
            with KafkaClient({"bootstrap.servers": f"127.0.0.1:{port}"}).connect() as c:
                ids.append(c.request(ApiKey.METADATA, {"topics": []})["cluster_id"])
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert ids[0] == ids[1] and len(ids[0]) == 22
    assert f"cluster.id={ids[0]}" in (tmp_path / "data" / "meta.properties").read_text()


def test_serve_takes_the_properties_file_as_kafka_server_start_does(tmp_path):
    # kafka-server-start.sh server.properties [--override k=v]: the same
    # command line starts kchannel serve.
    (tmp_path / "server.properties").write_text(
        f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'data'}\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "kchannel", "serve", "server.properties",
                             "--override", "node.id=7"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=str(tmp_path))
    try:
        port = read_listeners(proc, 1)["PLAINTEXT"][2]
        with KafkaClient({"bootstrap.servers": f"127.0.0.1:{port}"}).connect() as c:
            assert c.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 7
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("argv, message", [
    ([], "the server properties file is required"),
    (["a.properties", "--config", "b.properties"], "not both"),
])
def test_serve_usage_errors_exit_2(argv, message):
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "kchannel", "serve", *argv],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
