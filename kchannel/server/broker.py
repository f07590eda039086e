"""A whole broker from Kafka's ``server.properties``: the :class:`Server`
with every API ``kchannel serve`` answers and the stores behind them.

:func:`assemble` is what ``Server.from_properties(props)`` runs, which is
what ``kchannel serve`` runs (in each worker process with
``num.network.threads`` > 1) and what a program embedding the broker calls;
``Server(config)`` alone answers only ApiVersions, Metadata,
DescribeCluster and SASL.  On top of it :func:`assemble` opens the SCRAM
credential store (SQLite in the data directory by default, or in memory) and
registers the SCRAM credential APIs (50/51, allowed to ``super.users`` only,
or by the ACLs), DescribeClientQuotas (no quotas), the delegation token APIs
and the ACL APIs (with ``authorizer.class.name``: Kafka's ACLs, checked on
every request a gateway forwards; else SECURITY_DISABLED), then, with
``kchannel.upstream.bootstrap.servers`` set, the gateway in front of that
cluster.  The server class comes in as an argument: ``server.py`` calls this
module, so this module does not import it.
"""
import os

from ..config import ServerConfig, load_properties
from ..log import get_logger
from ..protocol import messages
from ..security.authorizer.setup import (AclClusterAuthorizer, AclTokenAuthorizer,
                                         authorizer_from_config)
from ..security.sasl import scram_store
from .acl_handlers import register_acl_handlers
from .gateway import install_gateway
from .handlers import handle_describe_client_quotas, random_cluster_id
from .scram_handlers import register_scram_handlers
from .token_handlers import install_server as install_tokens

__all__ = ["assemble", "stable_cluster_id"]

log = get_logger("kchannel.server.broker")


def _scram_store(props):
    """The SCRAM credential store named by the server properties (SQLite in
    the data directory by default, or in memory)."""
    kind = str(props.get("kchannel.scram.credential.store", "sqlite")).strip().lower()
    if kind == "memory":
        return scram_store.InMemoryScramCredentialStore()
    return scram_store.open_store(server_config=props)


def stable_cluster_id(config, props):
    """The cluster id kept in ``<first log dir>/meta.properties`` (Kafka's
    file), created on first start, so clients see the same id across
    restarts.  ``kchannel.cluster.id`` wins; None when no data directory is
    usable."""
    configured = config.cluster_id
    if configured:
        return configured
    if not (props.get("log.dirs") or props.get("log.dir")):
        return None
    data_dir = config.data_dir
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


def assemble(server_class, props, jaas_text=None, jaas_file_name=None, reuse_port=False):
    """``(server, closers)``: a ``server_class`` (:class:`Server`) for the
    given properties with every API and store ``kchannel serve`` has;
    ``closers`` close those stores after ``server.shutdown()``
    (``Server.from_properties`` hands them to the server).  ``reuse_port``:
    listeners shared with other worker processes."""
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
    try:
        server = server_class(config, sasl_kwargs=sasl_kwargs,
                              cluster_id=stable_cluster_id(config, props),
                              reuse_port=reuse_port)
    except BaseException:
        # A listener that cannot bind: the store opened for it is closed.
        for c in closers:
            c()
        raise
    # authorizer.class.name: ACLs (CreateAcls/DescribeAcls/DeleteAcls answered
    # here; SECURITY_DISABLED without one, as Kafka)
    try:
        acl_authorizer = authorizer_from_config(config.get, config.data_dir)
    except BaseException:
        server.shutdown()
        for c in closers:
            c()
        raise
    if acl_authorizer is not None:
        closers.append(acl_authorizer.store.close)
    register_acl_handlers(server, acl_authorizer)
    if store is not None:
        # Without an authorizer only super.users may read or change
        # credentials; with one, DESCRIBE / ALTER on the cluster (as Kafka).
        if acl_authorizer is not None:
            register_scram_handlers(server, store,
                                    authorize=AclClusterAuthorizer(acl_authorizer))
        else:
            register_scram_handlers(server, store, super_users=config.get("super.users"))
    server.register_handler(messages.DESCRIBE_CLIENT_QUOTAS.api_key,
                            handle_describe_client_quotas)
    # With an ACL authorizer its ACLs decide who creates tokens for others
    # and describes whose tokens.
    token_hook = install_tokens(
        server, config, props,
        authorizer=AclTokenAuthorizer(acl_authorizer) if acl_authorizer is not None else None)
    closers.append(token_hook.close)
    # Gateway in front of an upstream cluster (kchannel.upstream.*), after
    # every local API is registered: ApiVersions lists them and the
    # upstream's others.
    try:
        gateway = install_gateway(server, config, props, acl_authorizer)
    except BaseException:
        server.shutdown()
        for c in closers:
            c()
        raise
    if gateway is not None:
        closers.insert(0, gateway.close)
    return server, closers
