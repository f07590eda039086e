"""Kerberos principal to short name mapping (``sasl.kerberos.principal.to.local.rules``).

Mirrors Kafka's ``KerberosName``, ``KerberosRule`` and ``KerberosShortNamer``
(themselves derived from Hadoop's ``auth_to_local`` rules):

* ``DEFAULT``: a name in the default realm maps to its first component, so
  ``user@REALM`` -> ``user`` and ``service/host@REALM`` -> ``service``.  A name
  in any other realm does not match.
* ``RULE:[n:format](match)s/from/to/[g][/L|/U]``: applies only to names with
  ``n`` components; ``format`` builds a string from ``$0`` (realm), ``$1``,
  ``$2`` (components); the rule applies if ``match`` matches the whole string;
  ``s/from/to/`` substitutes the first match (every match with ``g``); ``/L``
  and ``/U`` lower/upper-case the result.

Rules are tried in order; the first that yields a name wins.  A result that
still contains ``/`` or ``@`` is an error, as is a name no rule matches.

Patterns are Java regular expressions in Kafka; the common subset (what
real rule sets use) means the same in Python's ``re``.  Replacement strings
use Java's syntax (``$1`` group references, ``\\`` escapes), translated here.
"""
import os
import re

from kchannel.errors import ConfigError, KChannelError
from kchannel.log import get_logger

log = get_logger("kchannel.security.kerberos_rules")

CONFIG_KEY = "sasl.kerberos.principal.to.local.rules"


class NoMatchingRule(KChannelError):
    """No rule maps the principal, or a rule produced a non-simple name
    (Kafka's ``NoMatchingRule``, an IOException there)."""


class BadFormatString(KChannelError):
    """A rule's format or replacement refers to a missing parameter/group
    (Kafka's ``BadFormatString``)."""


# -- KerberosName -------------------------------------------------------------

_NAME_PARSER = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")


class KerberosName:
    """A Kerberos principal split into service (first component), host
    (second component, may be None) and realm (may be None)."""

    __slots__ = ("service_name", "host_name", "realm")

    def __init__(self, service_name, host_name=None, realm=None):
        if service_name is None:
            raise ValueError("serviceName must not be null")
        self.service_name = service_name
        self.host_name = host_name
        self.realm = realm

    @classmethod
    def parse(cls, principal_name):
        m = _NAME_PARSER.fullmatch(principal_name)
        if m is None:
            if "@" in principal_name:
                raise ValueError(f"Malformed Kerberos name: {principal_name}")
            return cls(principal_name, None, None)
        return cls(m.group(1), m.group(3), m.group(4))

    def __str__(self):
        out = self.service_name
        if self.host_name is not None:
            out += "/" + self.host_name
        if self.realm is not None:
            out += "@" + self.realm
        return out

    def __repr__(self):
        return f"KerberosName({str(self)!r})"

    def __eq__(self, other):
        return isinstance(other, KerberosName) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


# -- KerberosRule ---------------------------------------------------------------

# Text without '$' then at most one "$digits" parameter (Kafka's PARAMETER_PATTERN).
_PARAMETER_PATTERN = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE_PATTERN = re.compile(r"[/@]")


def replace_parameters(fmt, params):
    """Replace ``$n`` in ``fmt`` by ``params[n]`` (no recursion)."""
    start = 0
    out = []
    while start < len(fmt):
        m = _PARAMETER_PATTERN.match(fmt, start)
        # The pattern can match the empty string, so a match always exists;
        # an empty match at a '$' cannot happen because group 2 takes it.
        out.append(m.group(1))
        num = m.group(3)
        if num is not None:
            if num == "":
                raise BadFormatString(f"bad format in username mapping in {num}")
            n = int(num)
            if n < 0 or n >= len(params):
                raise BadFormatString(
                    f"index {n} from {fmt} is outside of the valid range 0 to {len(params) - 1}")
            out.append(params[n])
        if m.end() == start:       # defensive: never loop without progress
            break
        start = m.end()
    return "".join(out)


