"""README rows of a benchmark script, collected by ``benchmarks/report.py``.

Every script prints its figures for a person to read.  The figures that make
the README's benchmarks table are also given to :func:`row`, with the target
they answer to and whether this run met it.  ``report.py`` runs every script
once, in one sitting, with ``KCHANNEL_BENCH_RESULTS`` naming a file: each
``row()`` appends one JSON line there, and the table is rebuilt from those
lines alone.  No figure in the table is typed by hand, and none comes from
another run.  Without the variable ``row()`` does nothing, so a script run
alone behaves as it always did.

A row is ``measurement`` (what was measured, with the parameters that matter),
``result`` (the figures, as text), ``target`` (text, or None where the row is
reported without a target) and ``met`` (True/False, or None without a target).
"""
import json
import os
import sys

ENV = "KCHANNEL_BENCH_RESULTS"


def row(measurement, result, target=None, met=None):
    """Record one README row (see the module docstring)."""
    path = os.environ.get(ENV)
    if not path:
        return
    if target is None and met is not None:
        raise ValueError("a row with no target cannot be met or missed")
    record = {
        "script": os.path.basename(sys.argv[0]) or "?",
        "measurement": measurement,
        "result": result,
        "target": target,
        "met": None if met is None else bool(met),
    }
    # One write of one line in append mode: forked peers of a script never
    # call row(), but a line is never interleaved with another even if they did.
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def status(met):
    """The table's status text for ``met``."""
    return {True: "met", False: "MISSED", None: "reported"}[met]
