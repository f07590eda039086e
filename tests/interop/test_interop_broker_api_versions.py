"""``kchannel broker-api-versions`` (kafka-broker-api-versions.sh).

Formatting rules are checked directly (Kafka's ``Node.toString`` and
``NodeApiVersions.toString(true)``); the command itself runs as a subprocess
against ``kchannel serve`` (PLAINTEXT, SSL and SASL_PLAINTEXT through
``--command-config``) and against the Tansu broker.
"""
import io
import re

import pytest

from kchannel.cli import broker_api_versions as bav
from kchannel.protocol.api_keys import API_NAMES, API_VALID_VERSIONS
from tests.fixtures.peers import free_ports, run_kchannel, start_kchannel_server, write_properties

LINE_RE = re.compile(r"^\t(\w+)\((\d+)\): (UNSUPPORTED|\d+(?: to \d+)?"
                     r"(?: \[usable: \d+\]| \[unusable: node too (?:new|old)\])?),?$")


def parse_report(text):
    """``{header: {api_key: text}}`` from the command's output; checks the
    shape line by line."""
    lines = text.splitlines()
    out = {}
    i = 0
    while i < len(lines):
        header = lines[i]
        assert header.endswith(" -> ("), header
        entries = {}
        i += 1
        while lines[i] != ")":
            m = LINE_RE.match(lines[i])
            assert m, lines[i]
            # every line but the last of a block ends with a comma
            assert lines[i].endswith(",") == (lines[i + 1] != ")"), lines[i]
            entries[int(m.group(2))] = (m.group(1), m.group(3))
            i += 1
        i += 1
        keys = list(entries)
        assert keys == sorted(keys)
        out[header[:-len(" -> (")]] = entries
    return out


# ------------------------------------------------------------ formatting
def test_node_to_string():
    assert bav.node_to_string(1, "localhost", 9092) == \
        "localhost:9092 (id: 1 rack: null isFenced: false)"
    assert bav.node_to_string(2, "h", 1, rack="r1") == "h:1 (id: 2 rack: r1 isFenced: false)"


def test_node_api_versions_text():
    text = bav.node_api_versions_to_string([
        {"api_key": 18, "min_version": 0, "max_version": 4},
        {"api_key": 3, "min_version": 0, "max_version": 99},          # newer than we know
        {"api_key": 17, "min_version": 1, "max_version": 1},          # min == max
        {"api_key": 36, "min_version": 7, "max_version": 9},          # node too new
        {"api_key": 999, "min_version": 0, "max_version": 2},         # unknown key
    ])
    lines = text.splitlines()
    assert lines[0] == "(" and lines[-1] == ")"
    body = lines[1:-1]
    assert "\tMetadata(3): 0 to 99 [usable: %d]," % API_VALID_VERSIONS[3][1] in body
    assert "\tSaslHandshake(17): 1 [usable: 1]," in body
    assert "\tApiVersions(18): 0 to 4 [usable: 4]," in body
    assert "\tSaslAuthenticate(36): 7 to 9 [unusable: node too new]," in body
    assert "\tProduce(0): UNSUPPORTED," in body
    assert body[-1] == "\tUNKNOWN(999): 0 to 2"
    # controller-only APIs are not listed unless the node announces them
    assert not any(l.startswith("\tVote(52)") for l in body)
    assert [int(re.search(r"\((\d+)\)", l).group(1)) for l in body] == sorted(
        set(bav.client_apis()) | {999})
    # Kafka's single-line form
    one_line = bav.node_api_versions_to_string([], line_breaks=False)
    assert one_line.startswith("(Produce(0): UNSUPPORTED, Fetch(1): UNSUPPORTED, ")


def test_node_too_old():
    text = bav.node_api_versions_to_string([{"api_key": 18, "min_version": -3,
                                             "max_version": -1}])
    assert "\tApiVersions(18): -3 to -1 [unusable: node too old]," in text.splitlines()


