"""Differential tests: hostile or unusual clients against Apache Kafka and
against ``kchannel serve``, with the same raw-socket client.

The twin is ``kchannel serve`` started from the session broker's own
``server.properties`` (``kafka_broker.server_properties()``), minus the KRaft
controller role, with the same SCRAM users.  Each row of ``SCENARIOS`` is a
short script of requests and raw bytes; it records what the server answered
(error codes, error messages, SASL mechanisms, TLS alerts) and whether it
closed the connection.  The record from Kafka must equal the record from
kchannel, except for the rows listed in ``DOCUMENTED``: those differences are
explained in README's Limitations, and the test pins both records so that a
change on either side shows up.

``test_java_client_sees_the_same_failures`` repeats the failed logins with
Kafka's own AdminClient as the client: against Kafka and against kchannel
serve it must end in the same exception class with the same message;
``test_java_client_logs_in_on_both`` logs it in on every listener and
mechanism of both (OIDC client credentials against the JWKS listener too).
"""
import base64
import hashlib
import hmac as hmac_mod
import os
import socket
import ssl
import struct
import time
import uuid
import warnings

import pytest

from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from tests.fixtures.kafka import LISTENERS, SCRAM_MODULE
from tests.fixtures.peers import start_kchannel_server
from tests.fixtures.sasl import unsecured_jws

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka]

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
CLOSED = "closed"
OPEN = "open"
SASL_MAX_RECEIVE = 524288          # Kafka's limit for a frame before authentication


# ------------------------------------------------------------------ the twin
@pytest.fixture(scope="module")
def twin(kafka_broker, tmp_path_factory):
    """``kchannel serve`` with the Kafka broker's configuration."""
    props = dict(kafka_broker.server_properties())
    for key in ("process.roles", "controller.quorum.voters", "controller.listener.names"):
        props.pop(key, None)
    names = list(LISTENERS)
    props["listeners"] = ",".join(f"{n}://127.0.0.1:0" for n in names)
    props["advertised.listeners"] = ",".join(f"{n}://127.0.0.1:0" for n in names)
    props["listener.security.protocol.map"] = ",".join(f"{n}:{LISTENERS[n]}" for n in names)
    directory = tmp_path_factory.mktemp("kchannel-twin")
    props["log.dirs"] = str(directory / "data")
    # Kafka without an authorizer lets anyone administer SCRAM credentials;
    # kchannel only super.users (README, Limitations), which Kafka ignores.
    props["super.users"] = f"User:{ADMIN}"
    kdc = kafka_broker.kdc
    srv = start_kchannel_server(directory, props, scram_users=dict(kafka_broker.users),
                                env=kdc.env if kdc else None)
    yield srv
    srv.stop_and_check()


class Side:
    """Where a scenario runs: ``address(listener)`` and the TLS settings."""

    def __init__(self, name, server, pki):
        self.name = name
        self.server = server
        self.pki = pki

    def address(self, listener):
        return "127.0.0.1", self.server.port(listener)


@pytest.fixture(scope="module")
def sides(kafka_broker, twin, pki):
    return [Side("kafka", kafka_broker, pki), Side("kchannel", twin, pki)]


