"""SASL GSSAPI (Kerberos V5, RFC 4752) client and server mechanisms.

Kafka delegates GSSAPI to the JDK's ``GssKrb5Client`` / ``GssKrb5Server``;
real clients (kafka-python, aiokafka, librdkafka) and Java brokers expect that
exact token flow, so both halves here reproduce it:

Context establishment (``gss_init_sec_context`` / ``gss_accept_sec_context``
tokens passed through unchanged)::

    client                                   server
    AP-REQ (initial response)        ->
                                     <-      AP-REP, if the client asked for
                                             mutual authentication (the context
                                             is complete on the server now)
    b"" (context complete, no token) ->
                                     <-      wrap([layers=0x01, maxbuf(3)=65536])

If the client did not ask for mutual authentication (the JDK client does not
when only the "auth" QOP is allowed, Kafka's default) the server's context is
complete after the AP-REQ and it answers the AP-REQ directly with the wrapped
security-layer offer.

Security-layer negotiation (RFC 4752 section 3.1)::

    wrap([selected=0x01, maxbuf(3)=0, authzid...]) ->
                                     <-      (nothing: complete)

Kafka supports only "auth" (no security layer), so both sides offer/select
bit 0x01.  The client's maxbuf is 0 as RFC 4752 requires when no layer is
selected (current JDKs do the same).  The client sends its own Kerberos
principal as the authorization id (Kafka passes the login principal);
the server ignores whatever authorization id the client asks for and
authorizes the authenticated principal, as Kafka's
``SaslServerCallbackHandler`` does — old kafka-python versions send the
*service* name there.

Credentials come from JAAS ``Krb5LoginModule`` options, like Kafka:

* client: ``useKeyTab=true keyTab=... principal=...`` acquires initiator
  credentials straight from the keytab into a private in-memory ccache (no
  ``kinit`` needed); ``useTicketCache=true`` (optionally ``ticketCache=...``)
  uses an existing ccache; with neither, the process default credentials
  (``KRB5CCNAME`` / ``KRB5_CLIENT_KTNAME``) are used.
* server: ``keyTab=... principal=kafka/host@REALM`` acquires acceptor
  credentials for exactly that principal.

Credentials are cached per (principal, keytab/ccache) for the process, as
Kafka logs in once per channel builder, so each connection does not cost an
AS exchange.
"""
import hashlib
import os
import threading

from kchannel.config.types import reveal
from kchannel.errors import ConfigError, SaslAuthenticationError
from kchannel.security.sasl.interfaces import (
    SaslClientMechanism, SaslServerMechanism, jaas_option)
from kchannel.log import get_logger
from kchannel.utils import run_blocking

try:
    import gssapi
    from gssapi.raw.misc import GSSError
except ImportError as exc:  # pragma: no cover - exercised only without gssapi
    raise ImportError(
        f"SASL mechanism GSSAPI needs the 'gssapi' package (python-gssapi): {exc}") from exc

log = get_logger("kchannel.security.sasl.gssapi")

MECHANISM = "GSSAPI"

# RFC 4752 security layer bits.
NO_PROTECTION = 0x01
INTEGRITY_ONLY_PROTECTION = 0x02
PRIVACY_PROTECTION = 0x04

# javax.security.sasl.maxbuffer default of the JDK implementation.
DEFAULT_MAX_BUFFER = 65536

QOP_PROPERTY = "javax.security.sasl.qop"
MAX_BUFFER_PROPERTY = "javax.security.sasl.maxbuffer"
RAW_SEND_SIZE_PROPERTY = "javax.security.sasl.rawsendsize"
BOUND_SERVER_NAME_PROPERTY = "javax.security.sasl.bound.server.name"

SERVICE_NAME_CONFIG = "sasl.kerberos.service.name"

# What Kafka's server tells a client whose credentials were refused: the
# GSS-API reason stays in the broker log (it can reveal whether a principal
# exists or which keys the broker holds).
SERVER_FAILURE_MESSAGE = ("Authentication failed during authentication due to invalid "
                          "credentials with SASL mechanism GSSAPI")

