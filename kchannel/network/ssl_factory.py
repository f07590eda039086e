"""SslFactory: an ``ssl.SSLContext`` built from Kafka's ``ssl.*`` configs.

Mirrors ``org.apache.kafka.common.security.ssl.SslFactory`` /
``DefaultSslEngineFactory``.  ``SslFactory(mode, configs)`` validates the
configs once (raising ``ConfigError`` naming the key) and then hands out one
engine -- an ``SSLObject`` wired to two ``MemoryBIO`` -- per connection with
``create_engine(peer_host, peer_port)``.

Supported keys (values may be strings or already typed values):

``ssl.protocol`` (default ``TLSv1.3``)
    As in Java, this caps what a *client* offers: ``TLSv1.2`` means a client
    never negotiates TLS 1.3 even if ``ssl.enabled.protocols`` lists it.
    ``TLS`` means no cap.  Servers are bounded by ``ssl.enabled.protocols``
    only (as a Java server engine is).
``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``)
    Becomes the context's minimum/maximum version.  OpenSSL can only express
    a contiguous range, so ``TLSv1.1,TLSv1.3`` also allows TLS 1.2.
``ssl.cipher.suites`` (default: OpenSSL's defaults)
    Java/IANA names (``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``) are mapped to
    OpenSSL names through ``IANA_TO_OPENSSL``; OpenSSL names are accepted too.
    TLS 1.3 suites (``TLS_AES_128_GCM_SHA256`` ...) cannot be restricted with
    Python's ``ssl`` module (it has no ``SSL_CTX_set_ciphersuites``): listing
    them is accepted but all of OpenSSL's TLS 1.3 suites stay enabled.  As
    with Java, a list with no TLS 1.2 suite disables TLS 1.2 and a list with
    no TLS 1.3 suite disables TLS 1.3.
``ssl.keystore.type`` PEM / PKCS12 (Java's default ``JKS`` is read as
    PKCS12 when the file is one, which is what keytool writes since Java 9; a
    genuine JKS file is refused with a conversion hint)
``ssl.keystore.location``, ``ssl.keystore.password``, ``ssl.key.password``
``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` (inline PEM)
    Combination rules and messages are Kafka's (DefaultSslEngineFactory): no
    store password with PEM, a store password with PKCS12, no location
    together with an inline key, ...  PEM values may have lost their line
    breaks (a .properties value with ``\\`` continuations), as Kafka allows.
    Encrypted PEM keys are decrypted with ``ssl.key.password``.  A PKCS12
    file is opened with ``ssl.keystore.password``, which must also protect
    its key entry (keytool always writes it so).
``ssl.truststore.type`` PEM / PKCS12, ``ssl.truststore.location``,
``ssl.truststore.password``, ``ssl.truststore.certificates`` (inline PEM)
    Without any truststore, the system's default CAs are trusted (Java uses
    the JVM's cacerts).
``ssl.endpoint.identification.algorithm`` (default ``https``)
    Clients verify the server's host name against its certificate unless
    this is empty.  Servers never verify client host names.
``ssl.client.auth`` (server): ``none`` / ``requested`` / ``required``.
``kchannel.ssl.session.resumption.enable`` (default ``true``; kchannel-specific,
    Kafka has no key for it: Java's SSLContext always caches sessions)
    Clients keep the last resumable TLS session per server ``host:port`` (as
    Java's client session cache does) and offer it on the next connection
    to that ``host:port``: a resumed handshake skips the certificate
    signature and chain checks on both sides.  The peer's certificate (and
    so the mTLS principal) is restored from the session.  Servers issue one
    TLS 1.3 session ticket per full handshake (``num_tickets = 1``; OpenSSL's
    default is 2, and a client only keeps the newest).  ``false`` on a
    client never offers a session; on a server it issues no tickets and sets
    ``OP_NO_TICKET`` (OpenSSL still resumes TLS 1.2 session ids from its
    in-process cache, which Python cannot switch off).

Private keys never touch the disk in clear: OpenSSL's ``load_cert_chain``
only reads files, so the key and chain are handed to it through an anonymous
in-memory file (``memfd_create``, Linux) or, elsewhere, through a 0600 file in
a private 0700 directory holding the key re-encrypted under a random one-time
password, deleted right after loading.

Renegotiation is disabled (``OP_NO_RENEGOTIATION``), as Kafka refuses it.
"""
import os
import re
import secrets
import ssl
import tempfile
import threading
import time
from collections import namedtuple

from kchannel.config.types import Password, reveal
from kchannel.errors import ConfigError
from kchannel.network.ssl_transport import SslTransportLayer
from kchannel.log import get_logger

