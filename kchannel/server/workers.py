"""Running a broker from ``server.properties`` until a signal: what
``kchannel serve`` does, for any program (the CLI only parses its arguments
and calls :func:`serve`).

:func:`serve` builds the broker (:meth:`Server.from_properties
<kchannel.server.server.Server.from_properties>`), polls it until SIGTERM /
SIGINT (then shuts it down cleanly and returns 0), writes
``kchannel.metrics.file`` and serves ``kchannel.metrics.prometheus.listen``.
A configuration or bind error raises (``KChannelError`` / ``OSError``)
before anything is served.

``num.network.threads`` = N > 1 (Kafka's network processor count) starts N
worker processes, each a complete server bound to every listener with
``SO_REUSEPORT``, so the kernel spreads new connections over them and every
core can do TLS and SASL work.  The parent picks the port of each ``:0``
listener first (a bound, never listening ``SO_REUSEPORT`` socket), forks the
workers before building anything (no threads, SQLite handles or TLS state
cross the fork), forwards SIGTERM / SIGINT to them and returns 0 once all
have stopped; if one dies, the others are stopped and the status is 1.  The
SCRAM credential and delegation token stores are shared through their
SQLite files (WAL) in the data directory or ZooKeeper; the in-memory stores
cannot be shared and are refused with more than one worker.  Each worker
keeps its own metrics and its own TLS session ticket keys (a client resumes
only when it lands on the worker that issued its ticket; otherwise it gets a
full handshake).  With ``kchannel.metrics.file`` each worker writes its
metrics to ``<file>.worker-<k>`` and the parent writes ``<file>``: every
worker's values and their sum (see :mod:`kchannel.metrics_export`).  With
``kchannel.metrics.prometheus.listen`` the same sum is served to Prometheus
scrapes from a thread (:mod:`kchannel.server.prometheus`): the event loop
snapshots its metrics every second (one process), or the workers write
their records every second and the parent sums them per scrape.  Without
``SO_REUSEPORT`` load balancing (anything but Linux) one process runs, with
a warning.

Signal handlers are installed for the duration of :func:`serve` (so call it
from the main thread) and restored when it returns.
"""
import dataclasses
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

from .. import _impl, errors, metrics_export
from ..config import ServerConfig
from ..log import get_logger
from .broker import stable_cluster_id
from .prometheus import PrometheusEndpoint
from .server import Server

__all__ = ["serve", "WORKERS_CONFIG", "METRICS_FILE", "PROMETHEUS_LISTEN"]

# The name it had when this code lived in the CLI (as the other moved
# modules kept theirs): log lines and filters stay as they were.
log = get_logger("kchannel.cli.serve")


def serve(props, jaas_text=None, *, jaas_file_name=None):
    """Run the broker of the server properties ``props`` (a dict;
    ``jaas_text``: a JAAS file's text, as ``--jaas-config``) until SIGTERM /
    SIGINT; returns the exit status (0 after a clean stop, 1 when a worker
    process died).  Raises ``KChannelError`` / ``OSError`` when the broker
    cannot start (bad configuration, a listener that cannot bind, an
    unusable Prometheus address), having released what it had opened."""
    props = dict(props)
    if WORKERS_CONFIG in props:
        config = ServerConfig(props, jaas_text, jaas_file_name=jaas_file_name)
        workers = _worker_count(config, props)
        if workers > 1:
            return _run_workers(config, props, jaas_text, jaas_file_name, workers)
    server = Server.from_properties(props, jaas_text, jaas_file_name=jaas_file_name)
    closers = []   # what shuts down with the server besides its own stores
    path = server.config.get(METRICS_FILE)

    def write_metrics(now_ms):
        # One process: the file is this process's record, "summed" over one.
        metrics_export.write_atomically(path, metrics_export.combine(
            [metrics_export.record(server.metrics, 1, os.getpid(), now_ms)], now_ms))
    snapshot = None
    if server.config.get(PROMETHEUS_LISTEN):
        # The event loop snapshots its metrics every second; scrapes read
        # the last snapshot (the HTTP thread never touches live stats).
        latest = []

        def snapshot(now_ms):
            latest[:] = [metrics_export.record(server.metrics, 1, os.getpid(), now_ms)]
        snapshot(int(time.time() * 1000))
        try:
            closers.append(_prometheus(server.config, lambda: list(latest)).close)
        except BaseException:
            server.shutdown()
            raise
    return _serve(server, closers, write_metrics if path else None, snapshot)


# ------------------------------------------------------------------ Prometheus
PROMETHEUS_LISTEN = "kchannel.metrics.prometheus.listen"
PROMETHEUS_SNAPSHOT_MS = 1000


def _prometheus(config, records):
    """The endpoint at ``kchannel.metrics.prometheus.listen`` serving the
    sum of ``records()`` (the workers' last :func:`metrics_export.record` s)."""
    def collect():
        now_ms = int(time.time() * 1000)
        return metrics_export.prometheus_text(
            metrics_export.combine(records(), now_ms)["metrics"])
    return PrometheusEndpoint(config.get(PROMETHEUS_LISTEN), collect)


