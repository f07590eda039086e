"""A SCRAM credential and its text form (Kafka's ``ScramCredential`` and
``ScramCredentialUtils``).

A :class:`ScramCredential` holds only what RFC 5802 lets a server keep: the
salt, the iteration count, StoredKey and ServerKey.  It is the value the SCRAM
mechanism (:mod:`kchannel.security.sasl.scram`) checks and the stores
(:mod:`kchannel.security.sasl.scram_store`) keep; both import it from here.
"""
import base64
import binascii
from dataclasses import dataclass

__all__ = ["ScramCredential", "credential_to_string", "credential_from_string",
           "DEFAULT_ITERATIONS"]

DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    """Kafka's ``ScramCredential``: salt, StoredKey, ServerKey, iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self):
        # StoredKey/ServerKey are not the password, but together with a
        # captured exchange they help offline attacks: keep them out of logs.
        return f"ScramCredential(iterations={self.iterations})"

    __str__ = __repr__


def credential_to_string(credential):
    """Kafka's ``ScramCredentialUtils.credentialToString``."""
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return (f"salt={b64(credential.salt)},stored_key={b64(credential.stored_key)},"
            f"server_key={b64(credential.server_key)},iterations={credential.iterations}")


def credential_from_string(text):
    """Kafka's ``ScramCredentialUtils.credentialFromString``; raises ValueError."""
    props = {}
    for token in text.split(","):
        index = token.find("=")
        if index <= 0:
            raise ValueError(f"Credentials not valid: {text}")
        props[token[:index]] = token[index + 1:]
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError(f"Credentials not valid: {text}")
    try:
        return ScramCredential(
            salt=base64.b64decode(props["salt"], validate=True),
            stored_key=base64.b64decode(props["stored_key"], validate=True),
            server_key=base64.b64decode(props["server_key"], validate=True),
            iterations=int(props["iterations"]))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"Credentials not valid: {text}") from exc
