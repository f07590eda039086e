"""SSL principal mapping and certificate subject names.

* ``SslPrincipalMapper``: Kafka's ``ssl.principal.mapping.rules``
  (``org.apache.kafka.common.security.ssl.SslPrincipalMapper``): the same
  rule grammar, splitting, parse errors, ``$n`` replacement semantics
  (including the handling of back references beyond the group count) and
  ``toString``.  One addition: rules may also be separated by newlines (Kafka
  would silently drop every rule but the last line's in that case).
* ``x500_name(name)`` / ``subject_dn_from_der(der)``: a certificate subject
  as Java's ``X500Principal.getName()`` (RFC 2253) prints it, which is the
  string Kafka's rules are matched against: most specific RDN first, keywords
  only for CN, C, L, ST, O, OU, STREET, DC, UID (others as dotted OIDs with
  ``#``-hex DER values), ``, = + < > # ; " \\`` escaped with a backslash
  anywhere in a value, leading/trailing spaces escaped, NUL as ``\\00``.

Java regular expressions in rules are compiled with Python's ``re``; the
common syntax (groups, classes, lazy/possessive quantifiers, anchors) is the
same, Java-only constructs such as ``\\p{Lu}`` are not supported.
"""
import re

from kchannel.errors import ConfigError, KChannelError

SSL_PRINCIPAL_MAPPING_RULES_CONFIG = "ssl.principal.mapping.rules"
DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"

# Kafka's RULE_PATTERN, verbatim (Java and Python agree on this syntax).
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
# re.ASCII: Java's \s is [ \t\n\x0B\f\r], not Unicode whitespace.
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)", re.ASCII)
_RULE_PARSER = re.compile(_RULE_PATTERN, re.ASCII)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(KChannelError):
    """No ``ssl.principal.mapping.rules`` rule applies to a DN (Kafka's
    ``SslPrincipalMapper.NoMatchingRule``)."""


def _split_rules(rules):
    if rules is None:
        rules = DEFAULT_SSL_PRINCIPAL_MAPPING_RULES
    if isinstance(rules, (list, tuple)):
        # A LIST-typed config value has already been split on commas.
        rules = ",".join(rules)
    out = []
    for line in rules.split("\n"):
        for m in _RULE_SPLITTER.finditer(line.strip()):
            out.append(m.group(1))
    return out


class _Rule:
    __slots__ = ("is_default", "pattern", "regex", "replacement", "to_lower", "to_upper")

    def __init__(self, pattern=None, replacement=None, to_lower=False, to_upper=False,
                 is_default=False):
        self.is_default = is_default
        self.pattern = pattern
        self.replacement = replacement
        self.to_lower = to_lower
        self.to_upper = to_upper
        self.regex = None
        if not is_default and pattern is not None:
            try:
                self.regex = re.compile(_java_regex(pattern))
            except re.error as exc:
                raise ConfigError(f"Invalid rule: `{pattern}`: {exc}",
                                  SSL_PRINCIPAL_MAPPING_RULES_CONFIG, pattern) from exc

    def apply(self, dn):
        if self.is_default:
            return dn
        result = None
        if self.regex.fullmatch(dn) is not None:
            template = _escape_literal_back_references(self.replacement, self.regex.groups)
            result = self.regex.sub(lambda m: _java_expand(m, template), dn)
        if self.to_lower and result is not None:
            result = _ascii_lower(result)
        elif self.to_upper and result is not None:
            result = _ascii_upper(result)
        return result

    def __str__(self):
        if self.is_default:
            return "DEFAULT"
        buf = "RULE:"
        if self.pattern is not None:
            buf += self.pattern
        if self.replacement is not None:
            buf += "/" + self.replacement
        if self.to_lower:
            buf += "/L"
        elif self.to_upper:
            buf += "/U"
        return buf

    __repr__ = __str__


_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")
_JAVA_NAMED_BACKREF = re.compile(r"\\k<([A-Za-z][A-Za-z0-9]*)>")


def _java_regex(pattern):
    r"""Java regex syntax Python spells differently: named groups
    ``(?<name>...)`` and back references ``\k<name>``."""
    pattern = _JAVA_NAMED_GROUP.sub("(?P<", pattern)
    return _JAVA_NAMED_BACKREF.sub(r"(?P=\1)", pattern)


def _ascii_lower(s):
    # Java's toLowerCase(Locale.ENGLISH); Python's lower() is locale-free.
    return s.lower()


def _ascii_upper(s):
    return s.upper()


