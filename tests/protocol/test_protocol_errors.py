"""Kafka's error table and its mapping onto kchannel exceptions."""
import pytest

from kchannel import errors as kerrors
from kchannel.protocol.errors import ERROR_TABLE, Errors, error_message, error_name, exception_for


def test_table_is_complete_and_consistent():
    codes = [code for code, _n, _m in ERROR_TABLE]
    assert len(codes) == len(set(codes)) == len(Errors)
    assert codes[0] == -1 and 0 in codes
    assert sorted(codes) == codes
    assert max(codes) >= 128
    for code, name, message in ERROR_TABLE:
        assert Errors(code).name == name
        assert Errors(code).message == message
        assert error_name(code) == name


@pytest.mark.parametrize("code,name", [
    (-1, "UNKNOWN_SERVER_ERROR"), (0, "NONE"), (33, "UNSUPPORTED_SASL_MECHANISM"),
    (34, "ILLEGAL_SASL_STATE"), (35, "UNSUPPORTED_VERSION"),
    (58, "SASL_AUTHENTICATION_FAILED"), (61, "DELEGATION_TOKEN_AUTH_DISABLED"),
    (62, "DELEGATION_TOKEN_NOT_FOUND"), (63, "DELEGATION_TOKEN_OWNER_MISMATCH"),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"), (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"),
    (66, "DELEGATION_TOKEN_EXPIRED"), (42, "INVALID_REQUEST"),
])
def test_well_known_codes(code, name):
    assert Errors[name] == code
    assert error_name(code) == name


def test_messages():
    assert Errors.NONE.message == ""
    assert Errors.UNSUPPORTED_VERSION.message == "The version of API is not supported."
    assert Errors.ILLEGAL_SASL_STATE.message == \
        "Request is not valid given the current SASL state."
    assert error_message(12345) == Errors.UNKNOWN_SERVER_ERROR.message
    assert error_name(12345) == "UNKNOWN_SERVER_ERROR"


@pytest.mark.parametrize("code,cls", [
    (58, kerrors.SaslAuthenticationError),
    (34, kerrors.IllegalSaslStateError),
    (33, kerrors.UnsupportedSaslMechanismError),
    (35, kerrors.UnsupportedVersionError),
    (61, kerrors.DelegationTokenError),
    (62, kerrors.DelegationTokenError),
    (66, kerrors.DelegationTokenError),
    (3, kerrors.KafkaError),
    (-1, kerrors.KafkaError),
])
def test_exception_for(code, cls):
    exc = exception_for(code)
    assert type(exc) is cls
    assert Errors(code).message in str(exc)
    custom = exception_for(code, "server said no")
    assert "server said no" in str(custom)


def test_exception_for_details():
    exc = exception_for(58, "Authentication failed: Invalid username or password")
    assert str(exc) == "Authentication failed: Invalid username or password"
    assert exc.error_code == 58
    exc = exception_for(62)
    assert exc.error_code == 62 and exc.name == "DELEGATION_TOKEN_NOT_FOUND"
    assert isinstance(exc, kerrors.KafkaError)
    assert exception_for(0) is None


def test_retriable_and_invalid_metadata_flags_sans_io():
    # Kafka's InvalidMetadataException extends RetriableException.
    assert {e for e in Errors if e.invalid_metadata} <= {e for e in Errors if e.retriable}
    assert Errors.NOT_LEADER_OR_FOLLOWER.retriable and Errors.NOT_LEADER_OR_FOLLOWER.invalid_metadata
    assert Errors.NOT_COORDINATOR.retriable and not Errors.NOT_COORDINATOR.invalid_metadata
    assert not Errors.NONE.retriable and not Errors.OFFSET_OUT_OF_RANGE.retriable
    assert not Errors.SASL_AUTHENTICATION_FAILED.retriable


@pytest.mark.interop
def test_retriable_and_invalid_metadata_flags_match_kafka(kafka_java):
    """Every code's flags equal ``instanceof RetriableException`` /
    ``InvalidMetadataException`` of the exception Kafka's Errors maps it to."""
    kafka = kafka_java.probe([{"id": "flags", "op": "errorFlags"}])["flags"]
    assert kafka["ok"], kafka
    flags = {int(code): tuple(v) for code, v in kafka["errors"].items()}
    assert len(flags) > 120
    ours = {e.value: (e.retriable, e.invalid_metadata) for e in Errors if e is not Errors.NONE}
    assert {c: ours[c] for c in flags if c in ours} == {c: f for c, f in flags.items() if c in ours}


def test_retriable_and_invalid_metadata_sets_follow_java_exceptions():
    from kchannel.consumer import fetcher
    from kchannel.producer import sender
    from kchannel.protocol.errors import (COORDINATOR_ERRORS, INVALID_METADATA_ERRORS,
                                          RETRIABLE_ERRORS)
    # Java: InvalidMetadataException extends RetriableException.
    assert INVALID_METADATA_ERRORS < RETRIABLE_ERRORS
    for e in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NETWORK_EXCEPTION,
              Errors.REPLICA_NOT_AVAILABLE, Errors.UNKNOWN_TOPIC_ID):
        assert e.invalid_metadata and e.retriable
    for e in COORDINATOR_ERRORS | {Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE,
                                   Errors.REQUEST_TIMED_OUT, Errors.NOT_ENOUGH_REPLICAS}:
        assert e.retriable and not e.invalid_metadata
    for e in (Errors.OFFSET_OUT_OF_RANGE, Errors.MESSAGE_TOO_LARGE, Errors.ILLEGAL_GENERATION,
              Errors.REBALANCE_IN_PROGRESS, Errors.GROUP_AUTHORIZATION_FAILED,
              Errors.BROKER_NOT_AVAILABLE, Errors.UNKNOWN_SERVER_ERROR):
        assert not e.retriable
    assert COORDINATOR_ERRORS == {Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE,
                                  Errors.COORDINATOR_LOAD_IN_PROGRESS}
    # One definition: the Sender and the Fetcher use these very sets.
    assert sender.RETRIABLE_ERRORS is RETRIABLE_ERRORS
    assert sender.INVALID_METADATA_ERRORS is INVALID_METADATA_ERRORS
    assert fetcher.RETRIABLE_ERRORS is RETRIABLE_ERRORS
    assert fetcher.INVALID_METADATA_ERRORS is INVALID_METADATA_ERRORS
    # A response's exception says whether retrying may help.
    assert exception_for(Errors.NOT_COORDINATOR).retriable
    assert not exception_for(Errors.INVALID_GROUP_ID).retriable

