"""Channel builders (Kafka's ``ChannelBuilder`` / ``ChannelBuilders``).

A builder turns a connected (or connecting) socket into a
:class:`~kchannel.network.channel.KafkaChannel` with the transport and
authenticator its security protocol needs:

* :class:`PlaintextChannelBuilder` -- plain TCP, ``User:ANONYMOUS``.
* :class:`SslChannelBuilder` -- TLS via :class:`kchannel.network.ssl_factory.SslFactory`;
  principal from the client certificate (``ssl.principal.mapping.rules``).
* SASL_PLAINTEXT / SASL_SSL -- ``kchannel.security.sasl.channel_builder.SaslChannelBuilder``.

:func:`kchannel.security.channel_builders.create_channel_builder` picks the
right one from ``security.protocol`` (it lives in the security layer because
it needs the SASL builder, and the network layer never imports upwards).
"""

from .authenticator import (
    DefaultAuthenticator,
    create_principal_builder,
    create_ssl_principal_mapper,
)
from .channel import DEFAULT_MAX_RECEIVE_SIZE, KafkaChannel
from .ssl_factory import SslFactory
from .transport import PlaintextTransportLayer
from ..log import get_logger

log = get_logger("kchannel.network.channel_builder")

__all__ = ["ChannelBuilder", "PlaintextChannelBuilder", "SslChannelBuilder",
           "create_ssl_transport"]


def _plaintext_transport(sock):
    return PlaintextTransportLayer(sock)


class ChannelBuilder:
    """Interface: ``build_channel(channel_id, sock, mode=None, peer_host=None,
    peer_port=None, listener_name=None, max_receive_size=None,
    remote_address=None) -> KafkaChannel``; ``close()``."""

    security_protocol = None

    def __init__(self, mode="server", configs=None, listener_name=None):
        if mode not in ("server", "client"):
            raise ValueError(f"mode must be 'server' or 'client', got {mode!r}")
        self.mode = mode
        self.configs = dict(configs or {})
        self.listener_name = listener_name

    def build_channel(self, channel_id, sock, mode=None, peer_host=None, peer_port=None,
                      listener_name=None, max_receive_size=None, remote_address=None):
        raise NotImplementedError

    def close(self):
        pass

    def _channel(self, channel_id, transport, authenticator_factory, mode, listener_name,
                 max_receive_size, remote_address):
        return KafkaChannel(
            channel_id, transport, authenticator_factory,
            max_receive_size if max_receive_size is not None else DEFAULT_MAX_RECEIVE_SIZE,
            mode=mode or self.mode,
            listener_name=listener_name if listener_name is not None else self.listener_name,
            security_protocol=self.security_protocol,
            remote_address=remote_address,
        )


class PlaintextChannelBuilder(ChannelBuilder):
    security_protocol = "PLAINTEXT"

    def __init__(self, mode="server", configs=None, listener_name=None):
        super().__init__(mode, configs, listener_name)
        self.principal_builder = create_principal_builder(self.configs)

    def build_channel(self, channel_id, sock, mode=None, peer_host=None, peer_port=None,
                      listener_name=None, max_receive_size=None, remote_address=None):
        transport = _plaintext_transport(sock)
        ln = listener_name if listener_name is not None else self.listener_name
        pb = self.principal_builder

        def factory():
            return DefaultAuthenticator("PLAINTEXT", pb, ln, remote_address)

        return self._channel(channel_id, transport, factory, mode, ln, max_receive_size,
                             remote_address)


class SslChannelBuilder(ChannelBuilder):
    """TLS channels.  ``configs`` holds the ssl.* keys (typed or strings)."""

    security_protocol = "SSL"

    def __init__(self, mode="server", configs=None, listener_name=None, ssl_factory=None):
        super().__init__(mode, configs, listener_name)
        if ssl_factory is None:
            ssl_factory = SslFactory(mode, self.configs)
        self.ssl_factory = ssl_factory
        self.principal_builder = create_principal_builder(
            self.configs, create_ssl_principal_mapper(self.configs))

    def build_channel(self, channel_id, sock, mode=None, peer_host=None, peer_port=None,
                      listener_name=None, max_receive_size=None, remote_address=None):
        transport = create_ssl_transport(self.ssl_factory, sock, peer_host, peer_port)
        ln = listener_name if listener_name is not None else self.listener_name
        pb = self.principal_builder

        def factory():
            return DefaultAuthenticator("SSL", pb, ln, remote_address)

        return self._channel(channel_id, transport, factory, mode, ln, max_receive_size,
                             remote_address)


def create_ssl_transport(ssl_factory, sock, peer_host, peer_port):
    """A TLS transport over ``sock`` from ``ssl_factory`` (also used by the
    SASL_SSL builder)."""
    return ssl_factory.create_transport(sock, peer_host, peer_port)