# ------------------------------------------------------------------ metrics
METRICS_FILE = "kchannel.metrics.file"
METRICS_INTERVAL = "kchannel.metrics.file.interval.ms"


def _worker_metrics_path(path, index):
    return f"{path}.worker-{index + 1}"


class _MetricsWriter:
    """Calls ``write(now_ms)`` every ``interval_ms`` from a poll loop, and
    once more at the end; a failed write is logged (rate-limited to one line
    per failure streak) and never stops the server."""

    def __init__(self, write, interval_ms):
        self._write = write
        self._interval = interval_ms / 1000.0
        self._next = 0.0
        self._failing = False

    def timeout_ms(self, default_ms):
        wait = max(0.0, self._next - time.monotonic())
        return min(default_ms, int(wait * 1000) + 1)

    def maybe_write(self, force=False):
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self._interval
        try:
            self._write(int(time.time() * 1000))
        except OSError as exc:
            if not self._failing:
                log.warning("Cannot write %s: %s", METRICS_FILE, exc)
            self._failing = True
        else:
            self._failing = False


class _Writers:
    """Several :class:`_MetricsWriter` s polled as one."""

    def __init__(self, writers):
        self._writers = writers

    def timeout_ms(self, default_ms):
        return min(w.timeout_ms(default_ms) for w in self._writers)

    def maybe_write(self, force=False):
        for w in self._writers:
            w.maybe_write(force)


def _serve(server, closers, write_metrics=None, snapshot=None, interval_ms=None):
    """Poll ``server`` until SIGTERM / SIGINT; returns the exit status.
    ``write_metrics(now_ms)``: called every ``interval_ms`` (default
    ``kchannel.metrics.file.interval.ms``) and once after the server
    stopped; ``snapshot(now_ms)`` every second (the Prometheus endpoint's
    values)."""
    stop = threading.Event()
    writers = []
    if write_metrics is not None:
        writers.append(_MetricsWriter(write_metrics,
                                      interval_ms or server.config.get(METRICS_INTERVAL)))
    if snapshot is not None:
        writers.append(_MetricsWriter(snapshot, PROMETHEUS_SNAPSHOT_MS))
    writer = _Writers(writers) if writers else None

    def on_signal(signum, _frame):
        log.info("Received %s; shutting down", signal.Signals(signum).name)
        stop.set()
        server.selector.wakeup()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    _impl.log_choices()
    log.info("kchannel server (node %d, cluster %s) started", server.node_id, server.cluster_id)
    try:
        while not stop.is_set():
            if writer is None:
                server.poll(300)
            else:
                server.poll(writer.timeout_ms(300))
                writer.maybe_write()
    finally:
        server.shutdown()
        if writer is not None:
            # The final values (connections closed by the shutdown included).
            writer.maybe_write(force=True)
        for c in closers:
            try:
                c()
            except Exception:  # noqa: BLE001
                pass
        for s, h in old.items():
            signal.signal(s, h)
    return 0


# ------------------------------------------------------------------ workers
WORKERS_CONFIG = "num.network.threads"