def _escape_literal_back_references(unescaped, num_groups):
    """Kafka's escapeLiteralBackReferences: ``$n`` beyond the group count is
    shortened digit by digit (``$12`` -> group 1 then "2") and, if still too
    large, turned into a literal ``\\$n``.  Indices come from the original
    string while insertions shift the copy -- faithfully reproduced."""
    if num_groups == 0:
        return unescaped
    value = unescaped
    for m in _BACK_REFERENCE.finditer(unescaped):
        num = m.group(1)
        if num.startswith("0"):
            continue
        idx = int(num)
        while idx > num_groups and idx >= 10:
            idx //= 10
        if idx > num_groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _java_expand(m, replacement):
    """Java's Matcher.appendReplacement expansion of ``replacement``."""
    out = []
    i, n = 0, len(replacement)
    group_count = m.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == n:
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i == n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                name = replacement[i + 1:end]
                if name not in m.re.groupindex:
                    raise ValueError(f"No group with name {{{name}}}")
                g = m.group(name)
                i = end + 1
            else:
                d = replacement[i]
                if not ("0" <= d <= "9"):
                    raise ValueError("Illegal group reference")
                ref = ord(d) - 48
                i += 1
                while i < n and "0" <= replacement[i] <= "9":
                    new_ref = ref * 10 + (ord(replacement[i]) - 48)
                    if group_count < new_ref:
                        break
                    ref = new_ref
                    i += 1
                if ref > group_count:
                    raise ValueError(f"No group {ref}")
                g = m.group(ref)
            if g is not None:
                out.append(g)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _parse_rules(rules):
    result = []
    for rule in rules:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ConfigError(f"Invalid rule: {rule}", SSL_PRINCIPAL_MAPPING_RULES_CONFIG, rule)
        if len(rule) != m.end():
            raise ConfigError(f"Invalid rule: `{rule}`, unmatched substring: "
                              f"`{rule[m.end():]}`", SSL_PRINCIPAL_MAPPING_RULES_CONFIG, rule)
        # Empty rules are ignored.
        if m.group(1) is not None:
            result.append(_Rule(is_default=True))
        elif m.group(2) is not None:
            result.append(_Rule(m.group(2), m.group(4), m.group(6) == "L", m.group(6) == "U"))
    return result


class SslPrincipalMapper:
    """Maps a certificate DN to a principal name with Kafka's rules."""

    def __init__(self, rules=DEFAULT_SSL_PRINCIPAL_MAPPING_RULES):
        self.rules = _parse_rules(_split_rules(rules))

    @classmethod
    def from_rules(cls, rules):
        return cls(rules)

    def get_name(self, distinguished_name):
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {self._rules_str()}")

    def _rules_str(self):
        return "[" + ", ".join(str(r) for r in self.rules) + "]"

    def __str__(self):
        return f"SslPrincipalMapper(rules = {self._rules_str()})"

    __repr__ = __str__


# ---------------------------------------------------------------------------
# X500Principal.getName() (RFC 2253)
# ---------------------------------------------------------------------------
# Attribute types Java prints by keyword in RFC 2253 output.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string tags Java renders as text (AVA.isDerString, non-canonical).
_TAG_PRINTABLE, _TAG_T61, _TAG_IA5, _TAG_GENERAL, _TAG_BMP, _TAG_UTF8 = (
    0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C)
_TEXT_TAGS = frozenset({_TAG_PRINTABLE, _TAG_T61, _TAG_IA5, _TAG_GENERAL, _TAG_BMP, _TAG_UTF8})
_ESCAPEES = frozenset(',=+<>#;"\\')


def _der_length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _value_bytes(attr, tag):
    """Content octets of an attribute value as they were encoded."""
    v = attr.value
    if isinstance(v, bytes):
        return v
    if tag == _TAG_BMP:
        return v.encode("utf-16-be")
    if tag == 0x1C:  # UniversalString
        return v.encode("utf-32-be")
    if tag == _TAG_T61:
        return v.encode("latin-1", "replace")
    return v.encode("utf-8")


def _escape_value(text):
    buf = []
    for c in text:
        if c in _ESCAPEES:
            buf.append("\\" + c)
        elif c == "\x00":
            buf.append("\\00")
        else:
            buf.append(c)
    chars = "".join(buf)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    if lead == 0 and trail == len(chars) - 1:
        return chars
    return "".join(("\\" + c) if (i < lead or i > trail) else c for i, c in enumerate(chars))


def _ava(attr):
    oid = attr.oid.dotted_string
    tag_obj = getattr(attr, "_type", None)
    tag = getattr(tag_obj, "value", tag_obj)
    if tag is None:
        tag = _TAG_UTF8 if isinstance(attr.value, str) else 0x04
    keyword = _RFC2253_KEYWORDS.get(oid)
    content = _value_bytes(attr, tag)
    if keyword is None or tag not in _TEXT_TAGS:
        der = bytes([tag]) + _der_length(len(content)) + content
        return f"{keyword or oid}=#{der.hex()}"
    # Java decodes the content octets as UTF-8 whatever the string type.
    return f"{keyword}={_escape_value(content.decode('utf-8', 'replace'))}"


def x500_name(name):
    """A ``cryptography.x509.Name`` as ``X500Principal.getName()``."""
    parts = []
    for rdn in reversed(list(name.rdns)):
        parts.append("+".join(_ava(a) for a in rdn))
    return ",".join(parts)


def subject_dn_from_der(der):
    """Subject DN (Java RFC 2253 form) of a DER certificate."""
    # Imported on first use (~20 ms of start-up, see ssl_factory._crypto).
    from cryptography import x509
    return x500_name(x509.load_der_x509_certificate(der).subject)


def subject_dn_from_pem(pem):
    # Imported on first use (~20 ms of start-up, see ssl_factory._crypto).
    from cryptography import x509
    if isinstance(pem, str):
        pem = pem.encode("ascii")
    return x500_name(x509.load_pem_x509_certificate(pem).subject)
