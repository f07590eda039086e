"""Checks shared by server and client configs (key stores, mechanisms)."""
import os

from kchannel.config.definitions import invalid
from kchannel.config.properties import load_properties
from kchannel.config.types import Password, reveal
from kchannel.errors import ConfigError

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"


def effective_store_type(declared, location):
    """Store type to hand to the TLS layer.

    ``JKS`` (Kafka's default) is read as PKCS12 when the file is PKCS12, as
    Java's ``keystore.type.compat`` does; callers run :func:`store_errors`
    first, which refuses real JKS/JCEKS files.
    """
    if declared is None:
        return None
    up = declared.upper()
    if up == "JKS" and location:
        return "PKCS12"
    return up


def _store_file_error(kind, type_key, loc_key, type_, path):
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except (OSError, ValueError) as exc:
        return ConfigError(f"Failed to load SSL {kind} {path} of type {type_}: "
                           f"{getattr(exc, 'strerror', None) or exc}",
                           key=loc_key, value=path)
    if type_.upper() == "PEM":
        return None
    if head == _JKS_MAGIC or head == _JCEKS_MAGIC:
        fmt = "JKS" if head == _JKS_MAGIC else "JCEKS"
        return invalid(loc_key, path,
                       f"{path} is a {fmt} key store, which kchannel cannot read. Convert it with "
                       f"'keytool -importkeystore -srckeystore {path} -destkeystore store.p12 "
                       f"-deststoretype PKCS12' and set {type_key}=PKCS12, or use PEM "
                       f"({type_key}=PEM)")
    if head[:1] != b"\x30":
        return ConfigError(f"Failed to load SSL {kind} {path} of type {type_}: not a PKCS12 file",
                           key=loc_key, value=path)
    return None


def store_errors(values, prefix="", server=False, check_files=True):
    """Kafka's ``DefaultSslEngineFactory`` key/trust store rules.

    ``values`` holds effective typed ssl.* values; ``prefix`` is prepended to
    key names in messages (e.g. ``listener.name.ssl.``).  Returns a list.
    """
    errs = []
    ks_type = (values.get("ssl.keystore.type") or "JKS")
    ks_path = values.get("ssl.keystore.location")
    ks_pw = values.get("ssl.keystore.password")
    key = values.get("ssl.keystore.key")
    chain = values.get("ssl.keystore.certificate.chain")
    pem_ks = ks_type.upper() == "PEM"
    keystore = None

    def err(msg, k):
        errs.append(ConfigError(msg, key=prefix + k))

    if key is not None:
        if not pem_ks:
            err(f"SSL private key can be specified only for PEM, but key store type is {ks_type}.",
                "ssl.keystore.key")
        elif chain is None:
            err("SSL private key is specified, but certificate chain is not specified.",
                "ssl.keystore.certificate.chain")
        elif ks_path is not None:
            err("Both SSL key store location and separate private key are specified.", "ssl.keystore.location")
        elif ks_pw is not None:
            err("SSL key store password cannot be specified with PEM format, only key password may be specified.",
                "ssl.keystore.password")
        else:
            keystore = "inline"
    elif chain is not None:
        err("SSL certificate chain is specified, but private key is not specified", "ssl.keystore.key")
    elif pem_ks and ks_path is not None:
        if ks_pw is not None:
            err("SSL key store password cannot be specified with PEM format, only key password may be specified",
                "ssl.keystore.password")
        else:
            keystore = "file"
    elif ks_path is None and ks_pw is not None:
        err("SSL key store is not specified, but key store password is specified.", "ssl.keystore.location")
    elif ks_path is not None and ks_pw is None:
        err("SSL key store is specified, but key store password is not specified.", "ssl.keystore.password")
    elif ks_path is not None:
        keystore = "file"
    if keystore == "file" and check_files:
        e = _store_file_error("keystore", prefix + "ssl.keystore.type", prefix + "ssl.keystore.location",
                              ks_type, ks_path)
        if e:
            errs.append(e)
    if server and keystore is None and not errs:
        err("Invalid value null for configuration ssl.keystore.location: an SSL listener needs a key store "
            "(ssl.keystore.location, or ssl.keystore.type=PEM with ssl.keystore.key and "
            "ssl.keystore.certificate.chain)", "ssl.keystore.location")

    ts_type = (values.get("ssl.truststore.type") or "JKS")
    ts_path = values.get("ssl.truststore.location")
    ts_pw = values.get("ssl.truststore.password")
    certs = values.get("ssl.truststore.certificates")
    pem_ts = ts_type.upper() == "PEM"
    truststore = None
    if certs is not None:
        if not pem_ts:
            err(f"SSL trust store certs can be specified only for PEM, but trust store type is {ts_type}.",
                "ssl.truststore.certificates")
        elif ts_path is not None:
            err("Both SSL trust store location and separate trust certificates are specified.",
                "ssl.truststore.location")
        elif ts_pw is not None:
            err("SSL trust store password cannot be specified for PEM format.", "ssl.truststore.password")
    elif pem_ts and ts_path is not None:
        if ts_pw is not None:
            err("SSL trust store password cannot be specified for PEM format.", "ssl.truststore.password")
        else:
            truststore = "file"
    elif ts_path is None and ts_pw is not None:
        err("SSL trust store is not specified, but trust store password is specified.", "ssl.truststore.location")
    elif ts_path is not None:
        truststore = "file"
    if truststore == "file" and check_files:
        e = _store_file_error("truststore", prefix + "ssl.truststore.type", prefix + "ssl.truststore.location",
                              ts_type, ts_path)
        if e:
            errs.append(e)
    return errs


