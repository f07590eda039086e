"""Client side of the delegation token APIs (Kafka Admin's
``createDelegationToken`` / ``renewDelegationToken`` /
``expireDelegationToken`` / ``describeDelegationToken``) over a connected
:class:`kchannel.client.KafkaClient`.

>>> admin = DelegationTokenAdmin(client)
>>> token = admin.create(renewers=["User:bob"])
>>> token.token_info.token_id, token.hmac_base64

An error code in the response raises
:class:`kchannel.errors.DelegationTokenError` (``error_code``, ``name``,
``message``); ``exception_name`` gives the name of the exception Kafka's
Admin client would throw.
"""
import base64

from kchannel.errors import DelegationTokenError, UnsupportedVersionError
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.tokens.token import DelegationToken, TokenInformation

__all__ = ["DelegationTokenAdmin", "exception_name", "raise_for_error"]

# Errors.java: the exception class of each error code whose class name is not
# the code's name in CamelCase + "Exception" (the Admin's errors too, not
# only the token APIs').
_EXCEPTIONS = {
    Errors.UNKNOWN_SERVER_ERROR: "UnknownServerException",
    Errors.CORRUPT_MESSAGE: "CorruptRecordException",
    Errors.REQUEST_TIMED_OUT: "TimeoutException",
    Errors.MESSAGE_TOO_LARGE: "RecordTooLargeException",
    Errors.STALE_CONTROLLER_EPOCH: "ControllerMovedException",
    Errors.OFFSET_METADATA_TOO_LARGE: "OffsetMetadataTooLarge",
    Errors.NETWORK_EXCEPTION: "NetworkException",
    Errors.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
    Errors.RECORD_LIST_TOO_LARGE: "RecordBatchTooLargeException",
    Errors.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
    Errors.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "ClusterAuthorizationException",
    Errors.TOPIC_ALREADY_EXISTS: "TopicExistsException",
    Errors.INVALID_CONFIG: "InvalidConfigurationException",
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "OutOfOrderSequenceException",
    Errors.DUPLICATE_SEQUENCE_NUMBER: "DuplicateSequenceException",
    Errors.INVALID_PRODUCER_ID_MAPPING: "InvalidPidMappingException",
    Errors.INVALID_TRANSACTION_TIMEOUT: "InvalidTxnTimeoutException",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "TransactionalIdAuthorizationException",
    Errors.KAFKA_STORAGE_ERROR: "KafkaStorageException",
    Errors.SASL_AUTHENTICATION_FAILED: "SaslAuthenticationException",
    Errors.DELEGATION_TOKEN_AUTH_DISABLED: "DelegationTokenDisabledException",
    Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "UnsupportedByAuthenticationException",
    Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "DelegationTokenAuthorizationException",
    Errors.NON_EMPTY_GROUP: "GroupNotEmptyException",
    Errors.PRINCIPAL_DESERIALIZATION_FAILURE: "PrincipalDeserializationException",
    Errors.FETCH_SESSION_TOPIC_ID_ERROR: "FetchSessionTopicIdException",
    Errors.INVALID_REGULAR_EXPRESSION: "InvalidRegularExpression",
}


def exception_name(code):
    """Kafka's exception class name for ``code``."""
    try:
        err = Errors(code)
    except ValueError:
        return "UnknownServerException"
    name = _EXCEPTIONS.get(err)
    if name is None:
        name = "".join(w.capitalize() for w in err.name.split("_")) + "Exception"
    return name


def raise_for_error(code):
    if code:
        try:
            err = Errors(code)
            name, message = err.name, err.message
        except ValueError:
            name, message = "UNKNOWN_SERVER_ERROR", ""
        exc = DelegationTokenError(code, name, message)
        exc.exception_name = exception_name(code)
        raise exc


def _principal(value):
    if isinstance(value, KafkaPrincipal):
        return value
    return KafkaPrincipal.from_string(str(value).strip())


