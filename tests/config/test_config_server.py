"""ServerConfig: Kafka's validation messages, listener-prefix precedence, JAAS precedence."""
import logging

import pytest

from kchannel.config import ServerConfig, parse_properties
from kchannel.config.definitions import SERVER_CONFIG_DEF
from kchannel.config.server import SRC_DEFAULT, SRC_GLOBAL, SRC_LISTENER, SRC_MECHANISM
from kchannel.config.types import Password, reveal
from kchannel.errors import ConfigError

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def plain_jaas(**users):
    opts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f"{PLAIN} required {opts};"


BASE = {"listeners": "PLAINTEXT://127.0.0.1:0"}


def errors_of(props, jaas=None):
    return [str(e) for e in ServerConfig.validate(props, jaas)]


def test_defaults_match_kafka():
    cfg = ServerConfig({})
    assert [e.connection_string for e in cfg.listeners] == ["PLAINTEXT://:9092"]
    assert cfg.listener_security_protocol_map == {
        "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    expected = {
        "socket.request.max.bytes": 104857600, "connections.max.idle.ms": 600000,
        "connections.max.reauth.ms": 0, "connection.failed.authentication.delay.ms": 100,
        "sasl.server.max.receive.size": 524288, "ssl.protocol": "TLSv1.3",
        "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"], "ssl.endpoint.identification.algorithm": "https",
        "ssl.client.auth": "none", "ssl.keystore.type": "JKS", "ssl.truststore.type": "JKS",
        "ssl.principal.mapping.rules": "DEFAULT", "sasl.enabled.mechanisms": ["GSSAPI"],
        "sasl.mechanism.inter.broker.protocol": "GSSAPI", "sasl.kerberos.principal.to.local.rules": ["DEFAULT"],
        "delegation.token.max.lifetime.ms": 604800000, "delegation.token.expiry.time.ms": 86400000,
        "delegation.token.expiry.check.interval.ms": 3600000, "security.inter.broker.protocol": "PLAINTEXT",
        "sasl.jaas.config": None, "delegation.token.secret.key": None, "ssl.cipher.suites": [],
    }
    for k, v in expected.items():
        assert cfg.get(k) == v, k
    assert not cfg.token_auth_enabled


def test_every_definition_has_doc_and_importance():
    for key in SERVER_CONFIG_DEF:
        assert key.doc and key.importance is not None
        if key.kchannel_specific:
            assert key.doc.startswith("kchannel-specific")


