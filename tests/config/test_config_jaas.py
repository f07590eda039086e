"""JAAS grammars and Kafka's JaasContext rules (scenarios of Kafka's JaasContextTest)."""
import pytest
from hypothesis import given, strategies as st

from kchannel.config import jaas
from kchannel.config.jaas import (load_client_context, load_server_context, parse_jaas_config,
                                  parse_jaas_file)
from kchannel.config.types import Password
from kchannel.errors import ConfigError

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def one(text):
    cfg = parse_jaas_config(text)
    assert len(cfg.entries) == 1
    return cfg.entries[0]


def test_no_options():
    """Kafka: JaasContextTest.testConfigNoOptions."""
    e = one("test.testConfigNoOptions required;")
    assert (e.login_module, e.control_flag, e.options) == ("test.testConfigNoOptions", "required", {})


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "REQUIRED", "Optional"])
def test_control_flags(flag):
    """Kafka: JaasContextTest.testControlFlag."""
    e = one(f"test.testControlFlag {flag} propName=propValue;")
    assert e.control_flag == flag.lower()
    assert e.options == {"propName": "propValue"}


def test_multiple_options_and_quoting():
    """Kafka: JaasContextTest.testSingleOption, testMultipleOptions, testQuotedOptionValue,
    testQuotedOptionName, testNumericOptionWithQuotes."""
    opts = " ".join(f"propName{i}=propValue{i}" for i in range(10))
    assert one(f"test.x sufficient {opts};").options == {f"propName{i}": f"propValue{i}" for i in range(10)}
    e = one('test.q required propName="prop value" propName2="value1 = 1, value2 = 2";')
    assert e.options == {"propName": "prop value", "propName2": "value1 = 1, value2 = 2"}
    assert one('test.q required "prop name"=propValue;').options == {"prop name": "propValue"}
    assert one("test.q required a='single quoted';").options == {"a": "single quoted"}
    assert one('test.n required option1="3";').options == {"option1": "3"}


def test_escapes_in_quoted_values():
    e = one(r'm required a="x\"y" b="back\\slash" c="tab\there" d="\101";')
    assert e.options == {"a": 'x"y', "b": "back\\slash", "c": "tab\there", "d": "A"}


def test_comments_and_word_chars():
    text = ("// leading comment\n/* block\ncomment */ org.Module$Inner_x-y required "
            "user_alice-1=alice_pw /* mid */ key=$val;")
    e = one(text)
    assert e.login_module == "org.Module$Inner_x-y"
    assert e.options == {"user_alice-1": "alice_pw", "key": "$val"}


def test_multiple_login_modules_are_parsed():
    """Kafka: JaasContextTest.testMultipleLoginModules."""
    text = " ".join(f"test.Module{i} required index=Index{i} module=Module{i};" for i in range(3))
    cfg = parse_jaas_config(text)
    assert [e.login_module for e in cfg.entries] == ["test.Module0", "test.Module1", "test.Module2"]
    assert cfg.entries[2].options == {"index": "Index2", "module": "Module2"}
    # ... but a sasl.jaas.config property must hold exactly one.
    with pytest.raises(ConfigError, match="JAAS config property contains 3 login modules, should be 1 module"):
        load_client_context(Password(text))


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("   /* only a comment */ ", "Login module not specified in JAAS config"),
    ("  required option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("test.loginModule option1=value1;", "Invalid login module control flag 'option1' in JAAS config"),
    ("test.loginModule", "Login module control flag not specified in JAAS config"),
    ("loginModule required option1;", "Value not specified for key 'option1' in JAAS config"),
    ("loginModule required option1=;", "Value not specified for key 'option1' in JAAS config"),
    ("test.testMissingSemicolon required option1=value1", "JAAS config entry not terminated by semi-colon"),
    # Unquoted numbers are number tokens, as in Kafka: they must be quoted.
    ("test.testNumericOptionWithoutQuotes required option1=3;",
     "Value not specified for key 'option1' in JAAS config"),
    ("test.testInvalidControlFlag { option1=3;",
     "Login module control flag is not available in the JAAS config"),
    # A lone '/' starts a comment (StreamTokenizer): unquoted paths break.
    ("m required keyTab=/etc/k.keytab;", "Value not specified for key 'keyTab' in JAAS config"),
])
def test_invalid_sasl_jaas_config(text, message):
    """Kafka: JaasContextTest.testMissingLoginModule, testMissingControlFlag,
    testMissingOptionValue, testMissingSemicolon, testNumericOptionWithoutQuotes,
    testInvalidControlFlag."""
    with pytest.raises(ConfigError) as ei:
        parse_jaas_config(text)
    assert str(ei.value) == message


