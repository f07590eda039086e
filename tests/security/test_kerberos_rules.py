"""sasl.kerberos.principal.to.local.rules: Kafka's KerberosNameTest/KerberosRuleTest cases."""
import pytest

from kchannel.errors import ConfigError
from kchannel.principal import DefaultKafkaPrincipalBuilder, SaslAuthenticationContext
from kchannel.security.kerberos_rules import (
    BadFormatString, KerberosName, KerberosShortNamer, NoMatchingRule, replace_parameters,
    replace_substitution)


def test_parse_name_parts():
    name = KerberosName.parse("App.service-name/example.com@REALM.COM")
    assert (name.service_name, name.host_name, name.realm) == (
        "App.service-name", "example.com", "REALM.COM")
    name = KerberosName.parse("App.service-name@REALM.COM")
    assert (name.service_name, name.host_name, name.realm) == (
        "App.service-name", None, "REALM.COM")
    name = KerberosName.parse("user")
    assert (name.service_name, name.host_name, name.realm) == ("user", None, None)
    assert str(KerberosName.parse("user/host@R")) == "user/host@R"
    with pytest.raises(ValueError, match="Malformed Kerberos name: a/b/c@R"):
        KerberosName.parse("a/b/c@R")


def test_parse():
    """Kafka: KerberosNameTest.testParse."""
    namer = KerberosShortNamer.from_unparsed_rules("REALM.COM", [
        r"RULE:[1:$1](App\..*)s/App\.(.*)/$1/g",
        r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g",
        "DEFAULT",
    ])
    assert namer.short_name("App.service-name/example.com@REALM.COM") == "service-name"
    assert namer.short_name("App.service-name@REALM.COM") == "service-name"
    assert namer.short_name("user/host@REALM.COM") == "user"


LOWER_RULES = [
    "RULE:[1:$1]/L",
    "RULE:[2:$1](Test.*)s/ABC///L",
    "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/L",
    r"RULE:[2:$1](App\..*)s/App\.(.*)/$1/g/L",
    "RULE:[2:$1]/L",
    "DEFAULT",
]


@pytest.mark.parametrize("principal,expected", [
    ("User@REALM.COM", "user"),
    ("TestABC/host@FOO.COM", "test"),
    ("ABC_User_ABC/host@FOO.COM", "xyz_user_xyz"),
    ("App.SERVICE-name/example.com@REALM.COM", "service-name"),
    ("User/root@REALM.COM", "user"),
])
def test_to_lower_case(principal, expected):
    """Kafka: KerberosNameTest.testToLowerCase."""
    assert KerberosShortNamer(LOWER_RULES, "REALM.COM").short_name(principal) == expected


@pytest.mark.parametrize("principal,expected", [
    ("User@REALM.COM", "USER"),
    ("TestABC/host@FOO.COM", "TEST"),
    ("ABC_User_ABC/host@FOO.COM", "XYZ_USER_XYZ"),
    ("App.SERVICE-name/example.com@REALM.COM", "SERVICE-NAME"),
    ("User/root@REALM.COM", "USER"),
])
def test_to_upper_case(principal, expected):
    """Kafka: KerberosNameTest.testToUpperCase."""
    rules = [r.replace("/L", "/U") for r in LOWER_RULES]
    assert KerberosShortNamer(rules, "REALM.COM").short_name(principal) == expected


@pytest.mark.parametrize("rule", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/g",
    "rule:[1:$1]", "rule:[1:$1]/L/U", "rule:[1:$1]/U/L", "rule:[1:$1]/LU",
    "RULE:[1:$1/L", "RULE:[1:$1]/l", "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
    "RULE:[:$1]",
])
def test_invalid_rules(rule):
    """Kafka: KerberosNameTest.testInvalidRules."""
    with pytest.raises(ConfigError, match="Invalid rule|For input string") as info:
        KerberosShortNamer([rule], "REALM.COM")
    assert isinstance(info.value, ValueError)   # IllegalArgumentException in Kafka
    assert info.value.key == "sasl.kerberos.principal.to.local.rules"


