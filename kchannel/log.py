"""Loggers that cannot be used to forge log lines.

Much of what kchannel logs comes from the peer: SASL mechanism names, client
ids and software names, user names, principals from certificates, SASL
extensions, token ids, and exception messages built from any of these.  Put
in a log line as sent, a newline starts a forged line (``\\n[2026-...] ERROR
...``), an ANSI escape sequence rewrites the operator's terminal, and a
30,000-character name makes a 30,000-character line.

Every kchannel module that can log a peer's value gets its logger from
:func:`get_logger`.  Such a logger carries :class:`SafeArgsFilter`, which
runs once per emitted record (never for a record whose level is disabled)
and replaces each non-numeric argument with :func:`escape` of its text, and
the message of an attached exception likewise, so the formatted line is one
line of printable characters whatever the peer sent.  The format string
itself is the code's own (a test checks that every log call passes a
literal), so nothing else needs escaping.
"""
import logging
import traceback
from collections.abc import Mapping

#: At most this many characters of one argument go into a log line.
MAX_LOGGED_CHARS = 1024

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch):
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _text(value):
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception:  # a broken __str__ must not break logging
        return f"<{type(value).__name__} with unprintable str()>"


def escape(value, limit=MAX_LOGGED_CHARS):
    """``value`` as one line of printable text, at most ``limit`` characters
    of it.

    Every character that ``str.isprintable`` refuses (C0/C1 controls such as
    newline and ESC, Unicode line and paragraph separators, format characters
    such as bidi overrides, unassigned and surrogate code points) becomes a
    visible escape (``\\n``, ``\\x1b``, ``\\u2028``).  Text beyond ``limit``
    characters (counted after escaping) is replaced by a note of the original
    length.
    """
    text = _text(value)
    total = len(text)
    # Escaping can only lengthen the text: escape no more than can be kept.
    head = text[:limit] if limit is not None else text
    if not head.isprintable():
        head = "".join(ch if ch.isprintable() else _escape_char(ch) for ch in head)
    if limit is not None and (total > limit or len(head) > limit):
        return f"{head[:limit]}...[truncated, {total} characters in all]"
    return head


def _safe_arg(value):
    # Numbers keep their type so that %d and %x still format them.
    if value is None or isinstance(value, (int, float)):
        return value
    return escape(value)


def _safe_exc_text(exc_info):
    """The traceback text for ``exc_info`` with each exception's message
    escaped (the frames are the code's own)."""
    te = traceback.TracebackException(*exc_info)
    seen = set()
    stack = [te]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(getattr(cur, "_str", None), str):
            cur._str = escape(cur._str)
        stack.append(getattr(cur, "__cause__", None))
        stack.append(getattr(cur, "__context__", None))
    return "".join(te.format()).rstrip("\n")


class SafeArgsFilter(logging.Filter):
    """Escapes and caps a record's arguments and exception message (see the
    module docstring).  Never drops a record."""

    def filter(self, record):
        try:
            args = record.args
            if isinstance(args, Mapping):
                record.args = {k: _safe_arg(v) for k, v in args.items()}
            elif args:
                record.args = tuple(_safe_arg(a) for a in args)
            if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
                record.exc_text = _safe_exc_text(record.exc_info)
        except Exception:  # logging must never fail the caller
            pass
        return True


_FILTER = SafeArgsFilter()


def get_logger(name):
    """``logging.getLogger(name)`` with :class:`SafeArgsFilter` attached."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
