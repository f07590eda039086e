"""ClientConfig: Java keys, librdkafka and kafka-python/aiokafka aliases."""
import logging

import pytest

from kchannel.config import ClientConfig, parse_jaas_config
from kchannel.config.aliases import credentials_jaas, jaas_quote
from kchannel.config.types import Password, reveal
from kchannel.errors import ConfigError

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_defaults_match_kafka():
    c = ClientConfig({})
    assert c.security_protocol == "PLAINTEXT"
    assert c.sasl_mechanism == "GSSAPI"
    assert c.get("connections.max.idle.ms") == 540000
    assert c.get("request.timeout.ms") == 30000
    assert c.get("reconnect.backoff.ms") == 50 and c.get("reconnect.backoff.max.ms") == 1000
    assert c.get("ssl.endpoint.identification.algorithm") == "https"
    assert c.get("ssl.protocol") == "TLSv1.3"
    assert c.jaas() is None and c.bootstrap_servers == []


def test_java_keys():
    c = ClientConfig({"bootstrap.servers": "a:9092, b:9093", "security.protocol": "sasl_ssl",
                      "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.jaas.config": f'{SCRAM} required username="u" password="p";',
                      "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"})
    assert c.bootstrap_servers == ["a:9092", "b:9093"]
    assert c.bootstrap_addresses == [("a", 9092), ("b", 9093)]
    assert ClientConfig({"bootstrap.servers": "PLAINTEXT://[::1]:9092"}).bootstrap_addresses == [("::1", 9092)]
    assert c.security_protocol == "SASL_SSL"   # case-insensitive, as Kafka's validator
    assert c.jaas().option("username") == "u"
    assert isinstance(c.values()["sasl.jaas.config"], Password)


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "TLS"},
     "Invalid value TLS for configuration security.protocol: String must be one of (case insensitive): "
     "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"bootstrap.servers": "localhost"}, "Invalid url in bootstrap.servers: localhost"),
    ({"bootstrap.servers": "a:1,b:x"}, "Invalid url in bootstrap.servers: b:x"),
    ({"request.timeout.ms": "-1"}, "Invalid value -1 for configuration request.timeout.ms: Value must be at least 0"),
    ({"request.timeout.ms": True},
     "Invalid value true for configuration request.timeout.ms: Expected value to be a 32-bit integer, "
     "but it was a builtins.bool"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
     "Could not find a 'KafkaClient' entry in the JAAS configuration. System property "
     "'java.security.auth.login.config' is not set"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "x required"},
     "JAAS config entry not terminated by semi-colon"),
    ({"security.protocol": "SSL", "ssl.truststore.password": "pw"},
     "SSL trust store is not specified, but trust store password is specified."),
    ({"security.protocol": "SSL", "ssl.truststore.certificates": "c"},
     "SSL trust store certs can be specified only for PEM, but trust store type is JKS."),
    ({"sasl_plain_username": "u"}, "Configuration sasl_plain_username needs both a user name and a password"),
    ({"sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
     "sasl.username/sasl.password can only be used with PLAIN or SCRAM mechanisms, not GSSAPI; set "
     "sasl.jaas.config instead"),
    ({"security_protocol": "SSL", "security.protocol": "SASL_SSL"},
     "Configuration security_protocol (translated to security.protocol) conflicts with security.protocol"),
])
def test_bad_client_configs(props, message):
    with pytest.raises(ConfigError) as ei:
        ClientConfig(props)
    assert message in [str(e) for e in ei.value.errors]


def test_librdkafka_names(caplog):
    with caplog.at_level(logging.INFO, logger="kchannel.config"):
        c = ClientConfig({"bootstrap.servers": "localhost:9092", "security.protocol": "sasl_plaintext",
                          "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "alice",
                          "sasl.password": 'pa"ss\\word'})
    assert c.sasl_mechanism == "SCRAM-SHA-256"
    j = c.jaas()
    assert j.login_module == SCRAM and j.option("username") == "alice" and j.option("password") == 'pa"ss\\word'
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "Client config sasl.mechanisms translated to sasl.mechanism" in infos
    assert "Client config sasl.username translated to a generated sasl.jaas.config" in infos
    assert not any("pa\"ss" in m for m in caplog.messages)
    assert c.unused == []


