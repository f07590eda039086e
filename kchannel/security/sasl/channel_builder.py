"""SASL channel builder (Kafka's ``SaslChannelBuilder``).

Builds SASL_PLAINTEXT and SASL_SSL channels for
:func:`kchannel.security.channel_builders.create_channel_builder`:

* transport: plain TCP, or TLS first for SASL_SSL (the same ``SslFactory`` /
  TLS transport as SSL listeners).  On a SASL_SSL *listener* TLS client
  authentication is off unless ``ssl.client.auth`` is set with the listener
  prefix (``listener.name.<l>.ssl.client.auth``), as in Kafka's
  ``ChannelBuilders``; a client certificate, if sent, is exposed to the
  principal builder as ``ssl_peer_subject_dn``.
* server: one :class:`SaslServerAuthenticator` per accepted channel (and per
  re-authentication) with the listener's ``sasl.enabled.mechanisms``, the
  JAAS options of each mechanism, the server callbacks (SCRAM credential
  store, delegation-token lookup, OAUTHBEARER validation; pluggable), the
  principal builder, ``connections.max.reauth.ms`` per mechanism and
  ``sasl.server.max.receive.size``.
* client: one :class:`SaslClientAuthenticator` per connection for
  ``sasl.mechanism`` with the ``sasl.jaas.config`` login-module options.

Configuration lookups accept either the listener's effective config dict
(typed values or strings) or, through ``server_config``, the config
engineer's ``ServerConfig`` (``jaas_for`` / ``listener_mechanism_config``).
"""
from types import MappingProxyType

from kchannel.config.jaas import JaasConfig, JaasEntry, parse_jaas_config
from kchannel.config.types import reveal
from kchannel.errors import ConfigError, UnsupportedSaslMechanismError
from kchannel.network.authenticator import (create_principal_builder,
                                            create_ssl_principal_mapper)
from kchannel.network.channel_builder import (ChannelBuilder, _plaintext_transport,
                                              create_ssl_transport)
from kchannel.network.ssl_factory import SslFactory
from kchannel.security.kerberos_rules import KerberosShortNamer, default_kerberos_realm
from kchannel.security.sasl import mechanism as registry
from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.server_authenticator import (
    DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE, SaslServerAuthenticator)
from kchannel.log import get_logger

log = get_logger("kchannel.security.sasl.channel_builder")

__all__ = ["SaslChannelBuilder"]

SASL_ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
SASL_MECHANISM = "sasl.mechanism"
SASL_JAAS_CONFIG = "sasl.jaas.config"
CONNECTIONS_MAX_REAUTH_MS = "connections.max.reauth.ms"
SASL_SERVER_MAX_RECEIVE_SIZE = "sasl.server.max.receive.size"
FAILED_AUTHENTICATION_DELAY_MS = "connection.failed.authentication.delay.ms"
PRINCIPAL_TO_LOCAL_RULES = "sasl.kerberos.principal.to.local.rules"
SSL_CLIENT_AUTH = "ssl.client.auth"

DEFAULT_ENABLED_MECHANISMS = ["GSSAPI"]       # Kafka's sasl.enabled.mechanisms default
DEFAULT_CLIENT_MECHANISM = "GSSAPI"           # Kafka's sasl.mechanism default
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100


def _view(value):
    """A dict as a read-only view (an authenticator keeps it without a copy,
    see ``kept_mapping``); anything else (None, an int) as it is."""
    return MappingProxyType(value) if isinstance(value, dict) else value


def _as_list(value):
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v).strip() for v in value if str(v).strip()]


def _as_int(value, key):
    if value is None or value == "":
        return None
    try:
        return int(reveal(value))
    except (TypeError, ValueError):
        raise ConfigError(f"Invalid value {value} for configuration {key}: Not a number "
                          "of type LONG", key=key, value=value) from None


def _jaas_options(value, context_name="KafkaClient"):
    """Login-module options from whatever form the JAAS config came in."""
    if value is None:
        return None
    value = reveal(value)
    if isinstance(value, dict):
        return {k: reveal(v) for k, v in value.items()}
    if isinstance(value, str):
        value = parse_jaas_config(value)
    if isinstance(value, (JaasConfig, JaasEntry)):
        return {k: reveal(v) for k, v in dict(value.options).items()}
    raise ConfigError(f"Unsupported JAAS configuration {type(value).__name__}",
                      key=SASL_JAAS_CONFIG)