# --------------------------------------------------------- bad config table
BAD = [
    ({"socket.request.max.bytes": "abc"},
     "Invalid value abc for configuration socket.request.max.bytes: Not a number of type INT"),
    ({"socket.request.max.bytes": "0"},
     "Invalid value 0 for configuration socket.request.max.bytes: Value must be at least 1"),
    ({"socket.request.max.bytes": "4294967296"},
     "Invalid value 4294967296 for configuration socket.request.max.bytes: Not a number of type INT"),
    ({"connections.max.reauth.ms": "1_000"},
     "Invalid value 1_000 for configuration connections.max.reauth.ms: Not a number of type LONG"),
    ({"ssl.client.auth": "REQUIRED"},
     "Invalid value REQUIRED for configuration ssl.client.auth: String must be one of: required, requested, none"),
    ({"listener.name.plaintext.ssl.client.auth": "maybe"},
     "Invalid value maybe for configuration listener.name.plaintext.ssl.client.auth: String must be one of: "
     "required, requested, none"),
    ({"ssl.allow.dn.changes": "yes"},
     "Invalid value yes for configuration ssl.allow.dn.changes: Expected value to be either true or false"),
    ({"delegation.token.max.lifetime.ms": "0"},
     "Invalid value 0 for configuration delegation.token.max.lifetime.ms: Value must be at least 1"),
    ({"sasl.login.refresh.window.factor": "0.2"},
     "Invalid value 0.2 for configuration sasl.login.refresh.window.factor: Value must be at least 0.5"),
    ({"sasl.login.refresh.buffer.seconds": "40000"},
     "Invalid value 40000 for configuration sasl.login.refresh.buffer.seconds: Not a number of type SHORT"),
    ({"principal.builder.class": "no.such.module.Builder"},
     "Invalid value no.such.module.Builder for configuration principal.builder.class: "
     "Class no.such.module.Builder could not be found."),
    ({"security.inter.broker.protocol": "TLS"},
     "Invalid value TLS for configuration security.inter.broker.protocol: String must be one of: "
     "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"ssl.keystore.type": "JCEKS"},
     "Invalid value JCEKS for configuration ssl.keystore.type: kchannel supports key store types PKCS12 and PEM "
     "(JKS only when the file is actually PKCS12)"),
    ({"listeners": "PLAINTEXT:9092"},
     "Error creating broker listeners from 'PLAINTEXT:9092': Unable to parse PLAINTEXT:9092 to a broker endpoint"),
    ({"listeners": "CLIENT://:9092"},
     "Error creating broker listeners from 'CLIENT://:9092': No security protocol defined for listener CLIENT"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"},
     "requirement failed: Each listener must have a different name, listeners: PLAINTEXT://:9092,PLAINTEXT://:9093"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"},
     "requirement failed: Each listener must have a different port, listeners: PLAINTEXT://:9092,SSL://:9092"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092"},
     "requirement failed: If you have two listeners on the same port then one needs to be IPv4 and the other "
     "IPv6, listeners: PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092, port: 9092"),
    ({"listeners": "PLAINTEXT://:70000"},
     "Invalid port 70000 in listeners 'PLAINTEXT://:70000': a port is 0 (ephemeral) to 65535"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"},
     "Invalid security protocol `TLS` defined in listener.security.protocol.map"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     "requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
     "Use a routable IP address."),
    ({"advertised.listeners": "SSL://host:9093"},
     "requirement failed: advertised.listeners listener names must be equal to or a subset of the ones defined "
     "in listeners. Found SSL. The valid options based on the current configuration are PLAINTEXT"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
    ({"inter.broker.listener.name": "CLIENT"},
     "Listener with name CLIENT defined in inter.broker.listener.name not found in "
     "listener.security.protocol.map."),
    ({"inter.broker.listener.name": "SSL"},
     "requirement failed: inter.broker.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are PLAINTEXT"),
    ({"listeners": "SSL://:9093", "ssl.keystore.location": "/nonexistent/ks.p12",
      "ssl.keystore.password": "pw"},
     "requirement failed: inter.broker.listener.name must be a listener name defined in advertised.listeners. "
     "The valid options based on currently configured listeners are SSL"),
    ({"connection.failed.authentication.delay.ms": "600000"},
     "requirement failed: connection.failed.authentication.delay.ms=600000 should always be less than "
     "connections.max.idle.ms=600000 to prevent failed authentication responses from timing out"),
    ({"node.id": "1", "broker.id": "2"}, "You must set `node.id` to the same value as `broker.id`."),
    ({"process.roles": "broker", "controller.listener.names": "CONTROLLER"},
     "Missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in "
     "KRaft mode)."),
    ({"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(a="a")},
     "requirement failed: sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when "
     "SASL is used for inter-broker communication"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN"},
     "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS configuration. "
     "System property 'java.security.auth.login.config' is not set"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{PLAIN} required; {PLAIN} required;"},
     "JAAS config property contains 2 login modules, should be 1 module"),
    ({"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN,DIGEST-MD5", "sasl.mechanism.inter.broker.protocol": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(a="a")},
     "Invalid value DIGEST-MD5 for configuration sasl.enabled.mechanisms: kchannel supports the SASL mechanisms "
     "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI, OAUTHBEARER"),
    ({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL"},
     "Invalid value null for configuration ssl.keystore.location: an SSL listener needs a key store "
     "(ssl.keystore.location, or ssl.keystore.type=PEM with ssl.keystore.key and ssl.keystore.certificate.chain) "
     "(listener SSL, ssl.keystore.location)"),
    ({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
      "ssl.keystore.location": "/x/ks.p12"},
     "SSL key store is specified, but key store password is not specified. (listener SSL, ssl.keystore.password)"),
    ({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
      "listener.name.ssl.ssl.keystore.key": "k"},
     "SSL private key can be specified only for PEM, but key store type is JKS. "
     "(listener SSL, listener.name.ssl.ssl.keystore.key)"),
    ({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM",
      "ssl.keystore.key": "k"},
     "SSL private key is specified, but certificate chain is not specified. "
     "(listener SSL, ssl.keystore.certificate.chain)"),
]


@pytest.mark.parametrize("props, message", BAD, ids=[m[:60] for _, m in BAD])
def test_bad_config_table(props, message):
    merged = dict(BASE) if "listeners" not in props else {}
    merged.update(props)
    with pytest.raises(ConfigError) as ei:
        ServerConfig(merged)
    assert message in [str(e) for e in ei.value.errors], [str(e) for e in ei.value.errors]
    assert str(ei.value) == str(ei.value.errors[0])


def test_validate_collects_every_error():
    errs = errors_of({"socket.request.max.bytes": "x", "ssl.client.auth": "maybe",
                      "listeners": "PLAINTEXT://:1,SSL://:1", "connections.max.reauth.ms": "y",
                      "ssl.keystore.type": "PEM", "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"})
    assert len(errs) == 4
    assert any("socket.request.max.bytes" in e for e in errs)
    assert any("ssl.client.auth" in e for e in errs)
    assert any("connections.max.reauth.ms" in e for e in errs)
    assert any("Each listener must have a different port" in e for e in errs)
    assert errors_of(BASE) == []


def test_jks_store_refused_with_hint(tmp_path):
    jks = tmp_path / "ks.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    errs = errors_of({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
                      "ssl.keystore.location": str(jks), "ssl.keystore.password": "pw"})
    assert len(errs) == 1
    assert errs[0].startswith(f"Invalid value {jks} for configuration ssl.keystore.location: {jks} is a JKS key "
                              "store, which kchannel cannot read. Convert it with 'keytool -importkeystore")
    assert "ssl.keystore.type=PKCS12" in errs[0]


def test_jks_declared_pkcs12_file_accepted(tmp_path):
    p12 = tmp_path / "ks.p12"
    p12.write_bytes(b"\x30\x82\x01\x00" + b"\0" * 60)  # DER SEQUENCE: a PKCS12 container
    cfg = ServerConfig({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
                        "ssl.keystore.location": str(p12), "ssl.keystore.password": "pw"})
    assert cfg.get("ssl.keystore.type") == "JKS"          # as configured (Kafka's default)
    assert cfg.listener_configs("SSL")["ssl.keystore.type"] == "PKCS12"  # what the TLS layer gets


# ----------------------------------------------------------- listeners
def test_listener_parsing():
    cfg = ServerConfig({
        "listeners": "client://0.0.0.0:9092, REPLICATION://localhost:9093,SSL://[::1]:9094 , ext://:0",
        "listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:PLAINTEXT,ssl:SSL,EXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "replication",
        "advertised.listeners": "CLIENT://broker1.example.com:9092,REPLICATION://broker1:9093,"
                                "SSL://broker1:9094,EXT://broker1:9092",
    }, _errors=[])
    eps = {e.listener_name: e for e in cfg.listeners}
    assert list(eps) == ["CLIENT", "REPLICATION", "SSL", "EXT"]
    assert (eps["CLIENT"].host, eps["CLIENT"].port, eps["CLIENT"].security_protocol) == ("0.0.0.0", 9092, "SASL_SSL")
    assert eps["SSL"].host == "::1" and eps["SSL"].connection_string == "SSL://[::1]:9094"
    assert eps["EXT"].host is None and eps["EXT"].port == 0 and eps["EXT"].bind_host == ""
    assert eps["EXT"].connection_string == "EXT://:0"
    assert cfg.inter_broker_listener_name == "REPLICATION"
    assert cfg.inter_broker_security_protocol == "PLAINTEXT"
    # advertised listeners may share ports
    assert cfg.advertised_listener("ext").port == 9092
    assert cfg.advertised_listener("client").host == "broker1.example.com"


def test_ipv4_and_ipv6_may_share_a_port():
    cfg = ServerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
                        "ssl.keystore.type": "PEM", "ssl.keystore.key": "k",
                        "ssl.keystore.certificate.chain": "c"})
    assert [e.port for e in cfg.listeners] == [9092, 9092]


