"""Kafka's ``ChannelBuilders``: the channel builder for a security protocol.

It sits in the security layer, not beside the builders in
:mod:`kchannel.network.channel_builder`, because SASL_PLAINTEXT and SASL_SSL
need :class:`~kchannel.security.sasl.channel_builder.SaslChannelBuilder` and the
network layer never imports the layers above it.
"""
from kchannel.config.listeners import SECURITY_PROTOCOLS
from kchannel.errors import ConfigError
from kchannel.network.channel_builder import PlaintextChannelBuilder, SslChannelBuilder
from kchannel.security.sasl.channel_builder import SaslChannelBuilder

__all__ = ["create_channel_builder", "SECURITY_PROTOCOLS"]


def create_channel_builder(security_protocol, mode, configs, listener_name=None, **kw):
    """Kafka's ``ChannelBuilders``: the builder for ``security_protocol``.

    ``configs``: effective config dict (for a server listener: the
    listener's effective configs).  Extra keyword arguments are passed to the
    SASL builder (``jaas``, ``callbacks``, ``api_versions_supplier``,
    ``token_manager``...).
    """
    proto = str(security_protocol or "PLAINTEXT").upper()
    if proto == "PLAINTEXT":
        return PlaintextChannelBuilder(mode, configs, listener_name)
    if proto == "SSL":
        return SslChannelBuilder(mode, configs, listener_name)
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        return SaslChannelBuilder(mode=mode, configs=configs, listener_name=listener_name,
                                  security_protocol=proto, **kw)
    raise ConfigError(
        f"Invalid value {security_protocol} for configuration security.protocol: "
        f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}",
        key="security.protocol", value=security_protocol)
