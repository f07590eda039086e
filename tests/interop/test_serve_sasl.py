"""Real Kafka clients against ``kchannel serve`` SASL listeners.

One ``kchannel serve`` subprocess for the module:

* ``SASL_PLAINTEXT`` bound and advertised at ``127.0.0.1:<p1>``;
* ``SASL_SSL`` bound at ``127.0.0.1:<p2>``, advertised as ``localhost:<p2>``;

both with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (KIP-255
unsecured JWS) and -- when the private KDC fixture can run -- GSSAPI, all
configured as Kafka brokers are, with ``listener.name.<l>.<mech>.sasl.jaas.config``
properties.  SCRAM users are created offline with ``kchannel configs
--server-config`` before the server starts.

Clients: librdkafka (confluent-kafka: PLAIN, SCRAM, OAUTHBEARER), kafka-python
3.x and aiokafka (SaslHandshake v1 + SaslAuthenticate; those plus GSSAPI) and
Debian's kafka-python 2.0.2 (SaslHandshake v0 with raw tokens: PLAIN, SCRAM,
GSSAPI).  Each fetches metadata with the right credentials and sees the
broker at the advertised address of the listener it used; wrong credentials
fail within seconds with the server's message where the protocol carries it.

The last section puts the same clients against an in-process ``Server``
(SASL_PLAINTEXT, one per test): librdkafka (PLAIN, SCRAM with an escaped
user name, OAUTHBEARER, SASL_SSL, the server's failure message,
re-authentication), kafka-python 3.x, aiokafka and the Debian kafka-python
2.0.2 (SaslHandshake v0, which waits for the empty final PLAIN frame).
"""
import asyncio
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.fixtures.peers import free_ports, legacy_kafka_python_metadata, start_kchannel_server
from tests.fixtures.rdkafka import rdkafka_brokers
from tests.fixtures.sasl_servers import start_server, wait_metric
from tests.fixtures.sasl import unsecured_jws
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NODE_ID = 7
PROTOCOLS = ["SASL_PLAINTEXT", "SASL_SSL"]
PASSWORD_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USER, PASSWORD = "alice", "alice-secret"

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

PLAIN_FAILURE = "Authentication failed: Invalid username or password"
SCRAM_FAILURE = ("Authentication failed during authentication due to invalid credentials "
                 "with SASL mechanism {}")


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki, kdc_or_none):
    kdc = kdc_or_none
    p1, p2 = free_ports(2)
    mechanisms = PASSWORD_MECHANISMS + ["OAUTHBEARER"] + (["GSSAPI"] if kdc else [])
    props = {
        "node.id": str(NODE_ID),
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{p1},SASL_SSL://127.0.0.1:{p2}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{p1},SASL_SSL://localhost:{p2}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        # Failed logins are answered at once (Kafka's default delays them).
        "connection.failed.authentication.delay.ms": "0",
    }
    jaas = {
        "plain": f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
                 f'user_admin="admin-secret" user_{USER}="{PASSWORD}";',
        "scram-sha-256": f"{SCRAM_MODULE} required;",
        "scram-sha-512": f"{SCRAM_MODULE} required;",
        "oauthbearer": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";',
    }
    env = None
    if kdc:
        props["sasl.kerberos.service.name"] = kdc.service_name
        jaas["gssapi"] = (f'{KRB5_MODULE} required useKeyTab=true storeKey=true '
                          f'keyTab="{kdc.service_keytab}" principal="{kdc.service_principal}";')
        env = kdc.env
    for listener in ("sasl_plaintext", "sasl_ssl"):
        for mech, text in jaas.items():
            props[f"listener.name.{listener}.{mech}.sasl.jaas.config"] = text
    for k, v in pki.server_configs().items():
        props[f"listener.name.sasl_ssl.{k}"] = v
    srv = start_kchannel_server(tmp_path_factory.mktemp("sasl-serve"), props, env=env,
                                scram_users={USER: PASSWORD})
    srv.kdc = kdc
    yield srv
    srv.stop_and_check()