class SaslChannelBuilder(ChannelBuilder):
    """Kafka's ``SaslChannelBuilder``.

    Keywords beyond ``ChannelBuilder``'s:

    * ``security_protocol``: ``SASL_PLAINTEXT`` or ``SASL_SSL``.
    * ``jaas``: JAAS per mechanism -- a dict mechanism -> (``JaasConfig`` |
      ``JaasEntry`` | options dict | JAAS text), a callable
      ``fn(mechanism)``, or one value for every mechanism.  Server default:
      ``server_config.jaas_for(listener, mechanism)`` or the
      ``[listener.name.<l>.]<mechanism>.sasl.jaas.config`` keys; client
      default: ``sasl.jaas.config``.
    * ``callbacks``: ``ServerCallbacks`` (or mechanism -> ``ServerCallbacks``);
      default built from the JAAS options, ``scram_store``,
      ``token_manager``/``token_credential`` and ``oauth_validate``.
    * ``api_versions_supplier``: ``fn(version) -> ApiVersions body`` (server).
    * ``principal_builder``, ``kerberos_short_namer``, ``ssl_factory``.
    * ``listener_ssl_client_auth``: the listener-prefixed ``ssl.client.auth``
      (SASL_SSL listeners); looked up in ``configs`` when not given.
    * ``mechanism_factory`` (tests / pluggable mechanisms).
    """

    def __init__(self, mode="server", configs=None, listener_name=None,
                 security_protocol="SASL_PLAINTEXT", *, jaas=None, callbacks=None,
                 api_versions_supplier=None, server_config=None, scram_store=None,
                 token_manager=None, token_credential=None, oauth_validate=None,
                 principal_builder=None, kerberos_short_namer=None, ssl_factory=None,
                 listener_ssl_client_auth=None, handshake_request_enable=True,
                 mechanism_factory=None, client_mechanism_factory=None, **_ignored):
        super().__init__(mode, configs, listener_name)
        proto = str(security_protocol).upper()
        if proto not in ("SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"SaslChannelBuilder cannot build {security_protocol} channels")
        self.security_protocol = proto
        self._jaas = jaas
        self._server_config = server_config
        self.api_versions_supplier = api_versions_supplier
        self._mechanism_factory = mechanism_factory
        self._client_mechanism_factory = client_mechanism_factory
        self.handshake_request_enable = handshake_request_enable
        self.failed_authentication_delay_ms = _as_int(
            self.configs.get(FAILED_AUTHENTICATION_DELAY_MS),
            FAILED_AUTHENTICATION_DELAY_MS)
        if self.failed_authentication_delay_ms is None:
            self.failed_authentication_delay_ms = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS

        if self.mode == "server":
            self.enabled_mechanisms = (_as_list(self.configs.get(SASL_ENABLED_MECHANISMS))
                                       or list(DEFAULT_ENABLED_MECHANISMS))
            if mechanism_factory is None:
                self._check_mechanisms(self.enabled_mechanisms)
            self.jaas_options = {m: self._server_jaas(m) or {} for m in self.enabled_mechanisms}
            self.mechanism_configs = {m: self._configs_for_mechanism(m)
                                      for m in self.enabled_mechanisms}
            self.callbacks = self._server_callbacks(callbacks, scram_store, token_manager,
                                                    token_credential, oauth_validate)
            self.connections_max_reauth_ms = {
                m: self._reauth_ms(m) for m in self.enabled_mechanisms}
            self.max_receive_size = _as_int(self.configs.get(SASL_SERVER_MAX_RECEIVE_SIZE),
                                            SASL_SERVER_MAX_RECEIVE_SIZE) \
                or DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
            if kerberos_short_namer is None and "GSSAPI" in self.enabled_mechanisms:
                kerberos_short_namer = self._kerberos_short_namer()
            self.kerberos_short_namer = kerberos_short_namer
            if principal_builder is None:
                principal_builder = create_principal_builder(
                    self.configs, create_ssl_principal_mapper(self.configs),
                    kerberos_short_namer)
            self.principal_builder = principal_builder
        else:
            self.client_mechanism = str(self.configs.get(SASL_MECHANISM)
                                        or DEFAULT_CLIENT_MECHANISM)
            self.client_jaas_options = self._client_jaas() or {}

        self.ssl_factory = None
        if proto == "SASL_SSL":
            if ssl_factory is None:
                ssl_configs = dict(self.configs)
                if self.mode == "server":
                    ssl_configs[SSL_CLIENT_AUTH] = self._sasl_ssl_client_auth(
                        listener_ssl_client_auth)
                ssl_factory = SslFactory(self.mode, ssl_configs)
            self.ssl_factory = ssl_factory

    # -- configuration -------------------------------------------------------
    @staticmethod
    def _check_mechanisms(mechanisms):
        """Fail at start-up, not on the first client, for a mechanism kchannel
        has no server implementation of (or whose dependency is missing)."""
        for m in mechanisms:
            try:
                _, server_factory = registry._factories(m)
            except UnsupportedSaslMechanismError as exc:
                server_factory, reason = None, str(exc)
            else:
                reason = f"No server implementation for SASL mechanism {m}"
            if server_factory is None:
                raise ConfigError(
                    f"Invalid value {','.join(mechanisms)} for configuration "
                    f"{SASL_ENABLED_MECHANISMS}: {reason}",
                    key=SASL_ENABLED_MECHANISMS, value=",".join(mechanisms))

    def _mechanism_config(self, mechanism, key):
        """``listener.name.<l>.<mechanism>.<key>``, ``<mechanism>.<key>``, then
        ``<key>`` (Kafka's per-mechanism listener config)."""
        sc = self._server_config
        if sc is not None and self.listener_name is not None:
            try:
                value = sc.listener_mechanism_config(self.listener_name, mechanism, key)
            except Exception:
                value = None
            if value is not None:
                return value
        mech = mechanism.lower()
        candidates = []
        if self.listener_name:
            candidates.append(f"listener.name.{self.listener_name.lower()}.{mech}.{key}")
        candidates += [f"{mech}.{key}", key]
        for k in candidates:
            value = self.configs.get(k)
            if value is not None:
                return value
        return None

    def _configs_for_mechanism(self, mechanism):
        """The configs a mechanism sees: ``<mechanism>.<key>`` (and
        ``listener.name.<l>.<mechanism>.<key>``) override ``<key>``, as
        Kafka's per-mechanism listener configs (e.g.
        ``oauthbearer.sasl.server.callback.handler.class``)."""
        out = dict(self.configs)
        prefixes = [f"{mechanism.lower()}."]
        if self.listener_name:
            prefixes.append(f"listener.name.{self.listener_name.lower()}.{mechanism.lower()}.")
        for prefix in prefixes:
            for key, value in self.configs.items():
                if key.startswith(prefix) and value is not None:
                    out[key[len(prefix):]] = value
        return out

    def _server_jaas(self, mechanism):
        jaas = self._jaas
        value = None
        if callable(jaas) and not isinstance(jaas, dict):
            value = jaas(mechanism)
        elif isinstance(jaas, dict):
            value = jaas.get(mechanism)
            if value is None and jaas and not any(
                    isinstance(k, str) and k.isupper() for k in jaas):
                value = jaas      # a plain options dict for every mechanism
        elif jaas is not None:
            value = jaas
        if value is None and self._server_config is not None:
            try:
                value = self._server_config.jaas_for(self.listener_name, mechanism)
            except ConfigError:
                raise
            except Exception:
                value = None
        if value is None:
            value = self._mechanism_config(mechanism, SASL_JAAS_CONFIG)
        return _jaas_options(value, "KafkaServer")

    def _client_jaas(self):
        jaas = self._jaas
        value = None
        if callable(jaas) and not isinstance(jaas, dict):
            value = jaas(self.client_mechanism)
        elif isinstance(jaas, dict) and self.client_mechanism in jaas:
            value = jaas[self.client_mechanism]
        elif jaas is not None:
            value = jaas
        if value is None:
            value = self.configs.get(SASL_JAAS_CONFIG)
        return _jaas_options(value)

    def _server_callbacks(self, callbacks, scram_store, token_manager, token_credential,
                          oauth_validate):
        if callbacks is not None:
            return callbacks
        if token_credential is None and token_manager is not None:
            token_credential = token_manager.token_credential
        return {
            m: ServerCallbacks.default(
                jaas_options=self.jaas_options.get(m) if m == "PLAIN" else None,
                store=scram_store, token_credential=token_credential,
                oauth_validate=oauth_validate)
            for m in self.enabled_mechanisms
        }

    def _reauth_ms(self, mechanism):
        value = self._mechanism_config(mechanism, CONNECTIONS_MAX_REAUTH_MS)
        return _as_int(value, CONNECTIONS_MAX_REAUTH_MS)

    def _kerberos_short_namer(self):
        rules = _as_list(self.configs.get(PRINCIPAL_TO_LOCAL_RULES)) or ["DEFAULT"]
        try:
            realm = default_kerberos_realm()
        except Exception:
            realm = ""
        return KerberosShortNamer.from_unparsed_rules(realm or "", rules)

    def _sasl_ssl_client_auth(self, listener_value):
        """TLS client auth on a SASL_SSL listener: only the listener-prefixed
        ``ssl.client.auth`` counts; otherwise ``none``."""
        if listener_value is None and self.listener_name:
            listener_value = self.configs.get(
                f"listener.name.{self.listener_name.lower()}.{SSL_CLIENT_AUTH}")
        if listener_value is not None:
            return str(listener_value).lower()
        configured = self.configs.get(SSL_CLIENT_AUTH)
        if configured is not None and str(configured).lower() != "none":
            log.warning("Broker configuration '%s' is applied only to SSL listeners. "
                        "Listener-prefixed configuration can be used to enable SSL client "
                        "authentication for SASL_SSL listeners.", SSL_CLIENT_AUTH)
        return "none"

    # -- channels ------------------------------------------------------------
    def _transport(self, sock, peer_host, peer_port):
        if self.security_protocol == "SASL_SSL":
            return create_ssl_transport(self.ssl_factory, sock, peer_host, peer_port)
        return _plaintext_transport(sock)

    def build_channel(self, channel_id, sock, mode=None, peer_host=None, peer_port=None,
                      listener_name=None, max_receive_size=None, remote_address=None):
        mode = mode or self.mode
        listener = listener_name if listener_name is not None else self.listener_name
        transport = self._transport(sock, peer_host, peer_port)
        try:
            if mode == "server":
                factory = self._server_factory(channel_id, sock, listener, transport,
                                               remote_address)
            else:
                factory = self._client_factory(channel_id, peer_host)
            return self._channel(channel_id, transport, factory, mode, listener,
                                 max_receive_size, remote_address)
        except Exception:
            try:
                transport.close()
            except Exception:
                pass
            raise

    def _server_factory(self, channel_id, sock, listener, transport, remote_address):
        try:
            server_host = sock.getsockname()[0]
        except (OSError, AttributeError, IndexError):
            server_host = None
        protocol = self.security_protocol

        def peer_dn():
            if protocol != "SASL_SSL":
                return None
            try:
                return transport.peer_subject_dn()
            except Exception:
                return None

        def factory():
            # Read-only views of the builder's dicts: the authenticator keeps
            # them instead of a copy per connection (kept_mapping).
            return SaslServerAuthenticator(
                enabled_mechanisms=self.enabled_mechanisms,
                jaas_options=_view(self.jaas_options),
                callbacks=self.callbacks,
                configs=_view(self.mechanism_configs),
                principal_builder=self.principal_builder,
                connections_max_reauth_ms=_view(self.connections_max_reauth_ms),
                max_receive_size=self.max_receive_size,
                api_versions_supplier=self.api_versions_supplier,
                connection_id=channel_id,
                listener_name=listener,
                security_protocol=protocol,
                client_address=remote_address,
                server_host=server_host,
                mechanism_factory=self._mechanism_factory,
                ssl_peer_subject_dn=peer_dn() if transport.ready() else None,
            )

        return factory

    def _client_factory(self, channel_id, peer_host):
        def factory():
            return SaslClientAuthenticator(
                mechanism=self.client_mechanism,
                jaas_options=_view(self.client_jaas_options),
                configs=_view(self.configs),
                server_host=peer_host,
                node=channel_id,
                handshake_request_enable=self.handshake_request_enable,
                mechanism_factory=self._client_mechanism_factory,
            )

        return factory
