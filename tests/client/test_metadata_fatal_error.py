"""Metadata's fatal error (Kafka's ``Metadata.fatalError`` /
``maybeThrowFatalException``), sans I/O: what lets a producer waiting for
metadata raise a refused login at once (tests/client/test_auth_fail_fast.py runs it
against real brokers)."""
import pytest

from kchannel.errors import SaslAuthenticationError
from kchannel.client.metadata import Metadata

BODY = {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "topics": [], "cluster_id": "c", "controller_id": 1}


def test_raised_once_then_forgotten_and_waiters_woken():
    metadata = Metadata([("127.0.0.1", 9092)])
    woken = []
    metadata.add_listener(woken.append)
    metadata.maybe_raise_fatal_error()          # nothing set: no error
    error = SaslAuthenticationError("Authentication failed: Invalid username or password")
    metadata.set_fatal_error(error)
    assert woken == [metadata.cluster]
    with pytest.raises(SaslAuthenticationError) as info:
        metadata.maybe_raise_fatal_error()
    assert info.value is error
    metadata.maybe_raise_fatal_error()          # raised once: gone


def test_a_successful_update_clears_it():
    metadata = Metadata([("127.0.0.1", 9092)])
    metadata.set_fatal_error(SaslAuthenticationError("refused"))
    metadata.update(BODY, now=1000)
    metadata.maybe_raise_fatal_error()