# -------------------------------------------------------- a raw Kafka client
class Conn:
    """One connection, speaking Kafka frames by hand."""

    def __init__(self, side, listener, tls=None):
        self.sock = socket.create_connection(side.address(listener), timeout=15)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="localhost")
        self.correlation_id = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_frame(self, payload):
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _read_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def read_frame(self):
        """The next frame's payload, or None when the server closed."""
        try:
            head = self._read_exact(4)
            if head is None:
                return None
            return self._read_exact(struct.unpack(">i", head)[0])
        except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
            return None

    def request(self, api_key, version, body, header_version=None, response_version=None):
        """Send a request; its decoded response body (read at
        ``response_version``, default ``version``), or CLOSED."""
        self.correlation_id += 1
        header = RequestHeader(api_key, version, self.correlation_id, "differential",
                               header_version)
        try:
            self.send_frame(encode_request(header, body))
        except (ConnectionResetError, BrokenPipeError):
            return CLOSED
        payload = self.read_frame()
        if payload is None:
            return CLOSED
        correlation_id, response = decode_response(
            payload, api_key, version if response_version is None else response_version)
        assert correlation_id == self.correlation_id
        return response

    def raw(self, token):
        """A raw (SaslHandshake v0) token; the server's raw answer or CLOSED."""
        try:
            self.send_frame(token)
        except (ConnectionResetError, BrokenPipeError):
            return CLOSED
        payload = self.read_frame()
        return CLOSED if payload is None else payload

    def state(self, timeout=5.0):
        """CLOSED if the server closes the connection within ``timeout``
        seconds (Kafka delays the close after a failed login by
        connection.failed.authentication.delay.ms), else OPEN."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except socket.timeout:
            return OPEN
        except (ConnectionResetError, ssl.SSLError, OSError):
            return CLOSED
        return CLOSED if data == b"" else f"unexpected bytes {data!r}"


# ------------------------------------------------------------ SASL helpers
def raw_api_versions(conn, version=3):
    body = conn.request(18, version, {"client_software_name": "differential",
                                      "client_software_version": "1.0"})
    return body if body == CLOSED else body["error_code"]


def raw_handshake(conn, mechanism, version=1):
    body = conn.request(17, version, {"mechanism": mechanism})
    return body if body == CLOSED else (body["error_code"], sorted(body["mechanisms"]))


def authenticate(conn, token, version=2):
    body = conn.request(36, version, {"auth_bytes": token})
    if body == CLOSED:
        return body, None
    return (body["error_code"], body["error_message"]), body["auth_bytes"]


class Scram:
    """The client side of SCRAM (RFC 5802) by hand."""

    def __init__(self, mechanism, user, password, extensions=""):
        self.hash = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.bare = f"n={user},r={self.nonce}" + (f",{extensions}" if extensions else "")

    def first(self):
        return ("n,," + self.bare).encode()

    def final(self, server_first):
        fields = dict(f.split("=", 1) for f in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(self.hash().name, self.password.encode(),
                                     base64.b64decode(fields["s"]), int(fields["i"]))
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac_mod.new(salted, b"Client Key", self.hash).digest()
        stored = self.hash(client_key).digest()
        signature = hmac_mod.new(stored, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def plain_login(conn, user=ADMIN, password=ADMIN_PASSWORD):
    assert raw_handshake(conn, "PLAIN")[0] == 0
    result, _ = authenticate(conn, f"\0{user}\0{password}".encode())
    return result


def scram_login(conn, mechanism, user, password, extensions=""):
    """SaslHandshake v1 + SaslAuthenticate; the record of every step."""
    record = [raw_handshake(conn, mechanism)]
    scram = Scram(mechanism, user, password, extensions)
    result, server_first = authenticate(conn, scram.first())
    record.append(result)
    if result == CLOSED or result[0] != 0:
        return record
    result, _ = authenticate(conn, scram.final(server_first))
    record.append(result)
    return record


def admin_conn(side):
    conn = Conn(side, "SASL_PLAINTEXT")
    assert plain_login(conn) == (0, "")
    return conn


def wait_for_token(conn, token_id, present, timeout=30.0):
    """Kafka's controller records a token change and each broker applies it
    from the metadata log a moment later: wait until the broker's own token
    cache (what DescribeDelegationToken reads) agrees."""
    deadline = time.monotonic() + timeout
    while True:
        body = conn.request(41, 3, {"owners": None})
        if (token_id in [t["token_id"] for t in body["tokens"]]) == present:
            return
        assert time.monotonic() < deadline, f"token {token_id} present={not present}"
        time.sleep(0.05)


def create_token(side):
    """(token id, hmac) of a new token owned by admin, usable for login."""
    conn = admin_conn(side)
    try:
        body = conn.request(38, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                    "renewers": [], "max_lifetime_ms": -1})
        assert body["error_code"] == 0, body
        wait_for_token(conn, body["token_id"], True)
        return body["token_id"], body["hmac"]
    finally:
        conn.close()


def token_extensions():
    return "tokenauth=true"


# --------------------------------------------------------------- scenarios
def bad_password(mechanism):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        if mechanism == "PLAIN":
            record = [raw_handshake(conn, "PLAIN"),
                      authenticate(conn, f"\0{ADMIN}\0wrong".encode())[0]]
        else:
            record = scram_login(conn, mechanism, ADMIN, "wrong")
        return record + [conn.state()]
    return run


def unknown_user(mechanism):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        if mechanism == "PLAIN":
            record = [raw_handshake(conn, "PLAIN"),
                      authenticate(conn, b"\0nobody\0whatever")[0]]
        else:
            record = scram_login(conn, mechanism, "nobody", "whatever")
        return record + [conn.state()]
    return run


def mechanism_not_enabled(side):
    conn = Conn(side, "SASL_PLAINTEXT")
    return [raw_api_versions(conn), raw_handshake(conn, "DIGEST-MD5"), conn.state()]


def mechanism_not_enabled_on_listener(side):
    """OAUTH_JWKS enables only OAUTHBEARER."""
    conn = Conn(side, "OAUTH_JWKS")
    return [raw_handshake(conn, "PLAIN"), conn.state()]


def oversized_frame(size, after_api_versions):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        record = [raw_api_versions(conn)] if after_api_versions else []
        conn.sock.sendall(struct.pack(">i", size) + b"\0" * 64)
        return record + [conn.state()]
    return run


def oversized_frame_plaintext(side):
    """Above socket.request.max.bytes (100 MiB) on a listener without
    authentication."""
    conn = Conn(side, "PLAINTEXT")
    conn.sock.sendall(struct.pack(">i", 104857600 + 1) + b"\0" * 64)
    return [conn.state()]


def handshake_v0_plain(password):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        record = [raw_handshake(conn, "PLAIN", version=0)]
        answer = conn.raw(f"\0{ADMIN}\0{password}".encode())
        record.append(answer if answer == CLOSED else f"raw {len(answer)} bytes")
        if answer != CLOSED:
            body = conn.request(3, 0, {"topics": []})
            record.append(body if body == CLOSED else [b["node_id"] for b in body["brokers"]])
        return record + [raw_api_versions(conn, 0) if answer != CLOSED else conn.state()]
    return run


def handshake_v0_scram(password):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        record = [raw_handshake(conn, "SCRAM-SHA-256", version=0)]
        scram = Scram("SCRAM-SHA-256", ADMIN, password)
        server_first = conn.raw(scram.first())
        record.append(server_first if server_first == CLOSED else "server-first")
        if server_first != CLOSED:
            server_final = conn.raw(scram.final(server_first))
            record.append(server_final if server_final == CLOSED
                          else server_final.decode()[:2])
            if server_final != CLOSED:
                body = conn.request(3, 0, {"topics": []})
                record.append(body if body == CLOSED else [b["node_id"] for b in body["brokers"]])
                return record + [raw_api_versions(conn, 0)]
        return record + [conn.state()]
    return run


def request_before_authentication(api_key, version, body):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        answer = conn.request(api_key, version, body)
        return [answer if answer == CLOSED else answer.get("error_code"), conn.state()]
    return run


def request_after_handshake(api_key, version, body):
    def run(side):
        conn = Conn(side, "SASL_PLAINTEXT")
        record = [raw_handshake(conn, "PLAIN")]
        answer = conn.request(api_key, version, body)
        return record + [answer, conn.state()]
    return run


def api_versions_unsupported(listener):
    def run(side):
        conn = Conn(side, listener)
        # KIP-511: a version the broker does not know gets a v0
        # UNSUPPORTED_VERSION answer listing the ApiVersions range, and the
        # connection stays usable.
        body = conn.request(18, 127, b"\x00\x00\x00", header_version=2, response_version=0)
        if body == CLOSED:
            return [body]
        entry = [(k["api_key"], k["min_version"]) for k in body["api_keys"]
                 if k["api_key"] == 18]
        return [body["error_code"], entry, raw_api_versions(conn)]
    return run


def api_versions_invalid_software(side):
    conn = Conn(side, "SASL_PLAINTEXT")
    body = conn.request(18, 3, {"client_software_name": "bad name!",
                                "client_software_version": "1.0"})
    return [body if body == CLOSED else body["error_code"], raw_api_versions(conn),
            raw_handshake(conn, "PLAIN")]


def token_request_on_token_channel(side):
    token_id, token_hmac = create_token(side)
    conn = Conn(side, "SASL_PLAINTEXT")
    record = scram_login(conn, "SCRAM-SHA-256", token_id,
                         base64.b64encode(token_hmac).decode(), token_extensions())
    body = conn.request(38, 3, {"owner_principal_type": None, "owner_principal_name": None,
                                "renewers": [], "max_lifetime_ms": -1})
    record.append(body if body == CLOSED else body["error_code"])
    body = conn.request(41, 3, {"owners": None})
    record.append(body if body == CLOSED else body["error_code"])
    return record + [raw_api_versions(conn)]


def expired_token(side):
    token_id, token_hmac = create_token(side)
    admin = admin_conn(side)
    body = admin.request(40, 2, {"hmac": token_hmac, "expiry_time_period_ms": -1})
    record = [body["error_code"]]
    wait_for_token(admin, token_id, False)
    conn = Conn(side, "SASL_PLAINTEXT")
    record += scram_login(conn, "SCRAM-SHA-256", token_id,
                          base64.b64encode(token_hmac).decode(), token_extensions())
    record.append(conn.state())
    body = admin.request(39, 2, {"hmac": token_hmac, "renew_period_ms": -1})
    record.append(body["error_code"])
    body = admin.request(40, 2, {"hmac": token_hmac, "expiry_time_period_ms": -1})
    record.append(body["error_code"])
    admin.close()
    return record


def token_on_non_sasl_listener(side):
    conn = Conn(side, "PLAINTEXT")
    # Still usable afterwards: ApiVersions is answered.
    return [raw_handshake(conn, "SCRAM-SHA-256"), raw_api_versions(conn)]


def tls_error(exc):
    if isinstance(exc, ssl.SSLError):
        return f"SSLError {exc.reason}"
    return type(exc).__name__


def tls_version_mismatch(side):
    """A client that offers only TLS 1.1 (both servers enable 1.2 and 1.3)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(side.pki.ca.cert_path)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # deliberately old
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        conn = Conn(side, "SSL", tls=ctx)
    except (ssl.SSLError, OSError) as exc:
        return [tls_error(exc)]
    return ["handshake completed", raw_api_versions(conn)]