def test_ephemeral_ports_may_repeat():
    cfg = ServerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    assert [e.listener_name for e in cfg.listeners] == ["PLAINTEXT", "INTERNAL"]


def test_advertised_defaults_to_listeners():
    cfg = ServerConfig({"listeners": "PLAINTEXT://myhost:9092"})
    assert cfg.advertised_listeners == cfg.listeners


def test_kraft_controller_listener_gets_plaintext_mapping():
    cfg = ServerConfig({"process.roles": "broker,controller", "node.id": "1",
                        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                        "controller.listener.names": "CONTROLLER"})
    assert cfg.listener("CONTROLLER").security_protocol == "PLAINTEXT"
    assert cfg.node_id == 1 and cfg.get("broker.id") == 1


# ------------------------------------------------- listener-prefix precedence
def test_listener_prefix_precedence():
    """Kafka: ChannelBuildersTest.testChannelBuilderConfigs."""
    props = {
        "listeners": "LISTENER1://:9092,PLAINTEXT://:9093",
        "listener.security.protocol.map": "LISTENER1:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.listener1.plain.sasl.jaas.config": plain_jaas(a="a"),
        "listener.name.listener1.gssapi.sasl.kerberos.service.name": "testkafka",
        "listener.name.listener1.sasl.kerberos.service.name": "testkafkaglobal",
        "plain.sasl.server.callback.handler.class": "callback",
        "listener.name.listener1.gssapi.config1.key": "custom.config1",
        "custom.config2.key": "custom.config2",
    }
    cfg = ServerConfig(props)
    c = cfg.listener_configs("listener1")
    assert c.get("listener.name.listener1.gssapi.sasl.kerberos.service.name") is None
    assert c["gssapi.sasl.kerberos.service.name"] == "testkafka"
    assert c["sasl.kerberos.service.name"] == "testkafkaglobal"
    assert c.get("listener.name.listener1.sasl.kerberos.service.name") is None
    assert c.get("plain.sasl.server.callback.handler.class") is None
    assert c["listener.name.listener1.gssapi.config1.key"] == "custom.config1"
    assert c["custom.config2.key"] == "custom.config2"
    # the other listener sees only the broker-wide value
    p = cfg.listener_configs("PLAINTEXT")
    assert p["sasl.kerberos.service.name"] is None
    assert "gssapi.sasl.kerberos.service.name" not in p
    assert cfg.listener_mechanism_config("LISTENER1", "GSSAPI", "sasl.kerberos.service.name") == "testkafka"
    assert cfg.listener_mechanism_config("LISTENER1", "PLAIN", "sasl.kerberos.service.name") == "testkafkaglobal"


