"""JAAS configuration: ``sasl.jaas.config`` values and JAAS files.

Two grammars, both tokenized by a port of ``java.io.StreamTokenizer`` so that
quirks match Kafka/Java exactly:

* ``sasl.jaas.config`` (Kafka's ``JaasConfig``)::

      <LoginModuleClass> <flag> (key=value)* ;

  ``//`` and ``/* */`` comments, values quoted with ``"`` or ``'`` (with
  C-style escapes) or bare words.  As in Kafka, an unquoted value that starts
  with a digit or ``.`` is a *number* token and is refused ("Value not
  specified for key ..."), and a lone ``/`` starts a comment, so paths and
  numbers must be quoted.

* JAAS files (the JDK's ``ConfigFile``)::

      Section {
          <LoginModuleClass> <flag> key="value" ... ;
          ...
      };

  Only ``"`` quotes option values here (a ``'``-quoted value is an error, as
  in the JDK).  ``${property}`` expansion of the JDK is not performed: there
  are no Java system properties in kchannel, so values are taken literally.

Kafka's ``JaasContext`` rules (which context a listener/mechanism uses, one
module per ``sasl.jaas.config``, disallowed login modules) are implemented by
:func:`load_server_context` / :func:`load_client_context`.
"""
from dataclasses import dataclass, field

from kchannel.config.types import reveal
from kchannel.errors import ConfigError

__all__ = [
    "JaasEntry", "JaasConfig", "parse_jaas_config", "parse_jaas_file",
    "load_server_context", "load_client_context", "mechanisms_for_module",
    "check_login_module", "LOGIN_MODULE_MECHANISMS", "DISALLOWED_LOGIN_MODULES_DEFAULT",
    "GLOBAL_CONTEXT_NAME_SERVER", "GLOBAL_CONTEXT_NAME_CLIENT", "JAVA_LOGIN_CONFIG_PARAM",
    "DISALLOWED_LOGIN_MODULES_CONFIG",
]

GLOBAL_CONTEXT_NAME_SERVER = "KafkaServer"
GLOBAL_CONTEXT_NAME_CLIENT = "KafkaClient"
JAVA_LOGIN_CONFIG_PARAM = "java.security.auth.login.config"
DISALLOWED_LOGIN_MODULES_CONFIG = "org.apache.kafka.disallowed.login.modules"
# Kafka 4.0's default (JndiLoginModule since 3.4; LdapLoginModule added in 4.0).
DISALLOWED_LOGIN_MODULES_DEFAULT = ("com.sun.security.auth.module.JndiLoginModule,"
                                    "com.sun.security.auth.module.LdapLoginModule")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

# Login module class -> SASL mechanisms it serves.
LOGIN_MODULE_MECHANISMS = {
    PLAIN_LOGIN_MODULE: ("PLAIN",),
    SCRAM_LOGIN_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    KRB5_LOGIN_MODULE: ("GSSAPI",),
    "com.ibm.security.auth.module.Krb5LoginModule": ("GSSAPI",),
    OAUTHBEARER_LOGIN_MODULE: ("OAUTHBEARER",),
}

_CONTROL_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
# Option keys whose values are secrets; JaasEntry's repr masks them.
_SECRET_MARKERS = ("password", "secret", "token", "key", "credential")


def _is_secret_option(key):
    k = key.lower()
    if k in ("keytab", "usekeytab", "storekey"):
        # Kerberos: keyTab is a path and useKeyTab/storeKey are booleans.
        return False
    return any(m in k for m in _SECRET_MARKERS) or k.startswith("user_")


@dataclass(frozen=True)
class JaasEntry:
    """One login module line: ``login_module control_flag options``.

    ``control_flag`` is lower case (``required`` ...).  ``options`` values are
    plain strings; ``repr`` masks secret-looking ones (passwords, tokens,
    ``user_<name>`` credentials of PlainLoginModule).
    """
    login_module: str
    control_flag: str
    options: dict = field(default_factory=dict)

    def __repr__(self):
        shown = ", ".join(f"{k}={'[hidden]' if _is_secret_option(k) else repr(v)}"
                          for k, v in self.options.items())
        return f"JaasEntry({self.login_module} {self.control_flag} {{{shown}}})"

    __str__ = __repr__

    def masked_options(self):
        return {k: ("[hidden]" if _is_secret_option(k) else v) for k, v in self.options.items()}

    @property
    def mechanisms(self):
        return LOGIN_MODULE_MECHANISMS.get(self.login_module.strip(), ())


