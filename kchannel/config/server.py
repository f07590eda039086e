"""Broker-side configuration: ``ServerConfig``.

Typed, validated view of a ``server.properties`` with Kafka's per-listener
rules (``KafkaConfig``, ``ChannelBuilders.channelBuilderConfigs``,
``AbstractConfig.valuesWithPrefixOverride``, ``JaasContext``):

* ``listener.name.<listener lower>.<key>`` overrides ``<key>`` for that
  listener; otherwise the unprefixed value, otherwise the default.
* ``listener.name.<listener lower>.<mechanism lower>.<key>`` is a mechanism
  scoped value.  For ``sasl.jaas.config``, ``sasl.server.callback.handler.class``,
  ``sasl.login.callback.handler.class`` and ``sasl.login.class`` ONLY that
  form is used on a broker (the unprefixed or listener-only forms are
  ignored; for ``sasl.jaas.config`` with Kafka's warning).
  ``connections.max.reauth.ms`` falls back mechanism -> listener -> global.
* JAAS precedence per (listener, mechanism), as ``JaasContext.loadServerContext``:
  1. ``listener.name.<l>.<mech>.sasl.jaas.config``;
  2. JAAS file section ``<listener lower>.KafkaServer``;
  3. JAAS file section ``KafkaServer``;
  otherwise "Could not find a 'KafkaServer' or '<l>.KafkaServer' entry ...".
  The JAAS file is ``jaas_file_text`` (CLI ``--jaas-config``) or the file named
  by the ``java.security.auth.login.config`` key.
* ``ssl.client.auth`` applies to a SASL_SSL listener only when listener
  prefixed; otherwise such a listener uses ``none`` (Kafka logs a warning when
  the broker-wide value is something else).  SSL listeners use the normal
  prefix fallback.

Construction raises the first ``ConfigError``; ``exc.errors`` lists every
problem found (see :meth:`ServerConfig.validate`).
"""
import logging

from kchannel.config import jaas as jaas_mod
from kchannel.config._common import (SUPPORTED_MECHANISMS, ConfigFactories,
                                     kerberos_service_name, mask, mechanism_errors,
                                     normalise_ssl_values, read_text_file, store_errors)
from kchannel.config.definitions import (CLIENT_CONFIG_DEF, SERVER_CONFIG_DEF, Type,
                                         java_list_str, warn_unsupported)
from kchannel.config.listeners import (Endpoint, config_prefix, normalise_listener_name,
                                       parse_listeners, parse_security_protocol_map,
                                       validate_advertised_listeners, validate_listeners)
from kchannel.config.types import Password, reveal
from kchannel.config.client import ClientConfig
from kchannel.errors import ConfigError

# Gateway: prefix of the upstream connections' client configuration.
UPSTREAM_PREFIX = "kchannel.upstream."
LISTENER_PREFIX = "listener.name."
KCHANNEL_PREFIX = "kchannel."
ALLOWED_PRINCIPALS = "kchannel.gateway.allowed.principals"

__all__ = ["ServerConfig", "DescribeRow", "MECHANISM_ONLY_KEYS", "MECHANISM_SCOPED_KEYS"]

log = logging.getLogger("kchannel.config.server")

# Broker keys read ONLY in their listener+mechanism prefixed form.
MECHANISM_ONLY_KEYS = ("sasl.jaas.config", "sasl.server.callback.handler.class",
                       "sasl.login.callback.handler.class", "sasl.login.class")
# Keys that may be mechanism scoped, with fallback to listener/global.
MECHANISM_SCOPED_KEYS = MECHANISM_ONLY_KEYS + ("connections.max.reauth.ms",)

_PASSWORD_KEYS = tuple(k.name for k in SERVER_CONFIG_DEF if k.type is Type.PASSWORD)

SRC_MECHANISM = "listener+mechanism prefix"
SRC_LISTENER = "listener prefix"
SRC_GLOBAL = "global"
SRC_DEFAULT = "default"
SRC_OVERRIDE = "SASL_SSL rule"


class DescribeRow:
    """One effective setting of one listener, for ``kchannel config describe``."""
    __slots__ = ("listener", "mechanism", "key", "value", "source", "source_key")

    def __init__(self, listener, mechanism, key, value, source, source_key):
        self.listener = listener
        self.mechanism = mechanism
        self.key = key
        self.value = value          # display string, secrets masked
        self.source = source        # SRC_* constant
        self.source_key = source_key  # the key as written (None for defaults)

    def as_dict(self):
        return {s: getattr(self, s) for s in self.__slots__}

    def __repr__(self):
        return f"DescribeRow({self.as_dict()!r})"


