"""Client configuration aliases: librdkafka and kafka-python/aiokafka names.

:func:`translate` rewrites a client config written for confluent-kafka
(librdkafka) or kafka-python/aiokafka into Kafka's Java keys, logging one INFO
line per translation.  User name/password pairs become a generated
``sasl.jaas.config`` with the login module of the SASL mechanism (PLAIN or
SCRAM-SHA-256/512); Kerberos keytab/principal become a ``Krb5LoginModule``
entry; librdkafka's unsecured ``sasl.oauthbearer.config`` becomes
``OAuthBearerLoginModule`` ``unsecuredLogin*`` options.  Separate PEM
certificate/key files (librdkafka, kafka-python) are read and handed over as
inline PEM (``ssl.keystore.type=PEM`` with ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``), which is how Kafka expresses them.

An alias given together with its Java key with a different value is a
``ConfigError``; an explicit ``sasl.jaas.config`` wins over generated ones.
"""
import logging

from kchannel.config.definitions import CLIENT_CONFIG_DEF, invalid
from kchannel.config.jaas import (KRB5_LOGIN_MODULE, OAUTHBEARER_LOGIN_MODULE, PLAIN_LOGIN_MODULE,
                                  SCRAM_LOGIN_MODULE)
from kchannel.config.types import Password, reveal
from kchannel.errors import ConfigError

__all__ = ["translate", "SIMPLE_ALIASES", "jaas_quote", "credentials_jaas", "is_alias",
           "split_configs"]

log = logging.getLogger("kchannel.config.aliases")

# alias -> (Java key, value converter or None)
def _bool(v):
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(v)


def _check_hostname(v):
    return "https" if _bool(v) else ""


def _rd_endpoint_algo(v):
    s = str(v).strip()
    return "" if s.lower() == "none" else s


def _servers(v):
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return v


SIMPLE_ALIASES = {
    # librdkafka
    "sasl.mechanisms": ("sasl.mechanism", None),
    "metadata.broker.list": ("bootstrap.servers", _servers),
    "ssl.endpoint.identification.algorithm": ("ssl.endpoint.identification.algorithm", _rd_endpoint_algo),
    # kafka-python / aiokafka
    "bootstrap_servers": ("bootstrap.servers", _servers),
    "client_id": ("client.id", None),
    "security_protocol": ("security.protocol", None),
    "sasl_mechanism": ("sasl.mechanism", None),
    "sasl_kerberos_service_name": ("sasl.kerberos.service.name", None),
    "sasl_kerberos_domain_name": ("kchannel.sasl.kerberos.domain.name", None),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", _check_hostname),
    "ssl_password": ("ssl.key.password", None),
    "request_timeout_ms": ("request.timeout.ms", None),
    "reconnect_backoff_ms": ("reconnect.backoff.ms", None),
    "reconnect_backoff_max_ms": ("reconnect.backoff.max.ms", None),
    "connections_max_idle_ms": ("connections.max.idle.ms", None),
    "socket_connection_setup_timeout_ms": ("socket.connection.setup.timeout.ms", None),
}

_CRED_USER = ("sasl.username", "sasl_plain_username")
_CRED_PASS = ("sasl.password", "sasl_plain_password")
_FILE_ALIASES = {
    # alias -> role
    "ssl.ca.location": "ca_file", "ssl_cafile": "ca_file",
    "ssl.ca.pem": "ca_pem",
    "ssl.certificate.location": "cert_file", "ssl_certfile": "cert_file",
    "ssl.certificate.pem": "cert_pem",
    "ssl.key.location": "key_file", "ssl_keyfile": "key_file",
    "ssl.key.pem": "key_pem",
}
_KRB = ("sasl.kerberos.keytab", "sasl.kerberos.principal")
_OIDC = ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
         "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions")
_OTHER = ("sasl.oauthbearer.config", "sasl_oauth_token_provider", "enable.ssl.certificate.verification",
          "ssl_context") + _OIDC
