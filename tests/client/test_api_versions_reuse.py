"""An ApiVersions answer identical byte for byte to the last one is not
decoded again (issue 24 item 5, the connection storm): NetworkClient's own
ApiVersions request reuses the body and map decoded for the previous
connection, the SASL client authenticator the SASL entries it read.  Against
Apache Kafka over SASL_PLAINTEXT SCRAM-SHA-256: every connection is READY
with what a fresh decode gives, and an answer with other bytes is decoded.
"""
import time

import pytest

from kchannel.client import ConnectionState, NetworkClient
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl import _wire, client_authenticator

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

NODES = 3


def _connect_all(net, host, port, ids):
    for i in ids:
        net.connect(i, host, port)
    deadline = time.monotonic() + 30
    while not all(net.is_ready(i) for i in ids):
        assert time.monotonic() < deadline, [net.connection_state(i) for i in ids]
        for i in ids:
            assert net.connection_state(i) in (ConnectionState.CONNECTING,
                                               ConnectionState.CHECKING_API_VERSIONS,
                                               ConnectionState.READY), \
                net.connection_exception(i)
        net.poll(100)


def test_identical_api_versions_answers_decoded_once(kafka_broker, monkeypatch):
    configs = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")
    host, port = configs["bootstrap.servers"].rsplit(":", 1)
    sasl_decodes = []
    real_decode = _wire.decode_response

    def counting_decode(frame, api_key, version):
        if api_key == int(ApiKey.API_VERSIONS):
            sasl_decodes.append(version)
        return real_decode(frame, api_key, version)

    monkeypatch.setattr(_wire, "decode_response", counting_decode)
    # Whatever an earlier test in this process left: the first connection
    # here decodes, the others reuse.
    monkeypatch.setattr(client_authenticator, "_LAST_API_VERSIONS", [None])
    net = NetworkClient(configs)
    client_decodes = []
    real_client_decode = net._decode_response

    def counting_client_decode(api_key, version, payload):
        client_decodes.append(version)
        return real_client_decode(api_key, version, payload)

    net._decode_response = counting_client_decode
    try:
        _connect_all(net, host, int(port), range(NODES))
        assert len(client_decodes) == 1 and len(sasl_decodes) == 1
        body = net.api_versions_response(0)
        # what a fresh decode of the answer gives
        assert body["error_code"] == 0
        expected = {e["api_key"]: (e["min_version"], e["max_version"])
                    for e in body["api_keys"]}
        for i in range(NODES):
            assert net.api_versions_response(i) is body
            assert net.api_versions(i) == expected
            auth = net.selector.channel(i).authenticator
            broker_max = expected[int(ApiKey.SASL_AUTHENTICATE)][1]
            assert auth.sasl_authenticate_version == min(
                broker_max, messages.API[int(ApiKey.SASL_AUTHENTICATE)].max_version)
            assert auth.complete()

        # Other bytes than the last answer: decoded again, same result.
        shared = net._shared_api_versions
        net._shared_api_versions = (shared[0], shared[1], shared[2], shared[3] + b"x")
        client_authenticator._LAST_API_VERSIONS[0] = None
        _connect_all(net, host, int(port), [NODES])
        assert len(client_decodes) == 2 and len(sasl_decodes) == 2
        assert net.api_versions(NODES) == expected
        assert net.api_versions_response(NODES) == body
    finally:
        net.close()
