"""kchannel's exception hierarchy.

Every error says whose fault it is:

* ``AuthenticationError`` and subclasses: the credentials or the TLS peer were
  refused.  Non-retriable: retrying with the same settings fails the same way.
  They carry the server's message verbatim.
* ``InvalidReceiveError`` / ``InvalidRequestError``: the peer sent bytes that
  are not valid Kafka framing or protocol; only that connection is closed.
* ``ConfigError``: the operator's configuration is wrong; raised at start-up
  with the key, the value and what is allowed.
* ``KafkaError``: a Kafka error code returned in a response.
"""
import os as _os


class CoreErrorCodes:
    """The Kafka error codes the exceptions below carry by default.

    ``kchannel.protocol.errors.Errors`` is the vocabulary of Kafka's error
    codes, but this module sits below the protocol layer (which imports it),
    so the few codes it needs are named here;
    ``tests/project/test_kafka_constants.py`` checks each against
    ``Errors``."""

    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    SASL_AUTHENTICATION_FAILED = 58


class KChannelError(Exception):
    """Base class of every kchannel error."""

    retriable = False


class KafkaConnectionError(KChannelError):
    """Network-level failure on one connection (refused, reset, EOF): the
    broker is not reachable or went away, not a fault of the request.

    Retriable: a new connection may succeed.  ``errno`` is the socket's
    error number when the operating system gave one.
    """

    retriable = True
    errno = None

    @classmethod
    def for_errno(cls, err, what=None):
        """The error for socket error number ``err``: the operating system's
        text for it ("Connection refused", the message of Java's
        ``ConnectException``), after ``what: `` when given."""
        text = _os.strerror(err)
        exc = cls(f"{what}: {text}" if what else text)
        exc.errno = err
        return exc


# Older names, kept working: ``ConnectionError_`` (the first spelling, which
# only avoided the builtin ConnectionError) and ``ChannelConnectionError``.
ConnectionError_ = KafkaConnectionError
ChannelConnectionError = KafkaConnectionError


class InvalidReceiveError(KChannelError):
    """A frame size prefix was negative or above the configured maximum.

    Raised before any buffer of that size is allocated.
    """


class InvalidRequestError(KChannelError):
    """A request could not be parsed (truncated, bad header, bad body)."""


class UnsupportedVersionError(KChannelError):
    """An API version outside the supported range was used."""


class ConfigError(KChannelError, ValueError):
    """Invalid configuration: names the key, the value and what is allowed."""

    def __init__(self, message, key=None, value=None):
        super().__init__(message)
        self.key = key
        self.value = value


class AuthenticationError(KChannelError):
    """Authentication failed.  Non-retriable; carries the server's message."""

    retriable = False

    def __init__(self, message="", error_code=None):
        super().__init__(message)
        self.error_code = error_code


