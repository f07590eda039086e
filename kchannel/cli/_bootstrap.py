"""The admin tools' first connection: the first reachable address of
``--bootstrap-server``, tried in order, as Kafka's tools do."""
from kchannel.client import KafkaClient

__all__ = ["connect_bootstrap"]


def connect_bootstrap(bootstrap, configs, failure):
    """(client, connection) for the first address of ``bootstrap`` that
    connects (and authenticates) with ``configs``.  A malformed address
    raises ``failure`` with Kafka's ConfigException text; when none connects,
    the last address's error is raised."""
    configs = dict(configs)
    configs["bootstrap.servers"] = bootstrap
    last = None
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise failure("org.apache.kafka.common.config.ConfigException: Invalid url in "
                          f"bootstrap.servers: {address}")
        client = KafkaClient(configs)
        try:
            return client, client.connect(host.strip("[]"), int(port))
        except Exception as exc:  # noqa: BLE001 - try the next bootstrap server
            last = exc
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass
    raise last or failure("No bootstrap server to connect to")
