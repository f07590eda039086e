"""``kchannel config describe|validate`` through ``python -m kchannel`` (subprocess)."""

from tests.fixtures.peers import run_kchannel

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


GOOD = f"""\
listeners=SASL_PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT
inter.broker.listener.name=INTERNAL
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN} required \\
    user_alice="alice-secret";
listener.name.internal.connections.max.reauth.ms=60000
"""

JAAS = f"""KafkaServer {{ {PLAIN} required user_broker="broker-secret"; }};"""


def test_validate_ok(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(GOOD)
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    r = run_kchannel("config", "validate", "--config", str(cfg), "--jaas-config", str(jaas))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "configuration is valid" in r.stdout


def test_validate_lists_every_error(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text("socket.request.max.bytes=abc\nssl.client.auth=maybe\n"
                   "listeners=PLAINTEXT://:9092,SSL://:9092\nconnections.max.reauth.ms=-x\n"
                   "ssl.keystore.type=PEM\nssl.keystore.key=k\nssl.keystore.certificate.chain=c\n")
    r = run_kchannel("config", "validate", "--config", str(cfg))
    assert r.returncode == 1
    assert "4 error(s) found:" in r.stdout
    for text in ("Invalid value abc for configuration socket.request.max.bytes: Not a number of type INT",
                 "Invalid value maybe for configuration ssl.client.auth: String must be one of: required, "
                 "requested, none",
                 "Invalid value -x for configuration connections.max.reauth.ms: Not a number of type LONG",
                 "Each listener must have a different port"):
        assert text in r.stdout


def test_validate_missing_jaas_section(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(GOOD.replace("listener.name.sasl_plaintext.plain.sasl.jaas.config", "#"))
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f"internal.KafkaServer {{ {PLAIN} required; }};")
    r = run_kchannel("config", "validate", "--config", str(cfg), "--jaas-config", str(jaas))
    assert r.returncode == 1
    assert (f"Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS configuration. "
            f"System property 'java.security.auth.login.config' is {jaas}") in r.stdout


def test_describe(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(GOOD + "ssl.key.password=kp-secret\nlog.retention.hours=1\n")
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(JAAS)
    r = run_kchannel("config", "describe", "--config", str(cfg), "--jaas-config", str(jaas))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "Listener SASL_PLAINTEXT" in out and "Listener INTERNAL" in out
    assert "bind.address = SASL_PLAINTEXT://127.0.0.1:9092" in out
    assert "sasl.enabled.mechanisms = PLAIN    (global: sasl.enabled.mechanisms)" in out
    assert ("connections.max.reauth.ms = 60000    (listener prefix: "
            "listener.name.internal.connections.max.reauth.ms)") in out
    assert (f"jaas = {PLAIN} required user_alice=[hidden]    (listener+mechanism prefix: "
            "listener.name.sasl_plaintext.plain.sasl.jaas.config)") in out
    assert f"jaas = {PLAIN} required user_broker=[hidden]    (JAAS file section KafkaServer: {jaas})" in out
    assert "alice-secret" not in out and "broker-secret" not in out and "kp-secret" not in out
    assert "Unused configurations: log.retention.hours" in out


def test_describe_client(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text("bootstrap.servers=localhost:9092\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                   "sasl.username=alice\nsasl.password=alice-secret\nssl.truststore.type=PEM\n"
                   "ssl.truststore.certificates=-----BEGIN CERTIFICATE-----\n")
    r = run_kchannel("config", "describe", "--client", "--config", str(cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "security.protocol = SASL_SSL" in r.stdout
    assert "sasl.jaas.config = [hidden]    (translated alias)" in r.stdout
    assert "alice-secret" not in r.stdout


def test_usage_errors_exit_2(tmp_path):
    assert run_kchannel("config").returncode == 2
    assert run_kchannel("config", "validate").returncode == 2
    assert run_kchannel("config", "frobnicate", "--config", "x").returncode == 2


def test_missing_file_exit_1(tmp_path):
    r = run_kchannel("config", "validate", "--config", str(tmp_path / "nope.properties"))
    assert r.returncode == 1
    assert "cannot read" in r.stderr
