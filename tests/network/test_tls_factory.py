"""SslFactory: Kafka ssl.* configs -> SSLContext, and clear ConfigErrors."""
import os
import ssl

import pytest

from kchannel.config.types import Password
from kchannel.errors import ConfigError
from kchannel.network.ssl_factory import IANA_TO_OPENSSL, SslFactory


def test_defaults(pki):
    cf = SslFactory("client", pki.client_configs())
    ctx = cf.context
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    assert ctx.check_hostname is True
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    sf = SslFactory("server", pki.server_configs())
    assert sf.context.verify_mode == ssl.CERT_NONE
    assert sf.context.check_hostname is False
    assert sf.client_auth == "none"


def test_endpoint_identification_empty_disables_hostname_check(pki):
    ctx = SslFactory("client", pki.client_configs(endpoint_identification="")).context
    assert ctx.check_hostname is False
    # The chain is still verified, as in Java.
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    ctx = SslFactory("client", pki.client_configs(endpoint_identification=None)).context
    assert ctx.check_hostname is True  # None = unset = Kafka's default "https"


def test_endpoint_identification_invalid(pki):
    with pytest.raises(ConfigError) as err:
        SslFactory("client", pki.client_configs(endpoint_identification="ftp"))
    assert err.value.key == "ssl.endpoint.identification.algorithm"


@pytest.mark.parametrize("value,mode", [("none", ssl.CERT_NONE),
                                        ("requested", ssl.CERT_OPTIONAL),
                                        ("REQUIRED", ssl.CERT_REQUIRED)])
def test_client_auth(pki, value, mode):
    assert SslFactory("server", pki.server_configs(client_auth=value)).context.verify_mode == mode


def test_client_auth_invalid(pki):
    with pytest.raises(ConfigError) as err:
        SslFactory("server", pki.server_configs(client_auth="sometimes"))
    assert err.value.key == "ssl.client.auth"
    assert "required, requested, none" in str(err.value)


@pytest.mark.parametrize("enabled,expected", [
    ("TLSv1.2", (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)),
    ("TLSv1.3", (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)),
    (["TLSv1.3", "TLSv1.2"], (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)),
    (" TLSv1.2 , TLSv1.3 ", (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)),
])
def test_enabled_protocols(pki, enabled, expected):
    cfg = pki.server_configs()
    cfg["ssl.enabled.protocols"] = enabled
    ctx = SslFactory("server", cfg).context
    assert (ctx.minimum_version, ctx.maximum_version) == expected


def test_ssl_protocol_caps_clients_only(pki):
    cc = pki.client_configs()
    cc["ssl.protocol"] = "TLSv1.2"
    assert SslFactory("client", cc).context.maximum_version == ssl.TLSVersion.TLSv1_2
    sc = pki.server_configs()
    sc["ssl.protocol"] = "TLSv1.2"
    assert SslFactory("server", sc).context.maximum_version == ssl.TLSVersion.TLSv1_3
    cc["ssl.protocol"] = "TLS"
    assert SslFactory("client", cc).context.maximum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize("key,value", [
    ("ssl.enabled.protocols", "TLSv1.4"),
    ("ssl.enabled.protocols", "SSLv3"),
    ("ssl.enabled.protocols", ""),
    ("ssl.protocol", "TLSv9"),
    ("ssl.enabled.protocols", 12),
])
def test_bad_protocol_values(pki, key, value):
    cfg = pki.client_configs()
    cfg[key] = value
    with pytest.raises(ConfigError) as err:
        SslFactory("client", cfg)
    assert err.value.key == key