_KRB5 = gssapi.MechType.kerberos


def _flag(value):
    return str(value).strip().lower() == "true"


def _gss_reason(exc):
    """One-line human reason of a GSS-API error."""
    if isinstance(exc, GSSError):
        try:
            return exc.gen_message()
        except Exception:  # noqa: BLE001 - formatting must never hide the error
            pass
    return str(exc) or type(exc).__name__


def service_name(jaas_options, configs):
    """Kafka's ``KerberosLogin.getServiceName``: JAAS ``serviceName`` or
    ``sasl.kerberos.service.name``; both set and different is an error."""
    jaas_name = jaas_option(jaas_options, "serviceName")
    config_name = reveal((configs or {}).get(SERVICE_NAME_CONFIG))
    if jaas_name is not None and config_name is not None and jaas_name != config_name:
        raise ConfigError(
            "Conflicting serviceName values found in JAAS and Kafka configs value in JAAS "
            f"file {jaas_name}, value in Kafka config {config_name}",
            key=SERVICE_NAME_CONFIG, value=config_name)
    if jaas_name is not None:
        return jaas_name
    if config_name is not None:
        return config_name
    raise ConfigError("No serviceName defined in either JAAS or Kafka config",
                      key=SERVICE_NAME_CONFIG)


# -- credential cache -----------------------------------------------------------

_CRED_LOCK = threading.Lock()
_CRED_CACHE = {}


def _cached(key, factory):
    with _CRED_LOCK:
        creds = _CRED_CACHE.get(key)
        if creds is not None:
            try:
                # An expired or destroyed credential must be re-acquired; with a
                # client keytab in the store libkrb5 refreshes the TGT itself.
                if creds.lifetime is None or creds.lifetime > 0:
                    return creds
            except GSSError:
                pass
        creds = factory()
        _CRED_CACHE[key] = creds
        return creds


def clear_credential_cache():
    """Forget cached credentials (after keytab rotation, or in tests)."""
    with _CRED_LOCK:
        _CRED_CACHE.clear()


def _principal_name(principal):
    return gssapi.Name(principal, gssapi.NameType.kerberos_principal)


def client_credentials(jaas_options):
    """Initiator credentials described by Krb5LoginModule JAAS options.

    Raises ``SaslAuthenticationError`` naming the principal and keytab when
    they cannot be used.
    """
    principal = jaas_option(jaas_options, "principal")
    use_keytab = _flag(jaas_option(jaas_options, "useKeyTab", "false"))
    keytab = jaas_option(jaas_options, "keyTab")
    use_ticket_cache = _flag(jaas_option(jaas_options, "useTicketCache", "false"))
    ticket_cache = jaas_option(jaas_options, "ticketCache")

    if use_keytab:
        if not keytab:
            raise SaslAuthenticationError(
                "Could not login: Krb5LoginModule option useKeyTab=true needs keyTab",
                mechanism=MECHANISM)
        if not principal:
            raise SaslAuthenticationError(
                f"Could not login: Krb5LoginModule option useKeyTab=true needs principal "
                f"(keyTab {keytab})", mechanism=MECHANISM)
        if not os.path.isfile(keytab):
            raise SaslAuthenticationError(
                f"Could not login as {principal}: keyTab {keytab} does not exist or is "
                "not a file", mechanism=MECHANISM)
        # One private in-memory ccache per (principal, keytab): tickets fetched
        # for one connection are reused by the next, and nothing touches the
        # user's own ccache.
        digest = hashlib.sha256(f"{principal}\0{os.path.abspath(keytab)}".encode()).hexdigest()
        ccache = f"MEMORY:kchannel-{digest[:24]}"
        store = {"client_keytab": keytab, "ccache": ccache}
        key = ("initiate", principal, os.path.abspath(keytab))
    elif use_ticket_cache:
        store = {"ccache": ticket_cache} if ticket_cache else None
        key = ("initiate-ccache", principal, ticket_cache)
    else:
        store = None
        key = ("initiate-default", principal)

    def acquire():
        name = _principal_name(principal) if principal else None
        return gssapi.Credentials(name=name, usage="initiate", mechs=[_KRB5], store=store)

    try:
        return _cached(key, acquire)
    except GSSError as exc:
        where = f" from keyTab {keytab}" if use_keytab else (
            f" from ticket cache {ticket_cache}" if ticket_cache else "")
        raise SaslAuthenticationError(
            f"Could not login as {principal or 'the default principal'}{where}: "
            f"{_gss_reason(exc)}", mechanism=MECHANISM) from exc