log = get_logger("kchannel.network.ssl_factory")

# Kafka config names (SslConfigs / BrokerSecurityConfigs).
SSL_PROTOCOL_CONFIG = "ssl.protocol"
SSL_ENABLED_PROTOCOLS_CONFIG = "ssl.enabled.protocols"
SSL_CIPHER_SUITES_CONFIG = "ssl.cipher.suites"
SSL_KEYSTORE_TYPE_CONFIG = "ssl.keystore.type"
SSL_KEYSTORE_LOCATION_CONFIG = "ssl.keystore.location"
SSL_KEYSTORE_PASSWORD_CONFIG = "ssl.keystore.password"
SSL_KEY_PASSWORD_CONFIG = "ssl.key.password"
SSL_KEYSTORE_KEY_CONFIG = "ssl.keystore.key"
SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG = "ssl.keystore.certificate.chain"
SSL_TRUSTSTORE_TYPE_CONFIG = "ssl.truststore.type"
SSL_TRUSTSTORE_LOCATION_CONFIG = "ssl.truststore.location"
SSL_TRUSTSTORE_PASSWORD_CONFIG = "ssl.truststore.password"
SSL_TRUSTSTORE_CERTIFICATES_CONFIG = "ssl.truststore.certificates"
SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG = "ssl.endpoint.identification.algorithm"
SSL_CLIENT_AUTH_CONFIG = "ssl.client.auth"
SSL_SESSION_RESUMPTION_ENABLE_CONFIG = "kchannel.ssl.session.resumption.enable"

DEFAULT_SSL_PROTOCOL = "TLSv1.3"
DEFAULT_SSL_ENABLED_PROTOCOLS = ["TLSv1.2", "TLSv1.3"]
DEFAULT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "https"
DEFAULT_SSL_CLIENT_AUTH = "none"
# Hosts whose session a client keeps (least recently used dropped first).
SESSION_CACHE_SIZE = 1024

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_VERSION_ORDER = ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]

# TLS 1.3 suite names (identical in IANA, Java and OpenSSL).
TLS13_CIPHER_SUITES = frozenset({
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
    "TLS_AES_128_CCM_8_SHA256",
})

# IANA/Java names of TLS 1.2 suites -> OpenSSL names (from
# ``openssl ciphers -stdname``; the suites a current JDK enables).
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": "DHE-DSS-AES256-GCM-SHA384",
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": "DHE-DSS-AES128-GCM-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": "DHE-DSS-AES256-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": "DHE-DSS-AES128-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": "DHE-DSS-AES256-SHA",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": "DHE-DSS-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}

# Java's SSLEngine.getSession().getProtocol() spelling of versions.
PROTOCOL_NAMES = {"TLSv1": "TLSv1", "TLSv1.1": "TLSv1.1", "TLSv1.2": "TLSv1.2",
                  "TLSv1.3": "TLSv1.3"}

# Java-specific settings (JCA providers, algorithms, pluggable engine
# factories) that have no meaning for OpenSSL.
_JAVA_ONLY_CONFIGS = ("ssl.provider", "ssl.engine.factory.class",
                      "ssl.secure.random.implementation")

_KAFKA_DEFAULT_ENGINE_FACTORY = "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory"

SslEngine = namedtuple("SslEngine",
                       "ssl_object incoming outgoing mode peer_host peer_port session_cache",
                       defaults=(None,))
SslEngine.__doc__ = """One connection's TLS engine: an SSLObject and its two MemoryBIOs
(``session_cache``: the client's ``SessionCache``, None when resumption is off)."""


class SessionCache:
    """A client's resumable TLS sessions, one per server ``(host, port)``.

    Java's SSLContext keys its client session cache the same way; a session
    is only ever offered to the ``host:port`` it was made with, so host name
    verification (done on the full handshake) still holds for a resumed one.
    Taking a session from OpenSSL costs about a tenth of a full handshake
    (Python serialises and re-parses it, certificates included), so a
    connection takes one only when the cache has none for its server or the
    cached one has used half of its lifetime (``wants``); a storm of
    connections to one broker pays it once.  Bounded: the least recently
    stored entry goes first.
    """

    def __init__(self, maxsize=SESSION_CACHE_SIZE):
        self.maxsize = maxsize
        self._sessions = {}    # (host, port) -> (session, retake_at, expires_at)
        # Clients of one factory may connect from several threads.
        self._lock = threading.Lock()

    def get(self, host, port, now=None):
        entry = self._sessions.get((host, port))
        if entry is None:
            return None
        if (time.time() if now is None else now) >= entry[2]:
            # OpenSSL would only fall back to a full handshake; don't offer it.
            return None
        return entry[0]

    def wants(self, host, port, now=None):
        """True if a session for ``host:port`` should be taken now."""
        entry = self._sessions.get((host, port))
        return entry is None or (time.time() if now is None else now) >= entry[1]

    def put(self, host, port, session, now=None):
        now = time.time() if now is None else now
        lifetime = max(session.timeout, 0)
        key = (host, port)
        sessions = self._sessions
        with self._lock:
            sessions.pop(key, None)
            sessions[key] = (session, now + lifetime / 2, now + lifetime)
            if len(sessions) > self.maxsize:
                del sessions[next(iter(sessions))]

    def invalidate(self, host, port):
        self._sessions.pop((host, port), None)

    def __len__(self):
        return len(self._sessions)

    def __repr__(self):
        return f"SessionCache({len(self._sessions)} sessions)"


