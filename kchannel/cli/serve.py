"""``kchannel serve``: run a kchannel server from a Kafka ``server.properties``.

    kchannel serve --config server.properties [--jaas-config kafka_server_jaas.conf]
                   [--override key=value ...]

Binds every listener in ``listeners`` (logging "Awaiting socket connections on
HOST:PORT." per listener, as Kafka's SocketServer), serves ApiVersions,
Metadata and DescribeCluster plus the SCRAM credential APIs (50/51) backed by the server's SCRAM
credential store (allowed to the principals in ``super.users`` only), DescribeClientQuotas
(no quotas: what ``kafka-configs.sh --describe --entity-type users`` asks first) and, when
delegation tokens are enabled and the token module is installed, the delegation token APIs.
With ``kchannel.upstream.bootstrap.servers`` set it is a gateway in front of that cluster
(see :mod:`kchannel.gateway`): every other request is forwarded upstream.  SIGTERM / SIGINT shut it down
cleanly (exit 0).  A configuration error exits 1 with Kafka's message.
"""
import logging
import os
import signal
import threading

from .. import errors, tokens
from ..config import ServerConfig, load_properties
from ..gateway import install_gateway
from ..handlers import handle_describe_client_quotas, random_cluster_id
from ..protocol import messages
from ..security.sasl import scram_store
from ..security.sasl.scram_handlers import register_scram_handlers
from ..server import Server

NAME = "serve"
HELP = "run a Kafka-protocol server (listeners, TLS, SASL) from server.properties"

log = logging.getLogger("kchannel.cli.serve")


def add_arguments(parser):
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="server properties file (Kafka's server.properties format)")
    parser.add_argument("--jaas-config", metavar="FILE", default=None,
                        help="JAAS file, as -Djava.security.auth.login.config "
                             "(KafkaServer / <listener>.KafkaServer sections)")
    parser.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                        help="override a property (repeatable), as kafka-server-start's "
                             "--override")


def _load_props(path):
    return dict(load_properties(path))


def _parse_override(text):
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise errors.ConfigError(f"Invalid override {text!r}: expected key=value",
                                 key=text, value=None)
    return key.strip(), value


def _scram_store(props):
    """The SCRAM credential store named by the server properties (SQLite in
    the data directory by default, or in memory)."""
    kind = str(props.get("kchannel.scram.credential.store", "sqlite")).strip().lower()
    if kind == "memory":
        return scram_store.InMemoryScramCredentialStore()
    return scram_store.open_store(server_config=props)


def _install_tokens(server, config, props):
    """Delegation tokens (KIP-48) on ``server``."""
    return tokens.install_server(server, config, props)


def _stable_cluster_id(config, props):
    """The cluster id kept in ``<first log dir>/meta.properties`` (Kafka's
    file), created on first start, so clients see the same id across
    restarts.  ``kchannel.cluster.id`` wins; None when no data directory is
    usable."""
    configured = getattr(config, "cluster_id", None)
    if configured:
        return configured
    if not (props.get("log.dirs") or props.get("log.dir")):
        return None
    data_dir = getattr(config, "data_dir", None)
    if not data_dir:
        return None
    path = os.path.join(data_dir, "meta.properties")
    try:
        if os.path.exists(path):
            existing = load_properties(path).get("cluster.id")
            if existing:
                return existing
        os.makedirs(data_dir, exist_ok=True)
        cluster_id = random_cluster_id()
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"#\nversion=0\nbroker.id={config.node_id}\ncluster.id={cluster_id}\n")
        return cluster_id
    except OSError as exc:
        log.warning("Cannot keep the cluster id in %s: %s", path, exc)
        return None


def build_server(props, jaas_text=None, jaas_file_name=None):
    """``(server, closers)`` for the given properties (used by ``run`` and
    tests)."""
    config = ServerConfig(props, jaas_text, jaas_file_name=jaas_file_name)
    closers = []
    sasl_kwargs = {}
    store = None
    uses_sasl = any(ep.security_protocol.startswith("SASL_") for ep in config.listeners)
    wants_scram_api = True
    if uses_sasl or wants_scram_api:
        try:
            store = _scram_store(props)
        except Exception as exc:  # noqa: BLE001 - no store means no SCRAM, not no server
            log.warning("SCRAM credential store unavailable: %s", exc)
            store = None
        if store is not None:
            sasl_kwargs["scram_store"] = store
            closers.append(store.close)
    server = Server(config, sasl_kwargs=sasl_kwargs,
                    cluster_id=_stable_cluster_id(config, props))
    if store is not None:
        # Only super.users may read or change credentials (no ACL authorizer).
        register_scram_handlers(server, store, super_users=config.get("super.users"))
    server.register_handler(messages.DESCRIBE_CLIENT_QUOTAS.api_key,
                            handle_describe_client_quotas)
    token_hook = _install_tokens(server, config, props)
    if token_hook is not None and hasattr(token_hook, "close"):
        closers.append(token_hook.close)
    # Gateway in front of an upstream cluster (kchannel.upstream.*), after
    # every local API is registered: ApiVersions lists them and the
    # upstream's others.
    try:
        gateway = install_gateway(server, config, props)
    except BaseException:
        server.shutdown()
        for c in closers:
            c()
        raise
    if gateway is not None:
        closers.insert(0, gateway.close)
    return server, closers


def run(args):
    try:
        props = _load_props(args.config)
        for item in args.override or ():
            k, v = _parse_override(item)
            props[k] = v
        jaas_text = None
        if args.jaas_config:
            with open(args.jaas_config, encoding="utf-8") as f:
                jaas_text = f.read()
        server, closers = build_server(props, jaas_text, args.jaas_config)
    except OSError as exc:
        log.error("Cannot start: %s", exc)
        return 1
    except errors.KChannelError as exc:
        log.error("Cannot start: %s", exc)
        return 1

    stop = threading.Event()

    def on_signal(signum, _frame):
        log.info("Received %s; shutting down", signal.Signals(signum).name)
        stop.set()
        server.selector.wakeup()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    log.info("kchannel server (node %d, cluster %s) started", server.node_id, server.cluster_id)
    try:
        while not stop.is_set():
            server.poll(300)
    finally:
        server.shutdown()
        for c in closers:
            try:
                c()
            except Exception:  # noqa: BLE001
                pass
        for s, h in old.items():
            signal.signal(s, h)
    return 0