def normalise_ssl_values(values):
    """Copy of ``values`` with JKS-declared PKCS12 stores typed PKCS12 and
    store types upper-cased, ready for the TLS layer."""
    out = dict(values)
    for kind in ("keystore", "truststore"):
        tkey = f"ssl.{kind}.type"
        if tkey in out and out[tkey] is not None:
            out[tkey] = effective_store_type(out[tkey], out.get(f"ssl.{kind}.location"))
    return out


def mechanism_errors(mechanisms, key):
    errs = []
    for m in mechanisms:
        if m not in SUPPORTED_MECHANISMS:
            errs.append(invalid(key, m, "kchannel supports the SASL mechanisms " + ", ".join(SUPPORTED_MECHANISMS)))
    return errs


def read_text_file(path, key):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8")
    except (OSError, ValueError) as exc:
        raise invalid(key, path, getattr(exc, "strerror", None) or str(exc)) from None


def mask(value):
    """Display form of a typed value: secrets hidden, lists comma-joined."""
    if isinstance(value, Password):
        return Password.HIDDEN
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, type):
        return value.__module__ + "." + value.__qualname__
    return str(reveal(value))


def expand_path(p):
    return os.path.expanduser(p) if p else p


def kerberos_service_name(jaas_config, config_value):
    """Kafka's ``KerberosLogin.getServiceName``: JAAS ``serviceName`` option
    or ``sasl.kerberos.service.name``; both set must agree."""
    jaas_value = jaas_config.option("serviceName") if jaas_config is not None else None
    if jaas_value is not None and config_value is not None and jaas_value != config_value:
        raise ConfigError("Conflicting serviceName values found in JAAS and Kafka configs value in JAAS file "
                          f"{jaas_value}, value in Kafka config {config_value}", key="sasl.kerberos.service.name")
    if jaas_value is not None:
        return jaas_value
    if config_value is not None:
        return config_value
    raise ConfigError("No serviceName defined in either JAAS or Kafka config", key="sasl.kerberos.service.name")


class ConfigFactories:
    """``validate`` and ``from_file`` shared by ServerConfig and ClientConfig.

    Subclasses take ``(props, jaas_file_text, *, jaas_file_name, _errors)``;
    with ``_errors`` given they collect every error instead of raising.
    """

    @classmethod
    def validate(cls, props, jaas_file_text=None, *, jaas_file_name=None):
        """Every ``ConfigError`` the configuration has (empty list = valid)."""
        errors = []
        try:
            cls(props, jaas_file_text, jaas_file_name=jaas_file_name, _errors=errors)
        except ConfigError as exc:  # defensive: collection mode raises nothing
            if exc not in errors:
                errors.append(exc)
        return errors

    @classmethod
    def from_file(cls, path, jaas_file=None):
        text = None
        if jaas_file is not None:
            text = read_text_file(jaas_file, "java.security.auth.login.config")
        return cls(load_properties(path), text, jaas_file_name=jaas_file)
