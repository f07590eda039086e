"""What a peer sends cannot forge, colour or flood the server's log.

End to end: a kchannel server on 127.0.0.1 gets a SaslHandshake whose
mechanism name carries a newline, a fake ``[timestamp] ERROR`` line and an
ANSI escape, then one with a 30,000-character name; every line it logs (at
DEBUG, tracebacks included) is one line of printable text, the failure is one
WARNING with the hostile text escaped, and the long name is capped.  Unit
tests pin :func:`kchannel.log.escape` and the filter, and a source audit
checks that every peer-facing module logs through it with literal format
strings.
"""
import ast
import io
import logging
import os
import socket
import struct
import time

import pytest

from kchannel import log as klog
from kchannel.protocol.headers import RequestHeader, encode_request
from kchannel.utils import now_ms

from tests.fixtures.sasl_servers import start_server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SASL_HANDSHAKE = 17
FORGED = "[2026-11-24 10:00:00,000] ERROR kchannel.server: Disk failure, shutting down"
HOSTILE = f"PLAIN\n{FORGED}\x1b[2J\x1b[31mRED"


# ------------------------------------------------------------------ escape
def test_escape_makes_one_printable_line():
    out = klog.escape(HOSTILE)
    assert out == ("PLAIN\\n[2026-11-24 10:00:00,000] ERROR kchannel.server: Disk failure, "
                   "shutting down\\x1b[2J\\x1b[31mRED")
    assert out.isprintable()


@pytest.mark.parametrize("raw, shown", [
    ("a\rb\tc\x00d\x7fe", "a\\rb\\tc\\x00d\\x7fe"),
    ("x\x85y", "x\\x85y"),                       # C1 NEL
    ("x\u2028y\u2029z", "x\\u2028y\\u2029z"),    # Unicode line/paragraph separators
    ("admin\u202egnp.exe", "admin\\u202egnp.exe"),  # bidi override
    ("caf\u00e9 \u540d\u524d", "caf\u00e9 \u540d\u524d"),  # printable stays as is
    ("\U000e0001", "\\U000e0001"),
])
def test_escape_characters(raw, shown):
    assert klog.escape(raw) == shown


def test_escape_caps_length_after_escaping():
    out = klog.escape("A" * 30000)
    assert out == "A" * klog.MAX_LOGGED_CHARS + "...[truncated, 30000 characters in all]"
    # Escapes count against the cap too: 2,000 ESC characters would be
    # 8,000 characters of escapes.
    out = klog.escape("\x1b" * 2000)
    assert len(out) < klog.MAX_LOGGED_CHARS + 50
    assert out.endswith("...[truncated, 2000 characters in all]")
    assert klog.escape("short", limit=3) == "sho...[truncated, 5 characters in all]"


def test_escape_of_objects_and_broken_str():
    class Broken:
        def __str__(self):
            raise RuntimeError("no")

    assert klog.escape(ValueError("bad\nname")) == "bad\\nname"
    assert klog.escape(b"\n") == "b'\\n'"
    assert klog.escape(Broken()) == "<Broken with unprintable str()>"