def test_client_apis_are_broker_apis():
    apis = bav.client_apis()
    assert 0 in apis and 18 in apis and 60 in apis and 87 in apis
    assert not {4, 5, 6, 7, 52, 53, 54, 56, 58, 59, 62, 63, 67, 70, 73, 82} & set(apis)
    assert set(apis) <= set(API_NAMES)


# --------------------------------------------------------- against servers


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    p1, p2, p3 = free_ports(3)
    props = {
        "node.id": "4",
        "broker.rack": "rack-a",
        "listeners": (f"PLAINTEXT://127.0.0.1:{p1},SSL://127.0.0.1:{p2},"
                      f"SASL_PLAINTEXT://127.0.0.1:{p3}"),
        "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{p1},SSL://localhost:{p2},"
                                 f"SASL_PLAINTEXT://localhost:{p3}"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "connection.failed.authentication.delay.ms": "0",
    }
    for k, v in pki.server_configs().items():
        props[f"listener.name.ssl.{k}"] = v
    srv = start_kchannel_server(tmp_path_factory.mktemp("bav-serve"), props,
                                scram_users={"bob": {"SCRAM-SHA-256": "bob-secret"}})
    yield srv
    srv.stop_and_check()


def write_command_config(tmp_path, props):
    return write_properties(tmp_path / "client.properties", props)


@pytest.mark.slow
@pytest.mark.interop
def test_plaintext(server):
    r = run_kchannel("broker-api-versions", "--bootstrap-server", server.bootstrap())
    assert r.returncode == 0, r.stderr
    report = parse_report(r.stdout)
    header = f"127.0.0.1:{server.port()} (id: 4 rack: rack-a isFenced: false)"
    assert list(report) == [header]
    entries = report[header]
    assert entries[18] == ("ApiVersions", "0 to 4 [usable: 4]")
    assert entries[3] == ("Metadata", "0 to %d [usable: %d]" % (API_VALID_VERSIONS[3][1],
                                                               API_VALID_VERSIONS[3][1]))
    assert entries[0] == ("Produce", "UNSUPPORTED")
    # the SCRAM credential APIs kchannel serve provides
    assert entries[50] == ("DescribeUserScramCredentials", "0 [usable: 0]")
    assert r.stdout.endswith(")\n")


@pytest.mark.slow
@pytest.mark.interop
def test_plaintext_listener_lists_sasl_apis_as_kafka(server):
    r = run_kchannel("broker-api-versions", "--bootstrap-server", server.bootstrap())
    assert r.returncode == 0, r.stderr
    (entries,) = parse_report(r.stdout).values()
    assert entries[17] == ("SaslHandshake", "0 to 1 [usable: 1]")
    assert entries[36] == ("SaslAuthenticate", "0 to 2 [usable: 2]")


@pytest.mark.slow
@pytest.mark.interop
def test_ssl_command_config(server, pki, tmp_path):
    cfg = write_command_config(tmp_path, {"security.protocol": "SSL", **pki.client_configs()})
    r = run_kchannel("broker-api-versions", "--bootstrap-server",
                     server.bootstrap("SSL", "localhost"), "--command-config", cfg)
    assert r.returncode == 0, r.stderr
    assert list(parse_report(r.stdout)) == [
        f"localhost:{server.port('SSL')} (id: 4 rack: rack-a isFenced: false)"]


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "alice", "alice-secret"),
                                                     ("SCRAM-SHA-256", "bob", "bob-secret")])
def test_sasl_command_config(server, tmp_path, mechanism, user, password):
    module = ("plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule")
    cfg = write_command_config(tmp_path, {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                            f'username="{user}" password="{password}";'})
    r = run_kchannel("broker-api-versions", "--bootstrap-server",
                     server.bootstrap("SASL_PLAINTEXT", "localhost"), "--command-config", cfg)
    assert r.returncode == 0, r.stderr
    entries = parse_report(r.stdout)[
        f"localhost:{server.port('SASL_PLAINTEXT')} (id: 4 rack: rack-a isFenced: false)"]
    # SASL listeners announce the SASL APIs
    assert entries[17] == ("SaslHandshake", "0 to 1 [usable: 1]")
    assert entries[36] == ("SaslAuthenticate", "0 to 2 [usable: 2]")


