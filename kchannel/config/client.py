"""Client-side configuration: ``ClientConfig``.

Accepts Kafka's Java client keys, plus librdkafka and kafka-python/aiokafka
names (translated by :mod:`kchannel.config.aliases`).  JAAS as Kafka's
``JaasContext.loadClientContext``: ``sasl.jaas.config`` (exactly one login
module), else the ``KafkaClient`` section of the JAAS file (``jaas_file_text``
or the file named by ``java.security.auth.login.config``).

Construction raises the first ``ConfigError``; ``exc.errors`` lists all.
"""
import logging
import re

from kchannel.config import jaas as jaas_mod
from kchannel.config._common import (ConfigFactories, kerberos_service_name, mechanism_errors, normalise_ssl_values, read_text_file,
                                     store_errors)
from kchannel.config.aliases import is_alias, translate
from kchannel.config.definitions import CLIENT_CONFIG_DEF, java_list_str, warn_unsupported
from kchannel.errors import ConfigError

__all__ = ["ClientConfig"]

log = logging.getLogger("kchannel.config.client")

# Kafka's Utils.HOST_PORT_PATTERN (host:port, optional scheme, IPv6 in brackets).
_HOST_PORT = re.compile(r"(?:[0-9a-zA-Z\-%._]*://)?\[?([0-9a-zA-Z\-%._:]*)]?:([0-9]+)")


class ClientConfig(ConfigFactories):
    """Validated client configuration."""

    def __init__(self, props=None, jaas_file_text=None, *, jaas_file_name=None, _errors=None, **kwargs):
        errors = [] if _errors is None else _errors
        merged = dict(props or {})
        merged.update(kwargs)  # kafka-python style keyword arguments
        self._build(merged, jaas_file_text, jaas_file_name, errors)
        if errors and _errors is None:
            first = errors[0]
            first.errors = list(errors)
            raise first
        self.errors = list(errors)

    def _build(self, props, jaas_file_text, jaas_file_name, errors):
        self.supplied = {str(k): v for k, v in props.items()}
        try:
            java, self.extras = translate(self.supplied)
        except ConfigError as exc:
            errors.append(exc)
            java = {k: v for k, v in self.supplied.items() if not is_alias(k)}
            self.extras = {}
        self.originals = java
        self._values = CLIENT_CONFIG_DEF.parse(java, errors)
        v = self._values
        self._bootstrap = []
        for url in v.get("bootstrap.servers") or []:
            if not url:
                continue
            m = _HOST_PORT.fullmatch(url)
            if m is None:
                errors.append(ConfigError(f"Invalid url in bootstrap.servers: {url}", key="bootstrap.servers",
                                          value=url))
            else:
                self._bootstrap.append((m.group(1), int(m.group(2))))
        proto = (v.get("security.protocol") or "PLAINTEXT").upper()
        v["security.protocol"] = proto
        if proto in ("SSL", "SASL_SSL"):
            errors.extend(store_errors(v, "", server=False))
        self._jaas = None
        self._jaas_sections = None
        self._jaas_file_desc = None
        jpath = v.get("java.security.auth.login.config")
        try:
            if jaas_file_text is not None:
                self._jaas_file_desc = jaas_file_name or "given"
                self._jaas_sections = jaas_mod.parse_jaas_file(jaas_file_text)
            elif jpath:
                self._jaas_file_desc = jpath
                self._jaas_sections = jaas_mod.parse_jaas_file(
                    read_text_file(jpath, "java.security.auth.login.config"))
        except ConfigError as exc:
            errors.append(exc)
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            errors.extend(mechanism_errors([v.get("sasl.mechanism")], "sasl.mechanism"))
            # kafka-python's token provider stands in for a JAAS login module.
            provider_only = (v.get("sasl.jaas.config") is None
                             and self.extras.get("sasl_oauth_token_provider") is not None)
            if not provider_only:
                try:
                    self._jaas = jaas_mod.load_client_context(
                        v.get("sasl.jaas.config"), self._jaas_sections, self._jaas_file_desc,
                        disallowed=v.get("org.apache.kafka.disallowed.login.modules"))
                    if v.get("sasl.mechanism") == "GSSAPI":
                        kerberos_service_name(self._jaas, v.get("sasl.kerberos.service.name"))
                except ConfigError as exc:
                    errors.append(exc)
        # Kafka keys kchannel accepts but ignores: say so, never silently.
        self.unsupported = warn_unsupported(java, log)
        unused = sorted(k for k in java if k not in CLIENT_CONFIG_DEF)
        self.unused = unused
        if unused:
            log.warning("These configurations '%s' were supplied but are not used yet.", java_list_str(unused))

    # ------------------------------------------------------------- public API
    def get(self, key):
        """Typed value of ``key`` as configured (or its default)."""
        if key not in CLIENT_CONFIG_DEF:
            raise KeyError(key)
        return self._values.get(key)

    def values(self):
        """Typed values of every client key, ready for the channel builders
        (key store types normalised: a JKS-declared PKCS12 file is PKCS12)."""
        return normalise_ssl_values(self._values)

    @property
    def security_protocol(self):
        return self._values["security.protocol"]

    @property
    def sasl_mechanism(self):
        return self._values.get("sasl.mechanism")

    @property
    def bootstrap_servers(self):
        return list(self._values.get("bootstrap.servers") or [])

    @property
    def bootstrap_addresses(self):
        """``bootstrap.servers`` as ``[(host, port)]`` (IPv6 without brackets)."""
        return list(self._bootstrap)

    @property
    def client_id(self):
        return self._values.get("client.id")

    @property
    def oauth_token_provider(self):
        """kafka-python/aiokafka ``sasl_oauth_token_provider`` object, if any."""
        return self.extras.get("sasl_oauth_token_provider")

    @property
    def kerberos_service_name(self):
        """GSSAPI service name: JAAS ``serviceName`` or ``sasl.kerberos.service.name``."""
        return kerberos_service_name(self._jaas, self._values.get("sasl.kerberos.service.name"))

    @property
    def ssl_context(self):
        """kafka-python/aiokafka ``ssl_context`` object, if any."""
        return self.extras.get("ssl_context")

    def jaas(self):
        """The client's JAAS context (``JaasConfig``) or None."""
        return self._jaas

    def __repr__(self):
        return (f"ClientConfig(security_protocol={self.security_protocol}, "
                f"sasl_mechanism={self.sasl_mechanism}, bootstrap_servers={self.bootstrap_servers})")