def _formatted(logger_name, *args, **kwargs):
    logger = klog.get_logger(logger_name)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        logger.warning(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    return stream.getvalue()


def test_filter_keeps_numbers_and_escapes_the_rest():
    out = _formatted("kchannel.test.log1", "n=%d x=%x f=%.1f s=%s r=%r none=%s", 7, 255, 1.5,
                     "a\nb", "c\x1bd", None)
    assert out == "WARNING n=7 x=ff f=1.5 s=a\\nb r='c\\\\x1bd' none=None\n"


def test_filter_escapes_mapping_args():
    out = _formatted("kchannel.test.log2", "%(user)s", {"user": "a\nb"})
    assert out == "WARNING a\\nb\n"


def test_filter_escapes_exception_messages_in_tracebacks():
    try:
        try:
            raise KeyError("inner\n" + FORGED)
        except KeyError as inner:
            raise ValueError("outer\x1b[31m") from inner
    except ValueError as exc:
        out = _formatted("kchannel.test.log3", "failed: %s", exc, exc_info=exc)
    assert "\x1b" not in out
    assert "\n" + FORGED not in out
    assert "ValueError: outer\\x1b[31m" in out
    assert "inner\\n[2026" in out
    # The traceback itself keeps its lines.
    assert out.count("Traceback (most recent call last):") == 2


def test_get_logger_attaches_the_filter_once():
    a = klog.get_logger("kchannel.test.log4")
    b = klog.get_logger("kchannel.test.log4")
    assert a is b and a.filters.count(klog._FILTER) == 1


# -------------------------------------------------------------- end to end
class _Lines(logging.Handler):
    """Formats every kchannel record as a file handler would."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
        self.records = []

    def emit(self, record):
        self.records.append((record.levelno, self.format(record)))


@pytest.fixture
def server_log():
    handler = _Lines()
    root = logging.getLogger("kchannel")
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    server, port = start_server(mechanisms=["PLAIN"],
                                extra={"connection.failed.authentication.delay.ms": "0"})
    try:
        yield port, handler
    finally:
        server.shutdown()
        root.removeHandler(handler)
        root.setLevel(old)


def _handshake(port, mechanism):
    payload = encode_request(RequestHeader(SASL_HANDSHAKE, 1, 7, "hostile"),
                             {"mechanism": mechanism})
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        # The server answers UNSUPPORTED_SASL_MECHANISM, then closes.
        while sock.recv(65536):
            pass


def _warnings_after(handler, start):
    deadline = now_ms() + 10000
    while now_ms() < deadline:
        found = [line for level, line in handler.records[start:] if level >= logging.WARNING]
        if found:
            return found
        time.sleep(0.01)  # the server thread logs after it has closed
    return []


def test_hostile_mechanism_name_is_one_escaped_warning(server_log):
    port, handler = server_log
    start = len(handler.records)
    _handshake(port, HOSTILE)
    warnings = _warnings_after(handler, start)
    assert len(warnings) == 1, warnings
    (line,) = warnings
    assert "Failed authentication with" in line
    assert "PLAIN\\n[2026-11-24 10:00:00,000] ERROR kchannel.server: Disk failure" in line
    assert "\\x1b[2J\\x1b[31mRED" in line
    for _, text in handler.records[start:]:
        assert "\n" not in text and "\x1b" not in text, text
        assert text.isprintable(), text


def test_huge_mechanism_name_is_capped(server_log):
    port, handler = server_log
    start = len(handler.records)
    _handshake(port, "M" * 30000)
    warnings = _warnings_after(handler, start)
    assert len(warnings) == 1, warnings
    assert "characters in all]" in warnings[0]
    longest = max(len(text) for _, text in handler.records[start:])
    assert longest < 2 * klog.MAX_LOGGED_CHARS + 400, longest


# ------------------------------------------------------------ source audit
# Modules that only log what the operator configured (config files, command
# line) may use plain loggers; every other module logs through get_logger.
OPERATOR_ONLY = ("kchannel/config/", "kchannel/cli/", "kchannel/_impl.py", "kchannel/log.py")
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}


def _sources():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "kchannel")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, ROOT).replace(os.sep, "/"), path


def test_peer_facing_modules_log_through_the_escaping_filter():
    offenders = []
    for rel, path in _sources():
        if rel.startswith(OPERATOR_ONLY):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "logging.getLogger(" in text:
            offenders.append(rel)
    assert offenders == []


def test_log_calls_pass_literal_format_strings():
    """Peer values reach a log line only as arguments (which the filter
    escapes), never baked into the format string."""
    offenders = []
    for rel, path in _sources():
        if rel.startswith(OPERATOR_ONLY):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LOG_METHODS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "log"):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    offenders.append(f"{rel}:{node.lineno}")
    assert offenders == []