def server_credentials(jaas_options, configs, server_host):
    """Acceptor credentials: the JAAS ``principal`` from ``keyTab`` (or, without
    a principal, ``<sasl.kerberos.service.name>/<server_host>``; without
    either, any key in the keytab)."""
    principal = jaas_option(jaas_options, "principal")
    keytab = jaas_option(jaas_options, "keyTab")
    if keytab and not os.path.isfile(keytab):
        raise SaslAuthenticationError(
            f"Could not login as {principal or 'service'}: keyTab {keytab} does not exist "
            "or is not a file", mechanism=MECHANISM)
    if principal:
        name = _principal_name(principal)
    else:
        try:
            svc = service_name(jaas_options, configs)
        except ConfigError:
            svc = None
        name = (gssapi.Name(f"{svc}@{server_host}", gssapi.NameType.hostbased_service)
                if svc and server_host else None)
    store = {"keytab": keytab} if keytab else None
    key = ("accept", principal, str(name) if name is not None else None,
           os.path.abspath(keytab) if keytab else None)

    def acquire():
        return gssapi.Credentials(name=name, usage="accept", mechs=[_KRB5], store=store)

    try:
        return _cached(key, acquire)
    except GSSError as exc:
        raise SaslAuthenticationError(
            f"Could not login as {principal or name or 'service'}"
            f"{' from keyTab ' + keytab if keytab else ''}: {_gss_reason(exc)}",
            mechanism=MECHANISM) from exc


# -- client ------------------------------------------------------------------------

