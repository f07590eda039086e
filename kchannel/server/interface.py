"""What the server-side modules use of a :class:`~kchannel.server.Server`.

The request handlers (:mod:`.handlers`, :mod:`.cluster`,
:mod:`.scram_handlers`, :mod:`.token_handlers`, :mod:`.acl_handlers`) and
the broker assembly (:mod:`.broker`) take a server and use the members of
:class:`BrokerServer`, read as attributes, never probed with
``getattr``/``hasattr``: a member missing here is a bug in the Server, not a
case to fall back from.  (The worker processes and the gateway drive the
Server itself -- ``poll``, its selector -- and take the concrete class.)
``tests/server/test_server_interface.py`` checks that a Server has every
member and that those modules probe nothing.

``config`` is always a :class:`kchannel.config.ServerConfig` (a Server is
built from one), so handlers read settings from it (``config.get(key)``,
``config.originals``, its properties) rather than from raw properties.
"""
from typing import Callable, Dict, List, Optional, Protocol, Tuple, runtime_checkable

from ..config import ServerConfig

__all__ = ["BrokerServer"]


@runtime_checkable
class BrokerServer(Protocol):
    """The Server as its handlers, the broker assembly and the workers see
    it (``isinstance(server, BrokerServer)`` checks the members exist)."""

    #: The validated server configuration (``kchannel.config.ServerConfig``).
    config: ServerConfig
    #: ``node.id``, the cluster id clients are told, ``broker.rack``.
    node_id: int
    cluster_id: str
    rack: Optional[str]
    #: The ms clock the server runs on (``time()`` -> epoch ms).
    time: Callable[[], int]
    #: The bound listeners (``kchannel.server.Listener``: ``name``,
    #: ``security_protocol``, ``configs``, ``channel_builder``...).
    listeners: List[object]
    #: Advertised endpoints by listener name (``advertised.listeners``).
    advertised: Dict[str, object]
    #: Which brokers a request on a listener is told about
    #: (``kchannel.server.cluster.ClusterView``); None until the cluster
    #: handlers are registered.
    cluster_view: Optional[object]
    #: The delegation token manager SCRAM token logins use, or None.
    token_manager: Optional[object]
    #: The server's metrics registry (``kchannel.metrics.Metrics``).
    metrics: object

    def register_handler(self, api_key: int, fn: Callable, min_version: Optional[int] = None,
                         max_version: Optional[int] = None) -> None:
        """Serve ``api_key`` with ``fn(ctx) -> dict | None``."""

    def advertised_endpoint(self, listener_name: str) -> Tuple[str, int]:
        """(host, port) clients should use for ``listener_name``."""

    def api_versions_body_bytes(self, version: int, listener_name: Optional[str] = None) -> bytes:
        """The encoded ApiVersions response body for a listener."""

    def shutdown(self, timeout: float = 10.0) -> None:
        """Close the listeners, connections and what the assembly opened."""
