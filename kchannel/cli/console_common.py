"""What ``console-producer`` and ``console-consumer`` share: ``key=value``
options and the client configuration assembled as Kafka's console tools do
(properties file, then ``--*-property`` options, then the tool's flags for
keys neither set)."""
from kchannel.config.properties import load_properties

__all__ = ["parse_properties", "producer_or_consumer_configs"]


def parse_properties(items):
    """``["k=v", ...]`` -> dict (Kafka's ``CommandLineUtils.parseKeyValueArgs``)."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"Invalid command line properties: {item}")
        out[key.strip()] = value
    return out


def producer_or_consumer_configs(bootstrap, config_file, properties, defaults):
    configs = dict(load_properties(config_file)) if config_file else {}
    configs.update(parse_properties(properties))
    for key, value in defaults.items():
        configs.setdefault(key, value)
    configs["bootstrap.servers"] = bootstrap
    return configs