OAUTHBEARER_LOGIN_CALLBACK_HANDLER = \
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def is_alias(key):
    """True for a librdkafka/kafka-python name this module translates."""
    if key in SIMPLE_ALIASES or key in _FILE_ALIASES or key in _CRED_USER or key in _CRED_PASS \
            or key in _KRB or key in _OTHER:
        return True
    return "_" in key and "." not in key and key.replace("_", ".") in CLIENT_CONFIG_DEF


def jaas_quote(value):
    """Quote a value for a ``sasl.jaas.config`` (StreamTokenizer escapes)."""
    s = str(reveal(value))
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{s}"'


def credentials_jaas(mechanism, username, password):
    """``sasl.jaas.config`` text for PLAIN/SCRAM user name and password."""
    mech = (mechanism or "").upper()
    if mech == "PLAIN":
        module = PLAIN_LOGIN_MODULE
    elif mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        module = SCRAM_LOGIN_MODULE
    else:
        raise ConfigError(f"sasl.username/sasl.password can only be used with PLAIN or SCRAM mechanisms, "
                          f"not {mechanism}; set sasl.jaas.config instead", key="sasl.mechanism",
                          value=mechanism)
    return f"{module} required username={jaas_quote(username)} password={jaas_quote(password)};"


def _read(path, alias):
    try:
        with open(path, "rb") as f:
            return f.read().decode("latin-1")
    except (OSError, ValueError) as exc:
        raise invalid(alias, path, getattr(exc, "strerror", None) or str(exc)) from None


def _oauth_jaas(text):
    """librdkafka's unsecured ``sasl.oauthbearer.config`` -> JAAS options."""
    opts = {}
    principal_claim = "sub"
    pairs = [p for p in str(text).split() if p]
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep:
            raise invalid("sasl.oauthbearer.config", text, f"expected name=value, got {p}")
        if k == "principalClaimName":
            principal_claim = v
            opts["unsecuredLoginPrincipalClaimName"] = v
    for p in pairs:
        k, _, v = p.partition("=")
        if k == "principal":
            opts[f"unsecuredLoginStringClaim_{principal_claim}"] = v
        elif k == "principalClaimName":
            pass
        elif k == "scopeClaimName":
            opts["unsecuredLoginScopeClaimName"] = v
        elif k == "scope":
            opts["unsecuredLoginListClaim_scope"] = "," + v
        elif k == "lifeSeconds":
            opts["unsecuredLoginLifetimeSeconds"] = v
        elif k.startswith("extension_"):
            opts[f"unsecuredLoginExtension_{k[len('extension_'):]}"] = v
        else:
            raise invalid("sasl.oauthbearer.config", text, f"unknown option {k}")
    body = " ".join(f"{k}={jaas_quote(v)}" for k, v in opts.items())
    return f"{OAUTHBEARER_LOGIN_MODULE} required {body};".replace("required ;", "required;")


