"""What a successful authentication logs: one DEBUG line per side, naming a
principal only where it is known (the client does not know the principal the
broker gives it), and nothing above DEBUG from the unsecured OAUTHBEARER
login, which runs at every authentication."""
import logging
import threading

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from kchannel.utils import now_ms

from tests.fixtures.sasl_servers import client_configs, start_server

METADATA = 3


def _messages(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger]


def _wait_for(predicate, timeout_ms=5000):
    # The server thread logs right after writing the response the client
    # acts on: give it a moment.
    deadline = now_ms() + timeout_ms
    while not predicate() and now_ms() < deadline:
        threading.Event().wait(0.005)
    return predicate()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"])
def test_success_logged_without_unknown_principal(servers, caplog, mechanism):
    caplog.set_level(logging.DEBUG, logger="kchannel")
    server, port = start_server()
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", mechanism)) as client:
        client.connect("127.0.0.1", port)
        client.request(METADATA, {"topics": []})
        node = client.node_id

    def lines():
        return [m for m in _messages(caplog, "kchannel.network.selector")
                if m.startswith("Successfully authenticated with")]

    assert _wait_for(lambda: any(m.endswith(" as User:alice") for m in lines())), lines()
    assert not [m for m in lines() if "None" in m], lines()
    # The client's own line names the broker and channel, not a principal.
    client_lines = [m for m in lines() if f"(channelId={node})" in m]
    assert len(client_lines) == 1, lines()
    assert client_lines[0].endswith(f"(channelId={node})"), client_lines


def test_unsecured_oauthbearer_login_logs_at_debug(servers, caplog):
    caplog.set_level(logging.DEBUG, logger="kchannel")
    server, port = start_server()
    servers.append(server)
    for _ in range(2):
        with KafkaClient(client_configs("SASL_PLAINTEXT", "OAUTHBEARER")) as client:
            client.connect("127.0.0.1", port)
            client.request(METADATA, {"topics": []})
    records = [r for r in caplog.records if r.name == "kchannel.security.sasl.oauthbearer"]
    retrieved = [r for r in records if r.getMessage().startswith("Retrieved token")]
    assert len(retrieved) == 2
    assert {r.levelno for r in retrieved} == {logging.DEBUG}
    assert [r.getMessage() for r in records if r.levelno > logging.DEBUG] == []


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_failed_authentication_warning_names_the_mechanism(servers, caplog, mechanism):
    # The server's warning names the SASL mechanism the failure carries (a
    # SaslAuthenticationError's), as Kafka's "Failed authentication with
    # ... (channelId=...) using SASL mechanism ...".
    caplog.set_level(logging.DEBUG, logger="kchannel")
    server, port = start_server()
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", mechanism, password="wrong")) as client:
        with pytest.raises(SaslAuthenticationError):
            client.connect("127.0.0.1", port)

    def failures():
        # the server's channel: channelId=<its address>-<peer address>-<n>
        return [r for r in caplog.records if r.name == "kchannel.network.selector"
                and r.getMessage().startswith("Failed authentication with")
                and f"(channelId=127.0.0.1:{port}-" in r.getMessage()]

    assert _wait_for(lambda: failures()), [r.getMessage() for r in caplog.records]
    (record,) = failures()
    assert record.levelno == logging.WARNING
    assert f" using SASL mechanism {mechanism} (" in record.getMessage(), record.getMessage()
