"""KIP-768 signed OAuth tokens with real clients against ``kchannel serve``.

The server validates OAUTHBEARER tokens with Kafka's
``OAuthBearerValidatorCallbackHandler`` configuration (JWKS file, expected
audience and issuer).  A tiny OAuth token endpoint in this process issues
RS256 JWTs for the client-credentials grant; librdkafka fetches its tokens
from it (``sasl.oauthbearer.method=oidc``), kafka-python 3 and aiokafka are
handed the same kind of token by a token provider.  Tokens signed by another
key, for another audience or already expired are refused with KIP-255's
``invalid_token``.
"""
import asyncio
import base64
import http.server
import json
import logging
import threading
import time

import pytest

from tests.fixtures.peers import free_ports, start_kchannel_server
from tests.fixtures.rdkafka import rdkafka_brokers

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NODE_ID = 8
AUDIENCE = "kafka-cluster"
ISSUER = "https://issuer.example"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def uint_b64(n):
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class Issuer:
    """An RSA key pair that signs RS256 JWTs and publishes its JWKS."""

    def __init__(self, kid):
        from cryptography.hazmat.primitives.asymmetric import rsa
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self):
        pub = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                          "n": uint_b64(pub.n), "e": uint_b64(pub.e)}]}

    def token(self, sub="alice", audience=AUDIENCE, issuer=ISSUER, lifetime_s=3600,
              scope="kafka"):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        claims = {"sub": sub, "aud": audience, "iss": issuer, "iat": now - 5,
                  "exp": now + lifetime_s, "scope": scope}
        signing_input = (b64url(json.dumps(header).encode()) + "." +
                         b64url(json.dumps(claims).encode())).encode("ascii")
        signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return signing_input.decode("ascii") + "." + b64url(signature)


@pytest.fixture(scope="module")
def issuer():
    pytest.importorskip("cryptography")
    return Issuer("key-1")


@pytest.fixture(scope="module")
def token_endpoint(issuer):
    """``http://127.0.0.1:<port>/token``: client-credentials grant for
    client id ``kafka-client`` / secret ``client-secret``."""
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            auth = self.headers.get("Authorization", "")
            requests.append((self.path, body, auth))
            expected = "Basic " + base64.b64encode(b"kafka-client:client-secret").decode()
            if auth != expected or "grant_type=client_credentials" not in body:
                self.send_response(401)
                self.end_headers()
                return
            payload = json.dumps({"access_token": issuer.token(sub="kafka-client"),
                                  "token_type": "Bearer", "expires_in": 3600}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.requests = requests
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}/token"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, issuer):
    directory = tmp_path_factory.mktemp("oauth")
    jwks_path = directory / "jwks.json"
    jwks_path.write_text(json.dumps(issuer.jwks()))
    (port,) = free_ports(1)
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    props = {
        "node.id": str(NODE_ID),
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        prefix + "sasl.jaas.config": f"{OAUTH_MODULE} required;",
        prefix + "sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "connection.failed.authentication.delay.ms": "0",
    }
    srv = start_kchannel_server(directory, props)
    yield srv
    srv.stop_and_check()


def expected_jwks_brokers(server):
    return [(NODE_ID, "127.0.0.1", server.port("SASL_PLAINTEXT"))]


# ------------------------------------------------------------------ librdkafka
def test_librdkafka_oidc_client_credentials(server, token_endpoint):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "kafka-client",
        "sasl.oauthbearer.client.secret": "client-secret",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url})
    assert brokers == expected_jwks_brokers(server), errors
    assert token_endpoint.requests, "librdkafka never asked the token endpoint"


def test_librdkafka_oidc_wrong_client_secret(server, token_endpoint):
    result, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "kafka-client",
        "sasl.oauthbearer.client.secret": "wrong",
        "sasl.oauthbearer.token.endpoint.url": token_endpoint.url}, timeout=1.5)
    assert isinstance(result, Exception)


# ------------------------------------------------- kafka-python 3 / aiokafka
def kafka_python_with_token(caplog, server, token, timeout_ms=10000):
    kafka = pytest.importorskip("kafka")
    oauth = pytest.importorskip("kafka.net.sasl.oauth")
    caplog.set_level(logging.WARNING, logger="kafka")

    class Provider(oauth.AbstractTokenProvider):
        def token(self):
            return token
    try:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=server.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(), request_timeout_ms=5000,
            bootstrap_timeout_ms=timeout_ms)
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        return RuntimeError(repr(exc)), [r.getMessage() for r in caplog.records]
    try:
        consumer.topics()
        return sorted((b.node_id, b.host, b.port)
                      for b in consumer._client.cluster.brokers()), []
    finally:
        consumer.close()


def test_kafka_python_signed_token(server, issuer, caplog):
    brokers, logs = kafka_python_with_token(caplog, server, issuer.token())
    assert brokers == expected_jwks_brokers(server), logs


@pytest.mark.parametrize("case", ["other-key", "other-audience", "other-issuer", "expired"])
def test_kafka_python_refused_tokens(server, issuer, caplog, case):
    mark = server.mark()
    if case == "other-key":
        token = Issuer("key-1").token()          # same kid, another key
    elif case == "other-audience":
        token = issuer.token(audience="another-service")
    elif case == "other-issuer":
        token = issuer.token(issuer="https://evil.example")
    else:
        token = issuer.token(lifetime_s=-3600)
    result, logs = kafka_python_with_token(caplog, server, token, timeout_ms=1200)
    assert isinstance(result, Exception), result
    # the KIP-255 error JSON reaches the client as the SaslAuthenticate error
    # (unless kafka-python loses it to its end-of-stream race; the server log
    # has it either way)
    assert (any("invalid_token" in m for m in logs)
            or any("socket disconnected" in m for m in logs)), logs
    assert server.wait_for_log(r"WARNING .*Failed authentication with .*invalid_token",
                               timeout=5, start=mark), server.log()[-3000:]


def test_aiokafka_signed_token(server, issuer, caplog):
    aiokafka = pytest.importorskip("aiokafka")
    abc = pytest.importorskip("aiokafka.abc")
    token = issuer.token()

    class Provider(abc.AbstractTokenProvider):
        async def token(self):
            return token

    async def main():
        client = aiokafka.AIOKafkaClient(
            bootstrap_servers=server.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Provider(), request_timeout_ms=5000)
        await client.bootstrap()
        try:
            return sorted((b.nodeId, b.host, b.port) for b in client.cluster.brokers())
        finally:
            await client.close()
    assert asyncio.run(main()) == expected_jwks_brokers(server)