# ---------------------------------------------------------------------------
# config value helpers
# ---------------------------------------------------------------------------
def _get(configs, key, default=None):
    value = configs.get(key, default)
    return default if value is None else value


def _str(configs, key, default=None):
    value = reveal(_get(configs, key, default))
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"Invalid value {value!r} for configuration {key}: expected a string",
                          key, value)
    return value


def _list(configs, key, default=None):
    value = _get(configs, key, default)
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if not isinstance(v, str):
                raise ConfigError(f"Invalid value {value!r} for configuration {key}: "
                                  "expected a list of strings", key, value)
            if v.strip():
                out.append(v.strip())
        return out
    raise ConfigError(f"Invalid value {value!r} for configuration {key}: "
                      "expected a comma-separated list", key, value)


def _bool(configs, key, default):
    value = reveal(_get(configs, key, default))
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"Invalid value {value!r} for configuration {key}: "
                      "Expected value to be either true or false", key, value)


def _password(configs, key):
    value = reveal(configs.get(key))
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"Invalid value for configuration {key}: expected a password string",
                          key, Password(value))
    return value


def _read_file(path, key):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"Failed to load SSL keystore/truststore file {path!r} "
                          f"configured by {key}: {exc.strerror or exc}", key, path) from exc


# ---------------------------------------------------------------------------
# key material parsing (cryptography)
# ---------------------------------------------------------------------------
def _crypto():
    # Imported on first use: cryptography's x509/PKCS12 modules cost ~20 ms
    # of start-up that a PLAINTEXT-only process never needs.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    return x509, serialization, pkcs12


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _normalize_pem(data):
    r"""Re-wrap PEM blocks whose line structure was lost.

    Kafka's PEM parser ignores whitespace inside a block, so configs such as
    ``ssl.keystore.key`` written in a .properties file with ``\``
    continuations (which join the lines) work there; OpenSSL needs the
    64-column layout back.  Blocks with RFC 1421 headers (``Proc-Type:``)
    are left as they are.
    """
    def rewrap(m):
        body = m.group(2)
        if b":" in body:
            return m.group(0)
        b64 = re.sub(rb"\s+", b"", body)
        lines = b"\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        return b"-----BEGIN " + m.group(1) + b"-----\n" + lines + b"\n-----END " \
            + m.group(1) + b"-----\n"
    return _PEM_BLOCK.sub(rewrap, data)


def _pem_certs(data, key):
    """All certificates in PEM ``data`` (bytes), as cryptography objects."""
    x509, _, _ = _crypto()
    data = _normalize_pem(data)
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise ConfigError(f"Invalid PEM certificates in {key}: {exc}", key) from exc
    return certs


def _pem_key(data, password, key, password_key):
    """The private key in PEM ``data``; ``password`` for an encrypted one."""
    _, serialization, _ = _crypto()
    data = _normalize_pem(data)
    pw = password.encode("utf-8") if password is not None else None
    try:
        return serialization.load_pem_private_key(data, password=pw)
    except TypeError as exc:
        # cryptography: "Password was not given but private key is encrypted"
        # or "Password was given but private key is not encrypted".
        if pw is None:
            raise ConfigError(f"The private key in {key} is encrypted but "
                              f"{password_key} is not set", password_key) from exc
        # Java accepts a password on an unencrypted PEM key; so do we.
        return serialization.load_pem_private_key(data, password=None)
    except ValueError as exc:
        if pw is not None and b"ENCRYPTED" in data:
            raise ConfigError(f"Failed to decrypt the private key in {key}: wrong "
                              f"{password_key}", password_key) from exc
        raise ConfigError(f"Invalid PEM private key in {key}: {exc}", key) from exc