def mtls_without_certificate(side):
    ctx = ssl.create_default_context(cafile=side.pki.ca.cert_path)
    try:
        conn = Conn(side, "MTLS", tls=ctx)
    except (ssl.SSLError, OSError) as exc:
        return ["handshake failed", tls_error(exc)]
    # TLS 1.3: the client's side of the handshake ends before the server
    # has checked the certificate; the refusal arrives as an alert.
    try:
        result = raw_api_versions(conn)
    except (ssl.SSLError, OSError) as exc:
        result = tls_error(exc)
    return ["handshake completed", result]


def mtls_untrusted_certificate(side):
    ctx = ssl.create_default_context(cafile=side.pki.ca.cert_path)
    ident = side.pki.untrusted_client
    ctx.load_cert_chain(ident.chain_path, ident.key_path)
    try:
        conn = Conn(side, "MTLS", tls=ctx)
    except (ssl.SSLError, OSError) as exc:
        return ["handshake failed", tls_error(exc)]
    try:
        result = raw_api_versions(conn)
    except (ssl.SSLError, OSError) as exc:
        result = tls_error(exc)
    return ["handshake completed", result]


def sasl_after_authentication(side):
    conn = admin_conn(side)
    return [raw_handshake(conn, "PLAIN"),
            authenticate(conn, b"\0admin\0admin-secret")[0],
            raw_api_versions(conn)]