def test_kafka_python_names():
    c = ClientConfig(bootstrap_servers=["h1:9092", "h2:9092"], security_protocol="SASL_PLAINTEXT",
                     sasl_plain_username="bob", sasl_plain_password="bob-pw", request_timeout_ms=5000,
                     client_id="app")
    # kafka-python's default mechanism is PLAIN
    assert c.sasl_mechanism == "PLAIN"
    assert c.jaas().login_module == PLAIN and c.jaas().option("password") == "bob-pw"
    assert c.bootstrap_servers == ["h1:9092", "h2:9092"]
    assert c.get("request.timeout.ms") == 5000 and c.client_id == "app"


def test_check_hostname_and_endpoint_identification():
    assert ClientConfig({"ssl_check_hostname": False}).get("ssl.endpoint.identification.algorithm") == ""
    assert ClientConfig({"ssl_check_hostname": True}).get("ssl.endpoint.identification.algorithm") == "https"
    assert ClientConfig({"ssl.endpoint.identification.algorithm": "none"}).get(
        "ssl.endpoint.identification.algorithm") == ""
    assert ClientConfig({"enable.ssl.certificate.verification": "false"}).get(
        "enable.ssl.certificate.verification") is False


def test_pem_file_aliases(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n")
    cert = tmp_path / "client.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n")
    key = tmp_path / "client.key"
    key.write_text("-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n")
    for names in (("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"),
                  ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password")):
        c = ClientConfig({"security.protocol": "SSL", names[0]: str(ca), names[1]: str(cert),
                          names[2]: str(key), names[3]: "kpw"})
        v = c.values()
        assert v["ssl.truststore.type"] == "PEM" and v["ssl.truststore.location"] == str(ca)
        assert v["ssl.keystore.type"] == "PEM"
        assert "CLIENT" in reveal(v["ssl.keystore.certificate.chain"])
        assert "KEY" in reveal(v["ssl.keystore.key"])
        assert reveal(v["ssl.key.password"]) == "kpw"
    # a single file with key and certificate: Kafka's file-based PEM key store
    c = ClientConfig({"security.protocol": "SSL", "ssl_certfile": str(cert)})
    assert c.values()["ssl.keystore.location"] == str(cert) and c.values()["ssl.keystore.type"] == "PEM"
    with pytest.raises(ConfigError, match=r"Invalid value .*missing.pem for configuration ssl.key.location"):
        ClientConfig({"ssl.certificate.location": str(cert), "ssl.key.location": str(tmp_path / "missing.pem")})


def test_kerberos_and_oauth_aliases():
    c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI",
                      "sasl.kerberos.service.name": "kafka", "sasl.kerberos.keytab": "/etc/client.keytab",
                      "sasl.kerberos.principal": "client@EXAMPLE.COM"})
    e = c.jaas().entry
    assert e.login_module == "com.sun.security.auth.module.Krb5LoginModule"
    assert e.options == {"useKeyTab": "true", "storeKey": "true", "keyTab": "/etc/client.keytab",
                         "principal": "client@EXAMPLE.COM"}
    assert c.get("sasl.kerberos.service.name") == "kafka"
    c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                      "sasl.oauthbearer.config": "principal=admin scope=read,write lifeSeconds=600 extension_traceId=1"})
    assert c.jaas().options == {"unsecuredLoginStringClaim_sub": "admin", "unsecuredLoginListClaim_scope": ",read,write",
                                "unsecuredLoginLifetimeSeconds": "600", "unsecuredLoginExtension_traceId": "1"}

    class Provider:
        def token(self):
            return "t"
    p = Provider()
    c = ClientConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=p,
                     sasl_kerberos_domain_name="kafka.example.com")
    assert c.oauth_token_provider is p and c.jaas() is None
    assert c.get("kchannel.sasl.kerberos.domain.name") == "kafka.example.com"


def test_explicit_jaas_wins_over_generated(caplog):
    with caplog.at_level(logging.WARNING, logger="kchannel.config"):
        c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                          "sasl.username": "gen", "sasl.password": "gen",
                          "sasl.jaas.config": f'{PLAIN} required username="explicit" password="x";'})
    assert c.jaas().option("username") == "explicit"
    assert "Client config sasl.username ignored: sasl.jaas.config is set explicitly" in caplog.messages