def expected_sasl_brokers(server, protocol):
    if protocol == "SASL_PLAINTEXT":
        return [(NODE_ID, "127.0.0.1", server.port(protocol))]
    return [(NODE_ID, "localhost", server.port(protocol))]


def bootstrap(server, protocol):
    # SASL_SSL is reached by name: host name verification is on.
    return server.bootstrap(protocol, "127.0.0.1" if protocol == "SASL_PLAINTEXT"
                            else "localhost")


def need_kdc(server):
    if server.kdc is None:
        pytest.skip("the private Kerberos KDC (krb5-kdc) is not available")
    return server.kdc


def failure_logged(server, mark, text):
    m = server.wait_for_log(r"WARNING .*Failed authentication with .*" + text, timeout=5,
                            start=mark)
    assert m is not None, server.log()[-3000:]


# ------------------------------------------------------------------ librdkafka
def rdkafka_conf(server, protocol, mechanism, pki, **extra):
    conf = {"bootstrap.servers": bootstrap(server, protocol), "security.protocol": protocol,
            "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": f"principal={USER}"})
    else:
        conf.update({"sasl.username": USER, "sasl.password": PASSWORD})
    if protocol == "SASL_SSL":
        conf.update({"ssl.ca.location": pki.ca.cert_path,
                     "ssl.endpoint.identification.algorithm": "https"})
    conf.update(extra)
    return conf


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS + ["OAUTHBEARER"])
def test_librdkafka(server, pki, protocol, mechanism):
    brokers, errors = rdkafka_brokers(rdkafka_conf(server, protocol, mechanism, pki))
    assert brokers == expected_sasl_brokers(server, protocol), errors


@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
def test_librdkafka_wrong_password(server, pki, mechanism):
    mark = server.mark()
    result, errors = rdkafka_brokers(
        rdkafka_conf(server, "SASL_PLAINTEXT", mechanism, pki, **{"sasl.password": "wrong"}),
        timeout=1.5)
    assert isinstance(result, Exception)
    message = PLAIN_FAILURE if mechanism == "PLAIN" else SCRAM_FAILURE.format(mechanism)
    # librdkafka shows the broker's SaslAuthenticate error message.
    assert any(message in e for e in errors), errors
    failure_logged(server, mark, "")


@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
def test_librdkafka_handshake_v0(server, pki, mechanism):
    """librdkafka told the broker is 0.10.x (no ApiVersions request) uses
    SaslHandshake v0 and raw SASL tokens -- the pre-KIP-152 path."""
    mark = server.mark()
    brokers, errors = rdkafka_brokers(rdkafka_conf(
        server, "SASL_PLAINTEXT", mechanism, pki,
        **{"api.version.request": False, "broker.version.fallback": "0.10.2.1"}))
    assert brokers == expected_sasl_brokers(server, "SASL_PLAINTEXT"), errors
    assert not server.wait_for_log(r"WARNING", timeout=0.2, start=mark)


def test_librdkafka_handshake_v0_wrong_password(server, pki):
    """Without SaslAuthenticate there is no error response: the server logs
    the reason and closes the connection."""
    mark = server.mark()
    result, _ = rdkafka_brokers(rdkafka_conf(
        server, "SASL_PLAINTEXT", "SCRAM-SHA-256", pki,
        **{"api.version.request": False, "broker.version.fallback": "0.10.2.1",
           "sasl.password": "wrong"}), timeout=1.5)
    assert isinstance(result, Exception)
    failure_logged(server, mark, SCRAM_FAILURE.format("SCRAM-SHA-256"))


# ---------------------------------------------------------------- kafka-python
def kafka_python_kwargs(server, protocol, mechanism, pki, password=PASSWORD, token=None):
    kw = {"bootstrap_servers": bootstrap(server, protocol), "security_protocol": protocol,
          "sasl_mechanism": mechanism}
    if mechanism in PASSWORD_MECHANISMS:
        kw.update(sasl_plain_username=USER, sasl_plain_password=password)
    elif mechanism == "GSSAPI":
        kdc = need_kdc(server)
        kw.update(sasl_kerberos_service_name=kdc.service_name,
                  sasl_kerberos_domain_name=kdc.service_host)
    if protocol == "SASL_SSL":
        kw.update(ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True)
    return kw


