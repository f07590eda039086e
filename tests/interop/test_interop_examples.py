"""The files in ``examples/`` work as documented.

The examples are copied into a temporary directory (which plays the
repository root: relative certificate paths resolve against the current
directory), ``examples/make-certs.sh`` makes the certificates there, and
``kchannel serve`` runs each example server configuration with only the ports
and data directory overridden.  Every example client configuration then
lists the broker with ``kchannel broker-api-versions``; librdkafka uses the
same certificates.
"""
import os
import shutil
import subprocess

import pytest

from tests.fixtures.peers import ROOT, free_ports, run_kchannel, start_kchannel_server

pytestmark = [pytest.mark.slow, pytest.mark.interop]

EXAMPLES = os.path.join(ROOT, "examples")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (examples/make-certs.sh needs it)")
    root = tmp_path_factory.mktemp("examples-root")
    shutil.copytree(EXAMPLES, root / "examples",
                    ignore=shutil.ignore_patterns("certs"))
    r = subprocess.run(["bash", str(root / "examples" / "make-certs.sh")], cwd=root,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    certs = root / "examples" / "certs"
    for name in ("ca.pem", "server.pem", "server.key", "server.keystore.pem", "server.p12",
                 "client.pem", "client.key", "client.keystore.pem", "client.p12",
                 "truststore.p12"):
        assert (certs / name).is_file(), name
    return root


def start_example(root, config, listeners, jaas=None, scram_users=None):
    """``kchannel serve --config examples/CONFIG [--jaas-config examples/JAAS]``
    run from ``root`` with ``--override`` for the ports (free ones, advertised
    as localhost) and the data directory; returns (ServeProcess, ports)."""
    ports = dict(zip(listeners, free_ports(len(listeners))))
    data = root / ("data-" + config)
    overrides = [
        "listeners=" + ",".join(f"{l}://127.0.0.1:{p}" for l, p in ports.items()),
        "advertised.listeners=" + ",".join(f"{l}://localhost:{p}" for l, p in ports.items()),
        f"log.dirs={data}",
    ]
    if scram_users:
        # As the example says: SCRAM users are created before the first
        # start with kchannel configs --server-config (same data directory).
        (root / "users.properties").write_text(f"log.dirs={data}\n")
        for user, password in scram_users.items():
            r = run_kchannel("configs", "--server-config", "users.properties", "--alter",
                             "--add-config", f"SCRAM-SHA-256=[password={password}],"
                             f"SCRAM-SHA-512=[password={password}]",
                             "--entity-type", "users", "--entity-name", user, cwd=str(root))
            assert r.returncode == 0, r.stderr
    srv = start_kchannel_server(
        root / ("run-" + config), {}, config_file=f"examples/{config}",
        jaas_file=f"examples/{jaas}" if jaas else None, overrides=overrides, cwd=root)
    return srv, ports


def bav(root, port, client_config):
    return run_kchannel("broker-api-versions", "--bootstrap-server", f"localhost:{port}",
                        "--command-config", f"examples/{client_config}", cwd=str(root))


def test_plaintext_and_ssl_example(workdir):
    srv, ports = start_example(workdir, "server.properties", ["PLAINTEXT", "SSL"])
    try:
        for listener, client in (("PLAINTEXT", "client-plaintext.properties"),
                                 ("SSL", "client-ssl.properties")):
            r = bav(workdir, ports[listener], client)
            assert r.returncode == 0, r.stderr
            assert r.stdout.startswith(
                f"localhost:{ports[listener]} (id: 1 rack: null isFenced: false) -> (\n"), r.stdout
        # The README's librdkafka snippet, and the client certificate is
        # accepted (ssl.client.auth=requested).
        admin = pytest.importorskip("confluent_kafka.admin")
        a = admin.AdminClient({"bootstrap.servers": f"localhost:{ports['SSL']}",
                               "security.protocol": "SSL",
                               "ssl.ca.location": str(workdir / "examples/certs/ca.pem"),
                               "ssl.certificate.location":
                                   str(workdir / "examples/certs/client.pem"),
                               "ssl.key.location": str(workdir / "examples/certs/client.key")})
        md = a.list_topics(timeout=10)
        assert [(b.id, b.host, b.port) for b in md.brokers.values()] == [
            (1, "localhost", ports["SSL"])]
        del a
    finally:
        srv.stop_and_check()


def test_sasl_example(workdir):
    srv, ports = start_example(workdir, "server-sasl.properties",
                               ["SASL_PLAINTEXT", "SASL_SSL"], jaas="kafka_server_jaas.conf",
                               scram_users={"alice": "alice-secret"})
    try:
        for listener, client in (("SASL_PLAINTEXT", "client-sasl-plain.properties"),
                                 ("SASL_PLAINTEXT", "client-sasl-scram.properties"),
                                 ("SASL_SSL", "client-sasl-ssl.properties")):
            r = bav(workdir, ports[listener], client)
            assert r.returncode == 0, (client, r.stderr)
            assert r.stdout.startswith(f"localhost:{ports[listener]} (id: 1 "), r.stdout
            assert "\tSaslAuthenticate(36): 0 to 2 [usable: 2],\n" in r.stdout
        # A wrong password: exit 1 with Kafka's message, as the README says.
        bad = (workdir / "examples/client-sasl-scram.properties").read_text().replace(
            'password="alice-secret"', 'password="wrong"')
        (workdir / "bad.properties").write_text(bad)
        r = run_kchannel("broker-api-versions", "--bootstrap-server",
                         f"localhost:{ports['SASL_PLAINTEXT']}", "--command-config",
                         "bad.properties", cwd=str(workdir))
        assert r.returncode == 1
        assert ("Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism SCRAM-SHA-512") in r.stderr
    finally:
        srv.stop_and_check()