def admin_requests(side):
    """Ordinary admin requests whose whole answers must agree."""
    conn = admin_conn(side)
    record = []
    for api_key, version, body in (
            (48, 0, {"components": [{"entity_type": "user", "match_type": 0,
                                     "match": "alice"}], "strict": False}),
            (48, 1, {"components": [], "strict": False}),
            (50, 0, {"users": [{"name": "nobody"}, {"name": ""}, {"name": "alice"},
                               {"name": "admin"}, {"name": "admin"}]}),
            (51, 0, {"deletions": [{"name": "nobody", "mechanism": 1}],
                     "upsertions": [{"name": "carol", "mechanism": 1, "iterations": 1024,
                                     "salt": b"salt", "salted_password": b"x" * 32},
                                    {"name": "dave", "mechanism": 9, "iterations": 8192,
                                     "salt": b"salt", "salted_password": b"x" * 32}]}),
            (60, 0, {"include_cluster_authorized_operations": False}),
    ):
        answer = conn.request(api_key, version, body)
        if isinstance(answer, dict) and "results" in answer:
            # Kafka lists users, and each user's mechanisms, in hash map order.
            answer["results"] = sorted(answer["results"], key=lambda r: r["user"])
            for r in answer["results"]:
                if "credential_infos" in r:
                    r["credential_infos"].sort(key=lambda c: c["mechanism"])
        if isinstance(answer, dict):
            answer = {k: v for k, v in answer.items()
                      if k not in ("cluster_id", "brokers", "throttle_time_ms")}
        record.append(answer)
    return record


