"""``kchannel.protocol.error_responses``: every builder's body encodes at
every version of its API (the codec would refuse a missing or misspelt
field), and the per-item errors follow the request.  The differential tests
against Apache Kafka (tests/interop/test_kafka_differential.py) check the bodies
against what Kafka sends."""
import uuid

import pytest

from kchannel.protocol import messages
from kchannel.protocol.error_responses import _BUILDERS, error_response_body
from kchannel.protocol.errors import Errors

ILLEGAL = int(Errors.ILLEGAL_SASL_STATE)
REQUESTS = {
    3: {"topics": [{"name": "t1", "topic_id": uuid.UUID(int=1)},
                   {"name": None, "topic_id": uuid.UUID(int=2)}]},
    10: {"key": "g", "key_type": 0, "coordinator_keys": ["g1", "g2"]},
}
CASES = [(key, v) for key in sorted(_BUILDERS)
         for v in range(messages.API[key].min_version, messages.API[key].max_version + 1)]


@pytest.mark.parametrize("api_key,version", CASES)
def test_every_body_encodes_and_decodes(api_key, version):
    body = error_response_body(api_key, version, REQUESTS.get(api_key, {}), ILLEGAL, "why")
    spec = messages.API[api_key].response
    decoded = spec.decode(spec.encode(body, version), version)
    # every field the builder set that this version has survives
    assert_kept(decoded, body)


def assert_kept(decoded, built):
    if isinstance(decoded, dict):
        for key, value in decoded.items():
            if key in built:
                assert_kept(value, built[key])
    elif isinstance(decoded, list):
        assert len(decoded) == len(built)
        for d, b in zip(decoded, built):
            assert_kept(d, b)
    else:
        assert decoded == built


def test_per_item_errors():
    body = error_response_body(3, 12, REQUESTS[3], ILLEGAL, "why")
    assert [(t["name"], t["error_code"]) for t in body["topics"]] == [("t1", ILLEGAL),
                                                                      ("", ILLEGAL)]
    body = error_response_body(10, 4, REQUESTS[10], ILLEGAL, "why")
    assert [(c["key"], c["error_code"], c["error_message"]) for c in body["coordinators"]] == [
        ("g1", ILLEGAL, Errors.ILLEGAL_SASL_STATE.message),
        ("g2", ILLEGAL, Errors.ILLEGAL_SASL_STATE.message)]
    assert error_response_body(60, 1, {}, ILLEGAL, "why")["error_message"] == "why"


def test_no_builder_means_none():
    assert error_response_body(50, 0, {}, ILLEGAL, "why") is None
    assert error_response_body(0, 9, {}, ILLEGAL, "why") is None