def kafka_python_token_provider(token):
    oauth = pytest.importorskip("kafka.net.sasl.oauth")

    class Provider(oauth.AbstractTokenProvider):
        def token(self):
            return token
    return Provider()


def kafka_python_metadata(caplog, timeout_ms=10000, **kw):
    kafka = pytest.importorskip("kafka")
    caplog.set_level(logging.WARNING, logger="kafka")
    try:
        consumer = kafka.KafkaConsumer(request_timeout_ms=5000, bootstrap_timeout_ms=timeout_ms,
                                       **kw)
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        return RuntimeError(repr(exc)), [r.getMessage() for r in caplog.records]
    try:
        assert consumer.topics() == set()
        return sorted((b.node_id, b.host, b.port)
                      for b in consumer._client.cluster.brokers()), []
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS + ["OAUTHBEARER", "GSSAPI"])
def test_kafka_python(server, pki, caplog, protocol, mechanism):
    kw = kafka_python_kwargs(server, protocol, mechanism, pki)
    if mechanism == "OAUTHBEARER":
        kw["sasl_oauth_token_provider"] = kafka_python_token_provider(unsecured_jws())
    brokers, logs = kafka_python_metadata(caplog, **kw)
    assert brokers == expected_sasl_brokers(server, protocol), logs


def kafka_python_saw(logs, message):
    """kafka-python 3.0.12 drops a response that arrives in the same read as
    the end of the stream (its transport's ``_sock_recv`` returns the data
    together with the error and ``_read_from_sock`` aborts without parsing
    it).  The server sends its SaslAuthenticate error and closes, as Kafka
    does (the response goes out when the failed connection is closed), so
    whether this client shows the server's message is a race on its side;
    it always fails, with the message or with "socket disconnected"."""
    return any(message in m for m in logs) or any("socket disconnected" in m for m in logs)


@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
def test_kafka_python_wrong_password(server, pki, caplog, mechanism):
    mark = server.mark()
    kw = kafka_python_kwargs(server, "SASL_PLAINTEXT", mechanism, pki, password="wrong")
    result, logs = kafka_python_metadata(caplog, timeout_ms=1200, **kw)
    assert isinstance(result, Exception)
    message = PLAIN_FAILURE if mechanism == "PLAIN" else SCRAM_FAILURE.format(mechanism)
    assert kafka_python_saw(logs, message), logs
    failure_logged(server, mark, message)


def test_kafka_python_expired_oauth_token(server, pki, caplog):
    mark = server.mark()
    kw = kafka_python_kwargs(server, "SASL_PLAINTEXT", "OAUTHBEARER", pki)
    kw["sasl_oauth_token_provider"] = kafka_python_token_provider(
        unsecured_jws(lifetime_s=-600))
    result, logs = kafka_python_metadata(caplog, timeout_ms=1200, **kw)
    assert isinstance(result, Exception)
    # KIP-255: the server's error is {"status":"invalid_token"} JSON; the
    # final SaslAuthenticate error that carries it to kafka-python is
    # subject to the client's end-of-stream race (see kafka_python_saw).
    assert kafka_python_saw(logs, "invalid_token"), logs
    failure_logged(server, mark, "")


# -------------------------------------------------------------------- aiokafka
def aiokafka_metadata(caplog, **kw):
    aiokafka = pytest.importorskip("aiokafka")
    caplog.set_level(logging.WARNING, logger="aiokafka")

    async def main():
        client = aiokafka.AIOKafkaClient(request_timeout_ms=5000, **kw)
        try:
            await client.bootstrap()
            return sorted((b.nodeId, b.host, b.port) for b in client.cluster.brokers())
        finally:
            await client.close()
    try:
        return asyncio.run(main()), []
    except Exception as exc:  # noqa: BLE001
        return RuntimeError(repr(exc)), [r.getMessage() for r in caplog.records]


