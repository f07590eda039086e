"""``kchannel.metrics.prometheus.listen``: ``kchannel serve``'s metrics for
Prometheus to scrape, over HTTP on a tiny thread of its own.

The thread only serves text: ``collect()`` is called per scrape and must
not touch the server's live state (``kchannel serve`` hands it the last
snapshot its event loop took, or the worker processes' records), so a slow
or stuck scraper never holds up the network path.  ``GET /metrics`` (or
``/``) answers the text format 0.0.4 (:func:`kchannel.metrics_export.prometheus_text`);
anything else 404.
"""
import http.server
import socket
import threading

from kchannel import errors
from kchannel.log import get_logger
from kchannel.metrics_export import PROMETHEUS_CONTENT_TYPE

__all__ = ["PrometheusEndpoint", "parse_listen"]

LISTEN_CONFIG = "kchannel.metrics.prometheus.listen"
log = get_logger("kchannel.server.prometheus")


def parse_listen(value):
    """``HOST:PORT`` (``[v6]:PORT``; empty host: every interface) ->
    (host, port); a bad value is a ConfigError (the server does not start)."""
    text = str(value).strip()
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise errors.ConfigError(f"Invalid value {text} for configuration {LISTEN_CONFIG}: "
                                 "expected HOST:PORT", key=LISTEN_CONFIG, value=text)
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "0.0.0.0", int(port)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)


class PrometheusEndpoint:
    """Serves ``collect()`` (the exposition text) at ``listen``; ``close()``
    stops it.  ``address``: the bound (host, port) (port 0 picks one)."""

    def __init__(self, listen, collect):
        collect_text = collect

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's API
                if self.path.split("?", 1)[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                try:
                    body = collect_text().encode("utf-8")
                except Exception as exc:  # noqa: BLE001 - a scrape must not kill the thread
                    log.warning("Cannot collect metrics for a Prometheus scrape: %s", exc)
                    self.send_error(500)
                    return
                self.send_response(200)
                self.send_header("Content-Type", PROMETHEUS_CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                # The request line is the peer's: an argument (escaped by
                # the log filter), never part of the format string.
                log.debug("Prometheus scrape from %s: %s", self.client_address[0], fmt % args)

        self._httpd = _Server(parse_listen(listen), Handler)
        self.address = self._httpd.server_address[:2]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="kchannel-prometheus", daemon=True)
        self._thread.start()
        log.info("Prometheus metrics on http://%s:%d/metrics", *self.address)

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