def test_cipher_suites_iana_names(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"]
    ctx = SslFactory("server", cfg).context
    names = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"}
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2


def test_cipher_suites_tls13_only_disables_tls12(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384"
    ctx = SslFactory("server", cfg).context
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3


def test_cipher_suites_mixed(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = "TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
    ctx = SslFactory("server", cfg).context
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2,
                                                          ssl.TLSVersion.TLSv1_3)


def test_cipher_suites_openssl_names_accepted(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = "ECDHE-RSA-AES128-GCM-SHA256"
    SslFactory("server", cfg)


def test_cipher_suite_unknown(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = "TLS_FANTASY_WITH_ROT13"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.cipher.suites"
    assert "TLS_FANTASY_WITH_ROT13" in str(err.value)


def test_cipher_suites_incompatible_with_protocols(pki):
    cfg = pki.server_configs()
    cfg["ssl.cipher.suites"] = "TLS_AES_128_GCM_SHA256"
    cfg["ssl.enabled.protocols"] = "TLSv1.2"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.cipher.suites"


def test_iana_table_names_are_known_to_openssl():
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for iana, name in IANA_TO_OPENSSL.items():
        probe.set_ciphers(name)  # raises if OpenSSL does not know it


# --- keystores ---------------------------------------------------------------
def test_password_typed_values(pki):
    cfg = pki.server_configs(keystore="pkcs12")
    cfg["ssl.keystore.password"] = Password(cfg["ssl.keystore.password"])
    cfg["ssl.key.password"] = Password(cfg["ssl.key.password"])
    SslFactory("server", cfg)
    cfg = pki.server_configs(keystore="inline-encrypted")
    cfg["ssl.keystore.key"] = Password(cfg["ssl.keystore.key"])
    cfg["ssl.key.password"] = Password(cfg["ssl.key.password"])
    SslFactory("server", cfg)


def test_missing_keystore_file(pki, tmp_path):
    cfg = pki.server_configs()
    cfg["ssl.keystore.location"] = str(tmp_path / "nope.pem")
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.location"
    assert "nope.pem" in str(err.value)


def test_missing_truststore_file(pki, tmp_path):
    cfg = pki.client_configs()
    cfg["ssl.truststore.location"] = str(tmp_path / "nope.pem")
    with pytest.raises(ConfigError) as err:
        SslFactory("client", cfg)
    assert err.value.key == "ssl.truststore.location"


def test_wrong_key_password(pki):
    """Kafka: SslTransportLayerTest.testInvalidKeyPassword."""
    cfg = pki.server_configs(keystore="encrypted")
    cfg["ssl.key.password"] = "wrong"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.key.password"
    assert "wrong" in str(err.value).lower()
    assert "key-secret" not in str(err.value)


def test_missing_key_password(pki):
    """Kafka: DefaultSslEngineFactoryTest.testPemKeyStoreFileWithKeyPassword (the password is
    required)."""
    cfg = pki.server_configs(keystore="encrypted")
    del cfg["ssl.key.password"]
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.key.password"
    assert "encrypted" in str(err.value)


def test_wrong_pkcs12_password(pki):
    """Kafka: SslTransportLayerTest.testInvalidKeystorePassword."""
    cfg = pki.server_configs(keystore="pkcs12")
    cfg["ssl.keystore.password"] = "wrong"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.password"


def test_wrong_truststore_password(pki):
    """Kafka: SslTransportLayerTest.testInvalidTruststorePassword."""
    cfg = pki.client_configs(truststore="pkcs12")
    cfg["ssl.truststore.password"] = "wrong"
    with pytest.raises(ConfigError) as err:
        SslFactory("client", cfg)
    assert err.value.key == "ssl.truststore.password"


def test_bad_keystore_type(pki):
    cfg = pki.server_configs()
    cfg["ssl.keystore.type"] = "BKS"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.type"


def test_pem_type_but_not_pem(pki):
    cfg = pki.server_configs(keystore="pkcs12")
    cfg["ssl.keystore.type"] = "PEM"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.type"


def test_jks_type_with_pkcs12_content_works(pki):
    # Java 9+ keytool writes PKCS12 files even for -storetype JKS defaults.
    cfg = pki.server_configs(keystore="pkcs12")
    cfg["ssl.keystore.type"] = "JKS"
    SslFactory("server", cfg)


def test_real_jks_file_refused_with_hint(pki, tmp_path):
    path = tmp_path / "server.jks"
    path.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 64)
    cfg = pki.server_configs()
    cfg["ssl.keystore.type"] = "JKS"
    cfg["ssl.keystore.location"] = str(path)
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.location"
    assert "keytool -importkeystore" in str(err.value)


def test_type_inferred_when_unset(pki):
    for ks in ("pem", "pkcs12"):
        cfg = pki.server_configs(keystore=ks)
        del cfg["ssl.keystore.type"]
        SslFactory("server", cfg)


def test_key_not_matching_certificate(pki):
    cfg = pki.server_configs(keystore="inline")
    cfg["ssl.keystore.key"] = pki.client.key_pem
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.location"
    assert "does not match" in str(err.value)


def test_inline_key_without_chain(pki):
    cfg = {"ssl.keystore.type": "PEM", "ssl.keystore.key": pki.server.key_pem}
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.certificate.chain"


def test_inline_and_location_conflict(pki):
    cfg = pki.server_configs(keystore="inline")
    cfg["ssl.keystore.location"] = pki.server.keystore_pem_path
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.location"


def test_garbage_pem(pki):
    cfg = pki.server_configs(keystore="inline")
    cfg["ssl.keystore.certificate.chain"] = "-----BEGIN CERTIFICATE-----\nAAAA\n" \
                                            "-----END CERTIFICATE-----\n"
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.certificate.chain"


def test_server_needs_keystore(pki):
    with pytest.raises(ConfigError) as err:
        SslFactory("server", pki.truststore_configs("pem"))
    assert err.value.key == "ssl.keystore.location"


def test_bad_mode():
    with pytest.raises(ValueError):
        SslFactory("both", {})


def test_create_engine(pki):
    cf = SslFactory("client", pki.client_configs())
    engine = cf.create_engine("localhost", 9093)
    assert engine.ssl_object.server_hostname == "localhost"
    assert engine.ssl_object.server_side is False
    assert (engine.mode, engine.peer_host, engine.peer_port) == ("client", "localhost", 9093)
    sf = SslFactory("server", pki.server_configs())
    assert sf.create_engine().ssl_object.server_side is True


def test_no_key_material_left_on_disk(pki, tmp_path, monkeypatch):
    # The key is handed to OpenSSL through memory (memfd) or a temp file that
    # is removed at once: the temp dir must be as empty afterwards.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    SslFactory("server", pki.server_configs(keystore="pkcs12"))
    assert os.listdir(tmp_path) == []


def test_tempfile_fallback_without_memfd(pki, tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delattr(os, "memfd_create")
    SslFactory("server", pki.server_configs(keystore="inline"))
    assert os.listdir(tmp_path) == []


def test_client_engine_needs_host_for_endpoint_identification(pki):
    cf = SslFactory("client", pki.client_configs())
    with pytest.raises(ValueError, match="host name"):
        cf.create_engine(None)
    # Without endpoint identification no host name is needed.
    SslFactory("client", pki.client_configs(endpoint_identification="")).create_engine(None)


def test_java_only_settings_are_ignored_with_a_warning(pki, caplog):
    cfg = pki.client_configs()
    cfg["ssl.provider"] = "SunJSSE"
    with caplog.at_level("WARNING", logger="kchannel.network.ssl_factory"):
        SslFactory("client", cfg)
    assert "ssl.provider" in caplog.text


@pytest.mark.parametrize("mutate,key,message", [
    (lambda c, p: c.update({"ssl.keystore.password": "x"}), "ssl.keystore.password",
     "SSL key store password cannot be specified with PEM format"),
    (lambda c, p: c.update({"ssl.keystore.type": "PKCS12"}), "ssl.keystore.type",
     "SSL private key can be specified only for PEM, but key store type is PKCS12."),
    (lambda c, p: c.pop("ssl.keystore.certificate.chain"), "ssl.keystore.certificate.chain",
     "SSL private key is specified, but certificate chain is not specified"),
    (lambda c, p: c.update({"ssl.keystore.location": p.server.keystore_pem_path}),
     "ssl.keystore.location", "Both SSL key store location and separate private key"),
    (lambda c, p: c.pop("ssl.keystore.key"), "ssl.keystore.key",
     "SSL certificate chain is specified, but private key is not specified"),
])
def test_kafka_inline_keystore_rules(pki, mutate, key, message):
    cfg = pki.server_configs(keystore="inline")
    mutate(cfg, pki)
    with pytest.raises(ConfigError) as err:
        SslFactory("server", cfg)
    assert err.value.key == key
    assert message in str(err.value)


def test_kafka_keystore_password_rules(pki):
    cfg = pki.server_configs(keystore="pem")
    cfg["ssl.keystore.password"] = "x"
    with pytest.raises(ConfigError, match="cannot be specified with PEM format") as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.password"
    cfg = pki.server_configs(keystore="pkcs12")
    del cfg["ssl.keystore.password"]
    with pytest.raises(ConfigError, match="key store password is not specified") as err:
        SslFactory("server", cfg)
    assert err.value.key == "ssl.keystore.password"
    cfg = pki.client_configs()
    cfg["ssl.keystore.password"] = "x"
    with pytest.raises(ConfigError, match="SSL key store is not specified") as err:
        SslFactory("client", cfg)
    assert err.value.key == "ssl.keystore.location"


def test_kafka_truststore_rules(pki):
    cfg = pki.client_configs(truststore="pem")
    cfg["ssl.truststore.password"] = "x"
    with pytest.raises(ConfigError, match="cannot be specified for PEM format") as err:
        SslFactory("client", cfg)
    assert err.value.key == "ssl.truststore.password"
    cfg = pki.client_configs(truststore="inline")
    cfg["ssl.truststore.type"] = "PKCS12"
    with pytest.raises(ConfigError, match="can be specified only for PEM") as err:
        SslFactory("client", cfg)
    assert err.value.key == "ssl.truststore.type"
    cfg = pki.client_configs(truststore=None)
    cfg["ssl.truststore.password"] = Password("x")
    with pytest.raises(ConfigError, match="SSL trust store is not specified") as err:
        SslFactory("client", cfg)


def test_typed_configs_with_kafka_defaults(pki):
    """What the config layer hands over: every key present, Kafka defaults
    (JKS store types, None passwords, list values)."""
    cfg = {
        "ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
        "ssl.keystore.type": "JKS", "ssl.keystore.location": pki.server.p12_path,
        "ssl.keystore.password": Password(pki.server.store_password), "ssl.key.password": None,
        "ssl.keystore.key": None, "ssl.keystore.certificate.chain": None,
        "ssl.truststore.type": "JKS", "ssl.truststore.location": None,
        "ssl.truststore.password": None, "ssl.truststore.certificates": None,
        "ssl.cipher.suites": [], "ssl.endpoint.identification.algorithm": "https",
        "ssl.client.auth": "none", "ssl.provider": None,
        "ssl.engine.factory.class": None, "ssl.secure.random.implementation": None,
        "ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX",
    }
    ctx = SslFactory("server", cfg).context
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_inline_pem_without_line_breaks(pki):
    """A .properties value written with backslash continuations arrives with
    its line breaks removed; Kafka's PEM parser accepts that, so do we."""
    def flatten(pem):
        return " ".join(line.strip() for line in pem.strip().splitlines())
    cfg = {"ssl.keystore.type": "PEM",
           "ssl.keystore.key": flatten(pki.server.encrypted_key_pem),
           "ssl.key.password": pki.server.key_password,
           "ssl.keystore.certificate.chain": flatten(pki.server.chain_pem),
           "ssl.truststore.type": "PEM",
           "ssl.truststore.certificates": flatten(pki.ca.cert_pem)}
    factory = SslFactory("server", cfg)
    cfg["ssl.keystore.certificate.chain"] = "".join(
        line.strip() for line in pki.server.chain_pem.splitlines())
    SslFactory("server", cfg)
    # Both certificates of the chain survived the flattening.
    from kchannel.network.ssl_factory import _pem_certs
    assert len(_pem_certs(flatten(pki.server.chain_pem).encode(), "k")) == 2
    assert factory.context.cert_store_stats()["x509_ca"] == 1