def aiokafka_kwargs(server, protocol, mechanism, pki, password=PASSWORD, token=None):
    kw = kafka_python_kwargs(server, protocol, mechanism, pki, password)
    kw.pop("ssl_cafile", None)
    kw.pop("ssl_check_hostname", None)
    if protocol == "SASL_SSL":
        helpers = pytest.importorskip("aiokafka.helpers")
        kw["ssl_context"] = helpers.create_ssl_context(cafile=pki.ca.cert_path)
    if mechanism == "OAUTHBEARER":
        abc = pytest.importorskip("aiokafka.abc")

        class Provider(abc.AbstractTokenProvider):
            async def token(self):
                return token or unsecured_jws()
        kw["sasl_oauth_token_provider"] = Provider()
    return kw


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS + ["OAUTHBEARER", "GSSAPI"])
def test_aiokafka(server, pki, caplog, protocol, mechanism):
    brokers, logs = aiokafka_metadata(caplog, **aiokafka_kwargs(server, protocol, mechanism,
                                                                pki))
    assert brokers == expected_sasl_brokers(server, protocol), logs


@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
def test_aiokafka_wrong_password(server, pki, caplog, mechanism):
    mark = server.mark()
    result, logs = aiokafka_metadata(caplog, **aiokafka_kwargs(
        server, "SASL_PLAINTEXT", mechanism, pki, password="wrong"))
    assert isinstance(result, Exception)
    message = PLAIN_FAILURE if mechanism == "PLAIN" else SCRAM_FAILURE.format(mechanism)
    assert any(message in m for m in logs), logs
    failure_logged(server, mark, "")


def test_aiokafka_expired_oauth_token(server, pki, caplog):
    """aiokafka 0.14 does not look at the KIP-255 error challenge
    (``{"status":"invalid_token"}``): it takes the exchange as complete and
    sends Metadata, which the server -- as Kafka's SaslServerAuthenticator --
    refuses as an unexpected request during authentication: it answers with
    Kafka's Metadata error response (no brokers, ILLEGAL_SASL_STATE for any
    requested topic) and closes the connection.  aiokafka takes that for a
    cluster without brokers, as it would from Kafka."""
    mark = server.mark()
    result, logs = aiokafka_metadata(caplog, **aiokafka_kwargs(
        server, "SASL_PLAINTEXT", "OAUTHBEARER", pki, token=unsecured_jws(lifetime_s=-600)))
    assert result == [], (result, logs)
    failure_logged(server, mark, "Unexpected Kafka request of type METADATA during SASL "
                                 "authentication")


# ------------------------------------------- Debian kafka-python 2.0.2 (v0)
def legacy_configs(server, protocol, mechanism, pki, password=PASSWORD):
    kw = kafka_python_kwargs(server, protocol, mechanism, pki, password)
    if protocol == "SASL_SSL":
        kw["ssl_check_hostname"] = True
    return kw


@pytest.mark.parametrize("protocol,mechanism", [
    ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "GSSAPI"),
    ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "GSSAPI")])
def test_debian_kafka_python_handshake_v0(server, pki, legacy_kafka_python, protocol,
                                          mechanism):
    env = server.kdc.env if mechanism == "GSSAPI" and server.kdc else None
    r = legacy_kafka_python_metadata(legacy_configs(server, protocol, mechanism, pki), env=env)
    assert r["ok"], r
    assert [tuple(b) for b in r["brokers"]] == expected_sasl_brokers(server, protocol)


@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS)
def test_debian_kafka_python_wrong_password(server, pki, legacy_kafka_python, mechanism):
    """SaslHandshake v0 carries no error message: the server logs the reason
    and closes the connection, which the client sees at once."""
    mark = server.mark()
    r = legacy_kafka_python_metadata(
        legacy_configs(server, "SASL_PLAINTEXT", mechanism, pki, password="wrong"))
    assert not r["ok"], r
    # (the client's own deadline, 30 s, did not end it: the close did; no
    # wall-clock bound, which a loaded machine's process start-up can miss)
    assert r["error"] != "Timeout", r
    message = PLAIN_FAILURE if mechanism == "PLAIN" else SCRAM_FAILURE.format(mechanism)
    failure_logged(server, mark, message)