def test_unmatched_substring_message():
    with pytest.raises(ConfigError) as info:
        KerberosShortNamer(["DEFAULT/L"], "REALM.COM")
    assert str(info.value) == "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"


def test_replace_parameters():
    """Kafka: KerberosRuleTest.testReplaceParameters."""
    many = ["too", "many", "parameters", "are", "ok"]
    assert replace_parameters("", []) == ""
    assert replace_parameters("hello", []) == "hello"
    assert replace_parameters("", many) == ""
    assert replace_parameters("hello", many) == "hello"
    assert replace_parameters("hello $0", many) == "hello too"
    assert replace_parameters("hello $0", ["no recursion $1"]) == "hello no recursion $1"
    assert replace_parameters("$1@$0", ["R", "u"]) == "u@R"
    with pytest.raises(BadFormatString, match="outside of the valid range"):
        replace_parameters("$0", [])
    with pytest.raises(BadFormatString, match="bad format"):
        replace_parameters("hello $a", ["does not matter"])


def test_default_rule_semantics():
    namer = KerberosShortNamer(None, "EXAMPLE.COM")           # null rules = DEFAULT
    assert namer.short_name("client@EXAMPLE.COM") == "client"
    assert namer.short_name("kafka/localhost@EXAMPLE.COM") == "kafka"
    assert namer.short_name("plain") == "plain"                # already simple
    with pytest.raises(NoMatchingRule,
                       match="No rules apply to client@OTHER.COM, rules \\[DEFAULT\\]"):
        namer.short_name("client@OTHER.COM")


def test_rules_from_comma_separated_config_value():
    namer = KerberosShortNamer("RULE:[1:$1@$0](.*@OTHER.COM)s/@.*//, DEFAULT", "EXAMPLE.COM")
    assert namer.short_name("bob@OTHER.COM") == "bob"
    assert namer.short_name("bob@EXAMPLE.COM") == "bob"
    assert "RULE:[1:$1@$0](.*@OTHER.COM)s/@.*//" in repr(namer)


def test_non_simple_result_is_an_error():
    namer = KerberosShortNamer(["RULE:[2:$1/$2]"], "EXAMPLE.COM")
    with pytest.raises(NoMatchingRule, match="Non-simple name kafka/host after auth_to_local rule"):
        namer.short_name("kafka/host@EXAMPLE.COM")


def test_first_match_wins_and_component_count_filters():
    namer = KerberosShortNamer([
        "RULE:[2:$1@$0](kafka@EXAMPLE.COM)s/.*/broker/",
        "RULE:[1:$1]s/(.)(.*)/$2$1/",        # first substitution only, rotate
        "DEFAULT",
    ], "EXAMPLE.COM")
    assert namer.short_name("kafka/host1@EXAMPLE.COM") == "broker"
    assert namer.short_name("kafka@EXAMPLE.COM") == "afkak"
    assert namer.short_name("other/host1@EXAMPLE.COM") == "other"


def test_java_replacement_syntax():
    import re
    assert replace_substitution("a.b.c", re.compile(r"\."), r"\$", True) == "a$b$c"
    assert replace_substitution("a.b.c", re.compile(r"\."), "_", False) == "a_b.c"
    # $12 means group 1 followed by "2" when there is no group 12 (Java's rule).
    assert replace_substitution("ab", re.compile("(a)(b)"), "$12", False) == "a2"
    with pytest.raises(BadFormatString):
        replace_substitution("ab", re.compile("(a)"), "$3", False)


def test_principal_builder_uses_short_namer():
    """Kafka: DefaultKafkaPrincipalBuilderTest.testPrincipalBuilderGssapi."""
    builder = DefaultKafkaPrincipalBuilder(
        kerberos_short_namer=KerberosShortNamer(["DEFAULT"], "EXAMPLE.COM"))
    ctx = SaslAuthenticationContext(mechanism="GSSAPI", authorization_id="client@EXAMPLE.COM")
    assert str(builder.build(ctx)) == "User:client"


def test_default_realm_from_kdc(kdc):
    assert KerberosShortNamer().default_realm == "EXAMPLE.COM"
    assert KerberosShortNamer().short_name("client@EXAMPLE.COM") == "client"