@dataclass(frozen=True)
class JaasConfig:
    """Entries of one JAAS login context.

    ``context_name``: ``KafkaServer``, ``<listener>.KafkaServer`` or
    ``KafkaClient``; ``source``: where it came from (``sasl.jaas.config`` key
    or ``JAAS file``); ``dynamic``: True when from a ``sasl.jaas.config``
    property (Kafka's ``dynamicJaasConfig``).
    """
    entries: tuple = ()
    context_name: str = GLOBAL_CONTEXT_NAME_CLIENT
    source: str = "sasl.jaas.config"
    dynamic: bool = True

    def __post_init__(self):
        object.__setattr__(self, "entries", tuple(self.entries))

    @property
    def entry(self):
        """The single entry (``sasl.jaas.config`` always has exactly one)."""
        return self.entries[0] if self.entries else None

    @property
    def login_module(self):
        return self.entries[0].login_module if self.entries else None

    @property
    def options(self):
        """Options of the first entry (Kafka's mechanisms read the first)."""
        return dict(self.entries[0].options) if self.entries else {}

    def option(self, key, login_module=None):
        """Kafka's ``JaasContext.configEntryOption``: first entry with ``key``."""
        for e in self.entries:
            if login_module is not None and login_module != e.login_module:
                continue
            if key in e.options:
                return e.options[key]
        return None

    def __repr__(self):
        return f"JaasConfig({self.context_name!r}, source={self.source!r}, entries={list(self.entries)!r})"


# --------------------------------------------------------------------------
# java.io.StreamTokenizer port
# --------------------------------------------------------------------------
TT_EOF = -1
TT_EOL = 10
TT_NUMBER = -2
TT_WORD = -3

_CT_WHITESPACE = 1
_CT_DIGIT = 2
_CT_ALPHA = 4
_CT_QUOTE = 8
_CT_COMMENT = 16


_AGAIN = object()


