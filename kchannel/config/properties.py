"""Java ``.properties`` reader with ``java.util.Properties.load`` semantics.

Kafka reads ``server.properties`` / ``client.properties`` with
``Properties.load(InputStream)``, so an operator's file must mean exactly the
same thing here:

* a logical line is one or more natural lines (ended by ``\\n``, ``\\r`` or
  ``\\r\\n``); a natural line ending in an odd number of backslashes continues
  on the next one, and the leading whitespace (space, tab, form feed) of the
  continuation line is dropped.  Multi-line ``sasl.jaas.config`` values and
  inline PEM (``ssl.keystore.key``) depend on exactly this rule;
* a line whose first non-blank character is ``#`` or ``!`` is a comment (a
  comment never continues, even if it ends in a backslash);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace
  around the separator is skipped, and one ``=``/``:`` after whitespace is
  consumed too (``key = value``, ``key value``, ``key:value``);
* escapes ``\\t \\n \\r \\f \\uXXXX``; any other ``\\x`` is ``x`` (so
  ``\\=``, ``\\:``, ``\\ `` and ``\\#`` put separators into keys);
* trailing whitespace of a value is kept (Kafka's ConfigDef trims it later);
* a later duplicate key replaces the earlier one.

Files are decoded as ISO-8859-1, as ``Properties.load(InputStream)`` does, so
that non-ASCII bytes mean the same thing to kchannel and to a Kafka broker or
Java client reading the same file (use ``\\uXXXX`` for non-Latin-1 text).
"""
import os

from kchannel.errors import ConfigError

__all__ = ["parse_properties", "load_properties", "format_properties"]

_WS = " \t\f"


def _logical_lines(text):
    """Yield logical lines, mirroring ``Properties.LineReader.readLine``."""
    n = len(text)
    i = 0
    while i < n:
        buf = []
        skip_ws = True
        appended_line_begin = False
        preceding_backslash = False
        while True:
            if i >= n:
                # EOF: a trailing unescaped backslash is not part of the line.
                if buf:
                    if preceding_backslash:
                        buf.pop()
                    yield "".join(buf)
                return
            c = text[i]
            i += 1
            if skip_ws:
                if c in _WS:
                    continue
                if not appended_line_begin and (c == "\r" or c == "\n"):
                    continue
                skip_ws = False
                appended_line_begin = False
            if not buf and (c == "#" or c == "!"):
                # Comment: consume to end of the natural line.
                while i < n and text[i] not in "\r\n":
                    i += 1
                skip_ws = True
                continue
            if c != "\n" and c != "\r":
                buf.append(c)
                preceding_backslash = (not preceding_backslash) if c == "\\" else False
                continue
            # End of a natural line.
            if not buf:
                skip_ws = True
                continue
            if preceding_backslash:
                buf.pop()  # the continuation backslash itself
                skip_ws = True
                appended_line_begin = True
                preceding_backslash = False
                if c == "\r" and i < n and text[i] == "\n":
                    i += 1
                continue
            yield "".join(buf)
            break


def _load_convert(s, start, end):
    """Decode escapes in ``s[start:end]`` like ``Properties.loadConvert``."""
    out = []
    i = start
    while i < end:
        c = s[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        c = s[i]  # readLine never leaves an unescaped backslash at the end
        i += 1
        if c == "u":
            hexdigits = s[i:i + 4]
            if len(hexdigits) < 4 or i + 4 > end or any(
                    h not in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ConfigError("Malformed \\uxxxx encoding.")
            out.append(chr(int(hexdigits, 16)))
            i += 4
        elif c == "t":
            out.append("\t")
        elif c == "r":
            out.append("\r")
        elif c == "n":
            out.append("\n")
        elif c == "f":
            out.append("\f")
        else:
            out.append(c)
    return "".join(out)


def parse_properties(text):
    """Parse ``.properties`` text; returns an insertion-ordered ``dict``.

    Raises ``ConfigError("Malformed \\uxxxx encoding.")`` like Java does for a
    bad ``\\u`` escape.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("latin-1")
    props = {}
    for line in _logical_lines(text):
        limit = len(line)
        key_len = 0
        value_start = limit
        has_sep = False
        preceding_backslash = False
        while key_len < limit:
            c = line[key_len]
            if c in "=:" and not preceding_backslash:
                value_start = key_len + 1
                has_sep = True
                break
            if c in _WS and not preceding_backslash:
                value_start = key_len + 1
                break
            preceding_backslash = (not preceding_backslash) if c == "\\" else False
            key_len += 1
        while value_start < limit:
            c = line[value_start]
            if c not in _WS:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        key = _load_convert(line, 0, key_len)
        value = _load_convert(line, value_start, limit)
        # Re-inserting moves nothing in a dict; delete first so the order
        # reflects the last occurrence, which is the one that counts.
        props.pop(key, None)
        props[key] = value
    return props


def _looks_like_text(s):
    return "\n" in s or "\r" in s or (("=" in s or ":" in s) and not os.path.exists(s))


def load_properties(path_or_text, encoding="latin-1"):
    """Load a ``.properties`` file (path or ``os.PathLike``) into a ``dict``.

    A ``str`` containing a line break, or containing ``=``/``:`` and naming
    no existing file, is parsed as properties text instead (convenient in
    tests); use :func:`parse_properties` to be explicit.
    """
    if isinstance(path_or_text, str) and _looks_like_text(path_or_text):
        return parse_properties(path_or_text)
    with open(path_or_text, "rb") as f:
        data = f.read()
    return parse_properties(data.decode(encoding))


def _escape(s, is_key):
    out = []
    for idx, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append("\\u%04X" % ord(c))
        else:
            out.append(c)
    return "".join(out)


def format_properties(props):
    """Serialize a mapping so that :func:`parse_properties` reads it back."""
    return "".join(f"{_escape(str(k), True)}={_escape(str(v), False)}\n" for k, v in props.items())