def oauthbearer(token, listener="SASL_PLAINTEXT"):
    """An OAUTHBEARER login with ``token`` (KIP-255: a refused token gets an
    error challenge, which the client acknowledges with a lone 0x01)."""
    def run(side):
        conn = Conn(side, listener)
        record = [raw_handshake(conn, "OAUTHBEARER")]
        value = token() if callable(token) else token
        result, challenge = authenticate(conn, f"n,,\x01auth=Bearer {value}\x01\x01".encode())
        record.append(result if result == CLOSED else (result, challenge))
        if result != CLOSED and result[0] == 0 and challenge:
            record.append(authenticate(conn, b"\x01")[0])
        return record + [conn.state()]
    return run


def gssapi_garbage(side):
    conn = Conn(side, "SASL_PLAINTEXT")
    record = [raw_handshake(conn, "GSSAPI")]
    if record[0] == CLOSED or record[0][0] != 0:
        return record
    record.append(authenticate(conn, b"\x60\x03garbage")[0])
    return record + [conn.state()]


def plaintext_on_tls_listener(side):
    """A Kafka request in the clear to a TLS listener."""
    conn = Conn(side, "SSL")
    conn.send_frame(encode_request(RequestHeader(18, 3, 1, "differential"),
                                   {"client_software_name": "differential",
                                    "client_software_version": "1.0"}))
    conn.sock.settimeout(5)
    data = b""
    try:
        while len(data) < 7:
            chunk = conn.sock.recv(7 - len(data))
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout) as exc:
        return [data.hex(), type(exc).__name__]
    # A TLS alert record (content type 21, 2 bytes: level, description) or
    # nothing, then the close.
    return [data.hex() if data else CLOSED, conn.state()]


def tls_on_plaintext_listener(side):
    """A TLS ClientHello to a PLAINTEXT listener: its first bytes read as a
    huge frame size."""
    ctx = ssl.create_default_context(cafile=side.pki.ca.cert_path)
    try:
        Conn(side, "PLAINTEXT", tls=ctx)
    except (ssl.SSLError, OSError) as exc:
        return [tls_error(exc)]
    return ["handshake completed"]


# The APIs kchannel serve answers (kchannel/server/broker.py).
SERVED_APIS = (3, 17, 18, 29, 30, 31, 36, 38, 39, 40, 41, 48, 50, 51, 60)


def api_versions_ranges(side):
    """The version range announced for each API kchannel serve answers."""
    conn = Conn(side, "PLAINTEXT")
    body = conn.request(18, 3, {"client_software_name": "differential",
                                "client_software_version": "1.0"})
    ranges = {k["api_key"]: [k["min_version"], k["max_version"]] for k in body["api_keys"]}
    return [body["error_code"], {key: ranges.get(key) for key in SERVED_APIS}]