class SslAuthenticationError(AuthenticationError):
    """TLS handshake failure (untrusted certificate, host name mismatch,
    protocol or cipher mismatch).  ``reason`` is OpenSSL's reason string."""

    def __init__(self, message="", reason=None):
        super().__init__(message)
        self.reason = reason


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication failed (Kafka error SASL_AUTHENTICATION_FAILED, 58).

    ``message`` is the server's error message when it sent one.
    """

    def __init__(self, message="", error_code=CoreErrorCodes.SASL_AUTHENTICATION_FAILED,
                 mechanism=None):
        super().__init__(message, error_code)
        self.mechanism = mechanism


class IllegalSaslStateError(AuthenticationError):
    """A request arrived that is not allowed in the current SASL state (34)."""

    def __init__(self, message="", error_code=CoreErrorCodes.ILLEGAL_SASL_STATE):
        super().__init__(message, error_code)


class UnsupportedSaslMechanismError(AuthenticationError):
    """The server does not enable the requested mechanism (33).

    ``enabled_mechanisms`` lists what the server offered.
    """

    def __init__(self, message="", enabled_mechanisms=(),
                 error_code=CoreErrorCodes.UNSUPPORTED_SASL_MECHANISM):
        super().__init__(message, error_code)
        self.enabled_mechanisms = list(enabled_mechanisms)


class DelayedResponseAuthenticationError(AuthenticationError):
    """Kafka's ``DelayedResponseAuthenticationException``: the channel's
    authenticator failed (``__cause__`` is its ``AuthenticationError``) and
    its error response, if any, is to be sent only when the connection is
    closed, which a server delays by
    ``connection.failed.authentication.delay.ms``.

    Raised by ``KafkaChannel.prepare`` (and when a re-authentication fails as
    it begins); the selector catches it and schedules the close.  Callers of
    a selector never see it: the channel's state carries the authenticator's
    own exception.
    """

    def __init__(self, cause):
        super().__init__(str(cause), getattr(cause, "error_code", None))
        self.__cause__ = cause


class IllegalStateTransitionError(RuntimeError):
    """A kchannel bug, not the peer's nor the operator's fault: a state
    machine was asked for a transition its table does not list (Kafka throws
    ``IllegalStateException``).  The connection still fails closed; please
    report the message, which names both states."""


class KafkaError(KChannelError):
    """An error code returned by a Kafka broker in a response body."""

    def __init__(self, error_code, name="", message=""):
        text = f"{name or 'ERROR'} ({error_code})"
        if message:
            text += f": {message}"
        super().__init__(text)
        self.error_code = error_code
        self.name = name
        self.message = message


class DelegationTokenError(KafkaError):
    """A delegation token API returned an error code."""


class CorruptRecordError(KafkaError):
    """A record batch failed its CRC, is truncated or is otherwise malformed
    (Kafka's CorruptRecordException, error CORRUPT_MESSAGE, 2).  The bytes
    came from the broker (or the disk behind it): the fetch that returned
    them cannot be used."""

    def __init__(self, message=""):
        super().__init__(2, "CORRUPT_MESSAGE", message)


class UnsupportedCompressionTypeError(KafkaError):
    """A batch uses a compression codec this installation cannot read or
    write (Kafka's UNSUPPORTED_COMPRESSION_TYPE, 76): the message names the
    extra to install."""

    def __init__(self, message=""):
        super().__init__(76, "UNSUPPORTED_COMPRESSION_TYPE", message)


class IllegalStateError(KChannelError, RuntimeError):
    """The application called a method in a state that does not allow it
    (Kafka's ``IllegalStateException``): ``commit_transaction()`` without
    ``begin_transaction()``, a send outside a transaction of a
    transactional producer.  The message names the state."""


class ProducerFencedError(KafkaError):
    """Another producer with the same ``transactional.id`` has started
    (Kafka's ``ProducerFencedException``, PRODUCER_FENCED, 90; an
    INVALID_PRODUCER_EPOCH answer to a transactional request is reported as
    this too, as Kafka does).  Fatal: this producer can only be closed."""

    def __init__(self, message=""):
        super().__init__(90, "PRODUCER_FENCED", message or (
            "There is a newer producer with the same transactionalId which fences the "
            "current one."))


class InvalidProducerEpochError(KafkaError):
    """A Produce request carried an old producer epoch (Kafka's
    ``InvalidProducerEpochException``, INVALID_PRODUCER_EPOCH, 47): another
    producer with the same ``transactional.id`` took over.  Fatal for a
    transactional producer."""

    def __init__(self, message=""):
        super().__init__(47, "INVALID_PRODUCER_EPOCH", message or
                         "Producer attempted to produce with an old epoch.")


class TransactionalIdAuthorizationError(KafkaError):
    """The principal may not use this ``transactional.id`` (Kafka's
    ``TransactionalIdAuthorizationException``, 53): grant it WRITE on the
    TransactionalId resource.  Fatal."""

    def __init__(self, message=""):
        super().__init__(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", message or
                         "Transactional Id authorization failed.")


class InvalidTxnStateError(KafkaError):
    """The coordinator's transaction state does not allow the request
    (Kafka's ``InvalidTxnStateException``, INVALID_TXN_STATE, 48).  Fatal."""

    def __init__(self, message=""):
        super().__init__(48, "INVALID_TXN_STATE", message or
                         "The producer attempted a transactional operation in an invalid "
                         "state.")


class TransactionAbortableError(KafkaError):
    """The broker asks the producer to abort the transaction (Kafka's
    ``TransactionAbortableException``, TRANSACTION_ABORTABLE, 120):
    ``abort_transaction()`` and start again."""

    def __init__(self, message=""):
        super().__init__(120, "TRANSACTION_ABORTABLE", message or (
            "The server encountered an error with the transaction. The client can abort the "
            "transaction to continue using this transactional ID."))


class TransactionAbortedError(KChannelError):
    """A record's send failed because its transaction was aborted before the
    record was sent (Kafka's ``TransactionAbortedException``)."""


class CommitFailedError(KChannelError):
    """Offsets sent to a transaction were rejected because the consumer
    group moved on (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; Kafka's
    ``CommitFailedException``): abort, and rebuild the transaction from the
    consumer's new assignment."""


# Java's names, for code written against Kafka's or kafka-python's clients.
ProducerFencedException = ProducerFencedError
InvalidProducerEpochException = InvalidProducerEpochError
TransactionalIdAuthorizationException = TransactionalIdAuthorizationError