def test_prefixed_value_overrides_global_and_default():
    cfg = ServerConfig({
        "listeners": "INTERNAL://:9092,EXTERNAL://:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "connections.max.idle.ms": "1000",
        "listener.name.external.connections.max.idle.ms": "2000",
        "listener.name.internal.socket.request.max.bytes": "4096",
    })
    assert cfg.listener_configs("INTERNAL")["connections.max.idle.ms"] == 1000
    assert cfg.listener_configs("external")["connections.max.idle.ms"] == 2000
    assert cfg.listener_configs("INTERNAL")["socket.request.max.bytes"] == 4096
    assert cfg.listener_configs("EXTERNAL")["socket.request.max.bytes"] == 104857600
    rows = {(r.listener, r.key): r for r in cfg.describe()}
    assert rows[("EXTERNAL", "connections.max.idle.ms")].source == SRC_LISTENER
    assert rows[("EXTERNAL", "connections.max.idle.ms")].source_key == "listener.name.external.connections.max.idle.ms"
    assert rows[("INTERNAL", "connections.max.idle.ms")].source == SRC_GLOBAL
    assert rows[("EXTERNAL", "socket.request.max.bytes")].source == SRC_DEFAULT


def sasl_props(**extra):
    props = {
        "listeners": "SASL_PLAINTEXT://:9092,SASL_SSL://:9093,INTERNAL://:9094",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "ssl.keystore.type": "PEM", "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c",
    }
    props.update(extra)
    return props