SCENARIOS = {
    "bad-password-PLAIN": bad_password("PLAIN"),
    "bad-password-SCRAM-SHA-256": bad_password("SCRAM-SHA-256"),
    "bad-password-SCRAM-SHA-512": bad_password("SCRAM-SHA-512"),
    "unknown-user-PLAIN": unknown_user("PLAIN"),
    "unknown-user-SCRAM-SHA-256": unknown_user("SCRAM-SHA-256"),
    "mechanism-not-enabled": mechanism_not_enabled,
    "mechanism-not-enabled-on-listener": mechanism_not_enabled_on_listener,
    "oversized-first-frame": oversized_frame(SASL_MAX_RECEIVE + 1, False),
    "oversized-frame-after-api-versions": oversized_frame(SASL_MAX_RECEIVE + 1, True),
    "negative-frame-size": oversized_frame(-1, False),
    "oversized-frame-plaintext": oversized_frame_plaintext,
    "handshake-v0-PLAIN": handshake_v0_plain(ADMIN_PASSWORD),
    "handshake-v0-PLAIN-bad-password": handshake_v0_plain("wrong"),
    "handshake-v0-SCRAM": handshake_v0_scram(ADMIN_PASSWORD),
    "handshake-v0-SCRAM-bad-password": handshake_v0_scram("wrong"),
    "metadata-before-authentication": request_before_authentication(3, 1, {"topics": None}),
    "sasl-authenticate-before-handshake": request_before_authentication(
        36, 2, {"auth_bytes": b"\0admin\0admin-secret"}),
    "metadata-after-handshake": request_after_handshake(3, 1, {"topics": None}),
    "metadata-v12-with-topics-after-handshake": request_after_handshake(
        3, 12, {"topics": [{"name": "t1", "topic_id": uuid.UUID(int=0)},
                           {"name": None, "topic_id": uuid.UUID(int=7)}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False}),
    "describe-cluster-after-handshake": request_after_handshake(
        60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}),
    "create-token-after-handshake": request_after_handshake(
        38, 3, {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
                "max_lifetime_ms": -1}),
    "describe-scram-after-handshake": request_after_handshake(50, 0, {"users": None}),
    "renew-token-after-handshake": request_after_handshake(
        39, 2, {"hmac": b"x", "renew_period_ms": -1}),
    "expire-token-after-handshake": request_after_handshake(
        40, 2, {"hmac": b"x", "expiry_time_period_ms": -1}),
    "describe-tokens-after-handshake": request_after_handshake(41, 3, {"owners": None}),
    "describe-quotas-after-handshake": request_after_handshake(
        48, 1, {"components": [], "strict": False}),
    "find-coordinator-v3-after-handshake": request_after_handshake(
        10, 3, {"key": "g1", "key_type": 0}),
    "describe-cluster-v0-after-handshake": request_after_handshake(
        60, 0, {"include_cluster_authorized_operations": True}),
    "find-coordinator-after-handshake": request_after_handshake(
        10, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}),
    "api-versions-after-handshake": request_after_handshake(
        18, 3, {"client_software_name": "differential", "client_software_version": "1.0"}),
    "api-versions-unsupported-version-PLAINTEXT": api_versions_unsupported("PLAINTEXT"),
    "api-versions-unsupported-version-SASL": api_versions_unsupported("SASL_PLAINTEXT"),
    "api-versions-invalid-software-name": api_versions_invalid_software,
    "token-request-on-token-channel": token_request_on_token_channel,
    "expired-token": expired_token,
    "token-on-PLAINTEXT-listener": token_on_non_sasl_listener,
    "tls-version-mismatch": tls_version_mismatch,
    "mtls-without-client-certificate": mtls_without_certificate,
    "mtls-untrusted-client-certificate": mtls_untrusted_certificate,
    "sasl-after-authentication": sasl_after_authentication,
    "admin-requests": admin_requests,
    "api-versions-ranges": api_versions_ranges,
    "oauthbearer-expired-token": oauthbearer(lambda: unsecured_jws(ADMIN, -600)),
    "oauthbearer-not-a-jwt": oauthbearer("not-a-jwt"),
    "oauthbearer-unsecured-token-on-JWKS-listener": oauthbearer(
        lambda: unsecured_jws(ADMIN, 600), "OAUTH_JWKS"),
    "gssapi-garbage-token": gssapi_garbage,
    "plaintext-request-on-TLS-listener": plaintext_on_tls_listener,
    "tls-client-on-PLAINTEXT-listener": tls_on_plaintext_listener,
}

