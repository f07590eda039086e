"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapperTest, ported) and
certificate subjects rendered as Java's X500Principal.getName()."""
import pytest

from kchannel.errors import ConfigError
from kchannel.network.ssl_principal import (NoMatchingRule, SslPrincipalMapper,
                                            subject_dn_from_der, subject_dn_from_pem, x500_name)
from kchannel.principal import DefaultKafkaPrincipalBuilder, SslAuthenticationContext


# ---------------------------------------------------------------------------
# SslPrincipalMapperTest
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    """Kafka: SslPrincipalMapperTest.testValidRules."""
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules):
    """Kafka: SslPrincipalMapperTest.testInvalidRules."""
    with pytest.raises(ConfigError) as err:
        SslPrincipalMapper.from_rules(rules)
    assert err.value.key == "ssl.principal.mapping.rules"
    assert str(err.value).startswith("Invalid rule")


def test_invalid_rule_messages_match_kafka():
    with pytest.raises(ConfigError,
                       match=r"^Invalid rule: `DEFAULT/L`, unmatched substring: `/L`$"):
        SslPrincipalMapper("DEFAULT/L")


def test_ssl_principal_mapper():
    """Kafka: SslPrincipalMapperTest.testSslPrincipalMapper."""
    rules = ", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ])
    mapper = SslPrincipalMapper.from_rules(rules)
    assert mapper.get_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.get_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.get_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.get_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.get_name("OU=JavaSoft,O=Sun Microsystems,C=US") == \
        "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("expected,rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
     "/DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
     "/DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected, rules):
    """Kafka: SslPrincipalMapperTest.testRulesSplitting."""
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace():
    """Kafka: SslPrincipalMapperTest.testCommaWithWhitespace."""
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.get_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


# ---------------------------------------------------------------------------
# beyond the Kafka test: semantics details
# ---------------------------------------------------------------------------
def test_no_matching_rule():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=Svc$/$1/")
    with pytest.raises(NoMatchingRule) as err:
        mapper.get_name("CN=x,OU=Other")
    assert str(err.value) == "No rules apply to CN=x,OU=Other, rules [RULE:^CN=(.*?),OU=Svc$/$1]"


def test_default_when_none():
    assert SslPrincipalMapper(None).get_name("CN=a,O=b") == "CN=a,O=b"


def test_rules_separated_by_newlines():
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L\n"
                                "RULE:^CN=(.*?),.*$/$1/U\nDEFAULT")
    assert mapper.get_name("CN=Duke,OU=ServiceUsers,O=Org") == "duke"
    assert mapper.get_name("CN=Duke,OU=Other") == "DUKE"
    assert str(mapper).count("RULE:") == 2


def test_list_value_accepted():
    mapper = SslPrincipalMapper(["RULE:^CN=(.*?),.*$/$1/", "DEFAULT"])
    assert mapper.get_name("CN=bob,O=x") == "bob"


def test_back_reference_beyond_group_count():
    # $12 with one group: group 1 followed by a literal "2" (Java semantics).
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$12/").get_name("CN=a,O=b") == "a2"
    # $2 with one group: a literal "$2".
    assert SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1-$2/").get_name("CN=a,O=b") == "a-$2"


def test_whole_string_match_required():
    mapper = SslPrincipalMapper("RULE:CN=([a-z]+)/$1/,DEFAULT")
    # find() would match, matches() does not: falls through to DEFAULT.
    assert mapper.get_name("CN=abc,O=x") == "CN=abc,O=x"
    assert mapper.get_name("CN=abc") == "abc"


