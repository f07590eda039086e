"""What every fuzz target shares.

A target is a script: ``python tests/fuzz/fuzz_<name>.py [libFuzzer flags]
[corpus dirs]`` runs atheris (coverage-guided, libFuzzer underneath) on its
``test_one_input``; ``tests/protocol/test_fuzz.py`` runs each one for a bounded time
over its seed corpus, ``tests/fuzz/corpus/<name>/``.  A crash is any
exception other than the ones the code under test may raise on hostile
input, or a failed invariant (AssertionError): libFuzzer then writes the
input to ``crash-<sha1>`` and exits non-zero.

Replay one input without fuzzing: ``python tests/fuzz/fuzz_<name>.py
crash-<sha1>`` (libFuzzer runs the given files once).
"""
import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


class _LogSink(logging.Handler):
    """Formats every kchannel record, as a real handler would (so the
    escaping filter runs on whatever the input put in), and checks that the
    message is one line of printable text; prints nothing."""

    def emit(self, record):
        message = record.getMessage()
        if not message.isprintable():
            raise AssertionError(f"unescaped log message: {message!r}")
        self.format(record)

    def handleError(self, record):
        raise   # a failed check or a broken record is a crash, not a note on stderr


def quiet_logs():
    logger = logging.getLogger("kchannel")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(_LogSink())


def run(test_one_input):
    import atheris
    quiet_logs()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
