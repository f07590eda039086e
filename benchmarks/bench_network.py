"""Request/response throughput through the Selector, Server and NetworkClient.

    python -m pytest benchmarks/bench_network.py

Server and client run in the benchmark's thread (``Server.poll`` and
``NetworkClient.poll`` alternately) over real 127.0.0.1 sockets, so the
numbers are the CPU cost of kchannel's network layer (framing, header
parsing, dispatch, selector bookkeeping, metrics) without thread hand-offs.
``depth`` is the number of requests kept in flight on one connection.
"""
import pytest

from kchannel.client import NetworkClient
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server

REQUESTS = 2000


@pytest.fixture(params=["PLAINTEXT", "SSL"])
def setup(request, tmp_path_factory):
    if request.param == "SSL":
        from tests.fixtures.certs import make_pki
        pki = make_pki(str(tmp_path_factory.mktemp("pki")))
        server = Server(listeners=[{"name": "SSL", "host": "127.0.0.1", "port": 0,
                                    "security_protocol": "SSL",
                                    "configs": pki.server_configs()}])
        cfg = dict(pki.client_configs(), **{"security.protocol": "SSL"})
        host = "localhost"
    else:
        server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
        cfg = {}
        host = "127.0.0.1"
    net = NetworkClient(cfg)
    net.connect(0, host, server.bound_port(request.param))
    while not net.is_ready(0):
        net.poll(0)
        server.poll(0)
    yield server, net
    net.close()
    server.shutdown()


@pytest.mark.parametrize("depth", [1, 100])
def test_metadata_round_trips(benchmark, setup, depth):
    server, net = setup

    def run():
        sent = got = 0
        while got < REQUESTS:
            while sent < REQUESTS and net.in_flight_count(0) < depth:
                net.send(0, ApiKey.METADATA, {"topics": []}, 1)
                sent += 1
            got += len(net.poll(0))
            server.poll(0)

    benchmark.pedantic(run, rounds=3, iterations=1)