class ServerConfig(ConfigFactories):
    """Validated broker configuration.  See the module docstring."""

    def __init__(self, props, jaas_file_text=None, *, jaas_file_name=None, _errors=None):
        errors = [] if _errors is None else _errors
        self._warned = set()
        # Kept (never shown) so that with_overrides() sees the same JAAS file.
        self._jaas_file = (jaas_file_text, jaas_file_name)
        self._build(dict(props or {}), jaas_file_text, jaas_file_name, errors)
        if errors and _errors is None:
            first = errors[0]
            first.errors = list(errors)
            raise first
        self.errors = list(errors)

    def with_overrides(self, overrides):
        """A new ``ServerConfig`` of these properties with ``overrides`` (a
        dict of properties) applied, validated as a whole; the JAAS file is
        the same."""
        text, name = self._jaas_file
        return ServerConfig({**self.originals, **overrides}, text, jaas_file_name=name)

    # ---------------------------------------------------------------- build
    def _build(self, props, jaas_file_text, jaas_file_name, errors):
        self.originals = {str(k): v for k, v in props.items()}
        orig = self.originals
        self._values = SERVER_CONFIG_DEF.parse(orig, errors)
        v = self._values
        used = {k for k in orig if k in SERVER_CONFIG_DEF}

        def attempt(fn, *a):
            try:
                return fn(*a)
            except ConfigError as exc:
                errors.append(exc)
                return None

        # node.id / broker.id are synonyms (KafkaConfig.populateSynonyms).
        has_node, has_broker = "node.id" in orig, "broker.id" in orig
        if has_node and not has_broker:
            v["broker.id"] = v["node.id"]
        elif has_broker and not has_node:
            v["node.id"] = v["broker.id"]
        elif v["node.id"] != v["broker.id"]:
            errors.append(ConfigError("You must set `node.id` to the same value as `broker.id`.", key="node.id"))
        if v["process.roles"] and (v["node.id"] is None or v["node.id"] < 0):
            errors.append(ConfigError("Missing configuration `node.id` which is required when `process.roles` "
                                      "is defined (i.e. when running in KRaft mode).", key="node.id"))

        # listener.security.protocol.map (+ KRaft's implicit controller mapping)
        self._controller_names = [n for n in (v["controller.listener.names"] or [])]
        pmap = attempt(parse_security_protocol_map, v["listener.security.protocol.map"]) or {}
        if v["process.roles"] and "listener.security.protocol.map" not in orig:
            def ssl_or_sasl(n):
                return n in ("SSL", "SASL_SSL", "SASL_PLAINTEXT")
            names_in_listeners = []
            for item in [s for s in (v["listeners"] or "").split(",") if s.strip()]:
                idx = item.find(":")
                if idx >= 0:
                    names_in_listeners.append(item[:idx].strip().upper())
            if not (any(ssl_or_sasl(n) for n in self._controller_names)
                    or any(ssl_or_sasl(n) for n in names_in_listeners)):
                for n in self._controller_names:
                    if n != "PLAINTEXT":
                        pmap.setdefault(n, "PLAINTEXT")
        self._protocol_map = pmap

        # listeners / advertised.listeners
        self._listeners = []
        lt = v["listeners"]
        eps = attempt(parse_listeners, lt, pmap, "listeners")
        if eps is not None:
            attempt(validate_listeners, eps, lt, True, "listeners")
        self._listeners = eps or []
        for e in self._listeners:
            if not 0 <= e.port <= 65535:
                errors.append(ConfigError(f"Invalid port {e.port} in listeners '{lt}': a port is 0 (ephemeral) "
                                          "to 65535", key="listeners", value=lt))
        at = v["advertised.listeners"]
        if at is not None:
            adv = attempt(parse_listeners, at, pmap, "advertised.listeners")
            if adv is not None:
                attempt(validate_listeners, adv, at, False, "advertised.listeners")
            self._advertised = adv or []
        else:
            self._advertised = list(self._listeners)
        if eps is not None and (at is None or self._advertised):
            attempt(validate_advertised_listeners, self._advertised, self._listeners, self._controller_names)

        # Per-listener prefixed keys.
        self._listener_over = {}   # listener -> {key: (typed, written key)}
        self._mech_over = {}       # listener -> {(mech, key): (typed, written key)}
        for ep in self._listeners:
            prefix = config_prefix(ep.listener_name)
            lo, mo = {}, {}
            for k, raw in orig.items():
                if not k.startswith(prefix) or len(k) <= len(prefix):
                    continue
                rest = k[len(prefix):]
                if rest in SERVER_CONFIG_DEF:
                    val = attempt(SERVER_CONFIG_DEF.parse_value, rest, raw, k)
                    lo[rest] = (val, k)
                    used.add(k)
                    continue
                mech, _, sub = rest.partition(".")
                if sub in SERVER_CONFIG_DEF:
                    val = attempt(SERVER_CONFIG_DEF.parse_value, sub, raw, k)
                    mo[(mech.upper(), sub)] = (val, k)
                    used.add(k)
            self._listener_over[ep.listener_name] = lo
            self._mech_over[ep.listener_name] = mo

        if eps is not None:
            self._check_listener_prefixes(orig, errors)
        self._check_kchannel_keys(orig, v, errors)

        # Inter-broker listener (broker role only).
        self._ib_name = self._ib_protocol = None
        if not v["process.roles"] or "broker" in v["process.roles"]:
            self._check_inter_broker(orig, v, pmap, errors)

        # connection.failed.authentication.delay.ms < connections.max.idle.ms
        idle, delay = v["connections.max.idle.ms"], v["connection.failed.authentication.delay.ms"]
        if idle is not None and delay is not None and idle >= 0 and delay >= idle:
            errors.append(ConfigError(
                f"requirement failed: connection.failed.authentication.delay.ms={delay} should always be less "
                f"than connections.max.idle.ms={idle} to prevent failed authentication responses from timing out",
                key="connection.failed.authentication.delay.ms"))
        # KafkaConfig.validateValues: a per-IP maximum of 0 only with overrides.
        if v["max.connections.per.ip"] == 0 and not v["max.connections.per.ip.overrides"]:
            errors.append(ConfigError(
                "requirement failed: max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set.", key="max.connections.per.ip"))
        if v.get("principal.builder.class") is None:
            errors.append(ConfigError("requirement failed: principal.builder.class must be non-null",
                                      key="principal.builder.class"))

        # JAAS file
        self._jaas_sections = None
        self._jaas_file_desc = None
        jpath = v.get("java.security.auth.login.config")
        if jaas_file_text is not None:
            self._jaas_file_desc = jaas_file_name or "given"
            self._jaas_sections = attempt(jaas_mod.parse_jaas_file, jaas_file_text)
        elif jpath:
            self._jaas_file_desc = jpath
            text = attempt(read_text_file, jpath, "java.security.auth.login.config")
            if text is not None:
                self._jaas_sections = attempt(jaas_mod.parse_jaas_file, text)
        if self._jaas_sections is None and self._jaas_file_desc is not None:
            self._jaas_sections = {}
        self._disallowed = v.get("org.apache.kafka.disallowed.login.modules")

        # Per-listener security checks and JAAS contexts.
        self._jaas_cache = {}
        for ep in self._listeners:
            self._check_listener(ep, errors)

        # Gateway: kchannel.upstream.<key> is client configuration <key> of the
        # upstream connections, validated as such.
        self.upstream = None
        up = {k[len(UPSTREAM_PREFIX):]: raw for k, raw in orig.items()
              if k.startswith(UPSTREAM_PREFIX) and len(k) > len(UPSTREAM_PREFIX)}
        if up:
            used.update(UPSTREAM_PREFIX + k for k in up)
            up_errors = []
            try:
                self.upstream = ClientConfig(up, _errors=up_errors)
            except ConfigError as exc:
                up_errors.append(exc)
            for exc in up_errors:
                key = getattr(exc, "key", None)
                errors.append(ConfigError(f"{UPSTREAM_PREFIX}* (upstream client configuration): {exc}",
                                          key=UPSTREAM_PREFIX + key if key else UPSTREAM_PREFIX))
            if self.upstream is not None and not v.get("kchannel.upstream.bootstrap.servers"):
                errors.append(ConfigError("kchannel.upstream.* is set but kchannel.upstream.bootstrap.servers is "
                                          "empty: set the upstream cluster's bootstrap servers",
                                          key="kchannel.upstream.bootstrap.servers"))

        # Kafka keys kchannel accepts but ignores: say so, never silently.
        self.unsupported = warn_unsupported(orig, log)

        # Everything else supplied is unused: say so once.
        unused = sorted(k for k in orig if k not in used)
        self.unused = unused
        if unused:
            log.warning("These configurations '%s' were supplied but are not used yet.", java_list_str(unused))

    def _check_listener_prefixes(self, orig, errors):
        """A ``listener.name.<x>.`` key must name a listener, in lower case
        (Kafka upper-cases listener names and looks their configs up under
        the lower-case prefix only): Kafka would merely not use such a key;
        for an allow-list or a login module that fails open, so it is an
        error here."""
        known = {e.listener_name for e in self._listeners} | set(self._controller_names)
        for k in sorted(orig):
            if not k.startswith(LISTENER_PREFIX):
                continue
            name = k[len(LISTENER_PREFIX):].partition(".")[0]
            if name.upper() not in known:
                errors.append(ConfigError(
                    f"{k}: the prefix {LISTENER_PREFIX}{name}. names no listener (listeners: "
                    f"{', '.join(sorted(known)) or 'none'}); write the listener's name from "
                    "'listeners' in lower case", key=k, value=name))
            elif name != name.lower():
                errors.append(ConfigError(
                    f"{k}: listener prefixes are lower case, {LISTENER_PREFIX}{name.lower()}. "
                    f"(Kafka would not use this key for listener {name.upper()})", key=k,
                    value=name))

    def _check_kchannel_keys(self, orig, v, errors):
        """kchannel's own keys are known to it: one it does not know is a
        misspelling that would leave a setting at its default (an
        allow-list, a bound); and an allow-list must be one that applies."""
        for k in sorted(orig):
            rest = k
            if k.startswith(LISTENER_PREFIX):
                rest = k[len(LISTENER_PREFIX):].partition(".")[2]
                if not rest.startswith(KCHANNEL_PREFIX):
                    # listener.name.<l>.<mechanism>.kchannel.<key>
                    rest = rest.partition(".")[2]
            if not rest.startswith(KCHANNEL_PREFIX) or rest.startswith(UPSTREAM_PREFIX):
                continue
            if rest not in SERVER_CONFIG_DEF and rest not in CLIENT_CONFIG_DEF:
                errors.append(ConfigError(
                    f"Unknown configuration {k}: {rest} is not a kchannel setting (misspelled? "
                    "see the configuration reference)", key=k))
        lists = [k for k in orig if k == ALLOWED_PRINCIPALS
                 or (k.startswith(LISTENER_PREFIX) and k.endswith("." + ALLOWED_PRINCIPALS))]
        gateway = bool(v.get("kchannel.upstream.bootstrap.servers"))
        for k in sorted(lists):
            text = orig[k]
            items = ([t.strip() for t in text.split(",")] if isinstance(text, str)
                     else [str(t).strip() for t in text or ()])
            if not gateway and any(items):
                errors.append(ConfigError(
                    f"{k} is set but there is no gateway (kchannel.upstream.bootstrap.servers is "
                    "empty): the allow-list would restrict nothing", key=k))
            elif v.get("kchannel.gateway.authorizer.class") is not None and any(items):
                errors.append(ConfigError(
                    f"{k} is set together with kchannel.gateway.authorizer.class, which replaces "
                    "the allow-list: set one of them", key=k))
            for item in items:
                ptype, sep, pname = item.partition(":")
                if item and (not sep or not ptype.strip() or not pname.strip()):
                    errors.append(ConfigError(
                        f"Invalid value {text} for configuration {k}: {item!r} is not a "
                        "principal (Type:name, e.g. User:alice)", key=k, value=text))

    def _check_inter_broker(self, orig, v, pmap, errors):
        name = v["inter.broker.listener.name"]
        if name is not None and "security.inter.broker.protocol" in orig:
            errors.append(ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                      "should be set.", key="inter.broker.listener.name"))
            return
        if name is not None:
            try:
                lname = normalise_listener_name(name)
            except ConfigError as exc:
                errors.append(exc)
                return
            proto = pmap.get(lname)
            if proto is None:
                errors.append(ConfigError(f"Listener with name {lname} defined in inter.broker.listener.name not "
                                          "found in listener.security.protocol.map.",
                                          key="inter.broker.listener.name"))
                return
        else:
            proto = v["security.inter.broker.protocol"]
            if proto is None:
                return
            lname = proto
        self._ib_name, self._ib_protocol = lname, proto
        if not self._listeners:
            return
        ctrl = set(self._controller_names)
        adv_names = [e.listener_name for e in self._advertised if e.listener_name not in ctrl]
        if not adv_names:
            errors.append(ConfigError("requirement failed: There must be at least one broker advertised listener."
                                      + (" Perhaps all listeners appear in controller.listener.names?"
                                         if "broker" in (v["process.roles"] or []) else ""),
                                      key="advertised.listeners"))
            return
        if lname not in adv_names:
            errors.append(ConfigError(
                "requirement failed: inter.broker.listener.name must be a listener name defined in "
                "advertised.listeners. The valid options based on currently configured listeners are "
                + ",".join(adv_names), key="inter.broker.listener.name"))
            return
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            mech = v["sasl.mechanism.inter.broker.protocol"]
            enabled = self._effective(lname, "sasl.enabled.mechanisms")[0] or []
            if mech not in enabled:
                errors.append(ConfigError(
                    "requirement failed: sasl.mechanism.inter.broker.protocol must be included in "
                    "sasl.enabled.mechanisms when SASL is used for inter-broker communication",
                    key="sasl.mechanism.inter.broker.protocol"))

    def _check_listener(self, ep, errors):
        name, proto = ep.listener_name, ep.security_protocol
        if proto in ("SSL", "SASL_SSL"):
            vals = {k: self._effective(name, k)[0] for k in SERVER_CONFIG_DEF.names() if k.startswith("ssl.")}
            # Messages name the key as the operator would fix it.
            over = self._listener_over.get(name, {})
            for e in store_errors(vals, "", server=True):
                written = over[e.key][1] if e.key in over else e.key
                errors.append(ConfigError(f"{e} (listener {name}, {written})", key=written, value=e.value))
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechs, src, skey = self._effective(name, "sasl.enabled.mechanisms")
            errors.extend(mechanism_errors(mechs or [], skey or "sasl.enabled.mechanisms"))
            if self.get("sasl.jaas.config") is not None and not any(
                    (m, "sasl.jaas.config") in self._mech_over.get(name, {}) for m in mechs or []):
                self._warn_once("unprefixed-jaas",
                                "Server config sasl.jaas.config should be prefixed with SASL mechanism name, "
                                "ignoring config")
            for m in mechs or []:
                if m not in SUPPORTED_MECHANISMS:
                    continue
                try:
                    jc = self._load_jaas(name, m)
                    if m == "GSSAPI":
                        kerberos_service_name(jc, self._effective(name, "sasl.kerberos.service.name")[0])
                except ConfigError as exc:
                    errors.append(exc)
            if proto == "SASL_SSL" and "ssl.client.auth" not in self._listener_over.get(name, {}):
                glob = self._values.get("ssl.client.auth")
                if glob is not None and glob.lower() != "none":
                    self._warn_once("sasl-ssl-client-auth",
                                    "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. "
                                    "Listener-prefixed configuration can be used to enable SSL client "
                                    "authentication for SASL_SSL listeners. In future releases, broker-wide option "
                                    "without listener prefix may be applied to SASL_SSL listeners as well. All "
                                    "configuration options intended for specific listeners should be "
                                    "listener-prefixed.")

    def _warn_once(self, tag, msg):
        if tag not in self._warned:
            self._warned.add(tag)
            log.warning(msg)

    # ---------------------------------------------------------- resolution
    def _effective(self, listener, key):
        """(typed value, source, written key) of ``key`` for ``listener``."""
        lo = self._listener_over.get(listener, {})
        if key in lo:
            val, written = lo[key]
            return val, SRC_LISTENER, written
        if key in self.originals:
            return self._values.get(key), SRC_GLOBAL, key
        return self._values.get(key), SRC_DEFAULT, None

    def _listener_name(self, listener):
        name = (listener.listener_name if isinstance(listener, Endpoint)
                else normalise_listener_name(listener))
        if name not in self._listener_over:
            raise KeyError(f"No listener named {name}; listeners are "
                           f"{', '.join(e.listener_name for e in self._listeners)}")
        return name

    def _load_jaas(self, listener, mechanism):
        ck = (listener, mechanism)
        if ck not in self._jaas_cache:
            dyn = self._mech_over.get(listener, {}).get((mechanism.upper(), "sasl.jaas.config"))
            self._jaas_cache[ck] = jaas_mod.load_server_context(
                listener, mechanism, None if dyn is None else dyn[0], self._jaas_sections, self._jaas_file_desc,
                disallowed=self._disallowed)
        return self._jaas_cache[ck]

    # ----------------------------------------------------------- public API
    def get(self, key):
        """Broker-wide typed value of ``key`` (no listener prefix)."""
        if key not in SERVER_CONFIG_DEF:
            raise KeyError(key)
        return self._values.get(key)

    def values(self):
        """Broker-wide typed values of every defined key."""
        return dict(self._values)

    @property
    def node_id(self):
        """``node.id`` (= ``broker.id``); 0 when neither is set (kchannel
        has no ZooKeeper broker id generation)."""
        n = self._values.get("node.id")
        return 0 if n is None or n < 0 else n

    @property
    def listeners(self):
        return list(self._listeners)

    @property
    def advertised_listeners(self):
        return list(self._advertised)

    def listener(self, name):
        name = normalise_listener_name(name)
        for e in self._listeners:
            if e.listener_name == name:
                return e
        raise KeyError(name)

    def advertised_listener(self, name):
        name = normalise_listener_name(name)
        for e in self._advertised:
            if e.listener_name == name:
                return e
        return None

    @property
    def listener_security_protocol_map(self):
        return dict(self._protocol_map)

    @property
    def controller_listener_names(self):
        return list(self._controller_names)

    @property
    def inter_broker_listener_name(self):
        return self._ib_name

    @property
    def inter_broker_security_protocol(self):
        return self._ib_protocol

    @property
    def sasl_mechanism_inter_broker_protocol(self):
        return self._values.get("sasl.mechanism.inter.broker.protocol")

    @property
    def socket_request_max_bytes(self):
        return self._values["socket.request.max.bytes"]

    @property
    def connections_max_idle_ms(self):
        return self._values["connections.max.idle.ms"]

    @property
    def failed_authentication_delay_ms(self):
        return self._values["connection.failed.authentication.delay.ms"]

    @property
    def log_dirs(self):
        raw = self._values.get("log.dirs") or self._values.get("log.dir") or ""
        return [d for d in (s.strip() for s in raw.split(",")) if d]

    @property
    def data_dir(self):
        """First log directory: where kchannel keeps its SQLite stores."""
        dirs = self.log_dirs
        return dirs[0] if dirs else None

    @property
    def cluster_id(self):
        return self._values.get("kchannel.cluster.id")

    @property
    def delegation_token_secret_key(self):
        """``delegation.token.secret.key``, else the deprecated
        ``delegation.token.master.key``; a Password or None."""
        key = self._values.get("delegation.token.secret.key")
        if key is None:
            key = self._values.get("delegation.token.master.key")
        return key

    @property
    def token_auth_enabled(self):
        key = self.delegation_token_secret_key
        return key is not None and bool(reveal(key))

    def enabled_mechanisms(self, listener):
        """``sasl.enabled.mechanisms`` effective for ``listener``."""
        return list(self._effective(self._listener_name(listener), "sasl.enabled.mechanisms")[0] or [])

    def listener_configs(self, listener):
        """Effective typed configs the channel builders of ``listener`` get.

        Every defined key with the listener prefix applied, plus mechanism
        scoped entries as ``<mechanism lower>.<key>`` (Kafka's layout), plus
        any other supplied key as written (for pluggable classes; secrets as
        ``Password``), filtered like ``ChannelBuilders.channelBuilderConfigs``.  Key
        store types are normalised for the TLS layer (JKS-declared PKCS12
        files become ``PKCS12``) and, for SASL_SSL, ``ssl.client.auth`` is
        the listener-prefixed value or ``none``.
        """
        name = self._listener_name(listener)
        out = {k: self._effective(name, k)[0] for k in SERVER_CONFIG_DEF.names()}
        for (mech, key), (val, written) in self._mech_over.get(name, {}).items():
            out[written[len(config_prefix(name)):]] = val
        # Other supplied keys pass through as written, for pluggable classes
        # (ChannelBuilders.channelBuilderConfigs' filters).
        prefix = config_prefix(name)
        for k, raw in self.originals.items():
            if k in out:
                continue
            if k.startswith(prefix) and k[len(prefix):] in out:
                continue
            if k[k.find(".") + 1:] in out:
                continue
            # Keep secrets out of any repr of this dict.
            if isinstance(raw, str) and any(k.endswith("." + p) for p in _PASSWORD_KEYS):
                raw = Password(raw.strip())
            out[k] = raw
        ep = self.listener(name)
        if ep.security_protocol == "SASL_SSL" and "ssl.client.auth" not in self._listener_over[name]:
            out["ssl.client.auth"] = "none"
        return normalise_ssl_values(out)

    def listener_mechanism_config(self, listener, mechanism, key):
        """Mechanism scoped value of ``key`` (Kafka's rules, module docstring)."""
        name = self._listener_name(listener)
        hit = self._mech_over.get(name, {}).get((mechanism.upper(), key))
        if hit is not None:
            return hit[0]
        if key in MECHANISM_ONLY_KEYS:
            return None
        return self._effective(name, key)[0]

    def jaas_for(self, listener, mechanism):
        """JaasConfig for (listener, mechanism) by Kafka's precedence, or None
        when there is none.  Raises ``ConfigError`` for a bad/disallowed one."""
        name = self._listener_name(listener)
        try:
            return self._load_jaas(name, mechanism)
        except ConfigError as exc:
            if str(exc).startswith("Could not find a "):
                return None
            raise

    def inter_broker_client_configs(self):
        """Client configs this broker uses to connect to other brokers, as
        Kafka's ``ChannelBuilders.clientChannelBuilder(interBrokerSecurityProtocol,
        JaasContext.Type.SERVER, config, interBrokerListenerName,
        saslMechanismInterBrokerProtocol, ...)``; a dict a ``ClientConfig`` /
        ``KafkaClient`` accepts as is:

        * ``security.protocol``: the inter-broker listener's protocol;
        * every ``ssl.*`` / ``sasl.*`` client key with the inter-broker
          listener's prefix applied (``listener.name.<l>.<key>``, else the
          broker-wide value), mechanism-scoped keys with the
          ``listener.name.<l>.<mechanism>.`` prefix;
        * SASL: ``sasl.mechanism`` = ``sasl.mechanism.inter.broker.protocol``
          and ``sasl.jaas.config`` = the listener's *server* JAAS context for
          that mechanism (``listener.name.<l>.<mech>.sasl.jaas.config``, else
          the JAAS file's ``<l>.KafkaServer`` / ``KafkaServer`` section), whose
          client-side options (``username``/``password`` of
          PlainLoginModule / ScramLoginModule) the client login uses.  From a
          JAAS file section with several login modules, the one serving the
          mechanism is taken (else the first).

        Raises ``ConfigError`` when there is no inter-broker listener or no
        JAAS context for the inter-broker mechanism."""
        name, proto = self._ib_name, self._ib_protocol
        if name is None or name not in self._listener_over:
            raise ConfigError("No inter-broker listener: inter.broker.listener.name / "
                              "security.inter.broker.protocol name no listener of this broker",
                              key="inter.broker.listener.name")
        listener_values = self.listener_configs(name)
        out = {"security.protocol": proto}
        for key in CLIENT_CONFIG_DEF.names():
            if not key.startswith(("ssl.", "sasl.")) or key not in SERVER_CONFIG_DEF:
                continue
            if key in ("sasl.jaas.config", "sasl.mechanism"):
                continue
            value = listener_values.get(key)
            # An empty list (ssl.cipher.suites' broker default) means "the
            # defaults", which for a client is the key left unset.
            if value is not None and value != []:
                out[key] = value
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            mech = self.sasl_mechanism_inter_broker_protocol
            out["sasl.mechanism"] = mech
            for key in MECHANISM_SCOPED_KEYS:
                if key == "sasl.jaas.config" or key not in CLIENT_CONFIG_DEF:
                    continue
                value = self.listener_mechanism_config(name, mech, key)
                if value is not None:
                    out[key] = value
                else:
                    out.pop(key, None)
            context = self._load_jaas(name, mech)
            entries = list(context.entries)
            entry = next((e for e in entries if mech in e.mechanisms), entries[0] if entries else None)
            if entry is None:
                raise ConfigError(f"No login module for {mech} in {context.context_name}",
                                  key="sasl.jaas.config")
            out["sasl.jaas.config"] = Password(_format_jaas_entry(entry))
        return out

    def kerberos_service_name(self, listener):
        """GSSAPI service name of ``listener`` (JAAS ``serviceName`` option or
        ``sasl.kerberos.service.name``), as Kafka's ``KerberosLogin``."""
        name = self._listener_name(listener)
        return kerberos_service_name(self._load_jaas(name, "GSSAPI"),
                                     self._effective(name, "sasl.kerberos.service.name")[0])

    def jaas_sections(self):
        """Parsed JAAS file sections (``{}`` when no JAAS file)."""
        return dict(self._jaas_sections or {})

    # -------------------------------------------------------------- describe
    def describe(self):
        """Per-listener rows with the source of every value (secrets masked)."""
        rows = []
        for ep in self._listeners:
            name = ep.listener_name
            adv = self.advertised_listener(name)
            rows.append(DescribeRow(name, None, "security.protocol", ep.security_protocol,
                                    SRC_GLOBAL if "listener.security.protocol.map" in self.originals
                                    else SRC_DEFAULT, "listener.security.protocol.map"))
            rows.append(DescribeRow(name, None, "bind.address", ep.connection_string, SRC_GLOBAL, "listeners"))
            rows.append(DescribeRow(name, None, "advertised.address",
                                    adv.connection_string if adv else "(not advertised)",
                                    SRC_GLOBAL if "advertised.listeners" in self.originals else SRC_DEFAULT,
                                    "advertised.listeners" if "advertised.listeners" in self.originals
                                    else "listeners"))
            keys = ["connections.max.idle.ms", "connections.max.reauth.ms", "socket.request.max.bytes",
                    "principal.builder.class"]
            if ep.security_protocol in ("SSL", "SASL_SSL"):
                keys += [k for k in SERVER_CONFIG_DEF.names() if k.startswith("ssl.")]
            if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                keys += ["sasl.enabled.mechanisms", "sasl.server.max.receive.size",
                         "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name"]
            for k in keys:
                val, src, written = self._effective(name, k)
                if (k == "ssl.client.auth" and ep.security_protocol == "SASL_SSL"
                        and src != SRC_LISTENER):
                    rows.append(DescribeRow(name, None, k, "none", SRC_OVERRIDE, written))
                    continue
                rows.append(DescribeRow(name, None, k, mask(val), src, written))
            if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                for m in self.enabled_mechanisms(name):
                    for k in MECHANISM_SCOPED_KEYS:
                        hit = self._mech_over.get(name, {}).get((m.upper(), k))
                        if k == "sasl.jaas.config":
                            continue
                        if hit is not None:
                            rows.append(DescribeRow(name, m, k, mask(hit[0]), SRC_MECHANISM, hit[1]))
                        elif k == "connections.max.reauth.ms":
                            val, src, written = self._effective(name, k)
                            rows.append(DescribeRow(name, m, k, mask(val), src, written))
                    try:
                        jc = self._load_jaas(name, m)
                    except ConfigError as exc:
                        rows.append(DescribeRow(name, m, "jaas", f"ERROR: {exc}", "", None))
                        continue
                    src = SRC_MECHANISM if jc.dynamic else f"JAAS file section {jc.context_name}"
                    written = jc.source if jc.dynamic else self._jaas_file_desc
                    for e in jc.entries:
                        opts = " ".join(f"{k}={v}" for k, v in e.masked_options().items())
                        rows.append(DescribeRow(name, m, "jaas", f"{e.login_module} {e.control_flag} {opts}".strip(),
                                                src, written))
        return rows

    def __repr__(self):
        return (f"ServerConfig(node_id={self.node_id}, listeners="
                f"{[e.connection_string for e in self._listeners]})")



def _format_jaas_entry(entry):
    """One JAAS entry as ``sasl.jaas.config`` text (options quoted, ``\\`` and
    ``"`` escaped as the JAAS tokenizer reads them back)."""
    def quote(value):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    opts = "".join(f" {k}={quote(v)}" for k, v in entry.options.items())
    return f"{entry.login_module} {entry.control_flag}{opts};"