class GssapiSaslClient(SaslClientMechanism):
    """The JDK ``GssKrb5Client`` flow: context tokens, then the RFC 4752 final
    handshake selecting "auth" with the client principal as authorization id."""

    mechanism_name = MECHANISM

    def __init__(self, service, server_host, jaas_options=None, authorization_id=None,
                 mutual_auth=False):
        if not server_host:
            raise ConfigError("GSSAPI needs the broker host name to build the service "
                              "principal <service>/<host>")
        self.service = service
        self.server_host = server_host
        self._jaas_options = dict(jaas_options or {})
        self._authorization_id = authorization_id
        self._mutual = mutual_auth
        self._ctx = None
        self._final_handshake = False
        self._complete = False
        self._send_max_buf = 0
        self._target = gssapi.Name(f"{service}@{server_host}", gssapi.NameType.hostbased_service)

    def has_initial_response(self):
        return True

    def _fail(self, what, exc):
        error = f"An error: ({what}: {_gss_reason(exc)}) occurred when evaluating SASL " \
                "token received from the Kafka Broker."
        if isinstance(exc, GSSError) and "not found in Kerberos database" in _gss_reason(exc):
            # Kafka adds this hint for KDC_ERR_S_PRINCIPAL_UNKNOWN.
            error += (" Users must configure FQDN of kafka brokers when authenticating using "
                      "SASL and the broker host name must match the hostname in "
                      f"`principal/hostname@realm` (looked for {self.service}/"
                      f"{self.server_host}).")
        error += " Kafka Client will go to AUTHENTICATION_FAILED state."
        log.warning("GSSAPI authentication to %s failed: %s", self.server_host, error)
        raise SaslAuthenticationError(error, mechanism=MECHANISM) from exc

    def _start(self):
        creds = client_credentials(self._jaas_options)
        flags = [gssapi.RequirementFlag.confidentiality, gssapi.RequirementFlag.integrity]
        if self._mutual:
            flags += [gssapi.RequirementFlag.mutual_authentication,
                      gssapi.RequirementFlag.out_of_sequence_detection]
        self._ctx = gssapi.SecurityContext(name=self._target, creds=creds, usage="initiate",
                                           mech=_KRB5, flags=flags)

    def _first_step(self):
        self._start()
        return self._ctx.step()

    def evaluate_challenge(self, challenge):
        if self._complete:
            raise SaslAuthenticationError("GSSAPI authentication already complete",
                                          mechanism=MECHANISM)
        challenge = bytes(challenge or b"")
        if self._final_handshake:
            return self._do_final_handshake(challenge)
        try:
            if self._ctx is None:
                # Credentials from the keytab and the service ticket may
                # need the KDC: on an event loop that goes to an executor.
                token = run_blocking(self._first_step)
            else:
                token = self._ctx.step(challenge)
        except SaslAuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - GSSError or garbage in the token
            self._fail("GSS initiate failed", exc)
        if self._ctx.complete:
            self._final_handshake = True
            if token is None:
                # RFC 2222 7.2.1: context done, the client answers with no data.
                return b""
        return token if token is not None else b""

    def _do_final_handshake(self, challenge):
        if not challenge:
            # The server echoed an empty token (S0): answer with nothing.
            return b""
        try:
            layers = self._ctx.unwrap(challenge).message
        except Exception as exc:  # noqa: BLE001
            self._fail("Final handshake failed", exc)
        if len(layers) != 4:
            self._fail("Final handshake failed",
                       ValueError(f"security layer offer of {len(layers)} bytes, expected 4"))
        if not layers[0] & NO_PROTECTION:
            self._fail("Final handshake failed",
                       ValueError("No common protection layer between client and server"))
        self._send_max_buf = int.from_bytes(layers[1:4], "big")
        authzid = self._authorization_id
        if authzid is None:
            authzid = str(self._ctx.initiator_name)
        # maxbuf MUST be 0 when no security layer is selected (RFC 4752 3.1).
        reply = bytes([NO_PROTECTION, 0, 0, 0]) + authzid.encode("utf-8")
        try:
            token = self._ctx.wrap(reply, False).message
        except Exception as exc:  # noqa: BLE001
            self._fail("Final handshake failed", exc)
        self._complete = True
        log.debug("GSSAPI authenticated as %s to %s", authzid, self._ctx.target_name)
        return token

    def is_complete(self):
        return self._complete

    def get_negotiated_property(self, name):
        if not self._complete:
            return None
        if name == QOP_PROPERTY:
            return "auth"
        if name == RAW_SEND_SIZE_PROPERTY:
            return self._send_max_buf
        return None

    @property
    def authorization_id(self):
        return self._authorization_id or (
            str(self._ctx.initiator_name) if self._ctx is not None and self._ctx.complete
            else None)

    def dispose(self):
        self._ctx = None


# -- server --------------------------------------------------------------------------