def _worker_count(config, props):
    """Worker processes to start: ``num.network.threads`` (validated with the
    whole configuration first, so a bad file fails before any fork)."""
    workers = int(config.get(WORKERS_CONFIG))
    if workers <= 1:
        return 1
    if not (sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")):
        log.warning("%s=%d: worker processes need the kernel to spread connections over "
                    "SO_REUSEPORT sockets, which only Linux does; running one process",
                    WORKERS_CONFIG, workers)
        return 1
    for key in ("kchannel.scram.credential.store", "kchannel.delegation.token.store",
                "kchannel.acl.store"):
        if str(props.get(key, "")).strip().lower() == "memory":
            raise errors.ConfigError(
                f"{WORKERS_CONFIG}={workers} starts {workers} processes, which cannot share "
                f"{key}=memory: use the sqlite store (the default) or set {WORKERS_CONFIG}=1",
                key=key, value="memory")
    return workers


def _reserve_ports(config):
    """For every ``:0`` listener, a bound (never listening) SO_REUSEPORT
    socket: its port is the one all workers bind.  Returns (listeners
    value with the ports filled in, the reserving sockets)."""
    held, parts = [], []
    for ep in config.listeners:
        if ep.port == 0:
            family = socket.AF_INET6 if ep.host and ":" in ep.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            held.append(sock)
            # SO_REUSEPORT only: a non-listening socket with SO_REUSEADDR
            # would let any other SO_REUSEADDR socket (another server's :0
            # listener) be handed the same port before the workers bind it.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((ep.bind_host, 0))
            ep = dataclasses.replace(ep, port=sock.getsockname()[1])
        parts.append(ep.connection_string)
    return ",".join(parts), held


def _run_workers(config, props, jaas_text, jaas_file_name, workers):
    listeners, held = _reserve_ports(config)
    props = dict(props, listeners=listeners)
    # Each worker writes the same meta.properties otherwise: settle the
    # cluster id once, before the fork.
    cluster_id = stable_cluster_id(config, props)
    if cluster_id and not props.get("kchannel.cluster.id"):
        props["kchannel.cluster.id"] = cluster_id
    stopping = []

    def on_signal(signum, _frame):
        if not stopping:
            log.info("Received %s; stopping %d workers", signal.Signals(signum).name, workers)
        stopping.append(signum)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    pids = []
    metrics_path = config.get(METRICS_FILE)
    interval_ms = config.get(METRICS_INTERVAL)
    record_dir = None
    if config.get(PROMETHEUS_LISTEN):
        # Scrapes sum the workers' records: they write them every second
        # (to the metrics file's worker files, or to a private directory).
        interval_ms = min(interval_ms, PROMETHEUS_SNAPSHOT_MS)
        if not metrics_path:
            record_dir = tempfile.mkdtemp(prefix="kchannel-metrics-")
    record_base = metrics_path or (record_dir and os.path.join(record_dir, "metrics"))
    record_paths = [_worker_metrics_path(record_base, k) for k in range(workers)] \
        if record_base else []
    endpoint = None
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(workers):
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os._exit(_worker_main(props, jaas_text, jaas_file_name, index, workers, held,
                                      record_paths[index] if record_paths else None,
                                      interval_ms))
            pids.append(pid)
        for sock in held:
            sock.close()
        if config.get(PROMETHEUS_LISTEN):
            endpoint = _prometheus(config, lambda: [
                r for r in map(metrics_export.read_record, record_paths) if r])
        log.info("kchannel serve: %d worker processes (pids %s) share the listeners %s",
                 workers, ",".join(map(str, pids)), listeners)
        writer = None
        if metrics_path:
            worker_paths = [_worker_metrics_path(metrics_path, k) for k in range(workers)]

            def write_sum(now_ms):
                # Workers not heard from yet (just started) are left out
                # until their first record lands.
                records = [r for r in map(metrics_export.read_record, worker_paths) if r]
                metrics_export.write_atomically(metrics_path,
                                                metrics_export.combine(records, now_ms))
            writer = _MetricsWriter(write_sum, interval_ms)
        status = 0
        alive = set(pids)
        while alive:
            try:
                if writer is None:
                    pid, wstatus = os.wait()
                else:
                    # Poll for exits so the sum is rewritten on schedule.
                    pid, wstatus = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        writer.maybe_write()
                        time.sleep(min(0.2, writer.timeout_ms(200) / 1000.0))
                        continue
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            alive.discard(pid)
            code = os.waitstatus_to_exitcode(wstatus)
            if code != 0 or not stopping:
                if not stopping:
                    log.error("Worker process %d exited (status %d) while serving; stopping "
                              "the others", pid, code)
                    on_signal(signal.SIGTERM, None)
                status = 1
        if writer is not None:
            # Every worker wrote its final record before exiting: the last
            # sum covers the whole run.  The per-worker files have served
            # their purpose (their values are in the sum's "workers").
            writer.maybe_write(force=True)
            for p in worker_paths:
                try:
                    os.unlink(p)
                except OSError:
                    pass
        return status
    finally:
        if endpoint is not None:
            endpoint.close()
        if record_dir is not None:
            shutil.rmtree(record_dir, ignore_errors=True)
        for sock in held:
            sock.close()
        for s, h in old.items():
            signal.signal(s, h)


def _worker_main(props, jaas_text, jaas_file_name, index, workers, held, record_path=None,
                 interval_ms=None):
    """A worker process: build its own server (listeners shared through
    SO_REUSEPORT) and serve until SIGTERM, writing its metrics record to
    ``record_path`` every ``interval_ms``.  Returns the exit status."""
    try:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        for sock in held:
            sock.close()
        try:
            server = Server.from_properties(props, jaas_text, jaas_file_name=jaas_file_name,
                                            reuse_port=True)
            closers = []
        except (OSError, errors.KChannelError) as exc:
            log.error("Worker %d of %d cannot start: %s", index + 1, workers, exc)
            return 1
        log.info("Worker %d of %d (pid %d) serving", index + 1, workers, os.getpid())
        if not record_path:
            return _serve(server, closers)

        def write_record(now_ms):
            metrics_export.write_atomically(record_path, metrics_export.record(
                server.metrics, index + 1, os.getpid(), now_ms))
        return _serve(server, closers, write_record, interval_ms=interval_ms)
    except BaseException:  # noqa: BLE001 - a forked child must never return into the parent's code
        log.exception("Worker %d of %d failed", index + 1, workers)
        return 1
    finally:
        logging.shutdown()