def _java_replacement(template, group_count):
    """Compile a java.util.regex.Matcher replacement string into a list of
    literal strings and group numbers."""
    parts = []
    literal = []
    i = 0
    while i < len(template):
        c = template[i]
        if c == "\\":
            i += 1
            if i >= len(template):
                raise BadFormatString("character to be escaped is missing")
            literal.append(template[i])
            i += 1
        elif c == "$":
            i += 1
            if i >= len(template):
                raise BadFormatString("Illegal group reference: group index is missing")
            if template[i] == "{":
                end = template.find("}", i)
                if end < 0:
                    raise BadFormatString("named capturing group is missing trailing '}'")
                name = template[i + 1:end]
                ref = name
                i = end + 1
            else:
                if not template[i].isdigit():
                    raise BadFormatString("Illegal group reference")
                ref = int(template[i])
                if ref > group_count:
                    raise BadFormatString(f"No group {ref}")
                i += 1
                # Java keeps consuming digits while the number stays a valid group.
                while i < len(template) and template[i].isdigit():
                    nxt = ref * 10 + int(template[i])
                    if nxt > group_count:
                        break
                    ref = nxt
                    i += 1
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append((ref,))
        else:
            literal.append(c)
            i += 1
    if literal:
        parts.append("".join(literal))
    return parts


def replace_substitution(base, from_pattern, to, repeat):
    """Replace the first (or, with ``repeat``, every) match of
    ``from_pattern`` in ``base`` by the Java replacement string ``to``."""
    parts = _java_replacement(to, from_pattern.groups)

    def expand(m):
        out = []
        for p in parts:
            if isinstance(p, tuple):
                out.append(m.group(p[0]) or "")
            else:
                out.append(p)
        return "".join(out)

    try:
        return from_pattern.sub(expand, base, count=0 if repeat else 1)
    except IndexError as exc:           # unknown named group
        raise BadFormatString(str(exc)) from exc


def _compile(pattern, rule):
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"Invalid rule: {rule}: bad regular expression {pattern!r}: {exc}",
                          key=CONFIG_KEY, value=rule) from exc


class KerberosRule:
    """One ``auth_to_local`` rule; ``KerberosRule(default_realm)`` is DEFAULT."""

    def __init__(self, default_realm, num_components=None, fmt=None, match=None,
                 from_pattern=None, to_pattern=None, repeat=False,
                 to_lower_case=False, to_upper_case=False, text=None):
        self.default_realm = default_realm
        self.is_default = num_components is None
        self.num_components = num_components or 0
        self.format = fmt
        self.match_source = match
        self.from_source = from_pattern
        self.match = _compile(match, text) if match is not None else None
        self.from_pattern = _compile(from_pattern, text) if from_pattern is not None else None
        self.to_pattern = to_pattern
        self.repeat = repeat
        self.to_lower_case = to_lower_case
        self.to_upper_case = to_upper_case

    def __str__(self):
        if self.is_default:
            return "DEFAULT"
        buf = [f"RULE:[{self.num_components}:{self.format}]"]
        if self.match is not None:
            buf.append(f"({self.match_source})")
        if self.from_pattern is not None:
            buf.append(f"s/{self.from_source}/{self.to_pattern}/")
            if self.repeat:
                buf.append("g")
        if self.to_lower_case:
            buf.append("/L")
        if self.to_upper_case:
            buf.append("/U")
        return "".join(buf)

    __repr__ = __str__

    def apply(self, params):
        """``params`` = [realm, component1, component2...]; returns the short
        name or None when this rule does not apply."""
        result = None
        if self.is_default:
            if self.default_realm == params[0]:
                result = params[1]
        elif len(params) - 1 == self.num_components:
            base = replace_parameters(self.format, params)
            if self.match is None or self.match.fullmatch(base):
                if self.from_pattern is None:
                    result = base
                else:
                    result = replace_substitution(base, self.from_pattern,
                                                  self.to_pattern, self.repeat)
        if result is not None and _NON_SIMPLE_PATTERN.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if result is not None:
            # Locale.ENGLISH case mapping: ASCII-safe, no Turkish dotless i.
            if self.to_lower_case:
                result = result.lower()
            elif self.to_upper_case:
                result = result.upper()
        return result


# -- KerberosShortNamer -----------------------------------------------------------

_RULE_PARSER = re.compile(
    r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))")