def test_principal_builder_uses_mapper():
    """Kafka: DefaultKafkaPrincipalBuilderTest.testPrincipalWithSslPrincipalMapper."""
    builder = DefaultKafkaPrincipalBuilder(SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/L"))
    p = builder.build(SslAuthenticationContext(peer_subject_dn="CN=Client,OU=Eng,O=Example,C=US"))
    assert str(p) == "User:client"


# ---------------------------------------------------------------------------
# X500Principal.getName() rendering
# ---------------------------------------------------------------------------
def _dn(*rdns):
    """rdns in X.509 (encoding) order; each a list of (oid, value[, type])."""
    from cryptography import x509
    out = []
    for rdn in rdns:
        attrs = []
        for item in rdn:
            oid, value = item[0], item[1]
            if len(item) > 2:
                attrs.append(x509.NameAttribute(oid, value, _type=item[2]))
            else:
                attrs.append(x509.NameAttribute(oid, value))
        out.append(x509.RelativeDistinguishedName(attrs))
    return x509.Name(out)


def test_fixture_certificates(pki):
    assert subject_dn_from_pem(pki.client.cert_pem) == "CN=client,OU=Eng,O=Example,C=US"
    assert subject_dn_from_pem(pki.server.cert_pem) == "CN=localhost"
    assert pki.client.dn == "CN=client,OU=Eng,O=Example,C=US"


def test_most_specific_first_and_keywords():
    from cryptography.x509.oid import NameOID
    name = _dn([(NameOID.COUNTRY_NAME, "US")], [(NameOID.STATE_OR_PROVINCE_NAME, "State")],
               [(NameOID.LOCALITY_NAME, "City")], [(NameOID.ORGANIZATION_NAME, "Example")],
               [(NameOID.ORGANIZATIONAL_UNIT_NAME, "Eng")], [(NameOID.COMMON_NAME, "client")])
    assert x500_name(name) == "CN=client,OU=Eng,O=Example,L=City,ST=State,C=US"


def test_escaping():
    from cryptography.x509.oid import NameOID
    name = _dn([(NameOID.ORGANIZATION_NAME, 'a+b;c<d>e"f\\g=h#i')],
               [(NameOID.COMMON_NAME, "Tkac, Adam")])
    assert x500_name(name) == 'CN=Tkac\\, Adam,O=a\\+b\\;c\\<d\\>e\\"f\\\\g\\=h\\#i'
    name = _dn([(NameOID.COMMON_NAME, "  padded  ")])
    assert x500_name(name) == "CN=\\ \\ padded\\ \\ "
    name = _dn([(NameOID.COMMON_NAME, "#lead")])
    assert x500_name(name) == "CN=\\#lead"
    name = _dn([(NameOID.COMMON_NAME, "Zoë")])
    assert x500_name(name) == "CN=Zoë"


def test_dc_uid_street_keywords_and_oids():
    from cryptography.x509.oid import NameOID
    name = _dn([(NameOID.DOMAIN_COMPONENT, "com")], [(NameOID.DOMAIN_COMPONENT, "example")],
               [(NameOID.STREET_ADDRESS, "Main St")], [(NameOID.USER_ID, "jdoe")],
               [(NameOID.EMAIL_ADDRESS, "a@b.c")])
    # emailAddress has no RFC 2253 keyword: dotted OID and #hex of the DER
    # value (IA5String, tag 0x16), lower-case as Java prints it.
    assert x500_name(name) == ("1.2.840.113549.1.9.1=#1605614062 2e63".replace(" ", "")
                               + ",UID=jdoe,STREET=Main St,DC=example,DC=com")


def test_non_keyword_attributes_and_multivalued_rdn():
    from cryptography.x509.oid import NameOID
    name = _dn([(NameOID.COMMON_NAME, "svc"), (NameOID.SERIAL_NUMBER, "42")])
    text = x500_name(name)
    # Multi-valued RDN joined with '+'; serialNumber (2.5.4.5) is not an RFC
    # 2253 keyword, so it is printed as OID=#DER (PrintableString 0x13).
    parts = set(text.split("+"))
    assert parts == {"CN=svc", "2.5.4.5=#13023432"}


def test_der_roundtrip(pki):
    import ssl
    der = ssl.PEM_cert_to_DER_cert(pki.client.cert_pem)
    assert subject_dn_from_der(der) == "CN=client,OU=Eng,O=Example,C=US"


def test_java_named_groups():
    mapper = SslPrincipalMapper("RULE:^CN=(?<user>[^,]+),OU=(?<unit>[^,]+).*$/${user}.$2/L")
    assert mapper.get_name("CN=Ann,OU=Ops,O=X") == "ann.ops"
    mapper = SslPrincipalMapper("RULE:^CN=(?<n>[a-z]+),O=\\k<n>$/same/")
    assert mapper.get_name("CN=abc,O=abc") == "same"
    # Look-behind syntax is left alone.
    assert SslPrincipalMapper("RULE:^(?<=)CN=(.*)$/$1/").get_name("CN=z") == "z"