def _split_pem(data):
    """Split a PEM keystore file into (key blocks, certificate blocks)."""
    text = data.decode("ascii", "replace")
    keys, certs = [], []
    pos = 0
    while True:
        start = text.find("-----BEGIN ", pos)
        if start < 0:
            break
        label_end = text.find("-----", start + 11)
        label = text[start + 11:label_end]
        end_marker = f"-----END {label}-----"
        end = text.find(end_marker, label_end)
        if end < 0:
            break
        block = text[start:end + len(end_marker)] + "\n"
        if "PRIVATE KEY" in label:
            keys.append(block.encode("ascii"))
        elif label in ("CERTIFICATE", "X509 CERTIFICATE", "TRUSTED CERTIFICATE"):
            certs.append(block.encode("ascii"))
        pos = end + len(end_marker)
    return keys, certs


def _load_pkcs12(data, password, key, password_key):
    _, _, pkcs12 = _crypto()
    pw = password.encode("utf-8") if password is not None else None
    try:
        return pkcs12.load_pkcs12(data, pw)
    except ValueError as exc:
        if pw is not None:
            try:
                return pkcs12.load_pkcs12(data, None)
            except ValueError:
                pass
        msg = str(exc)
        if "password" in msg.lower() or pw is None or "mac" in msg.lower():
            raise ConfigError(f"Failed to load PKCS12 keystore {key}: wrong or missing "
                              f"{password_key} ({msg})", password_key) from exc
        raise ConfigError(f"Failed to load PKCS12 file {key}: {msg}", key) from exc


def _looks_like_pem(data):
    return b"-----BEGIN " in data[:4096]


