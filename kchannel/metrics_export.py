"""Metrics of ``kchannel serve`` as a JSON file, per worker and summed.

Kafka exports its metrics over JMX, one MBean set per broker, and the
``socket-server-metrics`` of its network processors carry a
``networkProcessor`` tag; an operator sums them.  ``kchannel serve`` has no
JMX, and with ``num.network.threads`` = N its processors are N processes
that share no memory.  So each worker hands a :func:`record` of its own
metrics to the process that writes ``kchannel.metrics.file``, and
:func:`combine` puts them together: every worker's own values under
``workers`` and one value per metric under ``metrics``.

How a metric is summed follows from what its name says it measures:

* ``-max``: the largest of the workers' values (a maximum of maxima);
* ``-avg`` and ``-ratio``: the mean of the workers that have a value (each
  worker is one process, so ``io-ratio`` stays a fraction of one core, as a
  Kafka processor's; the mean of per-worker averages weighs workers equally,
  not samples: close enough for a dashboard, and said here);
* everything else (``-total``, ``-rate``, ``-count``, ``connection-count``,
  gauges): the sum.

A metric with no value yet (Kafka's NaN: an average with no sample) is
written as null and left out of sums, maxima and means.

Sans-I/O but for :func:`write_atomically`, which replaces the file with
``os.replace`` so a reader never sees half a file.
"""
import json
import math
import os
import tempfile

__all__ = ["record", "combine", "write_atomically", "read_record"]


def _value(v):
    if v is None:
        return None
    v = float(v)
    if math.isnan(v) or math.isinf(v):
        return None
    return v


def record(metrics, worker, pid, now_ms):
    """One worker's metrics (a ``kchannel.metrics.Metrics``) as a plain dict:
    ``{"worker": k, "pid": p, "time_ms": t, "metrics": {"group:name{tags}": value}}``."""
    values = {str(mn): _value(v) for mn, v in metrics.metrics().items()}
    return {"worker": worker, "pid": pid, "time_ms": int(now_ms),
            "metrics": dict(sorted(values.items()))}


def _how(name):
    base = name.split("{", 1)[0]
    if base.endswith("-max"):
        return "max"
    if base.endswith("-avg") or base.endswith("-ratio"):
        return "mean"
    return "sum"


def combine(records, now_ms):
    """The file's content from the workers' :func:`record` dicts."""
    records = sorted(records, key=lambda r: r["worker"])
    names = sorted({n for r in records for n in r["metrics"]})
    out = {}
    for name in names:
        values = [r["metrics"][name] for r in records
                  if r["metrics"].get(name) is not None]
        if not values:
            out[name] = None
            continue
        how = _how(name)
        if how == "max":
            out[name] = max(values)
        elif how == "mean":
            out[name] = sum(values) / len(values)
        else:
            out[name] = sum(values)
    return {"time_ms": int(now_ms), "workers": records, "metrics": out}


def write_atomically(path, obj):
    """Write ``obj`` as JSON to ``path`` through a temporary file in the
    same directory and ``os.replace``: readers see the old or the new file,
    never a partial one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".metrics-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_record(path):
    """A worker's record written by :func:`write_atomically`, or None if it
    is not there (yet) or unreadable (a worker that died mid-way)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
