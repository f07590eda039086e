"""``kchannel kafka-dev`` without a broker: what it says when Java, Maven or
a port is missing (exit 1), usage errors (exit 2), and its fetch (the same
pom, jars and ``.complete`` stamp as ``.ci/install``).  Starting the broker
itself is ``tests/project/test_readme_first_run.py``."""
import hashlib
import os
import re
import shutil
import socket

import pytest

from kchannel.cli import kafka_dev
from tests.fixtures.kafka import POM, kafka_libs, require_kafka
from tests.fixtures.peers import ROOT, run_kchannel, skip_missing_peer


def _java_home():
    java = shutil.which("java")
    if java is None:
        skip_missing_peer("no `java` on PATH (Debian: openjdk-17-jre-headless)")
    return os.path.dirname(os.path.dirname(os.path.realpath(java)))


def _env(**extra):
    """An environment with neither java nor mvn on PATH (the interpreter is
    run by its absolute path)."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = "/nonexistent"
    env.update(extra)
    return env


def _run_kafka_dev(args, env, cwd):
    # run_kchannel starts from os.environ: JAVA_HOME must go from there.
    saved = os.environ.pop("JAVA_HOME", None)
    try:
        return run_kchannel("kafka-dev", *args, env=env, cwd=str(cwd), timeout=120)
    finally:
        if saved is not None:
            os.environ["JAVA_HOME"] = saved


def test_without_java_it_says_so_and_exits_1(tmp_path):
    r = _run_kafka_dev([], _env(), tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("kafka-dev: Apache Kafka needs Java 17 or later, and there is "
                               "no `java` on PATH or in JAVA_HOME.")
    assert "apt-get install openjdk-17-jre-headless" in r.stderr
    assert not (tmp_path / "kafka-dev").exists()


def test_without_maven_and_jars_it_says_so_and_exits_1(tmp_path):
    home = tmp_path / "kafka-home"
    r = _run_kafka_dev([], _env(JAVA_HOME=_java_home(), KCHANNEL_KAFKA_HOME=str(home)), tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr)
    version = kafka_dev.kafka_version()
    assert (f"kafka-dev: Apache Kafka {version} is not in {home}/libs yet, and fetching it "
            "from Maven Central needs Maven: no `mvn` on PATH.") in r.stderr
    assert not (home / "libs").exists()


def test_a_port_in_use_is_named_and_exits_1(tmp_path):
    require_kafka()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = run_kchannel("kafka-dev", "--sasl-ssl-port", str(port), cwd=str(tmp_path))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"kafka-dev: port {port} on 127.0.0.1 is in use" in r.stderr
    assert "--sasl-ssl-port" in r.stderr


def test_cluster_ids_never_look_like_options():
    """1 in 64 base64url UUIDs starts with "-", which kafka-storage's argument
    parser takes for an option (a first start then failed to format)."""
    ids = {kafka_dev.random_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(len(i) == 22 and re.fullmatch(r"[A-Za-z0-9_-]+", i) and i[0] != "-" for i in ids)


@pytest.mark.parametrize("args", [["--scram-user", "alice"], ["--plaintext-port", "x"],
                                  ["--plaintext-port", "9092", "--sasl-ssl-port", "9092"],
                                  ["--controller-port", "70000"]])
def test_usage_errors_exit_2(tmp_path, args):
    r = run_kchannel("kafka-dev", *args, cwd=str(tmp_path))
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "kafka-dev" in r.stderr


def test_ci_install_and_the_command_share_the_pom_in_the_package():
    with open(os.path.join(ROOT, ".ci", "install"), encoding="utf-8") as f:
        install = f.read()
    assert "KAFKA_POM=kchannel/cli/kafka-pom.xml" in install
    assert os.path.samefile(kafka_dev.POM, POM)
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert '"kchannel.cli" = ["kafka-pom.xml"]' in f.read()


@pytest.mark.slow
def test_fetch_only_fills_a_cache_as_ci_install_does(tmp_path):
    """With Maven (its local repository already holds the jars when
    .ci/install ran, so no network), ``--fetch-only`` writes the jars
    ``.ci/install`` fetched and the same stamp: the pom's SHA-256."""
    require_kafka()
    if shutil.which("mvn") is None:
        skip_missing_peer("no `mvn` on PATH (Debian: maven)")
    home = tmp_path / "kafka-home"
    r = run_kchannel("kafka-dev", "--fetch-only", env={"KCHANNEL_KAFKA_HOME": str(home)},
                     cwd=str(tmp_path), timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr)
    libs = home / "libs"
    assert r.stdout.strip() == f"Apache Kafka {kafka_dev.kafka_version()} jars in {libs}"
    with open(POM, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert (libs / ".complete").read_text().strip() == digest
    with open(os.path.join(kafka_libs(), ".complete")) as f:
        assert f.read().strip() == digest
    assert sorted(os.listdir(libs)) == sorted(os.listdir(kafka_libs()))
    assert not (home / "libs.partial").exists()
    # A second call finds the stamp and fetches nothing.
    again = run_kchannel("kafka-dev", "--fetch-only", env={"KCHANNEL_KAFKA_HOME": str(home),
                                                           "PATH": "/nonexistent"},
                         cwd=str(tmp_path))
    assert again.returncode == 0 and "fetching" not in again.stderr, again.stderr