def test_error_never_contains_the_secret():
    with pytest.raises(ConfigError) as ei:
        parse_jaas_config(f'{PLAIN} required username="u" password="s3cr3t"')
    assert "s3cr3t" not in str(ei.value) and ei.value.value is None


def test_entry_repr_masks_secrets():
    e = one(f'{PLAIN} required username="alice" password="alice-pw" user_bob="bob-pw";')
    r = repr(e)
    assert "alice" in r and "alice-pw" not in r and "bob-pw" not in r
    e = one(f'{OAUTH} required clientSecret="cs" unsecuredLoginStringClaim_sub="admin";')
    assert "cs" not in repr(e).replace("clientSecret", "") and "admin" in repr(e)
    assert e.options["clientSecret"] == "cs"  # the options themselves are plain strings
    assert e.mechanisms == ("OAUTHBEARER",)


def test_login_module_mechanisms():
    assert jaas.mechanisms_for_module(PLAIN) == ("PLAIN",)
    assert jaas.mechanisms_for_module(SCRAM) == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert jaas.mechanisms_for_module(KRB5) == ("GSSAPI",)
    assert jaas.mechanisms_for_module(OAUTH) == ("OAUTHBEARER",)
    assert jaas.mechanisms_for_module("com.example.Custom") == ()


# ---------------------------------------------------------------- JAAS files
FILE = """
/* broker */
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin"
    password="admin-secret"
    user_admin="admin-secret";
    org.apache.kafka.common.security.scram.ScramLoginModule required;
};
// ZooKeeper client section, not used by kchannel's listeners
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required username="zk" password="zk";
};
sasl_ssl.KafkaServer {
    com.sun.security.auth.module.Krb5LoginModule required
    useKeyTab=true storeKey=true keyTab="/etc/kafka.keytab" principal="kafka/host@EXAMPLE.COM";
};
"""


def test_parse_jaas_file():
    sections = parse_jaas_file(FILE)
    assert list(sections) == ["KafkaServer", "Client", "sasl_ssl.KafkaServer"]
    assert [e.login_module for e in sections["KafkaServer"]] == [PLAIN, SCRAM]
    assert sections["KafkaServer"][0].options["user_admin"] == "admin-secret"
    krb = sections["sasl_ssl.KafkaServer"][0]
    assert krb.options == {"useKeyTab": "true", "storeKey": "true", "keyTab": "/etc/kafka.keytab",
                           "principal": "kafka/host@EXAMPLE.COM"}


@pytest.mark.parametrize("text, message", [
    ("KafkaServer { m required; };  KafkaServer { m required; };",
     "Configuration Error:\n\tCan not specify multiple entries for KafkaServer"),
    ("KafkaServer { m bogus; };", "Configuration Error:\n\tInvalid control flag, bogus"),
    ("KafkaServer { m required a=b; ", "Configuration Error:\n\tExpected: [module class name], read [end of file]"),
    ("KafkaServer { m required a='b'; };", "Configuration Error:\n\tLine 1: expected [option value], found [b]"),
    ("KafkaServer\n m required; };", "Configuration Error:\n\tLine 2: expected [{], found [m]"),
    ("KafkaServer { m required a=b };", "Configuration Error:\n\tLine 1: expected [option key]"),
])
def test_invalid_jaas_files(text, message):
    with pytest.raises(ConfigError) as ei:
        parse_jaas_file(text)
    assert str(ei.value) == message


# ------------------------------------------------------------ JaasContext
def sections(*lines):
    return parse_jaas_file("\n".join(lines))