JAAS_FILE = f"""
KafkaServer {{ {PLAIN} required user_global="g"; {SCRAM} required; }};
internal.KafkaServer {{ {PLAIN} required user_internal="i"; }};
"""


def test_jaas_precedence():
    cfg = ServerConfig(sasl_props(**{
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(dynamic="d"),
        "sasl.jaas.config": plain_jaas(ignored="x"),                      # unprefixed: ignored
        "listener.name.sasl_plaintext.sasl.jaas.config": plain_jaas(ignored="y"),  # no mechanism: ignored
    }), JAAS_FILE)
    # 1. listener+mechanism prefixed property
    j = cfg.jaas_for("SASL_SSL", "PLAIN")
    assert j.dynamic and j.option("user_dynamic") == "d" and j.context_name == "KafkaServer"
    # 2. <listener>.KafkaServer section
    j = cfg.jaas_for("INTERNAL", "PLAIN")
    assert not j.dynamic and j.context_name == "internal.KafkaServer" and j.option("user_internal") == "i"
    # 3. KafkaServer section
    j = cfg.jaas_for("SASL_PLAINTEXT", "PLAIN")
    assert j.context_name == "KafkaServer" and j.option("user_global") == "g"
    assert j.option("user_ignored") is None
    j = cfg.jaas_for("SASL_SSL", "SCRAM-SHA-256")
    assert j.context_name == "KafkaServer" and len(j.entries) == 2
    assert cfg.listener_mechanism_config("SASL_SSL", "PLAIN", "sasl.jaas.config") == Password(plain_jaas(dynamic="d"))
    assert cfg.listener_mechanism_config("SASL_PLAINTEXT", "PLAIN", "sasl.jaas.config") is None


def test_unprefixed_sasl_jaas_config_is_ignored_with_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kchannel.config"):
        ServerConfig(sasl_props(**{"sasl.jaas.config": plain_jaas(a="a")}), JAAS_FILE)
    assert ("Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config"
            in caplog.messages)


def test_jaas_file_from_property(tmp_path):
    f = tmp_path / "kafka_server_jaas.conf"
    f.write_text(JAAS_FILE)
    cfg = ServerConfig(sasl_props(**{"java.security.auth.login.config": str(f)}))
    assert cfg.jaas_for("INTERNAL", "PLAIN").option("user_internal") == "i"
    errs = errors_of(sasl_props(**{"java.security.auth.login.config": str(tmp_path / "none.conf")}))
    assert errs[0].startswith(f"Invalid value {tmp_path / 'none.conf'} for configuration "
                              "java.security.auth.login.config: No such file or directory")