class _StreamTokenizer:
    """Faithful subset of ``java.io.StreamTokenizer`` (default syntax table)."""

    def __init__(self, text):
        self._s = text
        self._pos = 0
        self._peek = None  # None = NEED_CHAR
        self.ct = [0] * 256
        for c in range(ord("a"), ord("z") + 1):
            self.ct[c] |= _CT_ALPHA
        for c in range(ord("A"), ord("Z") + 1):
            self.ct[c] |= _CT_ALPHA
        for c in range(128 + 32, 256):
            self.ct[c] |= _CT_ALPHA
        for c in range(0, ord(" ") + 1):
            self.ct[c] = _CT_WHITESPACE
        self.ct[ord("/")] = _CT_COMMENT
        self.ct[ord('"')] = _CT_QUOTE
        self.ct[ord("'")] = _CT_QUOTE
        for c in "0123456789.-":  # parseNumbers()
            self.ct[ord(c)] |= _CT_DIGIT
        self.slash_slash = False
        self.slash_star = False
        self.eol_significant = False
        self.ttype = None
        self.sval = None
        self.nval = 0.0
        self.lineno = 1

    def word_chars(self, ch):
        self.ct[ord(ch)] |= _CT_ALPHA

    def quote_char(self, ch):
        self.ct[ord(ch)] = _CT_QUOTE

    def _read(self):
        if self._pos >= len(self._s):
            return -1
        c = ord(self._s[self._pos])
        self._pos += 1
        return c

    def _ctype(self, c):
        if c < 0:
            return _CT_WHITESPACE
        return self.ct[c] if c < 256 else _CT_ALPHA

    def next_token(self):
        # Java recurses after a comment; a loop keeps long comment runs safe.
        while True:
            tok = self._scan()
            if tok is not _AGAIN:
                return tok

    def _scan(self):
        self.sval = None
        c = self._peek if self._peek is not None else self._read()
        self._peek = None
        if c == -2:  # SKIP_LF marker
            c = self._read()
            if c == ord("\n"):
                c = self._read()
        if c < 0:
            self.ttype = TT_EOF
            return TT_EOF
        ctype = self._ctype(c)
        while ctype & _CT_WHITESPACE:
            if c == ord("\r"):
                self.lineno += 1
                if self.eol_significant:
                    self._peek = -2
                    self.ttype = TT_EOL
                    return TT_EOL
                c = self._read()
                if c == ord("\n"):
                    c = self._read()
            else:
                if c == ord("\n"):
                    self.lineno += 1
                    if self.eol_significant:
                        self.ttype = TT_EOL
                        return TT_EOL
                c = self._read()
            if c < 0:
                self.ttype = TT_EOF
                return TT_EOF
            ctype = self._ctype(c)

        if ctype & _CT_DIGIT:
            neg = False
            if c == ord("-"):
                c = self._read()
                if c != ord(".") and not (ord("0") <= c <= ord("9")):
                    self._peek = c
                    self.ttype = ord("-")
                    return self.ttype
                neg = True
            v = 0.0
            seendot = False
            while True:
                if c == ord(".") and not seendot:
                    seendot = True
                elif ord("0") <= c <= ord("9"):
                    v = v * 10 + (c - ord("0"))
                else:
                    break
                c = self._read()
            self._peek = c
            self.nval = -v if neg else v
            self.ttype = TT_NUMBER
            return TT_NUMBER

        if ctype & _CT_ALPHA:
            buf = []
            while True:
                buf.append(chr(c))
                c = self._read()
                ct = self._ctype(c) if c >= 0 else _CT_WHITESPACE
                if not ct & (_CT_ALPHA | _CT_DIGIT):
                    break
            self._peek = c
            self.sval = "".join(buf)
            self.ttype = TT_WORD
            return TT_WORD

        if ctype & _CT_QUOTE:
            self.ttype = c
            buf = []
            d = self._read()
            while d >= 0 and d != self.ttype and d != ord("\n") and d != ord("\r"):
                if d == ord("\\"):
                    c = self._read()
                    first = c
                    if ord("0") <= c <= ord("7"):
                        c = c - ord("0")
                        c2 = self._read()
                        if ord("0") <= c2 <= ord("7"):
                            c = (c << 3) + (c2 - ord("0"))
                            c2 = self._read()
                            if ord("0") <= c2 <= ord("7") and first <= ord("3"):
                                c = (c << 3) + (c2 - ord("0"))
                                d = self._read()
                            else:
                                d = c2
                        else:
                            d = c2
                    else:
                        c = {ord("a"): 7, ord("b"): 8, ord("f"): 12, ord("n"): 10,
                             ord("r"): 13, ord("t"): 9, ord("v"): 11}.get(c, c)
                        d = self._read()
                    if c >= 0:
                        buf.append(chr(c))
                else:
                    buf.append(chr(d))
                    d = self._read()
            self._peek = None if d == self.ttype else d
            self.sval = "".join(buf)
            return self.ttype

        if c == ord("/") and (self.slash_slash or self.slash_star):
            c = self._read()
            if c == ord("*") and self.slash_star:
                prevc = 0
                c = self._read()
                while c != ord("/") or prevc != ord("*"):
                    if c == ord("\r"):
                        self.lineno += 1
                        c = self._read()
                        if c == ord("\n"):
                            c = self._read()
                    else:
                        if c == ord("\n"):
                            self.lineno += 1
                            c = self._read()
                    if c < 0:
                        self.ttype = TT_EOF
                        return TT_EOF
                    prevc = c
                    c = self._read()
                return _AGAIN
            elif c == ord("/") and self.slash_slash:
                c = self._read()
                while c != ord("\n") and c != ord("\r") and c >= 0:
                    c = self._read()
                self._peek = c
                return _AGAIN
            else:
                if self.ct[ord("/")] & _CT_COMMENT:
                    while c != ord("\n") and c != ord("\r") and c >= 0:
                        c = self._read()
                    self._peek = c
                    return _AGAIN
                self._peek = c
                self.ttype = ord("/")
                return self.ttype

        if ctype & _CT_COMMENT:
            c = self._read()
            while c != ord("\n") and c != ord("\r") and c >= 0:
                c = self._read()
            self._peek = c
            return _AGAIN

        self.ttype = c
        return c


# --------------------------------------------------------------------------
# sasl.jaas.config (Kafka JaasConfig)
# --------------------------------------------------------------------------
def _jaas_error(message, key="sasl.jaas.config"):
    # The value is never echoed: it holds credentials.
    return ConfigError(message, key=key)


def _control_flag(flag):
    if flag is None:
        raise _jaas_error("Login module control flag is not available in the JAAS config")
    up = flag.upper()
    if up not in _CONTROL_FLAGS:
        raise _jaas_error(f"Invalid login module control flag '{flag}' in JAAS config")
    return up.lower()


