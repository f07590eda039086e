"""Kafka's ``ConnectionState`` of a client's connection to one node (shared
by ``kchannel.client.network_client`` and its per-request twin
``kchannel.client._clientloop_py``)."""
import enum

__all__ = ["ConnectionState"]


class ConnectionState(enum.Enum):
    """Kafka's ConnectionState names.

    kchannel's CONNECTING lasts until the channel is ready (TCP connect, TLS
    handshake and SASL authentication); CHECKING_API_VERSIONS is the
    ApiVersions exchange that follows."""
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    READY = "READY"
    AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"

    def is_disconnected(self):
        return self is ConnectionState.DISCONNECTED or \
            self is ConnectionState.AUTHENTICATION_FAILED

    def is_connected(self):
        return self is ConnectionState.CHECKING_API_VERSIONS or self is ConnectionState.READY