def translate(props):
    """Return ``(java_props, extras)``.

    ``java_props``: the config with aliases replaced by Java keys.
    ``extras``: values with no Java key (``sasl_oauth_token_provider``,
    ``ssl_context``).
    """
    src = dict(props)
    out = {}
    extras = {}

    def put(java_key, value, alias):
        if java_key in src and java_key != alias and str(reveal(src[java_key])) != str(reveal(value)):
            raise ConfigError(f"Configuration {alias} (translated to {java_key}) conflicts with {java_key}",
                              key=alias, value=None)
        if java_key in out and out[java_key] is not value and str(reveal(out[java_key])) != str(reveal(value)):
            raise ConfigError(f"Configuration {alias} (translated to {java_key}) conflicts with another alias "
                              f"of {java_key}", key=alias)
        out[java_key] = value

    # Java keys first, unchanged.
    for k, v in src.items():
        if k in SIMPLE_ALIASES or k in _FILE_ALIASES or k in _CRED_USER or k in _CRED_PASS \
                or k in _KRB or k in _OTHER:
            continue
        if "_" in k and "." not in k:
            dotted = k.replace("_", ".")
            if dotted in CLIENT_CONFIG_DEF:
                log.info("Client config %s translated to %s", k, dotted)
                put(dotted, v, k)
                continue
        out.setdefault(k, v)

    for alias, (java_key, conv) in SIMPLE_ALIASES.items():
        if alias not in src:
            continue
        value = src[alias]
        if conv is not None:
            try:
                value = conv(value)
            except ValueError:
                raise invalid(alias, value, "Expected value to be either true or false") from None
        if alias != java_key:
            log.info("Client config %s translated to %s", alias, java_key)
        put(java_key, value, alias)

    if "enable.ssl.certificate.verification" in src:
        try:
            out["enable.ssl.certificate.verification"] = _bool(src["enable.ssl.certificate.verification"])
        except ValueError:
            raise invalid("enable.ssl.certificate.verification", src["enable.ssl.certificate.verification"],
                          "Expected value to be either true or false") from None

    # TLS files
    roles = {}
    for alias, role in _FILE_ALIASES.items():
        if alias in src and src[alias] not in (None, ""):
            roles[role] = (alias, src[alias])
    if "ca_file" in roles or "ca_pem" in roles:
        alias, val = roles.get("ca_file") or roles["ca_pem"]
        if "ca_file" in roles:
            put("ssl.truststore.location", val, alias)
            log.info("Client config %s translated to ssl.truststore.location with ssl.truststore.type=PEM", alias)
        else:
            put("ssl.truststore.certificates", Password(reveal(val)), alias)
            log.info("Client config %s translated to ssl.truststore.certificates with ssl.truststore.type=PEM",
                     alias)
        put("ssl.truststore.type", "PEM", alias)
    cert = roles.get("cert_file") or roles.get("cert_pem")
    key = roles.get("key_file") or roles.get("key_pem")
    if cert and not key and "cert_file" in roles:
        # One PEM file holding key and certificates: Kafka's file-based PEM key store.
        put("ssl.keystore.location", cert[1], cert[0])
        put("ssl.keystore.type", "PEM", cert[0])
        log.info("Client config %s translated to ssl.keystore.location with ssl.keystore.type=PEM", cert[0])
    elif cert or key:
        if not (cert and key):
            missing = "ssl.key.location/ssl_keyfile" if cert else "ssl.certificate.location/ssl_certfile"
            alias = (cert or key)[0]
            raise ConfigError(f"Configuration {alias} needs {missing} as well", key=alias)
        chain = _read(cert[1], cert[0]) if "cert_file" in roles else reveal(cert[1])
        pkey = _read(key[1], key[0]) if "key_file" in roles else reveal(key[1])
        put("ssl.keystore.certificate.chain", Password(chain), cert[0])
        put("ssl.keystore.key", Password(pkey), key[0])
        put("ssl.keystore.type", "PEM", cert[0])
        log.info("Client configs %s and %s translated to inline PEM ssl.keystore.certificate.chain and "
                 "ssl.keystore.key with ssl.keystore.type=PEM", cert[0], key[0])

    # SASL credentials -> sasl.jaas.config
    user = next((src[k] for k in _CRED_USER if k in src), None)
    pw = next((src[k] for k in _CRED_PASS if k in src), None)
    user_key = next((k for k in _CRED_USER if k in src), None)
    generated = None
    if user is not None or pw is not None:
        if user is None or pw is None:
            alias = user_key or next(k for k in _CRED_PASS if k in src)
            raise ConfigError(f"Configuration {alias} needs both a user name and a password", key=alias)
        mech = out.get("sasl.mechanism")
        if mech is None:
            mech = "PLAIN"
            out["sasl.mechanism"] = mech
            log.info("Client config sasl.mechanism not set; using PLAIN for %s", user_key)
        generated = (credentials_jaas(str(mech).strip(), user, pw), user_key)
    if any(k in src for k in _KRB):
        keytab = src.get("sasl.kerberos.keytab")
        principal = src.get("sasl.kerberos.principal")
        opts = ["useKeyTab=true", "storeKey=true"] if keytab else ["useTicketCache=true"]
        if keytab:
            opts.append(f"keyTab={jaas_quote(keytab)}")
        if principal:
            opts.append(f"principal={jaas_quote(principal)}")
        generated = (f"{KRB5_LOGIN_MODULE} required {' '.join(opts)};",
                     "sasl.kerberos.keytab" if keytab else "sasl.kerberos.principal")
    if "sasl.oauthbearer.config" in src:
        generated = (_oauth_jaas(src["sasl.oauthbearer.config"]), "sasl.oauthbearer.config")
    method = str(src.get("sasl.oauthbearer.method", "default")).strip().lower()
    if method == "oidc":
        # librdkafka's OIDC client credentials: Kafka's OAuthBearerLoginCallbackHandler
        # with clientId/clientSecret/scope JAAS options.
        opts = []
        for alias, opt in (("sasl.oauthbearer.client.id", "clientId"),
                           ("sasl.oauthbearer.client.secret", "clientSecret"),
                           ("sasl.oauthbearer.scope", "scope")):
            if src.get(alias) not in (None, ""):
                opts.append(f"{opt}={jaas_quote(src[alias])}")
        for ext in str(src.get("sasl.oauthbearer.extensions") or "").split(","):
            if ext.strip():
                k, _, val = ext.strip().partition("=")
                opts.append(f"extension_{k}={jaas_quote(val)}")
        generated = (f"{OAUTHBEARER_LOGIN_MODULE} required {' '.join(opts)};", "sasl.oauthbearer.method")
        put("sasl.login.callback.handler.class", OAUTHBEARER_LOGIN_CALLBACK_HANDLER, "sasl.oauthbearer.method")
        log.info("Client config sasl.oauthbearer.method=oidc translated to sasl.login.callback.handler.class=%s",
                 OAUTHBEARER_LOGIN_CALLBACK_HANDLER)
    elif method != "default":
        raise invalid("sasl.oauthbearer.method", src["sasl.oauthbearer.method"],
                      "String must be one of: default, oidc")
    elif any(k in src for k in _OIDC[1:]):
        alias = next(k for k in _OIDC[1:] if k in src)
        raise ConfigError(f"Configuration {alias} needs sasl.oauthbearer.method=oidc", key=alias)
    if "ssl_context" in src:
        extras["ssl_context"] = src["ssl_context"]
        log.info("Client config ssl_context kept as the TLS context")
    if "sasl_oauth_token_provider" in src:
        extras["sasl_oauth_token_provider"] = src["sasl_oauth_token_provider"]
        log.info("Client config sasl_oauth_token_provider kept as the OAUTHBEARER token provider")
    if generated is not None:
        text, alias = generated
        if "sasl.jaas.config" in src:
            log.warning("Client config %s ignored: sasl.jaas.config is set explicitly", alias)
        else:
            out["sasl.jaas.config"] = Password(text)
            log.info("Client config %s translated to a generated sasl.jaas.config", alias)
    return out, extras


