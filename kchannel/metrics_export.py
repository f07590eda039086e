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

:func:`prometheus_text` renders the same values in Prometheus' text format
0.0.4, named as the Prometheus JMX exporter's common Kafka rules name
Kafka's MBeans: a metric ``name`` of group ``group`` (MBean
``kafka.<domain>:type=<group>,<tags>``, attribute ``name``) becomes
``kafka_<domain>_<group>_<name>`` lower-cased with every character outside
``[a-zA-Z0-9_:]`` made ``_`` (``kafka_server_socket_server_metrics_connection_count``);
its tags become labels, a hyphenated tag camel-cased as those rules name it
(``client-id`` -> ``clientId``; ``listener``, ``networkProcessor`` as they
are).  ``-total`` metrics are counters, the rest gauges; a metric with no
value yet is NaN, as the exporter shows Kafka's NaN.
"""
import json
import math
import os
import re
import tempfile

__all__ = ["record", "combine", "write_atomically", "read_record", "prometheus_name",
           "prometheus_samples", "prometheus_text", "prometheus_label",
           "PROMETHEUS_CONTENT_TYPE"]

# Prometheus' text exposition format, version 0.0.4.
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


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


# --------------------------------------------------------------- Prometheus
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def prometheus_name(domain, group, name):
    """``kafka_<domain>_<group>_<name>`` as the JMX exporter's Kafka rules
    (``lowercaseOutputName``) spell the MBean's attribute."""
    return _INVALID.sub("_", f"kafka_{domain}_{group}_{name}".lower())


def prometheus_label(tag):
    """A tag name as a Prometheus label name (``client-id`` -> ``clientId``)."""
    head, *rest = tag.split("-")
    out = head + "".join(p[:1].upper() + p[1:] for p in rest)
    out = _INVALID.sub("_", out).replace(":", "_")
    return out if out and not out[0].isdigit() else "_" + out


def _parse_key(key):
    """``group:name{k=v,...}`` (a :func:`record` key) -> (group, name, tags)."""
    group, _, rest = key.partition(":")
    name, brace, tags = rest.partition("{")
    pairs = {}
    if brace:
        for item in tags[:-1].split(","):
            k, _, v = item.partition("=")
            if k:
                pairs[k] = v
    return group, name, pairs


def prometheus_samples(values):
    """``values``: {"group:name{tags}": value} (:func:`combine`'s
    ``metrics``) or {MetricName: value} -> [(group, name, tags, value)]."""
    out = []
    for key, v in values.items():
        if isinstance(key, str):
            group, name, tags = _parse_key(key)
        else:
            group, name, tags = key.group, key.name, dict(key.tags)
        out.append((group, name, tags, _value(v)))
    return out


def _escape(v):
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v):
    if v is None:
        return "NaN"
    if float(v).is_integer() and abs(v) < 2 ** 53:
        return str(int(v))
    return repr(float(v))


def prometheus_text(values, domain="server"):
    """Prometheus text format 0.0.4 of ``values`` (see
    :func:`prometheus_samples`) under ``kafka_<domain>_...``."""
    families = {}
    for group, name, tags, v in prometheus_samples(values):
        fam = families.setdefault(prometheus_name(domain, group, name),
                                  ("counter" if name.endswith("-total") else "gauge",
                                   f"{name} of {group}", []))
        fam[2].append((tags, v))
    lines = []
    for fname in sorted(families):
        kind, help_text, samples = families[fname]
        lines.append(f"# HELP {fname} {_escape(help_text)}")
        lines.append(f"# TYPE {fname} {kind}")
        for tags, v in sorted(samples, key=lambda s: sorted(s[0].items())):
            labels = ",".join(f'{prometheus_label(k)}="{_escape(tv)}"'
                              for k, tv in sorted(tags.items()))
            lines.append(f"{fname}{{{labels}}} {_number(v)}" if labels
                         else f"{fname} {_number(v)}")
    return "\n".join(lines) + "\n"