# What both announce for the APIs kchannel serve answers (kchannel's side).
SERVED_RANGES = {3: [0, 12], 17: [0, 1], 18: [0, 4], 29: [1, 3], 30: [1, 3], 31: [1, 3],
                 36: [0, 2], 38: [1, 3], 39: [1, 2], 40: [1, 2], 41: [1, 3], 48: [0, 1],
                 50: [0, 0], 51: [0, 0], 60: [0, 1]}

SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism SCRAM-SHA-256")


def documented(mechanisms):
    """The differences README's Limitations explains: scenario -> (Kafka's
    record, kchannel's record).  ``mechanisms``: the SaslHandshake list."""
    handshake_ok = (0, mechanisms)
    return {
        # SCRAM: an unknown user (or an unknown, expired or deleted token)
        # gets a server-first message and fails at the final one, like a
        # wrong password; Kafka fails the first message.
        "unknown-user-SCRAM-SHA-256": (
            [handshake_ok, (58, SCRAM_FAILED), CLOSED],
            [handshake_ok, (0, ""), (58, SCRAM_FAILED), CLOSED]),
        "expired-token": (
            [0, handshake_ok, (58, SCRAM_FAILED), CLOSED, 62, 62],
            [0, handshake_ok, (0, ""), (58, SCRAM_FAILED), CLOSED, 62, 62]),
        # TLS alerts are OpenSSL's, not Java's: the handshake fails either
        # way, with another alert.
        "mtls-without-client-certificate": (
            ["handshake completed", "SSLError SSLV3_ALERT_BAD_CERTIFICATE"],
            ["handshake completed", "SSLError TLSV13_ALERT_CERTIFICATE_REQUIRED"]),
        # kchannel serve's newest Metadata and DescribeCluster versions trail
        # Kafka 4.3.1's.
        "api-versions-ranges": (
            [0, {**SERVED_RANGES, 3: [0, 13], 60: [0, 2]}],
            [0, SERVED_RANGES]),
        "plaintext-request-on-TLS-listener": (
            ["15030300020250", CLOSED],      # alert record: fatal internal_error
            [CLOSED, CLOSED]),
        "mtls-untrusted-client-certificate": (
            ["handshake completed", "SSLError SSLV3_ALERT_CERTIFICATE_UNKNOWN"],
            ["handshake completed", "SSLError TLSV1_ALERT_UNKNOWN_CA"]),
    }


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_kafka_and_kchannel_agree(kafka_broker, sides, scenario):
    records = {side.name: SCENARIOS[scenario](side) for side in sides}
    if os.environ.get("KCHANNEL_DIFFERENTIAL_PRINT"):
        print(f"\n{scenario}\n  kafka:    {records['kafka']!r}\n"
              f"  kchannel: {records['kchannel']!r}")
    known = documented(sorted(kafka_broker.mechanisms("SASL_PLAINTEXT")))
    if scenario in known:
        assert (records["kafka"], records["kchannel"]) == known[scenario], records
    else:
        assert records["kafka"] == records["kchannel"], records


def test_every_documented_difference_is_in_the_readme():
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    for phrase in ("fails at the final message exactly like a wrong password",
                   "an unknown, expired or deleted delegation token",
                   "Kafka builds one for any API it can parse",
                   "TLS alerts come from OpenSSL",
                   "OpenSSL sends none for a first record that is not TLS",
                   "Metadata up to v12 and DescribeCluster up to v1"):
        assert phrase in readme, phrase