@pytest.mark.slow
@pytest.mark.interop
def test_sasl_wrong_password_exits_1(server, tmp_path):
    mark = server.mark()
    cfg = write_command_config(tmp_path, {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                            'required username="bob" password="nope";'})
    r = run_kchannel("broker-api-versions", "--bootstrap-server",
                     server.bootstrap("SASL_PLAINTEXT"), "--command-config", cfg)
    assert r.returncode == 1
    assert r.stdout == ""
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256") in r.stderr
    assert server.wait_for_log(r"WARNING .*Failed authentication with .*invalid credentials",
                               start=mark) is not None


@pytest.mark.slow
@pytest.mark.interop
def test_unreachable_exits_1(tmp_path):
    (port,) = free_ports(1)
    r = run_kchannel("broker-api-versions", "--bootstrap-server", f"127.0.0.1:{port}")
    assert r.returncode == 1
    assert r.stdout == ""
    assert f"Request METADATA failed on brokers [127.0.0.1:{port} (id: -1 rack: null " \
           "isFenced: false)]" in r.stderr


def test_usage_errors_exit_2(tmp_path):
    r = run_kchannel("broker-api-versions")
    assert r.returncode == 2
    assert "--bootstrap-server" in r.stderr


def test_version_flag():
    import kchannel
    r = run_kchannel("broker-api-versions", "--version")
    assert (r.returncode, r.stdout.strip()) == (0, kchannel.__version__)


def test_missing_command_config_exits_1(tmp_path):
    r = run_kchannel("broker-api-versions", "--bootstrap-server", "127.0.0.1:9",
                     "--command-config", str(tmp_path / "nope.properties"))
    assert r.returncode == 1
    assert "nope.properties" in r.stderr


def test_unreachable_advertised_broker_is_an_error_line(kchannel_inprocess_server):
    """The bootstrap answers, but the advertised address does not: that
    broker's line is ``-> ERROR: ...`` and the command still exits 0."""
    (dead,) = free_ports(1)
    srv = kchannel_inprocess_server({
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{dead}", "node.id": "9"})

    class Args:
        bootstrap_server = srv.bootstrap()
        command_config = None
        log_level = "WARNING"
    out, err = io.StringIO(), io.StringIO()
    assert bav.run(Args, out, err) == 0
    line = out.getvalue()
    assert line.startswith(f"127.0.0.1:{dead} (id: 9 rack: null isFenced: false) -> ERROR: ")
    assert line.count("\n") == 1


@pytest.mark.slow
@pytest.mark.interop
def test_tansu(tansu):
    r = run_kchannel("broker-api-versions", "--bootstrap-server", tansu.bootstrap)
    assert r.returncode == 0, r.stderr
    report = parse_report(r.stdout)
    assert len(report) == 1
    (header, entries), = report.items()
    assert re.fullmatch(rf"127\.0\.0\.1:{tansu.port} \(id: -?\d+ rack: null isFenced: false\)",
                        header), header
    # a real broker announces the data-plane APIs
    for key in (0, 1, 3, 18):
        assert entries[key][1] != "UNSUPPORTED", entries[key]
    assert entries[18][1].startswith("0 to ")


@pytest.mark.slow
@pytest.mark.interop
def test_tansu_with_authentication_exits_1(tansu_sasl, tmp_path):
    cfg = write_command_config(tmp_path, {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                            'required username="alice" password="alice-secret";'})
    r = run_kchannel("broker-api-versions", "--bootstrap-server", tansu_sasl.bootstrap,
                     "--command-config", cfg)
    assert r.returncode == 1
    assert r.stdout == ""
    # Tansu keeps no SCRAM users: its server-first message is "e=unknown-user",
    # reported as Kafka's client reports a SCRAM error from the broker.
    assert "failed with error: unknown-user" in r.stderr, r.stderr
    assert "Kafka Client will go to AUTHENTICATION_FAILED state." in r.stderr
