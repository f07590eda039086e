"""KIP-368 re-authentication of the kchannel client on a live connection to
Apache Kafka.

The broker's REAUTH listener has ``connections.max.reauth.ms`` =
``REAUTH_MS``: Kafka tells the client the session lifetime in its
SaslAuthenticate response and closes any connection whose session ran out.
The kchannel client must re-authenticate on the same connection in time, so
a stream of requests keeps working without a reconnect.
"""
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.kafka import REAUTH_MS

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]


def keep_busy_until_reauthenticated(client, broker, reauthentications, limit_s):
    """Send Metadata every 100 ms until the client has re-authenticated
    ``reauthentications`` times (or ``limit_s`` passed); returns the metrics
    and the number of requests answered."""
    answered = 0
    deadline = time.monotonic() + limit_s
    metrics = client.metrics.snapshot()
    while time.monotonic() < deadline:
        md = client.request(ApiKey.METADATA, {"topics": []})
        assert md["brokers"][0]["port"] == broker.port("REAUTH")
        answered += 1
        metrics = client.metrics.snapshot()
        if metrics["successful-reauthentication-total"] >= reauthentications:
            break
        client.network.poll(100)
    return metrics, answered


def check_reauthenticated(broker, mechanism, reauthentications):
    if mechanism == "GSSAPI" and not broker.gssapi:
        pytest.skip("the MIT KDC is not available, so the broker has no GSSAPI")
    with KafkaClient(broker.client_configs("REAUTH", mechanism)) as client:
        client.connect()
        authenticator = client.network.selector.channel(client.node_id).authenticator
        # Kafka told the client how long its session lasts (SaslAuthenticate v1+).
        assert 0 < authenticator.session_lifetime_ms <= REAUTH_MS
        # Each re-authentication happens at 85-95 % of the session, so the
        # wanted number fits in (n + 1) sessions; the limit only stops a
        # broken client from looping forever.
        metrics, answered = keep_busy_until_reauthenticated(
            client, broker, reauthentications, (reauthentications + 2) * REAUTH_MS / 1000)
    assert metrics["successful-reauthentication-total"] >= reauthentications, metrics
    assert metrics["failed-reauthentication-total"] == 0
    # one connection all along: Kafka never had to close it for expiry
    assert metrics["connection-creation-total"] == 1
    assert metrics["connection-close-total"] == 0
    assert answered > 0


def test_scram_reauthentication_on_a_live_connection(kafka_broker):
    check_reauthenticated(kafka_broker, "SCRAM-SHA-256", 1)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_reauthentication_every_mechanism(kafka_broker, mechanism):
    check_reauthenticated(kafka_broker, mechanism, 1)


@pytest.mark.slow
def test_token_login_reauthenticates(kafka_broker):
    """A delegation-token login (SCRAM, tokenauth=true) re-authenticates
    with the token too; the session never outlives the token."""
    from kchannel.tokens.admin import DelegationTokenAdmin
    from tests.fixtures.kafka_tokens import created, expired, token_configs
    with KafkaClient(kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-512")) as admin:
        admin.connect()
        tokens = DelegationTokenAdmin(admin)
        token = created(tokens, max_lifetime_ms=3600_000)
        try:
            with KafkaClient(token_configs(kafka_broker, token, "REAUTH",
                                           "SCRAM-SHA-512")) as client:
                client.connect()
                metrics, answered = keep_busy_until_reauthenticated(
                    client, kafka_broker, 2, 4 * REAUTH_MS / 1000)
        finally:
            expired(tokens, token)
    assert metrics["successful-reauthentication-total"] >= 2, metrics
    assert metrics["failed-reauthentication-total"] == 0
    assert metrics["connection-creation-total"] == 1
    assert answered > 0


@pytest.mark.slow
def test_expired_token_fails_reauthentication(kafka_broker):
    """Once its token is gone, a token-authenticated connection's next
    re-authentication fails: Kafka answers with the SCRAM failure, the
    connection closes, and the client reports the broker's message as a
    SaslAuthenticationError (what Kafka's Java client raises)."""
    from kchannel import errors
    from kchannel.tokens.admin import DelegationTokenAdmin
    from tests.fixtures.kafka_tokens import created, expired, token_configs
    with KafkaClient(kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")) as admin:
        admin.connect()
        tokens = DelegationTokenAdmin(admin)
        token = created(tokens, max_lifetime_ms=3600_000)
        with KafkaClient(token_configs(kafka_broker, token, "REAUTH")) as client:
            client.connect()
            expired(tokens, token)
            deadline = time.monotonic() + 3 * REAUTH_MS / 1000
            with pytest.raises(errors.SaslAuthenticationError) as exc:
                while time.monotonic() < deadline:
                    client.request(ApiKey.METADATA, {"topics": []})
                    client.network.poll(100)
            metrics = client.metrics.snapshot()
    assert str(exc.value) == ("Authentication failed during re-authentication due to "
                              "invalid credentials with SASL mechanism SCRAM-SHA-256")
    assert metrics["failed-reauthentication-total"] == 1
    assert metrics["successful-reauthentication-total"] == 0
