"""Configuration: Kafka's config keys, defaults, validation and JAAS.

Public API::

    load_properties(path_or_text) / parse_properties(text)   Java .properties
    ServerConfig(props, jaas_file_text=None)                  broker config
    ClientConfig(props, jaas_file_text=None)                  client config
    parse_jaas_config(text) / parse_jaas_file(text)           JAAS grammars
    Endpoint                                                  one listener
    Password                                                  secret value
"""
from kchannel.config.types import Password, reveal
from kchannel.config.properties import load_properties, parse_properties
from kchannel.config.jaas import JaasConfig, JaasEntry, parse_jaas_config, parse_jaas_file
from kchannel.config.listeners import Endpoint
from kchannel.config.server import ServerConfig
from kchannel.config.client import ClientConfig

__all__ = [
    "Password", "reveal", "load_properties", "parse_properties", "JaasConfig", "JaasEntry",
    "parse_jaas_config", "parse_jaas_file", "Endpoint", "ServerConfig", "ClientConfig",
]