def parse_jaas_config(text, context_name=GLOBAL_CONTEXT_NAME_CLIENT, source="sasl.jaas.config"):
    """Parse a ``sasl.jaas.config`` value with Kafka's ``JaasConfig`` grammar.

    Returns a :class:`JaasConfig` with every entry found (Kafka's
    ``JaasContext`` then insists on exactly one; see :func:`load_server_context`).
    Errors are ``ConfigError`` with Kafka's messages.
    """
    text = reveal(text)
    if text is None:
        text = ""
    tok = _StreamTokenizer(text)
    tok.slash_slash = True
    tok.slash_star = True
    tok.word_chars("-")
    tok.word_chars("_")
    tok.word_chars("$")
    entries = []
    while tok.next_token() != TT_EOF:
        login_module = tok.sval
        if tok.next_token() == TT_EOF:
            raise _jaas_error("Login module control flag not specified in JAAS config")
        flag = _control_flag(tok.sval)
        options = {}
        while tok.next_token() != TT_EOF and tok.ttype != ord(";"):
            key = tok.sval
            if tok.next_token() != ord("=") or tok.next_token() == TT_EOF or tok.sval is None:
                raise _jaas_error(f"Value not specified for key '{key}' in JAAS config")
            if key is None:
                raise _jaas_error("Option name not specified in JAAS config")
            options[key] = tok.sval
        if tok.ttype != ord(";"):
            raise _jaas_error("JAAS config entry not terminated by semi-colon")
        if not login_module:
            # Java's AppConfigurationEntry refuses a null/empty module name.
            raise _jaas_error("Login module not specified in JAAS config")
        entries.append(JaasEntry(login_module, flag, options))
    if not entries:
        raise _jaas_error("Login module not specified in JAAS config")
    return JaasConfig(entries, context_name=context_name, source=source, dynamic=True)


# --------------------------------------------------------------------------
# JAAS files (JDK ConfigFile)
# --------------------------------------------------------------------------
class _FileParser:
    def __init__(self, text):
        st = _StreamTokenizer(text)
        st.quote_char('"')
        st.word_chars("$")
        st.word_chars("_")
        st.word_chars("-")
        st.word_chars("*")
        st.slash_slash = True
        st.slash_star = True
        st.eol_significant = True
        self.st = st
        self.linenum = 1
        self.lookahead = None

    def _next(self):
        while True:
            tok = self.st.next_token()
            if tok != TT_EOL:
                return tok
            self.linenum += 1

    @staticmethod
    def _err(msg):
        return ConfigError("Configuration Error:\n\t" + msg, key=JAVA_LOGIN_CONFIG_PARAM)

    def _found(self):
        st = self.st
        if st.sval is not None:
            return st.sval
        if st.ttype == TT_NUMBER:
            return repr(st.nval)
        if st.ttype is not None and st.ttype >= 0:
            return chr(st.ttype)
        return "null"

    def match(self, expect):
        la = self.lookahead
        if la == TT_EOF:
            raise self._err(f"Expected: [{expect}], read [end of file]")
        if la in (ord('"'), TT_WORD):
            if expect.lower() in ("module class name", "controlflag", "option key", "option value"):
                value = self.st.sval
                self.lookahead = self._next()
                return value
            raise self._err(f"Line {self.linenum}: expected [{expect}], found [{self._found()}]")
        if la in (ord("{"), ord(";"), ord("}"), ord("=")):
            if expect == chr(la):
                self.lookahead = self._next()
                return None
            raise self._err(f"Line {self.linenum}: expected [{expect}]")
        raise self._err(f"Line {self.linenum}: expected [{expect}], found [{self._found()}]")

    def peek(self, expect):
        return self.lookahead == ord(expect)

    def parse(self):
        sections = {}
        self.lookahead = self._next()
        while self.lookahead != TT_EOF:
            if self.lookahead not in (TT_WORD, ord('"')):
                raise self._err(f"Line {self.linenum}: expected [application name], found [{self._found()}]")
            app_name = self.st.sval
            self.lookahead = self._next()
            self.match("{")
            entries = []
            while not self.peek("}"):
                module = self.match("module class name")
                sflag = self.match("controlFlag")
                if sflag is None or sflag.upper() not in _CONTROL_FLAGS:
                    raise self._err(f"Invalid control flag, {sflag}")
                options = {}
                while not self.peek(";"):
                    key = self.match("option key")
                    self.match("=")
                    value = self.match("option value")
                    options[key] = value
                self.lookahead = self._next()
                entries.append(JaasEntry(module, sflag.lower(), options))
            self.match("}")
            self.match(";")
            if app_name in sections:
                raise self._err(f"Can not specify multiple entries for {app_name}")
            sections[app_name] = entries
        return sections