def _hmac_bytes(hmac):
    if isinstance(hmac, str):
        return base64.b64decode(hmac)
    if isinstance(hmac, DelegationToken):
        return hmac.hmac
    return bytes(hmac)


class DelegationTokenAdmin:
    """Delegation token operations over one connected ``KafkaClient``."""

    def __init__(self, client):
        self.client = client

    def create(self, renewers=(), max_lifetime_ms=-1, owner=None):
        """CreateDelegationToken -> :class:`DelegationToken`.  ``owner``
        (KIP-373) needs a broker supporting version 3."""
        owner = _principal(owner) if owner is not None else None
        body = {
            "renewers": [{"principal_type": p.principal_type, "principal_name": p.name}
                         for p in map(_principal, renewers or ())],
            "max_lifetime_ms": int(max_lifetime_ms),
            "owner_principal_type": owner.principal_type if owner else None,
            "owner_principal_name": owner.name if owner else None,
        }
        version = self.client.choose_version(int(ApiKey.CREATE_DELEGATION_TOKEN))
        if owner is not None and version is not None and version < 3:
            raise UnsupportedVersionError(
                "The broker does not support creating delegation tokens for another owner "
                "(CreateDelegationToken v3)")
        r = self.client.request(int(ApiKey.CREATE_DELEGATION_TOKEN), body)
        raise_for_error(r["error_code"])
        token_owner = KafkaPrincipal(r["principal_type"], r["principal_name"])
        requester = token_owner
        if r.get("token_requester_principal_name"):
            requester = KafkaPrincipal(r["token_requester_principal_type"],
                                       r["token_requester_principal_name"])
        info = TokenInformation(
            r["token_id"], token_owner, requester,
            [_principal(p) for p in renewers or ()],
            r["issue_timestamp_ms"], r["max_timestamp_ms"], r["expiry_timestamp_ms"])
        return DelegationToken(info, bytes(r["hmac"]))

    def renew(self, hmac, renew_time_period_ms=-1):
        """RenewDelegationToken -> new expiry timestamp (ms)."""
        r = self.client.request(int(ApiKey.RENEW_DELEGATION_TOKEN),
                                {"hmac": _hmac_bytes(hmac),
                                 "renew_period_ms": int(renew_time_period_ms)})
        raise_for_error(r["error_code"])
        return r["expiry_timestamp_ms"]

    def expire(self, hmac, expiry_time_period_ms=-1):
        """ExpireDelegationToken -> new expiry timestamp (ms)."""
        r = self.client.request(int(ApiKey.EXPIRE_DELEGATION_TOKEN),
                                {"hmac": _hmac_bytes(hmac),
                                 "expiry_time_period_ms": int(expiry_time_period_ms)})
        raise_for_error(r["error_code"])
        return r["expiry_timestamp_ms"]

    def describe(self, owners=None):
        """DescribeDelegationToken -> [:class:`DelegationToken`].  ``owners``
        None asks for every token the caller may see."""
        body = {"owners": None if owners is None else
                [{"principal_type": p.principal_type, "principal_name": p.name}
                 for p in map(_principal, owners)]}
        r = self.client.request(int(ApiKey.DESCRIBE_DELEGATION_TOKEN), body)
        raise_for_error(r["error_code"])
        out = []
        for t in r.get("tokens") or ():
            owner = KafkaPrincipal(t["principal_type"], t["principal_name"])
            requester = owner
            if t.get("token_requester_principal_name"):
                requester = KafkaPrincipal(t["token_requester_principal_type"],
                                           t["token_requester_principal_name"])
            info = TokenInformation(
                t["token_id"], owner, requester,
                [KafkaPrincipal(x["principal_type"], x["principal_name"])
                 for x in t.get("renewers") or ()],
                t["issue_timestamp"], t["max_timestamp"], t["expiry_timestamp"])
            out.append(DelegationToken(info, bytes(t["hmac"])))
        return out
