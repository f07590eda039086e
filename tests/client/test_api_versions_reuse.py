"""An ApiVersions answer identical byte for byte to the last one is not
decoded again (issue 24 item 5, the connection storm): NetworkClient's own
ApiVersions request reuses the body and map decoded for the previous
connection, the SASL client authenticator the SASL entries it read.  Against
Apache Kafka over SASL_PLAINTEXT SCRAM-SHA-256: every connection is READY
with what a decode of its answer gives, each different answer is decoded,
alike ones are not.
"""
import time

import pytest

from kchannel.client import ConnectionState, NetworkClient
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl import _wire, client_authenticator

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

# (Kafka's answer changes every few hundred ms, see below: of five answers
# received together some are alike)
NODES = 5


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


def _changes(answers):
    """How many of ``answers`` differ from the one before (the first counts)."""
    return sum(1 for i, a in enumerate(answers) if i == 0 or a != answers[i - 1])


def test_identical_api_versions_answers_decoded_once(kafka_broker, monkeypatch):
    configs = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")
    host, port = configs["bootstrap.servers"].rsplit(":", 1)
    # Apache Kafka's answer carries its metadata offset
    # (finalized_features_epoch), which moves every few hundred ms: the
    # answers are recorded, and a decode is expected for each change.
    sasl_answers, sasl_decodes = [], []
    real_body = client_authenticator._decode_body
    real_decode = _wire.decode_response

    def recording_body(frame, api_key, version):
        if api_key == int(ApiKey.API_VERSIONS):
            sasl_answers.append(bytes(frame[4:]))
        return real_body(frame, api_key, version)

    def counting_decode(frame, api_key, version):
        if api_key == int(ApiKey.API_VERSIONS):
            sasl_decodes.append(version)
        return real_decode(frame, api_key, version)

    monkeypatch.setattr(client_authenticator, "_decode_body", recording_body)
    monkeypatch.setattr(_wire, "decode_response", counting_decode)
    # Whatever an earlier test in this process left: the first connection
    # here decodes.
    monkeypatch.setattr(client_authenticator, "_LAST_API_VERSIONS", [None])
    net = NetworkClient(configs)
    # answers in the order they arrived, and the node each came from
    answers, answered, decodes = [], [], []
    real_payload = net._handle_api_versions_payload
    real_client_decode = net._decode_response

    def recording_payload(node, version, payload, out):
        answers.append(bytes(payload[4:]))
        answered.append(node.id)
        return real_payload(node, version, payload, out)

    def counting_client_decode(api_key, version, payload):
        decodes.append(version)
        return real_client_decode(api_key, version, payload)

    net._handle_api_versions_payload = recording_payload
    net._decode_response = counting_client_decode
    try:
        _connect_all(net, host, int(port), range(NODES))
        assert len(answers) == len(sasl_answers) == NODES
        assert len(decodes) == _changes(answers)
        assert len(sasl_decodes) == _changes(sasl_answers)
        for i in range(NODES):
            body = net.api_versions_response(i)
            # what a decode of the answer gives
            assert body["error_code"] == 0
            expected = {e["api_key"]: (e["min_version"], e["max_version"])
                        for e in body["api_keys"]}
            assert net.api_versions(i) == expected
            auth = net.selector.channel(i).authenticator
            broker_max = expected[int(ApiKey.SASL_AUTHENTICATE)][1]
            assert auth.sasl_authenticate_version == min(
                broker_max, messages.API[int(ApiKey.SASL_AUTHENTICATE)].max_version)
            assert auth.complete()
        same = [i for i in range(1, NODES) if answers[i] == answers[i - 1]]
        assert same, "no two answers in a row alike: nothing was reused"
        for i in same:
            # the same bytes: the same body, not decoded again
            assert (net.api_versions_response(answered[i])
                    is net.api_versions_response(answered[i - 1]))

        # Other bytes than the last answer: decoded again.
        shared = net._shared_api_versions
        net._shared_api_versions = (shared[0], shared[1], shared[2], shared[3] + b"x")
        client_authenticator._LAST_API_VERSIONS[0] = None
        before, sasl_before = len(decodes), len(sasl_decodes)
        _connect_all(net, host, int(port), [NODES])
        assert len(decodes) == before + 1 and len(sasl_decodes) == sasl_before + 1
        body = net.api_versions_response(NODES)
        assert net.api_versions(NODES) == {e["api_key"]: (e["min_version"], e["max_version"])
                                           for e in body["api_keys"]}
    finally:
        net.close()