def test_mechanism_only_keys_and_reauth_fallback():
    cfg = ServerConfig(sasl_props(**{
        "connections.max.reauth.ms": "100000",
        "listener.name.internal.connections.max.reauth.ms": "200000",
        "listener.name.internal.scram-sha-256.connections.max.reauth.ms": "300000",
        "sasl.server.callback.handler.class": "kchannel.config.types.Password",
        "listener.name.sasl_ssl.plain.sasl.server.callback.handler.class": "kchannel.config.types.Password",
    }), JAAS_FILE)
    m = cfg.listener_mechanism_config
    assert m("INTERNAL", "SCRAM-SHA-256", "connections.max.reauth.ms") == 300000
    assert m("INTERNAL", "PLAIN", "connections.max.reauth.ms") == 200000
    assert m("SASL_SSL", "PLAIN", "connections.max.reauth.ms") == 100000
    # server callback handlers are read only mechanism-prefixed on brokers
    assert m("SASL_SSL", "PLAIN", "sasl.server.callback.handler.class") == "kchannel.config.types.Password"
    assert m("SASL_SSL", "SCRAM-SHA-256", "sasl.server.callback.handler.class") is None
    assert m("INTERNAL", "PLAIN", "sasl.server.callback.handler.class") is None
    assert cfg.listener_configs("INTERNAL")["scram-sha-256.connections.max.reauth.ms"] == 300000
    rows = [r for r in cfg.describe() if r.listener == "INTERNAL" and r.key == "connections.max.reauth.ms"]
    assert {(r.mechanism, r.value, r.source) for r in rows} == {
        (None, "200000", SRC_LISTENER), ("PLAIN", "200000", SRC_LISTENER),
        ("SCRAM-SHA-256", "300000", SRC_MECHANISM)}


def test_enabled_mechanisms_per_listener():
    cfg = ServerConfig(sasl_props(**{"listener.name.internal.sasl.enabled.mechanisms": "PLAIN"}), JAAS_FILE)
    assert cfg.enabled_mechanisms("INTERNAL") == ["PLAIN"]
    assert cfg.enabled_mechanisms("SASL_SSL") == ["PLAIN", "SCRAM-SHA-256"]


def test_ssl_client_auth_for_sasl_ssl_needs_listener_prefix(caplog):
    with caplog.at_level(logging.WARNING, logger="kchannel.config"):
        cfg = ServerConfig(sasl_props(**{
            "listeners": "SASL_SSL://:9093,SSL://:9094,INTERNAL://:9095",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,INTERNAL:SASL_PLAINTEXT",
            "ssl.client.auth": "required"}), JAAS_FILE)
    assert cfg.listener_configs("SSL")["ssl.client.auth"] == "required"
    assert cfg.listener_configs("SASL_SSL")["ssl.client.auth"] == "none"
    assert any(m.startswith("Broker configuration 'ssl.client.auth' is applied only to SSL listeners.")
               for m in caplog.messages)
    cfg = ServerConfig(sasl_props(**{"listener.name.sasl_ssl.ssl.client.auth": "requested"}), JAAS_FILE)
    assert cfg.listener_configs("SASL_SSL")["ssl.client.auth"] == "requested"


def test_unused_keys_warned_once(caplog):
    with caplog.at_level(logging.WARNING, logger="kchannel.config"):
        cfg = ServerConfig({**BASE, "log.retention.hours": "168", "num.partitions": "1"})
    msgs = [m for m in caplog.messages if "were supplied but are not used yet" in m]
    assert msgs == ["These configurations '[log.retention.hours, "
                    "num.partitions]' were supplied but are not used yet."]
    assert cfg.unused == ["log.retention.hours", "num.partitions"]
    # Unlike Kafka, a listener prefix naming no listener is an error (README:
    # a listener's allow-list or login module must not fail open).
    assert any("names no listener" in e
               for e in errors_of({**BASE, "listener.name.nosuch.ssl.client.auth": "required"}))


def test_delegation_token_legacy_key():
    cfg = ServerConfig({**BASE, "delegation.token.master.key": "old"})
    assert reveal(cfg.delegation_token_secret_key) == "old" and cfg.token_auth_enabled
    cfg = ServerConfig({**BASE, "delegation.token.master.key": "old", "delegation.token.secret.key": "new"})
    assert reveal(cfg.delegation_token_secret_key) == "new"
    assert repr(cfg.get("delegation.token.secret.key")) == "[hidden]"


