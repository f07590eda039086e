"""The kchannel client against Apache Kafka itself: every listener (security
protocol) and every SASL mechanism the broker enables connect, negotiate
ApiVersions and get Metadata, and each answer is what kchannel expects.

The broker is the session's ``kafka_broker`` (tests/fixtures/kafka.py).
These are fast once the broker is up, so they run in both passes (the pure
twins in pass 1, the compiled ones in pass 2).
"""
import re

import pytest

from kchannel.client import KafkaClient
from kchannel.protocol import messages
from kchannel.protocol.api_keys import API_VALID_VERSIONS, ApiKey

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

MATRIX = [
    ("PLAINTEXT", None),
    ("SSL", None),
    ("MTLS", None),
    *[(listener, mech) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
      for mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")],
    ("OAUTH_JWKS", "OAUTHBEARER"),
]


def connect_client_for(broker, listener, mechanism, **kw):
    if mechanism == "GSSAPI" and not broker.gssapi:
        pytest.skip("the MIT KDC is not available, so the broker has no GSSAPI")
    configs = broker.client_configs(listener, mechanism, **kw)
    if listener == "OAUTH_JWKS" and "token" not in kw:
        # kchannel has no OIDC token-endpoint login (README, Limitations):
        # hand it a token the broker's JWKS validates.
        configs = broker.client_configs(listener, mechanism,
                                        token=broker.oauth.token(sub="alice"))
    return KafkaClient(configs)


def expected_brokers(broker, listener):
    return [{"node_id": broker.node_id, "host": "127.0.0.1", "port": broker.port(listener),
             "rack": None}]


@pytest.mark.parametrize("listener,mechanism", MATRIX,
                         ids=[f"{l}-{m}" if m else l for l, m in MATRIX])
def test_connect_api_versions_metadata(kafka_broker, listener, mechanism):
    with connect_client_for(kafka_broker, listener, mechanism) as client:
        client.connect()
        versions = client.api_versions
        # Every API a client needs to bootstrap is offered, in a version range
        # kchannel's schemas cover.
        for key in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.SASL_HANDSHAKE,
                    ApiKey.SASL_AUTHENTICATE, ApiKey.CREATE_DELEGATION_TOKEN,
                    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS):
            assert int(key) in versions, key
        assert client.choose_version(ApiKey.METADATA) == min(
            versions[int(ApiKey.METADATA)][1], messages.API[ApiKey.METADATA].max_version)
        md = client.request(ApiKey.METADATA, {"topics": []})
        assert md["brokers"] == expected_brokers(kafka_broker, listener)
        assert md["cluster_id"] == kafka_broker.cluster_id
        assert md["controller_id"] == kafka_broker.node_id
        assert md["topics"] == []


def test_every_api_kafka_offers_is_known_to_kchannel(kafka_broker):
    """Kafka's ApiVersions answer decodes with kchannel's schemas; kchannel
    can name every API key it announces (``kchannel broker-api-versions``),
    and every API kchannel implements is offered in a range that overlaps
    kchannel's, the client picking the highest version both speak.

    Kafka 4.3.1 announces newer versions of some APIs than kchannel's schema
    table (API_VALID_VERSIONS) knows; the client negotiates down, as the
    protocol intends (README, Limitations)."""
    with KafkaClient(kafka_broker.client_configs("PLAINTEXT")) as client:
        client.connect()
        body = client.api_versions_response
        assert body["error_code"] == 0
        offered = {e["api_key"]: (e["min_version"], e["max_version"])
                   for e in body["api_keys"]}
        assert [key for key in offered if key not in API_VALID_VERSIONS] == []
        for key, api in messages.API.items():
            lo, hi = offered[key]
            assert lo <= api.max_version and hi >= api.min_version, api.name
            assert client.choose_version(key) == min(hi, api.max_version), api.name


@pytest.mark.slow
def test_kafka_tool_against_kafka(kafka_broker, tmp_path):
    """The fixture's ``run_java`` runs Kafka's own kafka-broker-api-versions.sh
    class with the same client configs (a sanity check of the fixture that
    the Java-client tests build on)."""
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    props = kafka_broker.write_client_properties(tmp_path / "client.properties", configs)
    result = kafka_broker.run_java("org.apache.kafka.tools.BrokerApiVersionsCommand",
                                   "--bootstrap-server", configs["bootstrap.servers"],
                                   "--command-config", props)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first == f"{configs['bootstrap.servers']} (id: 1 rack: null isFenced: false) -> ("


@pytest.mark.slow
def test_broker_api_versions_prints_what_kafkas_tool_prints(kafka_broker, tmp_path):
    """``kchannel broker-api-versions`` and Kafka's BrokerApiVersionsCommand
    against the same Kafka broker: the same lines, except that kchannel's
    ``usable`` version is the newest its own (Kafka 4.0) schemas know."""
    from tests.fixtures.peers import run_kchannel
    configs = kafka_broker.client_configs("SASL_PLAINTEXT", "PLAIN")
    props = kafka_broker.write_client_properties(tmp_path / "client.properties", configs)
    args = ["--bootstrap-server", configs["bootstrap.servers"], "--command-config", props]
    java = kafka_broker.run_java("org.apache.kafka.tools.BrokerApiVersionsCommand", *args)
    mine = run_kchannel("broker-api-versions", *args)
    assert (java.returncode, mine.returncode) == (0, 0), mine.stderr + java.stderr
    java_lines, my_lines = java.stdout.splitlines(), mine.stdout.splitlines()
    assert len(java_lines) == len(my_lines)
    usable = re.compile(r"^\t(\w+)\((\d+)\): (.*?)( \[(?:usable: (\d+)|unusable: .*)\])?(,?)$")
    for theirs, ours in zip(java_lines, my_lines):
        a, b = usable.match(theirs), usable.match(ours)
        if a is None or b is None:
            assert ours == theirs
            continue
        assert (b.group(1), b.group(2), b.group(3), b.group(6)) == (
            a.group(1), a.group(2), a.group(3), a.group(6))
        if a.group(5) is None:
            assert b.group(4) == a.group(4)
            continue
        lo, hi = API_VALID_VERSIONS[int(a.group(2))]
        offered_lo = int(a.group(3).split(" to ")[0])
        if hi < offered_lo:
            assert b.group(4) == " [unusable: node too new]"
        else:
            assert int(b.group(5)) == min(int(a.group(5)), hi)