# ---------------------------------------------- the Java client as the peer
def java_failure_cases(broker):
    """case -> (listener, client configs) for failed logins (Java keys),
    bootstrap left to the side."""
    token = (f"{SCRAM_MODULE} required username=\"NoSuchTokenId\" "
             "password=\"bm8tc3VjaC1obWFj\" tokenauth=\"true\";")

    def with_jaas(configs, jaas):
        return dict(configs, **{"sasl.jaas.config": jaas})
    return {
        "wrong-password-PLAIN": ("SASL_PLAINTEXT", broker.client_configs(
            "SASL_PLAINTEXT", "PLAIN", password="wrong-secret")),
        "wrong-password-SCRAM-SHA-512": ("SASL_SSL", broker.client_configs(
            "SASL_SSL", "SCRAM-SHA-512", password="wrong-secret")),
        "unknown-user-PLAIN": ("SASL_PLAINTEXT", broker.client_configs(
            "SASL_PLAINTEXT", "PLAIN", user="nobody", password="x")),
        "unknown-user-SCRAM-SHA-256": ("SASL_PLAINTEXT", broker.client_configs(
            "SASL_PLAINTEXT", "SCRAM-SHA-256", user="nobody", password="x")),
        "unknown-token-SCRAM-SHA-256": ("SASL_PLAINTEXT", with_jaas(broker.client_configs(
            "SASL_PLAINTEXT", "SCRAM-SHA-256"), token)),
        "mechanism-not-enabled": ("OAUTH_JWKS", broker.client_configs(
            "SASL_PLAINTEXT", "PLAIN")),
        "unsecured-jwt-on-JWKS-listener": ("OAUTH_JWKS", broker.client_configs(
            "SASL_PLAINTEXT", "OAUTHBEARER")),
        "token-on-PLAINTEXT-listener": ("PLAINTEXT", with_jaas(broker.client_configs(
            "SASL_PLAINTEXT", "SCRAM-SHA-256"), token)),
        "token-on-SSL-listener": ("SSL", with_jaas(broker.client_configs(
            "SASL_SSL", "SCRAM-SHA-512"), token)),
        "sasl-client-on-PLAINTEXT-listener": ("PLAINTEXT", broker.client_configs(
            "SASL_PLAINTEXT", "PLAIN")),
    }


def test_java_client_sees_the_same_failures(kafka_broker, sides, kafka_java):
    """Kafka's AdminClient, one JVM, each failed login against Kafka and
    against kchannel serve: the same exception class and message."""
    checks = []
    for case, (listener, configs) in sorted(java_failure_cases(kafka_broker).items()):
        for side in sides:
            host, port = side.address(listener)
            checks.append({"id": f"{side.name}:{case}", "op": "describeCluster",
                           "config": dict(configs, **{"bootstrap.servers": f"{host}:{port}",
                                                      "default.api.timeout.ms": "15000"})})
    results = kafka_java.probe(checks)
    for case in java_failure_cases(kafka_broker):
        kafka, kchannel = results[f"kafka:{case}"], results[f"kchannel:{case}"]
        assert not kafka["ok"], kafka
        assert (kafka["error"], kafka["message"]) == (kchannel.get("error"),
                                                       kchannel.get("message")), case


def test_java_client_logs_in_on_both(kafka_broker, sides, kafka_java):
    """Kafka's AdminClient on every listener x mechanism of the broker's
    configuration (OIDC client-credentials login against the JWKS listener
    included): Kafka and its kchannel twin both let it in and describe
    themselves the same way."""
    combos = [(l, None) for l in ("PLAINTEXT", "SSL", "MTLS")]
    combos += [(l, m) for l in ("SASL_PLAINTEXT", "SASL_SSL", "REAUTH")
               for m in kafka_broker.mechanisms(l)]
    combos += [("OAUTH_JWKS", "OAUTHBEARER")]
    checks = []
    for listener, mechanism in combos:
        configs = kafka_broker.client_configs(listener, mechanism)
        host = configs["bootstrap.servers"].rsplit(":", 1)[0]
        for side in sides:
            checks.append({"id": f"{side.name}:{listener}:{mechanism}", "op": "describeCluster",
                           "config": dict(configs, **{
                               "bootstrap.servers": f"{host}:{side.address(listener)[1]}"})})
    results = kafka_java.probe(checks, kdc=kafka_broker.kdc, jvm_opts=kafka_broker.jvm_opts())
    for listener, mechanism in combos:
        got = {}
        for side in sides:
            r = results[f"{side.name}:{listener}:{mechanism}"]
            assert r["ok"], (side.name, listener, mechanism, r)
            assert r["nodes"] == [[1, "127.0.0.1", side.address(listener)[1]]], r
            got[side.name] = (r["controller"], r["clusterId"] is not None)
        assert got["kafka"] == got["kchannel"], (listener, mechanism, got)