def _is_jks(data):
    # JKS magic 0xFEEDFEED; JCEKS 0xCECECECE.
    return data[:4] in (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")


def _jks_error(key, path):
    return ConfigError(
        f"{key} {path!r} is a Java JKS/JCEKS keystore, which kchannel cannot read; convert it "
        "with: keytool -importkeystore -srckeystore <file> -destkeystore <file>.p12 "
        "-deststoretype PKCS12, then set the store type to PKCS12", key, path)


class _KeyMaterial:
    """A private key with its certificate chain (leaf first)."""

    def __init__(self, private_key, chain):
        self.private_key = private_key
        self.chain = chain


# ---------------------------------------------------------------------------
# handing PEM to OpenSSL without a clear-text file on disk
# ---------------------------------------------------------------------------
def _load_chain_into(ctx, material):
    """``ctx.load_cert_chain`` from in-memory key material.

    Linux: an anonymous memfd, never on any filesystem.  Elsewhere: a 0600
    file in a private 0700 directory, holding the key encrypted under a random
    one-time password, removed as soon as OpenSSL has read it.
    """
    _, serialization, _ = _crypto()
    chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in material.chain)
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None and os.path.isdir("/proc/self/fd"):
        key_pem = material.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption())
        fd = memfd("kchannel-keystore", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, key_pem + chain_pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    one_time = secrets.token_urlsafe(24)
    key_pem = material.private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()))
    tmpdir = tempfile.mkdtemp(prefix="kchannel-")
    path = os.path.join(tmpdir, "keystore.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem + chain_pem)
        ctx.load_cert_chain(path, password=one_time)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.rmdir(tmpdir)


# ---------------------------------------------------------------------------
# SslFactory
# ---------------------------------------------------------------------------
class SslFactory:
    """Builds the SSLContext for one mode ("client"/"server") and creates
    per-connection engines."""

    def __init__(self, mode, configs):
        if mode not in ("client", "server"):
            raise ValueError(f"mode must be 'client' or 'server', not {mode!r}")
        self.mode = mode
        self.configs = dict(configs or {})
        self.client_auth = DEFAULT_SSL_CLIENT_AUTH
        self.endpoint_identification = True
        self.session_resumption = _bool(self.configs, SSL_SESSION_RESUMPTION_ENABLE_CONFIG, True)
        self.session_cache = (SessionCache() if self.mode == "client" and self.session_resumption
                              else None)
        self.context = self._build_context()
        self._hostnames = {}

    # --- public -----------------------------------------------------------
    def create_engine(self, peer_host=None, peer_port=None):
        """A fresh SSLObject over two MemoryBIOs for one connection.

        Clients pass the host they dialled: it is sent as SNI and, with
        endpoint identification on, checked against the server certificate.
        """
        incoming = ssl.MemoryBIO()
        outgoing = ssl.MemoryBIO()
        if self.mode == "client" and self.endpoint_identification and not peer_host:
            raise ValueError(
                "A TLS client needs the server's host name to verify its certificate "
                f"({SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG}=https); none was given")
        cache = self.session_cache
        if self.mode == "client":
            session = cache.get(peer_host, peer_port) if cache is not None else None
            ssl_object = self.context.wrap_bio(incoming, outgoing, server_side=False,
                                               server_hostname=self._hostname(peer_host),
                                               session=session)
        else:
            ssl_object = self.context.wrap_bio(incoming, outgoing, server_side=True)
        return SslEngine(ssl_object, incoming, outgoing, self.mode, peer_host, peer_port, cache)

    def _hostname(self, peer_host):
        """``peer_host`` as wrap_bio takes it: IDNA-encoded once per host
        (wrap_bio encodes a str with the Python IDNA codec at every
        connection; it takes the ASCII bytes as they are)."""
        if not peer_host:
            return None
        encoded = self._hostnames.get(peer_host)
        if encoded is None:
            encoded = peer_host.encode("idna") if isinstance(peer_host, str) else peer_host
            if len(self._hostnames) >= 1024:
                self._hostnames.clear()
            self._hostnames[peer_host] = encoded
        return encoded

    def create_transport(self, sock, peer_host=None, peer_port=None, **options):
        """An ``SslTransportLayer`` over ``sock`` with a new engine
        (``options`` go to the transport, e.g. ``channel_id``)."""
        return SslTransportLayer(sock, self.create_engine(peer_host, peer_port), **options)

    # --- building ---------------------------------------------------------
    def _build_context(self):
        c = self.configs
        for key in _JAVA_ONLY_CONFIGS:
            if c.get(key) not in (None, "", _KAFKA_DEFAULT_ENGINE_FACTORY):
                log.warning("%s=%s is a Java-specific setting with no equivalent here; "
                            "ignored", key, c.get(key))
        if self.mode == "client":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.options |= ssl.OP_NO_COMPRESSION
        # Kafka refuses renegotiation, and the TLS pump's write path relies on
        # it being off (see TlsPump.write); Python >= 3.7 on OpenSSL >= 1.1.0h
        # always has the flag.
        ctx.options |= ssl.OP_NO_RENEGOTIATION
        if self.mode == "server":
            if self.session_resumption:
                # One ticket per full handshake: a kchannel (or Java) client
                # keeps only the newest per host:port, so OpenSSL's second
                # ticket would be encrypted and sent for nothing.
                ctx.num_tickets = 1
            else:
                ctx.num_tickets = 0
                ctx.options |= ssl.OP_NO_TICKET

        min_v, max_v = self._protocol_range()
        min_v, max_v = self._apply_cipher_suites(ctx, min_v, max_v)
        ctx.minimum_version = _VERSIONS[min_v]
        ctx.maximum_version = _VERSIONS[max_v]

        algo = _str(c, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG,
                    DEFAULT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM)
        algo = (algo or "").strip()
        if algo and algo.lower() not in ("https", "ldaps"):
            raise ConfigError(
                f"Invalid value {algo!r} for configuration "
                f"{SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG}: "
                "supported values are 'https' and '' (disabled)",
                SSL_ENDPOINT_IDENTIFICATION_ALGORITHM_CONFIG, algo)
        self.endpoint_identification = bool(algo)

        if self.mode == "client":
            # Java always verifies the server's chain; host name checking is
            # what endpoint identification switches.
            ctx.check_hostname = self.endpoint_identification
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx.check_hostname = False
            auth = (_str(c, SSL_CLIENT_AUTH_CONFIG, DEFAULT_SSL_CLIENT_AUTH) or "none")
            auth = auth.strip().lower()
            modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                     "required": ssl.CERT_REQUIRED}
            if auth not in modes:
                raise ConfigError(
                    f"Invalid value {auth!r} for configuration {SSL_CLIENT_AUTH_CONFIG}: "
                    "String must be one of: required, requested, none",
                    SSL_CLIENT_AUTH_CONFIG, auth)
            self.client_auth = auth
            ctx.verify_mode = modes[auth]

        material = self._key_material()
        if material is not None:
            try:
                _load_chain_into(ctx, material)
            except ssl.SSLError as exc:
                if exc.reason == "KEY_VALUES_MISMATCH":
                    what = "the private key does not match the certificate"
                else:
                    # e.g. EE_KEY_TOO_SMALL / CA_MD_TOO_WEAK under OpenSSL's
                    # security level, which Java's defaults may still allow.
                    what = f"OpenSSL refuses the key or certificate ({exc.reason or exc})"
                raise ConfigError(f"Invalid keystore: {what}",
                                  SSL_KEYSTORE_LOCATION_CONFIG) from exc
        elif self.mode == "server":
            raise ConfigError(
                f"A server needs a keystore: set {SSL_KEYSTORE_LOCATION_CONFIG} or "
                f"{SSL_KEYSTORE_KEY_CONFIG} and {SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG}",
                SSL_KEYSTORE_LOCATION_CONFIG)

        trust = self._trust_pem()
        if trust is None:
            if self.mode == "client" or ctx.verify_mode != ssl.CERT_NONE:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH if self.mode == "client"
                                       else ssl.Purpose.CLIENT_AUTH)
        else:
            try:
                ctx.load_verify_locations(cadata=trust)
            except ssl.SSLError as exc:
                raise ConfigError(f"Invalid truststore: {exc.reason or exc}",
                                  SSL_TRUSTSTORE_LOCATION_CONFIG) from exc
        return ctx

    def _protocol_range(self):
        c = self.configs
        enabled = _list(c, SSL_ENABLED_PROTOCOLS_CONFIG, DEFAULT_SSL_ENABLED_PROTOCOLS)
        if not enabled:
            raise ConfigError(f"{SSL_ENABLED_PROTOCOLS_CONFIG} must list at least one protocol",
                              SSL_ENABLED_PROTOCOLS_CONFIG, enabled)
        for p in enabled:
            if p not in _VERSIONS:
                raise ConfigError(
                    f"Invalid value {p!r} in configuration {SSL_ENABLED_PROTOCOLS_CONFIG}: "
                    f"supported protocols are {', '.join(_VERSION_ORDER)}",
                    SSL_ENABLED_PROTOCOLS_CONFIG, enabled)
        idx = sorted(_VERSION_ORDER.index(p) for p in enabled)
        lo, hi = idx[0], idx[-1]
        protocol = _str(c, SSL_PROTOCOL_CONFIG, DEFAULT_SSL_PROTOCOL).strip()
        if protocol in _VERSIONS:
            if self.mode == "client":
                cap = _VERSION_ORDER.index(protocol)
                if cap < lo:
                    raise ConfigError(
                        f"{SSL_PROTOCOL_CONFIG}={protocol} is below every protocol in "
                        f"{SSL_ENABLED_PROTOCOLS_CONFIG} ({','.join(enabled)})",
                        SSL_PROTOCOL_CONFIG, protocol)
                hi = min(hi, cap)
        elif protocol not in ("TLS", "SSL"):
            raise ConfigError(
                f"Invalid value {protocol!r} for configuration {SSL_PROTOCOL_CONFIG}: "
                "expected TLSv1.2, TLSv1.3 or TLS", SSL_PROTOCOL_CONFIG, protocol)
        return _VERSION_ORDER[lo], _VERSION_ORDER[hi]

    def _apply_cipher_suites(self, ctx, min_v, max_v):
        suites = _list(self.configs, SSL_CIPHER_SUITES_CONFIG, None)
        if not suites:
            return min_v, max_v
        tls12, tls13 = [], []
        for s in suites:
            if s in TLS13_CIPHER_SUITES:
                tls13.append(s)
            elif s in IANA_TO_OPENSSL:
                tls12.append(IANA_TO_OPENSSL[s])
            else:
                try:
                    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                    probe.set_ciphers(s)
                except ssl.SSLError:
                    raise ConfigError(
                        f"Unsupported cipher suite {s!r} in configuration "
                        f"{SSL_CIPHER_SUITES_CONFIG}", SSL_CIPHER_SUITES_CONFIG, suites) from None
                tls12.append(s)
        lo, hi = _VERSION_ORDER.index(min_v), _VERSION_ORDER.index(max_v)
        if tls12:
            ctx.set_ciphers(":".join(tls12))
        else:
            # No TLS 1.2 suite listed: as in Java, nothing below 1.3 can be
            # negotiated.
            lo = max(lo, _VERSION_ORDER.index("TLSv1.3"))
        if not tls13:
            hi = min(hi, _VERSION_ORDER.index("TLSv1.2"))
        elif set(tls13) != TLS13_CIPHER_SUITES - {"TLS_AES_128_CCM_SHA256",
                                                  "TLS_AES_128_CCM_8_SHA256"}:
            log.info("%s restricts TLS 1.3 suites to %s; Python's ssl module cannot restrict "
                     "TLS 1.3 suites, OpenSSL's defaults stay enabled",
                     SSL_CIPHER_SUITES_CONFIG, tls13)
        if lo > hi:
            raise ConfigError(
                f"{SSL_CIPHER_SUITES_CONFIG} lists no cipher suite usable with the enabled "
                f"protocols {min_v}..{max_v}", SSL_CIPHER_SUITES_CONFIG, suites)
        return _VERSION_ORDER[lo], _VERSION_ORDER[hi]

    def _key_material(self):
        c = self.configs
        ks_type = (_str(c, SSL_KEYSTORE_TYPE_CONFIG) or "").strip().upper() or None
        location = _str(c, SSL_KEYSTORE_LOCATION_CONFIG)
        inline_key = _password(c, SSL_KEYSTORE_KEY_CONFIG)
        inline_chain = _password(c, SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG)
        ks_password = _password(c, SSL_KEYSTORE_PASSWORD_CONFIG)
        key_password = _password(c, SSL_KEY_PASSWORD_CONFIG)

        # Kafka's DefaultSslEngineFactory.createKeystore rules and messages.
        if inline_key is not None:
            if ks_type not in (None, "PEM", "JKS"):
                # (Kafka also refuses its default JKS here; kchannel lets an
                # unset/default type pass since inline keys can only be PEM.)
                raise ConfigError("SSL private key can be specified only for PEM, but key store "
                                  f"type is {ks_type}.", SSL_KEYSTORE_TYPE_CONFIG, ks_type)
            if inline_chain is None:
                raise ConfigError("SSL private key is specified, but certificate chain is not "
                                  f"specified ({SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG}).",
                                  SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG)
            if location:
                raise ConfigError("Both SSL key store location and separate private key are "
                                  f"specified ({SSL_KEYSTORE_LOCATION_CONFIG}, "
                                  f"{SSL_KEYSTORE_KEY_CONFIG}).",
                                  SSL_KEYSTORE_LOCATION_CONFIG, location)
            if ks_password is not None:
                raise ConfigError("SSL key store password cannot be specified with PEM format, "
                                  "only key password may be specified "
                                  f"({SSL_KEY_PASSWORD_CONFIG}).", SSL_KEYSTORE_PASSWORD_CONFIG)
            pkey = _pem_key(inline_key.encode("utf-8"), key_password,
                            SSL_KEYSTORE_KEY_CONFIG, SSL_KEY_PASSWORD_CONFIG)
            chain = _pem_certs(inline_chain.encode("utf-8"),
                               SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG)
            if not chain:
                raise ConfigError(f"No certificate in {SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG}",
                                  SSL_KEYSTORE_CERTIFICATE_CHAIN_CONFIG)
            return _KeyMaterial(pkey, chain)
        if inline_chain is not None:
            raise ConfigError("SSL certificate chain is specified, but private key is not "
                              f"specified ({SSL_KEYSTORE_KEY_CONFIG})", SSL_KEYSTORE_KEY_CONFIG)

        if not location:
            if ks_password is not None:
                raise ConfigError("SSL key store is not specified, but key store password is "
                                  f"specified ({SSL_KEYSTORE_LOCATION_CONFIG}).",
                                  SSL_KEYSTORE_LOCATION_CONFIG)
            return None
        data = _read_file(location, SSL_KEYSTORE_LOCATION_CONFIG)
        kind = self._store_kind(ks_type, data, SSL_KEYSTORE_TYPE_CONFIG,
                                SSL_KEYSTORE_LOCATION_CONFIG, location)
        if kind == "PEM" and ks_password is not None:
            raise ConfigError("SSL key store password cannot be specified with PEM format, only "
                              f"key password may be specified ({SSL_KEY_PASSWORD_CONFIG})",
                              SSL_KEYSTORE_PASSWORD_CONFIG)
        if kind == "PKCS12" and ks_password is None:
            raise ConfigError("SSL key store is specified, but key store password is not "
                              f"specified ({SSL_KEYSTORE_PASSWORD_CONFIG}).",
                              SSL_KEYSTORE_PASSWORD_CONFIG)
        if kind == "PEM":
            keys, certs = _split_pem(data)
            if not keys:
                raise ConfigError(f"No private key in PEM keystore {location!r} "
                                  f"({SSL_KEYSTORE_LOCATION_CONFIG})",
                                  SSL_KEYSTORE_LOCATION_CONFIG, location)
            if not certs:
                raise ConfigError(f"No certificate in PEM keystore {location!r} "
                                  f"({SSL_KEYSTORE_LOCATION_CONFIG})",
                                  SSL_KEYSTORE_LOCATION_CONFIG, location)
            pkey = _pem_key(keys[0], key_password, SSL_KEYSTORE_LOCATION_CONFIG,
                            SSL_KEY_PASSWORD_CONFIG)
            chain = _pem_certs(b"".join(certs), SSL_KEYSTORE_LOCATION_CONFIG)
            return _KeyMaterial(pkey, chain)
        # PKCS12.  Java reads the key entry with ssl.key.password (default:
        # the store password); keytool writes PKCS12 files with one password
        # for both, which is what cryptography can read.
        p12 = _load_pkcs12(data, ks_password, SSL_KEYSTORE_LOCATION_CONFIG,
                           SSL_KEYSTORE_PASSWORD_CONFIG)
        if p12.key is None or p12.cert is None:
            raise ConfigError(f"PKCS12 keystore {location!r} ({SSL_KEYSTORE_LOCATION_CONFIG}) "
                              "holds no private key entry", SSL_KEYSTORE_LOCATION_CONFIG, location)
        chain = [p12.cert.certificate] + [c.certificate for c in p12.additional_certs]
        return _KeyMaterial(p12.key, chain)

    def _trust_pem(self):
        """The trusted certificates as one PEM string, or None if unset."""
        c = self.configs
        _, serialization, _ = _crypto()
        ts_type = (_str(c, SSL_TRUSTSTORE_TYPE_CONFIG) or "").strip().upper() or None
        location = _str(c, SSL_TRUSTSTORE_LOCATION_CONFIG)
        inline = _password(c, SSL_TRUSTSTORE_CERTIFICATES_CONFIG)
        password = _password(c, SSL_TRUSTSTORE_PASSWORD_CONFIG)
        # Kafka's DefaultSslEngineFactory.createTruststore rules and messages.
        if inline is not None:
            if ts_type not in (None, "PEM", "JKS"):
                raise ConfigError("SSL trust store certs can be specified only for PEM, but trust "
                                  f"store type is {ts_type}.", SSL_TRUSTSTORE_TYPE_CONFIG, ts_type)
            if location:
                raise ConfigError("Both SSL trust store location and separate trust certificates "
                                  f"are specified ({SSL_TRUSTSTORE_LOCATION_CONFIG}, "
                                  f"{SSL_TRUSTSTORE_CERTIFICATES_CONFIG}).",
                                  SSL_TRUSTSTORE_LOCATION_CONFIG, location)
            if password is not None:
                raise ConfigError("SSL trust store password cannot be specified for PEM format.",
                                  SSL_TRUSTSTORE_PASSWORD_CONFIG)
            certs = _pem_certs(inline.encode("utf-8"), SSL_TRUSTSTORE_CERTIFICATES_CONFIG)
        elif location:
            data = _read_file(location, SSL_TRUSTSTORE_LOCATION_CONFIG)
            kind = self._store_kind(ts_type, data, SSL_TRUSTSTORE_TYPE_CONFIG,
                                    SSL_TRUSTSTORE_LOCATION_CONFIG, location)
            if kind == "PEM":
                if password is not None and ts_type == "PEM":
                    raise ConfigError("SSL trust store password cannot be specified for PEM "
                                      "format.", SSL_TRUSTSTORE_PASSWORD_CONFIG)
                certs = _pem_certs(data, SSL_TRUSTSTORE_LOCATION_CONFIG)
            else:
                p12 = _load_pkcs12(data, password, SSL_TRUSTSTORE_LOCATION_CONFIG,
                                   SSL_TRUSTSTORE_PASSWORD_CONFIG)
                certs = [x.certificate for x in p12.additional_certs]
                if p12.cert is not None:
                    certs.insert(0, p12.cert.certificate)
        else:
            if password is not None:
                raise ConfigError("SSL trust store is not specified, but trust store password is "
                                  f"specified ({SSL_TRUSTSTORE_LOCATION_CONFIG}).",
                                  SSL_TRUSTSTORE_LOCATION_CONFIG)
            return None
        if not certs:
            raise ConfigError("The truststore holds no certificate",
                              SSL_TRUSTSTORE_LOCATION_CONFIG, location)
        return "".join(x.public_bytes(serialization.Encoding.PEM).decode("ascii")
                       for x in certs)

    @staticmethod
    def _store_kind(declared, data, type_key, location_key, location):
        if declared == "PEM":
            if not _looks_like_pem(data):
                raise ConfigError(f"{location_key} {location!r} is not a PEM file but "
                                  f"{type_key}=PEM", type_key, declared)
            return "PEM"
        if declared in ("PKCS12", "P12", "PFX"):
            return "PKCS12"
        if declared in (None, "JKS"):
            # Java 9+ keytool writes PKCS12 even for "JKS"; sniff the content.
            if _is_jks(data):
                raise _jks_error(location_key, location)
            return "PEM" if _looks_like_pem(data) else "PKCS12"
        if declared == "JCEKS":
            raise _jks_error(location_key, location)
        raise ConfigError(f"Invalid value {declared!r} for configuration {type_key}: "
                          "supported types are PEM and PKCS12 (and JKS files that are PKCS12)",
                          type_key, declared)

    def __repr__(self):
        return f"SslFactory(mode={self.mode!r})"