def test_jaas_file_kafka_client_section(tmp_path):
    f = tmp_path / "client_jaas.conf"
    f.write_text(f'KafkaClient {{ {PLAIN} required username="fileuser" password="pw"; }};')
    c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                      "java.security.auth.login.config": str(f)})
    assert c.jaas().option("username") == "fileuser" and c.jaas().context_name == "KafkaClient"
    c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, f.read_text())
    assert c.jaas().option("username") == "fileuser"


def test_generated_jaas_quotes_round_trip():
    for value in ['plain', 'with space', 'q"uote', 'back\\slash', 'new\nline', "sl/ash", "123", "-x"]:
        text = credentials_jaas("PLAIN", value, value)
        e = parse_jaas_config(text).entries[0]
        assert e.options == {"username": value, "password": value}
    assert jaas_quote('a"b') == '"a\\"b"'


def test_unknown_keys_warned(caplog):
    with caplog.at_level(logging.WARNING, logger="kchannel.config"):
        c = ClientConfig({"acks": "all", "linger.ms": "5"})
    assert "These configurations '[acks, linger.ms]' were supplied but are not used yet." in caplog.messages
    assert c.unused == ["acks", "linger.ms"]


def test_repr_hides_secrets():
    c = ClientConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                      "sasl.username": "u", "sasl.password": "topsecret"})
    assert "topsecret" not in repr(c) and "topsecret" not in repr(c.values()) and "topsecret" not in repr(c.jaas())


def test_gssapi_service_name_rules():
    krb = 'com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true'
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}
    with pytest.raises(ConfigError, match="^No serviceName defined in either JAAS or Kafka config$"):
        ClientConfig({**base, "sasl.jaas.config": krb + ";"})
    with pytest.raises(ConfigError) as ei:
        ClientConfig({**base, "sasl.jaas.config": krb + ' serviceName="a";', "sasl.kerberos.service.name": "b"})
    assert str(ei.value) == ("Conflicting serviceName values found in JAAS and Kafka configs value in JAAS file a, "
                             "value in Kafka config b")
    assert ClientConfig({**base, "sasl.jaas.config": krb + ' serviceName="kafka";'}).kerberos_service_name == "kafka"
    assert ClientConfig({**base, "sasl.jaas.config": krb + ";",
                         "sasl.kerberos.service.name": "kafka"}).kerberos_service_name == "kafka"


def test_librdkafka_oidc():
    c = ClientConfig({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                      "ssl.truststore.type": "PEM", "ssl.truststore.certificates": "c",
                      "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "app",
                      "sasl.oauthbearer.client.secret": "app-secret", "sasl.oauthbearer.scope": "kafka",
                      "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
                      "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token"})
    assert c.jaas().options == {"clientId": "app", "clientSecret": "app-secret", "scope": "kafka",
                                "extension_logicalCluster": "lkc-1", "extension_identityPoolId": "pool-2"}
    assert c.get("sasl.login.callback.handler.class") == \
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
    assert c.get("sasl.oauthbearer.token.endpoint.url") == "https://idp.example.com/token"
    assert "app-secret" not in repr(c.jaas())
    with pytest.raises(ConfigError, match="needs sasl.oauthbearer.method=oidc"):
        ClientConfig({"sasl.oauthbearer.client.id": "app"})
    ctx = object()
    assert ClientConfig(ssl_context=ctx).ssl_context is ctx


def test_any_client_props_fail_closed():
    from hypothesis import given, settings, strategies as st

    from kchannel.config.aliases import SIMPLE_ALIASES
    from kchannel.config.definitions import CLIENT_CONFIG_DEF
    keys = sorted([k.name for k in CLIENT_CONFIG_DEF if k.type.value != "CLASS"
                   and k.name != "java.security.auth.login.config"]
                  + list(SIMPLE_ALIASES) + ["sasl.username", "sasl.password", "sasl_plain_username",
                                            "sasl_plain_password", "sasl.oauthbearer.config",
                                            "sasl.oauthbearer.method", "ssl.certificate.location",
                                            "ssl.key.location", "sasl.kerberos.keytab"])
    value = st.one_of(st.text(max_size=30), st.sampled_from(["SASL_SSL", "PLAIN", "GSSAPI", "oidc", "true", "1"]))

    @settings(max_examples=150, deadline=None)
    @given(st.dictionaries(st.sampled_from(keys), value, max_size=8))
    def check(props):
        errs = ClientConfig.validate(props)
        assert all(isinstance(e, ConfigError) for e in errs)
        if not errs:
            ClientConfig(props).values()
    check()
