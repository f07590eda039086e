"""``kchannel.metrics.prometheus.listen``: Prometheus scrapes of ``kchannel
serve`` (two worker processes, a SASL_SSL listener), parsed with
prometheus_client's own text parser, move with a small login storm as the
JSON metrics file does, summed over the workers the same way."""
import json
import os
import re
import sys
import time
import urllib.request

import pytest

from kchannel.client import KafkaClient
from tests.fixtures.peers import free_port, require_module
from tests.fixtures.serve import (read_log_until, start_serve_config, stop_serve_config,
                                  write_scram_config)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="worker processes need Linux's SO_REUSEPORT")
parser = require_module("prometheus_client.parser", "prometheus-client")

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONNECTIONS = "kafka_server_socket_server_metrics_connection_count"
AUTH_OK = "kafka_server_socket_server_metrics_successful_authentication_total"
AUTH_FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEADLINE_S = 60


start = start_serve_config


def scrape_http(port):
    """{family name: {(sample name, labels...): value}} of one scrape."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = r.read().decode()
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def total(samples, name, **labels):
    return sum(v for lab, v in samples.get(name, ())
               if all(lab.get(k) == want for k, want in labels.items()))


def _json_metric(path, name):
    data = json.loads(path.read_text())
    return sum(v or 0 for k, v in data["metrics"].items()
               if k.split("{")[0] == f"socket-server-metrics:{name}")


def _until(predicate, what):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            value = predicate()
        except (OSError, ValueError, KeyError):
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def login(pki, port, password):
    c = KafkaClient({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                     "sasl.jaas.config": f'{SCRAM} required username="alice" '
                                         f'password="{password}";',
                     **pki.client_configs()})
    return c.connect("127.0.0.1", port)


def test_prometheus_scrape_follows_a_sasl_ssl_storm(tmp_path, pki):
    prom = free_port()
    path = tmp_path / "metrics.json"
    cfg = write_scram_config(tmp_path, **{
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.server.keystore_pem_path,
        "kchannel.metrics.file": str(path), "kchannel.metrics.file.interval.ms": "200",
        "kchannel.metrics.prometheus.listen": f"127.0.0.1:{prom}"})
    proc = start(cfg)
    clients = []
    try:
        m, buf = read_log_until(proc, rb"Awaiting socket connections on 127\.0\.0\.1:(\d+)\.")
        port = int(m.group(1))
        read_log_until(proc, rb"(?s)(Worker \d of 2 \(pid \d+\) serving.*){2}", buf)
        before = _until(lambda: scrape_http(prom), "a first scrape")
        assert total(before, AUTH_OK) == 0 and total(before, CONNECTIONS) == 0
        for _ in range(8):
            clients.append(login(pki, port, "alice-secret"))
        with pytest.raises(Exception):
            login(pki, port, "wrong")
        during = _until(lambda: (lambda s: s if total(s, AUTH_OK) == 8 and total(
            s, AUTH_FAILED) == 1 and total(s, CONNECTIONS) == 8 else None)(scrape_http(prom)),
            "the storm in a scrape")
        # Every server metric examples/grafana-dashboard.json plots is there.
        with open(os.path.join(ROOT, "examples", "grafana-dashboard.json")) as f:
            plotted = set(re.findall(r"kafka_server_[a-z_]+", f.read()))
        assert plotted and not plotted - set(during), plotted - set(during)
        # One series per metric and tags: the workers' values summed.
        assert len(during[CONNECTIONS]) == len({tuple(sorted(lab.items()))
                                                for lab, _ in during[CONNECTIONS]})
        # The JSON file says the same, summed over the same workers.
        # (the refused login's connection closes a moment after its answer)
        _until(lambda: [_json_metric(path, n) for n in (
            "successful-authentication-total", "failed-authentication-total",
            "connection-count")] == [8, 1, 8], "the JSON metrics")
        for c in clients:
            c.close()
        clients = []
        after = _until(lambda: (lambda s: s if total(s, CONNECTIONS) == 0 else None)(
            scrape_http(prom)), "the connections to close")
        assert total(after, AUTH_OK) == 8
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{prom}/nothing", timeout=10)
        assert err.value.code == 404
    finally:
        for c in clients:
            c.close()
        code = stop_serve_config(proc)
    assert code == 0
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{prom}/metrics", timeout=2)
