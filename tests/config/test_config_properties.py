"""java.util.Properties semantics of the .properties reader."""
import pytest
from hypothesis import given, strategies as st

from kchannel.config.properties import format_properties, load_properties, parse_properties
from kchannel.errors import ConfigError


@pytest.mark.parametrize("text, expected", [
    ("a=b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a\tb", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a : b", {"a": "b"}),
    ("   a=b", {"a": "b"}),
    ("a=b  ", {"a": "b  "}),             # trailing whitespace of a value is kept
    ("a==b", {"a": "=b"}),               # only one separator is consumed
    ("a = = b", {"a": "= b"}),
    ("a", {"a": ""}),
    ("a=", {"a": ""}),
    ("=b", {"": "b"}),
    ("a b c", {"a": "b c"}),
    ("a\\=b=c", {"a=b": "c"}),           # escaped separators in keys
    ("a\\:b:c", {"a:b": "c"}),
    ("a\\ b c", {"a b": "c"}),
    ("a=\\u0041\\u00e9", {"a": "A\u00e9"}),
    ("a=x\\ty\\nz\\rw\\f", {"a": "x\ty\nz\rw\f"}),
    ("a=\\q\\\\", {"a": "q\\"}),        # unknown escape drops the backslash
    ("# c=d\na=b", {"a": "b"}),
    ("! c=d\na=b", {"a": "b"}),
    ("   # indented comment\na=b", {"a": "b"}),
    ("a=b # not a comment", {"a": "b # not a comment"}),
    ("a=1\na=2", {"a": "2"}),             # last one wins
    ("a=b\r\nc=d\re=f", {"a": "b", "c": "d", "e": "f"}),
    ("\n\n  \n\ta=b\n\n", {"a": "b"}),
])
def test_simple_lines(text, expected):
    assert parse_properties(text) == expected


def test_continuation_drops_leading_whitespace():
    text = ("sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
            "    username=\"admin\" \\\n"
            "\t  password=\"admin-secret\";\n"
            "next=1\n")
    assert parse_properties(text) == {
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret";',
        "next": "1",
    }


def test_inline_pem_with_continuations():
    text = ("ssl.keystore.key=-----BEGIN PRIVATE KEY----- \\\n"
            "  MIIEvQIBADANBgkqhkiG9w0BAQEFAASC \\\n"
            "  -----END PRIVATE KEY-----\n")
    assert parse_properties(text)["ssl.keystore.key"] == (
        "-----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASC -----END PRIVATE KEY-----")


def test_continuation_rules():
    # An even number of trailing backslashes is an escaped backslash, not a continuation.
    assert parse_properties("a=b\\\\\nc=d") == {"a": "b\\", "c": "d"}
    # Odd: continuation.  A '#' at the start of a continuation line is data.
    assert parse_properties("a=b\\\n  #c\nd=e") == {"a": "b#c", "d": "e"}
    # A comment line never continues.
    assert parse_properties("# x \\\na=b") == {"a": "b"}
    # A blank line after a continuation ends the logical line.
    assert parse_properties("a=b\\\n\nc=d") == {"a": "b", "c": "d"}
    # CRLF continuation.
    assert parse_properties("a=b\\\r\n  c\r\nd=e") == {"a": "bc", "d": "e"}
    # Trailing backslash at end of file is dropped.
    assert parse_properties("a=b\\") == {"a": "b"}
    # Key continued across lines.
    assert parse_properties("ke\\\n  y=v") == {"key": "v"}


def test_malformed_unicode_escape():
    with pytest.raises(ConfigError, match=r"Malformed \\uxxxx encoding\."):
        parse_properties("a=\\u00zz")
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("a=\\u12")


def test_file_is_latin1_like_java(tmp_path):
    p = tmp_path / "client.properties"
    p.write_bytes("sasl.password=p\u00e4ss\n".encode("utf-8"))
    # Java's Properties.load(InputStream) reads ISO-8859-1: each UTF-8 byte is one char.
    assert load_properties(p) == {"sasl.password": "p\u00c3\u00a4ss"}
    assert load_properties(str(p), encoding="utf-8") == {"sasl.password": "p\u00e4ss"}


def test_load_properties_text_or_path(tmp_path):
    assert load_properties("a=b\nc=d") == {"a": "b", "c": "d"}
    with pytest.raises(FileNotFoundError):
        load_properties(str(tmp_path / "missing.properties"))


_keys = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=12)
_vals = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=30)


@given(st.dictionaries(_keys, _vals, max_size=6))
def test_format_parse_round_trip(d):
    assert parse_properties(format_properties(d)) == d


@given(st.text(max_size=200))
def test_any_text_parses_or_fails_with_config_error(text):
    try:
        out = parse_properties(text)
    except ConfigError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in out.items())