def parse_jaas_file(text):
    """Parse JAAS file text into ``{section name: [JaasEntry, ...]}``.

    Errors are ``ConfigError`` with the JDK's ``Configuration Error`` text.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return _FileParser(text).parse()


def read_jaas_file(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


# --------------------------------------------------------------------------
# Kafka JaasContext rules
# --------------------------------------------------------------------------
def _disallowed(disallowed=None):
    if disallowed is None:
        disallowed = DISALLOWED_LOGIN_MODULES_DEFAULT
    if isinstance(disallowed, str):
        disallowed = disallowed.split(",")
    return {m.strip() for m in disallowed}


def check_login_module(entry, disallowed=None, require_known=True, key="sasl.jaas.config"):
    """Refuse disallowed login modules (Kafka's message) and, since kchannel
    cannot load Java classes, modules it has no implementation for."""
    name = entry.login_module.strip()
    if name in _disallowed(disallowed):
        raise ConfigError(f"{name} is not allowed. Update System property "
                          f"'{DISALLOWED_LOGIN_MODULES_CONFIG}' to allow {name}", key=key)
    if require_known and name not in LOGIN_MODULE_MECHANISMS:
        known = ", ".join(sorted(LOGIN_MODULE_MECHANISMS))
        raise ConfigError(f"Login module {name} is not supported by kchannel; supported login "
                          f"modules: {known}", key=key)


def mechanisms_for_module(login_module):
    """SASL mechanisms served by a login module class (empty if unknown)."""
    return LOGIN_MODULE_MECHANISMS.get(login_module.strip(), ())


def _load_dynamic(text, context_name, source, disallowed=None):
    cfg = parse_jaas_config(text, context_name=context_name, source=source)
    n = len(cfg.entries)
    if n == 0:
        raise ConfigError("JAAS config property does not contain any login modules", key=source)
    if n != 1:
        raise ConfigError(f"JAAS config property contains {n} login modules, should be 1 module", key=source)
    check_login_module(cfg.entries[0], disallowed, key=source)
    return cfg


def _default_context(listener_context_name, global_name, jaas_sections, jaas_file_desc, disallowed=None):
    entries = None
    name = global_name
    if jaas_sections is not None:
        if listener_context_name is not None and listener_context_name in jaas_sections:
            entries = jaas_sections[listener_context_name]
            name = listener_context_name
        if entries is None:
            entries = jaas_sections.get(global_name)
    if entries is None:
        listener_text = "" if listener_context_name is None else f" or '{listener_context_name}'"
        raise ConfigError(
            f"Could not find a '{global_name}'{listener_text} entry in the JAAS configuration. "
            f"System property '{JAVA_LOGIN_CONFIG_PARAM}' is "
            f"{'not set' if jaas_file_desc is None else jaas_file_desc}",
            key=JAVA_LOGIN_CONFIG_PARAM)
    for e in entries:
        check_login_module(e, disallowed, key=JAVA_LOGIN_CONFIG_PARAM)
    return JaasConfig(entries, context_name=name, source="JAAS file", dynamic=False)


def load_server_context(listener_name, mechanism, dynamic_jaas_config=None, jaas_sections=None,
                        jaas_file_desc=None, disallowed=None):
    """Kafka's ``JaasContext.loadServerContext``.

    ``dynamic_jaas_config``: value of ``listener.name.<l>.<mech>.sasl.jaas.config``
    (or None).  Otherwise the JAAS file section ``<listener lower>.KafkaServer``
    is used if present, else ``KafkaServer``.  Raises ``ConfigError`` with
    Kafka's message when neither exists.
    """
    if listener_name is None:
        raise ConfigError("listenerName should not be null for SERVER")
    if mechanism is None:
        raise ConfigError("mechanism should not be null for SERVER")
    listener_context = f"{listener_name.lower()}.{GLOBAL_CONTEXT_NAME_SERVER}"
    if dynamic_jaas_config is not None:
        source = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
        return _load_dynamic(dynamic_jaas_config, GLOBAL_CONTEXT_NAME_SERVER, source, disallowed)
    return _default_context(listener_context, GLOBAL_CONTEXT_NAME_SERVER, jaas_sections, jaas_file_desc,
                            disallowed)


def load_client_context(dynamic_jaas_config=None, jaas_sections=None, jaas_file_desc=None, disallowed=None):
    """Kafka's ``JaasContext.loadClientContext``: ``sasl.jaas.config`` else the
    ``KafkaClient`` section of the JAAS file."""
    if dynamic_jaas_config is not None:
        return _load_dynamic(dynamic_jaas_config, GLOBAL_CONTEXT_NAME_CLIENT, "sasl.jaas.config", disallowed)
    return _default_context(None, GLOBAL_CONTEXT_NAME_CLIENT, jaas_sections, jaas_file_desc, disallowed)