def split_configs(configs, config_def, aliases, callables, shared_with_client, *,
                  normalize=None, logger=None, kind="client"):
    """Split one user dict for a producer or consumer into ``(raw values of
    config_def's keys, network client configs, callables)``.

    ``aliases`` maps kafka-python/librdkafka names that config_def does not
    know to ``(Java key, converter or None)``; an alias set together with its
    Java key to a different value is a ``ConfigError``.  Keys of config_def
    listed in ``shared_with_client`` go to both sides; every other key goes to
    the network client, which validates it.  ``normalize(key, value)``
    rewrites a config_def value (not an alias's); ``logger`` gets one INFO
    line per alias translated.
    """
    configs = dict(configs or {})
    extras = {k: configs.pop(k) for k in callables if k in configs}
    raw = {}
    client = {}
    for key, value in configs.items():
        if key in aliases and key not in config_def:
            java, conv = aliases[key]
            value = conv(value) if conv is not None else value
            if java in configs and str(configs[java]) != str(value):
                raise ConfigError(f"{key} (an alias of {java}) and {java} are both set, to "
                                  f"different values", key=key, value=value)
            if logger is not None:
                logger.info("Translated %s config %s to %s", kind, key, java)
            raw[java] = value
        elif key in config_def:
            raw[key] = normalize(key, value) if normalize is not None else value
            if key in shared_with_client:
                client[key] = value
        else:
            client[key] = value
    return raw, client, extras