class GssapiSaslServer(SaslServerMechanism):
    """The JDK ``GssKrb5Server`` flow (handshake stages 0, 1, 2)."""

    mechanism_name = MECHANISM

    def __init__(self, creds, service=None, max_buffer=DEFAULT_MAX_BUFFER):
        self._ctx = gssapi.SecurityContext(creds=creds, usage="accept")
        self._service = service
        self._max_buffer = max_buffer
        self._stage = 0
        self._complete = False
        self._peer = None
        self._me = None
        self._authzid = None
        self._requested_authzid = None
        self._client_max_buf = None

    def _fail(self, detail, exc=None):
        log.warning("GSSAPI authentication failed: %s", detail)
        error = SaslAuthenticationError(SERVER_FAILURE_MESSAGE, mechanism=MECHANISM)
        error.detail = detail
        if exc is not None:
            raise error from exc
        raise error

    def evaluate_response(self, response, now=None):
        if self._complete:
            self._fail("SASL authentication already complete")
        response = bytes(response or b"")
        if self._stage == 1:
            return self._do_handshake1(response)
        if self._stage == 2:
            return self._do_handshake2(response)
        try:
            token = self._ctx.step(response)
        except Exception as exc:  # noqa: BLE001 - any bad token fails closed
            self._fail(f"GSS initiate failed: {_gss_reason(exc)}", exc)
        if self._ctx.complete:
            self._stage = 1
            self._peer = str(self._ctx.initiator_name)
            self._me = str(self._ctx.target_name)
            # The ticket must be for our service (JDK: "GSS context targ name
            # protocol error").
            if self._service is not None:
                first = self._me.replace("@", "/").split("/")[0]
                if first.lower() != self._service.lower():
                    self._fail(f"GSS context targ name protocol error: {self._me}")
            if token is None:
                return self._do_handshake1(b"")
        return token if token is not None else b""

    def _do_handshake1(self, response):
        if response:
            self._fail("Handshake expecting no response data from server")
        offer = bytes([NO_PROTECTION]) + self._max_buffer.to_bytes(3, "big")
        try:
            token = self._ctx.wrap(offer, False).message
        except Exception as exc:  # noqa: BLE001
            self._fail(f"Problem wrapping handshake1: {_gss_reason(exc)}", exc)
        self._stage = 2
        return token

    def _do_handshake2(self, response):
        try:
            msg = self._ctx.unwrap(response).message
        except Exception as exc:  # noqa: BLE001
            self._fail(f"Final handshake step failed: {_gss_reason(exc)}", exc)
        if len(msg) < 4:
            self._fail(f"Final handshake step failed: {len(msg)} bytes, expected at least 4")
        selected = msg[0]
        if not selected & NO_PROTECTION:
            self._fail(f"Client selected unsupported protection: {selected}")
        self._client_max_buf = int.from_bytes(msg[1:4], "big")
        if len(msg) > 4:
            try:
                self._requested_authzid = msg[4:].decode("utf-8")
            except UnicodeDecodeError:
                self._requested_authzid = msg[4:].decode("utf-8", "replace")
        else:
            self._requested_authzid = self._peer
        # Kafka's SaslServerCallbackHandler authorizes every authenticated
        # client as itself: the authorization id is the Kerberos principal that
        # authenticated, whatever the client asked for.
        self._authzid = self._peer
        self._complete = True
        log.debug("Successfully authenticated client: authenticationID=%s; authorizationID=%s.",
                  self._peer, self._requested_authzid)
        return None

    def is_complete(self):
        return self._complete

    def get_authorization_id(self):
        if not self._complete:
            raise SaslAuthenticationError("Authentication incomplete", mechanism=MECHANISM)
        return self._authzid

    @property
    def requested_authorization_id(self):
        """The authorization id the client sent (informational only)."""
        return self._requested_authzid

    def get_negotiated_property(self, name):
        if not self._complete:
            return None
        if name == QOP_PROPERTY:
            return "auth"
        if name == MAX_BUFFER_PROPERTY:
            return str(self._max_buffer)
        if name == BOUND_SERVER_NAME_PROPERTY:
            parts = self._me.replace("@", "/").split("/")
            return parts[1] if len(parts) > 2 else None
        return None

    def dispose(self):
        self._ctx = None


# -- factories ---------------------------------------------------------------------------

def create_client(mechanism=MECHANISM, *, jaas_options=None, configs=None, server_host=None,
                  **kw):
    service = service_name(jaas_options, configs)
    return GssapiSaslClient(service, server_host, jaas_options,
                            authorization_id=kw.get("authorization_id"),
                            mutual_auth=bool(kw.get("mutual_auth", False)))


def create_server(mechanism=MECHANISM, *, jaas_options=None, configs=None, callbacks=None,
                  server_host=None, now=None, **kw):
    creds = server_credentials(jaas_options, configs, server_host)
    principal = jaas_option(jaas_options, "principal")
    if principal:
        service = principal.split("@")[0].split("/")[0]
    else:
        try:
            service = service_name(jaas_options, configs)
        except ConfigError:
            service = None
    return GssapiSaslServer(creds, service=service)