# ------------------------------------- broker-api-versions, every mechanism
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", PASSWORD_MECHANISMS + ["OAUTHBEARER", "GSSAPI"])
def test_broker_api_versions_command_config(server, pki, tmp_path, protocol, mechanism):
    """The kchannel client through ``kchannel broker-api-versions
    --command-config``, with Kafka client properties for each mechanism."""
    from tests.fixtures.peers import run_kchannel, write_properties
    props = {"security.protocol": protocol, "sasl.mechanism": mechanism}
    env = None
    if mechanism == "PLAIN":
        props["sasl.jaas.config"] = (f'{PLAIN_MODULE} required username="{USER}" '
                                     f'password="{PASSWORD}";')
    elif mechanism.startswith("SCRAM"):
        props["sasl.jaas.config"] = (f'{SCRAM_MODULE} required username="{USER}" '
                                     f'password="{PASSWORD}";')
    elif mechanism == "OAUTHBEARER":
        props["sasl.jaas.config"] = f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{USER}";'
    else:
        kdc = need_kdc(server)
        props["sasl.kerberos.service.name"] = kdc.service_name
        props["sasl.jaas.config"] = kdc.jaas_config()
        env = kdc.env
    if protocol == "SASL_SSL":
        props.update(pki.client_configs())
    cfg = write_properties(tmp_path / "client.properties", props)
    # GSSAPI needs the service's host name: bootstrap by name on both listeners
    host = "localhost" if mechanism == "GSSAPI" or protocol == "SASL_SSL" else "127.0.0.1"
    r = run_kchannel("broker-api-versions", "--bootstrap-server",
                     server.bootstrap(protocol, host), "--command-config", cfg, env=env)
    assert r.returncode == 0, r.stderr
    (_, h, p), = expected_sasl_brokers(server, protocol)
    node = f"{h}:{p} (id: {NODE_ID} rack: null isFenced: false) -> "
    if mechanism == "GSSAPI" and h == "127.0.0.1":
        # As a Kafka client, the service principal is built from the host
        # connected to: the bootstrap (localhost) authenticated, but the
        # advertised 127.0.0.1 means kafka/127.0.0.1, which this server is not.
        assert r.stdout == (node + "ERROR: Authentication failed during authentication due "
                            "to invalid credentials with SASL mechanism GSSAPI\n")
        return
    assert r.stdout.startswith(node + "(\n"), r.stdout
    assert "\tSaslAuthenticate(36): 0 to 2 [usable: 2],\n" in r.stdout


def test_kchannel_client_oauthbearer_logins_never_refused(server):
    from kchannel import errors
    from kchannel.client import KafkaClient
    conf = {"bootstrap.servers": bootstrap(server, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{USER}";'}
    refused = 0
    for _ in range(200):
        client = KafkaClient(conf)
        try:
            client.connect()
        except errors.SaslAuthenticationError as exc:
            assert "invalid_token" in str(exc)
            refused += 1
        finally:
            client.close()
    assert refused == 0


# ============================================ an in-process Server
DEBIAN_DIST = "/usr/lib/python3/dist-packages"

USERS = [("PLAIN", "alice", "alice-secret"),
         ("SCRAM-SHA-256", "alice", "alice-secret"),
         ("SCRAM-SHA-512", "bob", "bob-secret")]


@pytest.fixture
def inproc_server():
    """An in-process ``Server`` (SASL_PLAINTEXT: PLAIN, SCRAM, OAUTHBEARER)."""
    srv, port = start_server(failed_authentication_delay_ms=0)
    srv.port = port
    yield srv
    srv.shutdown()


# ------------------------------------------------------------------ librdkafka
def _rdkafka_admin(port, mechanism, user=None, password=None, **extra):
    admin = pytest.importorskip("confluent_kafka.admin")
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism}
    if user is not None:
        conf.update({"sasl.username": user, "sasl.password": password})
    conf.update(extra)
    return admin.AdminClient(conf)


@pytest.mark.parametrize("mechanism,user,password",
                         USERS + [("SCRAM-SHA-512", "us,er=1", "odd-secret")])
def test_librdkafka_inprocess(inproc_server, mechanism, user, password):
    md = _rdkafka_admin(inproc_server.port, mechanism, user, password).list_topics(timeout=15)
    assert list(md.brokers) == [0]
    assert wait_metric(inproc_server, "successful-authentication-total", 1) >= 1
    assert inproc_server.metrics.metric("failed-authentication-total") == 0


def test_librdkafka_oauthbearer_unsecured(inproc_server):
    admin = _rdkafka_admin(inproc_server.port, "OAUTHBEARER",
                           **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                              "sasl.oauthbearer.config": "principal=alice"})
    assert list(admin.list_topics(timeout=15).brokers) == [0]


