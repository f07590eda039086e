"""Failed logins against Apache Kafka: the kchannel client raises the error
class that matches the Java client's exception and carries the broker's
message, word for word.

``JAVA`` records what Kafka's own AdminClient reports in each case (read from
the Java client's output against this very broker); kchannel names the same
exceptions ``...Error`` instead of ``...Exception``.  The slow test
``test_java_client_gets_the_recorded_errors`` runs the Java client
(tests/java/AdminProbe.java) on every case, so the record cannot drift from
what Kafka really does.
"""
import os

import pytest

from kchannel import errors
from kchannel.client import KafkaClient
from tests.fixtures.kafka import SCRAM_MODULE, java_command
from tests.fixtures.kafka_messages import NOT_SASL, PLAIN_FAILED, SCRAM_FAILED

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

# case -> (Java exception class, message)
JAVA = {
    "wrong-password-PLAIN": ("SaslAuthenticationException", PLAIN_FAILED),
    "unknown-user-PLAIN": ("SaslAuthenticationException", PLAIN_FAILED),
    "wrong-password-SCRAM-SHA-256": ("SaslAuthenticationException",
                                     SCRAM_FAILED.format("SCRAM-SHA-256")),
    "wrong-password-SCRAM-SHA-512": ("SaslAuthenticationException",
                                     SCRAM_FAILED.format("SCRAM-SHA-512")),
    "unknown-user-SCRAM-SHA-256": ("SaslAuthenticationException",
                                   SCRAM_FAILED.format("SCRAM-SHA-256")),
    "unknown-token-SCRAM-SHA-512": ("SaslAuthenticationException",
                                    SCRAM_FAILED.format("SCRAM-SHA-512")),
    "mechanism-not-enabled": (
        "UnsupportedSaslMechanismException",
        "Client SASL mechanism 'PLAIN' not enabled in the server, enabled mechanisms are "
        "[OAUTHBEARER]"),
    "token-on-PLAINTEXT-listener": ("IllegalSaslStateException",
                                    NOT_SASL.format("SCRAM-SHA-256")),
    "token-on-SSL-listener": ("IllegalSaslStateException", NOT_SASL.format("SCRAM-SHA-512")),
    "unsecured-jwt-on-JWKS-listener": ("SaslAuthenticationException",
                                       '{"status":"invalid_token"}'),
}


def token_jaas(token_id, hmac):
    return (f'{SCRAM_MODULE} required username="{token_id}" password="{hmac}" '
            'tokenauth="true";')


def case_configs(broker, case):
    """Client configs (Java keys) for ``case``."""
    if case.startswith(("wrong-password-", "unknown-user-")):
        mech = case.split("-", 2)[2]
        if case.startswith("wrong"):
            return broker.client_configs("SASL_PLAINTEXT", mech, password="wrong-secret")
        return broker.client_configs("SASL_PLAINTEXT", mech, user="nobody", password="x")
    if case == "unknown-token-SCRAM-SHA-512":
        c = broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
        c["sasl.jaas.config"] = token_jaas("NoSuchTokenId", "bm8tc3VjaC1obWFj")
        return c
    if case == "mechanism-not-enabled":
        c = broker.client_configs("SASL_PLAINTEXT", "PLAIN")
        c["bootstrap.servers"] = broker.bootstrap("OAUTH_JWKS")
        return c
    if case == "token-on-PLAINTEXT-listener":
        c = broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")
        c["sasl.jaas.config"] = token_jaas("NoSuchTokenId", "bm8tc3VjaC1obWFj")
        c["bootstrap.servers"] = broker.bootstrap("PLAINTEXT")
        return c
    if case == "token-on-SSL-listener":
        c = broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
        c["sasl.jaas.config"] = token_jaas("NoSuchTokenId", "bm8tc3VjaC1obWFj")
        c["bootstrap.servers"] = broker.bootstrap("SSL")
        return c
    if case == "unsecured-jwt-on-JWKS-listener":
        c = broker.client_configs("SASL_PLAINTEXT", "OAUTHBEARER")
        c["bootstrap.servers"] = broker.bootstrap("OAUTH_JWKS")
        return c
    raise AssertionError(case)


def kchannel_class(java_class):
    return getattr(errors, java_class[:-len("Exception")] + "Error")


@pytest.mark.parametrize("case", sorted(JAVA))
def test_kchannel_client_gets_what_the_java_client_gets(kafka_broker, case):
    java_class, message = JAVA[case]
    with KafkaClient(case_configs(kafka_broker, case)) as client:
        with pytest.raises(errors.AuthenticationError) as info:
            client.connect()
    assert type(info.value) is kchannel_class(java_class)
    assert str(info.value) == message


def test_jwt_for_another_audience_is_refused(kafka_broker):
    """A signed token the JWKS validates but meant for another audience."""
    token = kafka_broker.oauth.token(sub="alice", audience="another-cluster")
    with KafkaClient(kafka_broker.client_configs("OAUTH_JWKS", "OAUTHBEARER",
                                                 token=token)) as client:
        with pytest.raises(errors.SaslAuthenticationError,
                           match=r'^\{"status":"invalid_token"\}$'):
            client.connect()


def test_jwt_signed_by_another_key_is_refused(kafka_broker):
    from cryptography.hazmat.primitives.asymmetric import rsa
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = kafka_broker.oauth.token(sub="alice", key=other)
    with KafkaClient(kafka_broker.client_configs("OAUTH_JWKS", "OAUTHBEARER",
                                                 token=token)) as client:
        with pytest.raises(errors.SaslAuthenticationError,
                           match=r'^\{"status":"invalid_token"\}$'):
            client.connect()


@pytest.mark.slow
def test_java_client_gets_the_recorded_errors(kafka_broker, tmp_path):
    """Kafka's AdminClient, one JVM for all cases: each ends in the recorded
    exception class and message."""
    args = []
    for case in sorted(JAVA):
        configs = case_configs(kafka_broker, case)
        props = kafka_broker.write_client_properties(tmp_path / f"{case}.properties", configs)
        args.append(f"{case}={props}={configs['bootstrap.servers']}")
    probe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "java", "AdminProbe.java")
    import subprocess
    from tests.fixtures.kdc import _die_with_parent
    result = subprocess.run(java_command(probe, args, jvm_opts=kafka_broker.jvm_opts()),
                            capture_output=True, text=True, timeout=300,
                            preexec_fn=_die_with_parent)
    assert result.returncode == 0, result.stderr[-3000:]
    got = {}
    for line in result.stdout.splitlines():
        case, outcome, rest = line.split(" ", 2)
        got[case] = (outcome, rest)
    expected = {case: ("EXC", f"org.apache.kafka.common.errors.{cls} {msg}")
                for case, (cls, msg) in JAVA.items()}
    assert got == expected