def parse_rules(default_realm, rules):
    result = []
    for rule in rules:
        m = _RULE_PARSER.match(rule)
        if m is None:
            raise ConfigError(f"Invalid rule: {rule}", key=CONFIG_KEY, value=rule)
        if m.end() != len(rule):
            raise ConfigError(
                f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`",
                key=CONFIG_KEY, value=rule)
        if m.group(2) is not None:
            result.append(KerberosRule(default_realm))
        else:
            if m.group(5) == "":
                # Integer.parseInt("") fails in Kafka with a NumberFormatException,
                # itself an IllegalArgumentException.
                raise ConfigError(f'For input string: "" in rule {rule}',
                                  key=CONFIG_KEY, value=rule)
            result.append(KerberosRule(
                default_realm, int(m.group(5)), m.group(6), m.group(8), m.group(10),
                m.group(11), m.group(12) == "g", m.group(13) == "L", m.group(13) == "U",
                text=rule))
    return result


def split_rules(value):
    """Split a raw config value (comma-separated list, as Kafka's LIST type)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    value = value.strip()
    if not value:
        return []
    return [r.strip() for r in value.split(",")]


class KerberosShortNamer:
    """Translate Kerberos principals into short names with ``rules``.

    ``rules``: list of rule strings (or a comma-separated string); None means
    ``["DEFAULT"]`` (Kafka's default for the config key).  ``default_realm``:
    the realm DEFAULT strips; None asks the local Kerberos configuration
    (``default_realm`` in ``libdefaults``), "" if there is none — as Kafka
    does when it cannot find one.
    """

    def __init__(self, rules=None, default_realm=None):
        rules = split_rules(rules)
        if rules is None:
            rules = ["DEFAULT"]
        if default_realm is None:
            default_realm = default_kerberos_realm() or ""
        self.default_realm = default_realm
        self.rules = parse_rules(default_realm, rules)

    @classmethod
    def from_unparsed_rules(cls, default_realm, rules):
        return cls(rules, default_realm)

    def short_name(self, principal):
        """Short name of ``principal`` (a str or :class:`KerberosName`).

        Raises :class:`NoMatchingRule` / :class:`BadFormatString` as Kafka,
        ``ValueError`` for a malformed name.
        """
        name = principal if isinstance(principal, KerberosName) else KerberosName.parse(principal)
        if name.host_name is None:
            if name.realm is None:
                return name.service_name
            params = [name.realm, name.service_name]
        else:
            params = [name.realm, name.service_name, name.host_name]
        for rule in self.rules:
            result = rule.apply(params)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"No rules apply to {name}, rules [{', '.join(str(r) for r in self.rules)}]")

    def __repr__(self):
        return ("KerberosShortNamer(principalToLocalRules = ["
                + ", ".join(str(r) for r in self.rules) + "])")


# -- default realm ---------------------------------------------------------------

_LIBDEFAULTS_RE = re.compile(r"^\s*\[\s*libdefaults\s*\]", re.I)
_SECTION_RE = re.compile(r"^\s*\[")
_DEFAULT_REALM_RE = re.compile(r"^\s*default_realm\s*=\s*(\S+)")


def default_kerberos_realm():
    """The local Kerberos default realm, or None.

    Asks libkrb5 through python-gssapi when it is installed (canonicalizing a
    bare name appends the default realm); otherwise reads ``default_realm``
    from ``KRB5_CONFIG`` (default ``/etc/krb5.conf``).
    """
    try:
        import gssapi  # optional dependency (extra "gssapi"): only when installed
        name = gssapi.Name("kchannel", gssapi.NameType.kerberos_principal)
        text = str(name.canonicalize(gssapi.MechType.kerberos))
        if "@" in text and text.rsplit("@", 1)[1]:
            return text.rsplit("@", 1)[1]
    except Exception:  # noqa: BLE001 - no gssapi, no config: fall back below
        pass
    paths = os.environ.get("KRB5_CONFIG", "/etc/krb5.conf").split(":")
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                in_lib = False
                for line in f:
                    if _SECTION_RE.match(line):
                        in_lib = bool(_LIBDEFAULTS_RE.match(line))
                        continue
                    if in_lib:
                        m = _DEFAULT_REALM_RE.match(line)
                        if m:
                            return m.group(1)
        except OSError:
            continue
    return None