def test_librdkafka_sasl_ssl(pki):
    srv, port = start_server("SASL_SSL", pki=pki, failed_authentication_delay_ms=0)
    try:
        admin = _rdkafka_admin(port, "SCRAM-SHA-256", "alice", "alice-secret",
                               **{"security.protocol": "SASL_SSL",
                                  "ssl.ca.location": pki.ca.cert_path})
        assert list(admin.list_topics(timeout=15).brokers) == [0]
    finally:
        srv.shutdown()


def test_librdkafka_sees_server_failure_message(inproc_server):
    errors = []
    seen = threading.Event()

    def on_error(err):
        errors.append(str(err))
        seen.set()

    admin = _rdkafka_admin(inproc_server.port, "PLAIN", "alice", "wrong", error_cb=on_error)
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 30
    while not seen.is_set() and time.monotonic() < deadline:
        admin.poll(0.2)      # error callbacks are served from poll()
    assert any("Invalid username or password" in e for e in errors), errors


def test_librdkafka_reauthenticates(pki):
    """KIP-368 with a real client: librdkafka re-authenticates within the
    session lifetime the server hands out."""
    srv, port = start_server(failed_authentication_delay_ms=0,
                             extra={"connections.max.reauth.ms": "1500"})
    try:
        admin = _rdkafka_admin(port, "SCRAM-SHA-256", "alice", "alice-secret")
        def reauthenticated():
            admin.list_topics(timeout=10)
            return srv.metrics.metric("successful-reauthentication-total") >= 1
        wait_until(reauthenticated, "a re-authentication", timeout_s=60, interval_s=0.1)
        assert srv.metrics.metric("successful-reauthentication-total") >= 1
        assert srv.metrics.metric("failed-reauthentication-total") == 0
    finally:
        srv.shutdown()


# ---------------------------------------------------------------- kafka-python
@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_kafka_python_inprocess(inproc_server, mechanism, user, password):
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{inproc_server.port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
        request_timeout_ms=10000)
    try:
        assert consumer.topics() == set()
    finally:
        consumer.close()


_DEBIAN_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[5])
import kafka
assert kafka.__version__.startswith("2.0"), kafka.__version__
c = kafka.KafkaConsumer(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism=sys.argv[2], sasl_plain_username=sys.argv[3],
                        sasl_plain_password=sys.argv[4], api_version=(1, 0, 0),
                        request_timeout_ms=10000)
print(kafka.__version__, sorted(c.topics()))
c.close()
"""


@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_debian_kafka_python_2_handshake_v0(inproc_server, mechanism, user, password):
    if not os.path.isdir(os.path.join(DEBIAN_DIST, "kafka")):
        pytest.skip("Debian python3-kafka is not installed")
    result = subprocess.run(
        [sys.executable, "-c", _DEBIAN_SCRIPT, f"127.0.0.1:{inproc_server.port}", mechanism, user,
         password, DEBIAN_DIST], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "2.0.2 []"
    assert wait_metric(inproc_server, "successful-authentication-total", 1) >= 1
    # v0 clients send raw tokens, so they cannot re-authenticate.
    assert inproc_server.metrics.metric("successful-authentication-no-reauth-total") >= 1


# -------------------------------------------------------------------- aiokafka
@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_aiokafka_inprocess(inproc_server, mechanism, user, password):
    aiokafka = pytest.importorskip("aiokafka")

    async def main():
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{inproc_server.port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    assert asyncio.run(main()) == set()