def test_load_for_server_with_listener_name_override():
    """Kafka: JaasContextTest.testLoadForServerWithListenerNameOverride."""
    s = sections(f"KafkaServer {{ {PLAIN} required; }};", f"plaintext.KafkaServer {{ {SCRAM} requisite; }};")
    ctx = load_server_context("PLAINTEXT", "SOME-MECHANISM", None, s, "/etc/jaas.conf")
    assert ctx.context_name == "plaintext.KafkaServer"
    assert [(e.login_module, e.control_flag) for e in ctx.entries] == [(SCRAM, "requisite")]
    assert not ctx.dynamic


def test_load_for_server_with_listener_name_and_fallback():
    """Kafka: JaasContextTest.testLoadForServerWithListenerNameAndFallback."""
    s = sections(f"KafkaServer {{ {PLAIN} required; }};", f"other.KafkaServer {{ {SCRAM} requisite; }};")
    ctx = load_server_context("PLAINTEXT", "SOME-MECHANISM", None, s, "/etc/jaas.conf")
    assert ctx.context_name == "KafkaServer"
    assert [e.login_module for e in ctx.entries] == [PLAIN]


def test_load_for_server_with_wrong_listener_name():
    """Kafka: JaasContextTest.testLoadForServerWithWrongListenerName."""
    s = sections(f"Server {{ {PLAIN} required; }};")
    with pytest.raises(ConfigError) as ei:
        load_server_context("PLAINTEXT", "SOME-MECHANISM", None, s, "/etc/jaas.conf")
    assert str(ei.value) == ("Could not find a 'KafkaServer' or 'plaintext.KafkaServer' entry in the JAAS "
                             "configuration. System property 'java.security.auth.login.config' is /etc/jaas.conf")
    with pytest.raises(ConfigError) as ei:
        load_client_context(None, None, None)
    assert str(ei.value) == ("Could not find a 'KafkaClient' entry in the JAAS configuration. System property "
                             "'java.security.auth.login.config' is not set")


def test_dynamic_config_beats_file():
    s = sections(f"sasl_ssl.KafkaServer {{ {SCRAM} required; }};")
    ctx = load_server_context("SASL_SSL", "PLAIN", Password(f'{PLAIN} required user_a="a";'), s, "f")
    assert ctx.dynamic and ctx.context_name == "KafkaServer"
    assert ctx.source == "listener.name.sasl_ssl.plain.sasl.jaas.config"
    assert ctx.option("user_a") == "a"


def test_disallowed_login_modules():
    """Kafka: JaasContextTest.testDisallowedLoginModulesSystemProperty."""
    with pytest.raises(ConfigError) as ei:
        load_client_context(Password("com.sun.security.auth.module.JndiLoginModule required;"))
    assert str(ei.value) == ("com.sun.security.auth.module.JndiLoginModule is not allowed. Update System "
                             "property 'org.apache.kafka.disallowed.login.modules' to allow "
                             "com.sun.security.auth.module.JndiLoginModule")
    with pytest.raises(ConfigError, match="LdapLoginModule is not allowed"):
        load_client_context(Password("com.sun.security.auth.module.LdapLoginModule required;"))
    # listener override in a JAAS file
    s = sections(f"KafkaServer {{ {PLAIN} required; }};",
                 "plaintext.KafkaServer { com.sun.security.auth.module.JndiLoginModule requisite; };")
    with pytest.raises(ConfigError, match="JndiLoginModule is not allowed"):
        load_server_context("PLAINTEXT", "PLAIN", None, s, "f")
    # a custom list (whitespace around names is ignored), as the system property
    custom = " com.ibm.security.auth.module.LdapLoginModule , com.ibm.security.auth.module.Krb5LoginModule "
    with pytest.raises(ConfigError, match="com.ibm.security.auth.module.Krb5LoginModule is not allowed"):
        load_client_context(Password("com.ibm.security.auth.module.Krb5LoginModule required;"), disallowed=custom)


def test_unknown_login_module_refused():
    with pytest.raises(ConfigError, match="Login module test.Module is not supported by kchannel"):
        load_client_context(Password("test.Module required;"))
    s = sections("KafkaServer { test.LoginModuleDefault required; };")
    with pytest.raises(ConfigError, match="not supported by kchannel"):
        load_server_context("PLAINTEXT", "PLAIN", None, s, "f")


@given(st.text(max_size=120))
def test_any_text_parses_or_fails_with_config_error(text):
    for fn in (parse_jaas_config, parse_jaas_file):
        try:
            fn(text)
        except ConfigError:
            pass
