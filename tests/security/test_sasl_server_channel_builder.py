"""SaslChannelBuilder configuration (server side, no sockets)."""
import pytest

from kchannel.errors import ConfigError
from kchannel.security.sasl.channel_builder import SaslChannelBuilder

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret";')


def builder(configs, **kw):
    return SaslChannelBuilder("server", configs, "SASL_PLAINTEXT", "SASL_PLAINTEXT", **kw)


def test_unknown_enabled_mechanism_fails_at_start_up():
    with pytest.raises(ConfigError) as err:
        builder({"sasl.enabled.mechanisms": "PLAIN,DIGEST-MD5"})
    assert err.value.key == "sasl.enabled.mechanisms"
    assert "DIGEST-MD5" in str(err.value)


def test_defaults():
    b = builder({"sasl.enabled.mechanisms": ["PLAIN"]})
    assert b.enabled_mechanisms == ["PLAIN"]
    assert b.max_receive_size == 524288
    assert b.failed_authentication_delay_ms == 100
    assert b.connections_max_reauth_ms == {"PLAIN": None}


def test_per_mechanism_settings_with_listener_prefix():
    b = builder({
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "3000",
        "scram-sha-256.connections.max.reauth.ms": 4000,
        "connections.max.reauth.ms": 9000,
        "sasl.server.max.receive.size": "2048",
        "connection.failed.authentication.delay.ms": "0",
    })
    assert b.jaas_options["PLAIN"] == {"user_alice": "alice-secret"}
    assert b.connections_max_reauth_ms == {"PLAIN": 3000, "SCRAM-SHA-256": 4000}
    assert b.max_receive_size == 2048
    assert b.failed_authentication_delay_ms == 0


def test_jaas_argument_forms():
    by_mech = builder({"sasl.enabled.mechanisms": "PLAIN"},
                      jaas={"PLAIN": PLAIN_JAAS}).jaas_options
    callable_ = builder({"sasl.enabled.mechanisms": "PLAIN"},
                        jaas=lambda m: {"user_bob": "x"}).jaas_options
    assert by_mech == {"PLAIN": {"user_alice": "alice-secret"}}
    assert callable_ == {"PLAIN": {"user_bob": "x"}}


def test_sasl_ssl_client_auth_needs_listener_prefix(pki):
    """Kafka: SaslAuthenticatorTest.testSslClientAuthRequestedOverriddenForSaslSslListener,
    testSslClientAuthRequiredForSaslSslListener (the channel builder's settings)."""
    configs = dict(pki.server_configs(client_auth="required"))
    configs["sasl.enabled.mechanisms"] = "PLAIN"
    b = SaslChannelBuilder("server", configs, "SASL_SSL", "SASL_SSL")
    assert b.ssl_factory.client_auth == "none"
    configs["listener.name.sasl_ssl.ssl.client.auth"] = "requested"
    b = SaslChannelBuilder("server", configs, "SASL_SSL", "SASL_SSL")
    assert b.ssl_factory.client_auth == "requested"


def test_client_mode():
    b = SaslChannelBuilder("client", {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="u" password="p";'}, None, "SASL_PLAINTEXT")
    assert b.client_mechanism == "SCRAM-SHA-512"
    assert b.client_jaas_options == {"username": "u", "password": "p"}


def test_mechanism_prefixed_configs_reach_the_mechanism():
    b = builder({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
                 "sasl.server.callback.handler.class": "global.Handler",
                 "oauthbearer.sasl.server.callback.handler.class": "oauth.Handler",
                 "listener.name.sasl_plaintext.plain.some.key": "listener-plain"})
    assert b.mechanism_configs["OAUTHBEARER"]["sasl.server.callback.handler.class"] == \
        "oauth.Handler"
    assert b.mechanism_configs["PLAIN"]["sasl.server.callback.handler.class"] == \
        "global.Handler"
    assert b.mechanism_configs["PLAIN"]["some.key"] == "listener-plain"


class TitleCasePrincipalBuilder:
    def build(self, context):
        from kchannel.principal import KafkaPrincipal
        return KafkaPrincipal("User", context.authorization_id.title())


def test_principal_builder_class():
    b = builder({"sasl.enabled.mechanisms": "PLAIN",
                 "principal.builder.class":
                     "tests.security.test_sasl_server_channel_builder.TitleCasePrincipalBuilder"})
    assert isinstance(b.principal_builder, TitleCasePrincipalBuilder)