def test_describe_masks_secrets():
    cfg = ServerConfig(sasl_props(**{
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(alice="alice-secret"),
        "ssl.key.password": "kp-secret"}), JAAS_FILE)
    text = repr([r.as_dict() for r in cfg.describe()])
    assert "alice-secret" not in text and "kp-secret" not in text
    assert "user_alice=[hidden]" in text


def test_real_server_properties_file(tmp_path):
    text = r"""
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=SASL_SSL://:9092,CONTROLLER://:9093
inter.broker.listener.name=SASL_SSL
advertised.listeners=SASL_SSL://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="admin" \
    password="admin-secret";
ssl.keystore.type=PEM
ssl.keystore.location=/etc/kafka/secrets/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/secrets/ca.pem
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
"""
    p = parse_properties(text)
    errs = errors_of(p)
    # The only problem: the PEM files do not exist on this machine.
    assert errs == ["Failed to load SSL keystore /etc/kafka/secrets/broker.pem of type PEM: No such file or "
                    "directory (listener SASL_SSL, ssl.keystore.location)",
                    "Failed to load SSL truststore /etc/kafka/secrets/ca.pem of type PEM: No such file or "
                    "directory (listener SASL_SSL, ssl.truststore.location)"]
    cfg = ServerConfig(p, _errors=[])
    assert cfg.inter_broker_listener_name == "SASL_SSL"
    assert cfg.jaas_for("SASL_SSL", "SCRAM-SHA-512").option("username") == "admin"
    assert cfg.data_dir == "/tmp/kraft-combined-logs"


def test_passthrough_keys_keep_secrets_hidden():
    cfg = ServerConfig({**BASE, "custom.plugin.ssl.keystore.password": "pw-secret", "custom.key": "v"})
    c = cfg.listener_configs("PLAINTEXT")
    assert isinstance(c["custom.plugin.ssl.keystore.password"], Password)
    assert "pw-secret" not in repr(c)
    assert c["custom.key"] == "v"


def test_gssapi_listener_needs_service_name():
    krb = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
           'keyTab="/k.keytab" principal="kafka/localhost@EXAMPLE.COM";')
    props = {"listeners": "SASL_PLAINTEXT://:9092", "security.inter.broker.protocol": "SASL_PLAINTEXT",
             "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": krb}
    assert "No serviceName defined in either JAAS or Kafka config" in errors_of(props)
    cfg = ServerConfig({**props, "listener.name.sasl_plaintext.sasl.kerberos.service.name": "kafka"})
    assert cfg.kerberos_service_name("SASL_PLAINTEXT") == "kafka"


_NON_CLASS_KEYS = sorted(k.name for k in SERVER_CONFIG_DEF if k.type.value != "CLASS"
                         and k.name != "java.security.auth.login.config")


def _random_props():
    from hypothesis import strategies as st
    key = st.one_of(st.sampled_from(_NON_CLASS_KEYS),
                    st.sampled_from(_NON_CLASS_KEYS).map(lambda k: "listener.name.plaintext." + k),
                    st.sampled_from(_NON_CLASS_KEYS).map(lambda k: "listener.name.plaintext.plain." + k))
    value = st.one_of(st.text(max_size=40), st.sampled_from(["PLAINTEXT://:0", "SSL://[::1]:1", "-1", "0",
                                                             "PLAIN", "true", "PLAINTEXT:SSL"]))
    return st.dictionaries(key, value, max_size=8)


def test_any_props_fail_closed():
    from hypothesis import given, settings

    @settings(max_examples=150, deadline=None)
    @given(_random_props())
    def check(props):
        errs = ServerConfig.validate(props)
        assert all(isinstance(e, ConfigError) for e in errs)
        if not errs:
            cfg = ServerConfig(props)
            for ep in cfg.listeners:
                cfg.listener_configs(ep.listener_name)
            cfg.describe()
    check()
