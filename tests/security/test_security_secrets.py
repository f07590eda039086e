"""Secrets stay secret: real logins at DEBUG logging, configuration objects,
error texts and CLI output never show a password, HMAC, token, secret key,
salted password, SCRAM proof or signature, private key or store password.

Every check collects the whole ``kchannel`` logger tree at DEBUG (message,
arguments and exception text of every record) and searches it for each
secret in the forms it could leak in: as written, base64, hex.
"""
import base64
import binascii
import hashlib
import logging
import os
import subprocess
import sys

import pytest

from kchannel.client import KafkaClient
from kchannel.config.client import ClientConfig
from kchannel.config.jaas import parse_jaas_config, parse_jaas_file
from kchannel.config.server import ServerConfig
from kchannel.config.types import Password
from kchannel.errors import ConfigError, KChannelError, SaslAuthenticationError
from kchannel.network.ssl_factory import SslFactory
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl import scram as scram_mod
from kchannel.security.sasl.scram_store import credential_from_password
from kchannel.tokens.admin import DelegationTokenAdmin
from kchannel.tokens.token import DelegationToken, TokenInformation
from kchannel.principal import KafkaPrincipal

from tests.fixtures.sasl_servers import client_configs, start_server
from tests.fixtures.tokens import TokenServer, client_configs as token_client_configs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def forms(secret):
    """The ways a secret could show up in text."""
    if isinstance(secret, str):
        raw = secret.encode("utf-8")
        out = {secret}
    else:
        raw = bytes(secret)
        out = set()
    if len(raw) >= 8:
        out.add(base64.b64encode(raw).decode("ascii").rstrip("="))
        out.add(base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="))
        out.add(binascii.hexlify(raw).decode("ascii"))
        out.add(repr(raw)[2:-1])
    return {f for f in out if len(f) >= 6}


def pem_body_lines(pem):
    """Base64 lines of a PEM block (any one of them is a leak)."""
    return [ln for ln in pem.splitlines() if ln and not ln.startswith("-----")]


class Leaks:
    """Everything the kchannel logger tree emits, plus extra texts."""

    def __init__(self, caplog):
        self.caplog = caplog
        self.extra = []

    def add(self, *texts):
        self.extra.extend(str(t) for t in texts)

    def text(self):
        parts = list(self.extra)
        for r in self.caplog.records:
            if not r.name.startswith("kchannel"):
                continue
            parts.append(r.getMessage())
            parts.append(repr(r.args))
            parts.append(str(r.msg))
            if r.exc_info and r.exc_info[1] is not None:
                parts.append(logging.Formatter().formatException(r.exc_info))
            if r.exc_text:
                parts.append(r.exc_text)
        return "\n".join(parts)

    def assert_clean(self, secrets, logged=True):
        text = self.text()
        assert self.caplog.records or not logged, "nothing was logged: the check would prove nothing"
        for secret in secrets:
            for form in forms(secret):
                assert form not in text, f"secret leaked as {form!r}"


@pytest.fixture
def leaks(caplog):
    caplog.set_level(logging.DEBUG, logger="kchannel")
    return Leaks(caplog)


@pytest.fixture
def scram_spy(monkeypatch):
    """Records the SCRAM client's exchange (a passive wrapper: the
    mechanism runs unchanged) so the test knows the proof, the server
    signature and the salted password of this very login."""
    seen = []
    original = scram_mod.ScramSaslClient.evaluate_challenge

    def spy(self, challenge):
        out = original(self, challenge)
        seen.append((self.mechanism_name, bytes(challenge or b""), out))
        return out

    monkeypatch.setattr(scram_mod.ScramSaslClient, "evaluate_challenge", spy)
    return seen


def scram_secrets(seen, password):
    """Proofs, signatures, salted passwords and keys of a recorded exchange."""
    out = []
    for mech, challenge, response in seen:
        if response and b",p=" in response:
            proof = response.rsplit(b",p=", 1)[1]
            out.append(base64.b64decode(proof))
            out.append(proof.decode("ascii"))
        if challenge.startswith(b"v="):
            sig = challenge[2:].split(b",")[0]
            out.append(base64.b64decode(sig))
            out.append(sig.decode("ascii"))
        if challenge.startswith(b"r="):
            attrs = dict(a.split(b"=", 1) for a in challenge.split(b","))
            name = "sha256" if mech == "SCRAM-SHA-256" else "sha512"
            salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(attrs[b"s"]),
                                         int(attrs[b"i"]))
            out.append(salted)
            ck = scram_mod.client_key(scram_mod.mechanism_for(mech), salted)
            out.append(ck)
            out.append(scram_mod.server_key(scram_mod.mechanism_for(mech), salted))
            out.append(hashlib.new(name, ck).digest())
    return out


# ------------------------------------------------------------------ logins
@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_login_and_failed_login_log_no_secret(servers, pki, leaks, scram_spy, protocol,
                                               mechanism):
    server, port = start_server(protocol, pki=pki, failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs(protocol, mechanism, pki=pki)) as c:
        c.connect("127.0.0.1", port)
        leaks.add(repr(c), repr(c.selector.channel(c.node_id)),
                  repr(c.selector.channel(c.node_id).authenticator))
    wrong = "Wrong-Pass-4e1d"
    with pytest.raises(SaslAuthenticationError) as err:
        KafkaClient(client_configs(protocol, mechanism, password=wrong, pki=pki)) \
            .connect("127.0.0.1", port)
    leaks.add(str(err.value), repr(err.value), repr(err.value.args))
    secrets = ["alice-secret", wrong, "bob-secret", "key-secret", "store-secret",
               *pem_body_lines(pki.server.key_pem)]
    if mechanism.startswith("SCRAM"):
        assert scram_spy, "the SCRAM exchange was not seen"
        secrets += scram_secrets(scram_spy, "alice-secret")
        secrets += scram_secrets([s for s in scram_spy], wrong)
    leaks.assert_clean(secrets)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_oauthbearer_token_not_logged(servers, pki, leaks, protocol):
    server, port = start_server(protocol, pki=pki, failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs(protocol, "OAUTHBEARER", pki=pki)) as c:
        c.connect("127.0.0.1", port)
        auth = c.selector.channel(c.node_id).authenticator
        leaks.add(repr(c), repr(auth))
    text = leaks.text()
    # An unsecured JWS: base64url of '{"alg":"none"}' starts every token;
    # any compact JWS starts with the base64url of '{"'.
    assert "eyJ" not in text
    assert "auth=Bearer" not in text
    leaks.assert_clean([])


def test_delegation_token_create_and_login_log_no_hmac(tmp_path, pki, leaks, scram_spy):
    s = TokenServer(tmp_path, pki)
    try:
        with KafkaClient(token_client_configs(pki, "SCRAM-SHA-256", "alice",
                                              "alice-secret")) as c:
            c.connect("127.0.0.1", s.port)
            admin = DelegationTokenAdmin(c)
            token = admin.create(renewers=["User:bob"])
            described = admin.describe()
            admin.renew(token.hmac)
        assert described and described[0].hmac == token.hmac
        leaks.add(repr(token), str(token), repr(described), repr(token.token_info))
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            with KafkaClient(token_client_configs(pki, mech, token.token_info.token_id,
                                                  token.hmac_base64, token=True)) as c:
                c.connect("127.0.0.1", s.port)
                c.request(int(ApiKey.DESCRIBE_CLUSTER),
                          {"include_cluster_authorized_operations": False})
        with pytest.raises(SaslAuthenticationError) as err:
            KafkaClient(token_client_configs(pki, "SCRAM-SHA-256", token.token_info.token_id,
                                             "Bm9wZS1ub3BlLW5vcGU=", token=True)) \
                .connect("127.0.0.1", s.port)
        leaks.add(str(err.value), repr(s.service.manager), repr(s.server))
        entry = s.service.manager.get_token(token.token_info.token_id)
        leaks.add(repr(entry))
        assert s.seen == [("User:alice", True), ("User:alice", True)]
        secrets = [token.hmac, token.hmac_base64, "e2e-secret", "alice-secret",
                   *scram_secrets(scram_spy, "alice-secret"),
                   *scram_secrets(scram_spy, token.hmac_base64)]
        leaks.assert_clean(secrets)
    finally:
        s.close()


# ----------------------------------------------------------- config objects
SECRET = "Zq8-Secret-Value"


def test_password_repr_str_format():
    p = Password(SECRET)
    for text in (repr(p), str(p), f"{p}", "%s" % p, repr([p]), repr({"k": p})):
        assert SECRET not in text
    assert p.value == SECRET


def test_jaas_entry_and_config_repr():
    cfg = parse_jaas_config(f'{PLAIN_MODULE} required username="admin" password="{SECRET}" '
                            f'user_admin="{SECRET}" user_alice="{SECRET}1";')
    sections = parse_jaas_file(
        f'KafkaServer {{ {SCRAM_MODULE} required username="admin" password="{SECRET}"; }};\n'
        f'KafkaClient {{ {PLAIN_MODULE} required username="u" password="{SECRET}"; }};')
    texts = [repr(cfg), str(cfg), repr(cfg.entry), str(cfg.entry), repr(sections),
             str(sections), repr(cfg.entry.masked_options())]
    for t in texts:
        assert SECRET not in t
    assert cfg.option("password") == SECRET


def test_scram_credential_and_token_repr():
    cred = credential_from_password("SCRAM-SHA-512", SECRET)
    info = TokenInformation("tid", KafkaPrincipal("User", "alice"),
                            KafkaPrincipal("User", "alice"), [], 0, 1, 1)
    tok = DelegationToken(info, b"\x01hmac-bytes-of-the-token")
    texts = [repr(cred), str(cred), repr(tok), str(tok), repr([tok])]
    for t in texts:
        for f in (forms(cred.stored_key) | forms(cred.server_key) | forms(cred.salt)
                  | forms(tok.hmac) | forms(tok.hmac_base64)):
            assert f not in t


def _server_props(pki):
    jaas = (f'{PLAIN_MODULE} required username="admin" password="{SECRET}" '
            f'user_admin="{SECRET}" user_alice="{SECRET}-alice";')
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "delegation.token.secret.key": f"{SECRET}-dt",
    }
    props.update(pki.server_configs(keystore="pkcs12", truststore="pkcs12"))
    return props


def test_server_and_client_config_repr_describe_and_errors(pki):
    props = _server_props(pki)
    cfg = ServerConfig(props)
    texts = [repr(cfg), str(cfg), repr(cfg.describe()) if hasattr(cfg, "describe") else ""]
    client = ClientConfig({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="{SECRET}";',
        **pki.client_configs(keystore="inline-encrypted")})
    texts += [repr(client), str(client), repr(client.jaas())]
    # Errors about secret-typed keys name the key, never the value.
    bad = [
        {**props, "ssl.keystore.password": [SECRET]},
        {**props, "ssl.key.password": {SECRET: 1}},
        {**props, "delegation.token.secret.key": [SECRET]},
        {**props, "listener.name.sasl_ssl.ssl.truststore.password": (SECRET,)},
        {**props, "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_alice="{SECRET}"'},
        {**props, "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} optional user_alice="{SECRET}" x;'},
    ]
    for b in bad:
        with pytest.raises(ConfigError) as err:
            ServerConfig(b)
        errs = getattr(err.value, "errors", [err.value])
        texts += [str(e) for e in errs] + [repr(e) for e in errs] + [repr(e.value) for e in errs]
        texts += [str(e) for e in ServerConfig.validate(b)]
    for b in ({"security.protocol": "SSL", "ssl.keystore.password": [SECRET]},
              {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": f'{PLAIN_MODULE} required password="{SECRET}" b;'}):
        with pytest.raises(ConfigError) as err:
            ClientConfig(b)
        texts += [str(err.value), repr(err.value), repr(err.value.value)]
    for t in texts:
        for s in (SECRET, "store-secret", "key-secret", *pem_body_lines(pki.client.key_pem),
                  *pem_body_lines(pki.client.encrypted_key_pem)):
            assert s not in t, t


def test_ssl_factory_errors_and_repr(pki, leaks):
    good = SslFactory("client", pki.client_configs(keystore="pkcs12"))
    leaks.add(repr(good))
    for configs in (pki.server_configs(keystore="pkcs12") |
                    {"ssl.keystore.password": f"{SECRET}-wrong"},
                    pki.server_configs(keystore="inline-encrypted") |
                    {"ssl.key.password": f"{SECRET}-wrong"},
                    pki.server_configs(keystore="encrypted") |
                    {"ssl.key.password": f"{SECRET}-wrong"},
                    pki.server_configs(keystore="inline") |
                    {"ssl.keystore.key": f"-----BEGIN PRIVATE KEY-----\n{SECRET}AAAA\n"
                                         "-----END PRIVATE KEY-----"}):
        with pytest.raises(ConfigError) as err:
            SslFactory("server", configs)
        leaks.add(str(err.value), repr(err.value), repr(err.value.value))
    leaks.assert_clean([SECRET, "store-secret", "key-secret",
                        *pem_body_lines(pki.server.key_pem)], logged=False)


# ------------------------------------------------------------------- CLI
def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "kchannel", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("action", ["describe", "validate"])
def test_config_cli_hides_secrets(tmp_path, pki, action):
    props = _server_props(pki)
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'KafkaServer {{ {SCRAM_MODULE} required username="admin" '
                    f'password="{SECRET}-file"; }};\n')
    client = tmp_path / "client.properties"
    client.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="u" password="{SECRET}-c";\n'
        f"ssl.keystore.type=PKCS12\nssl.keystore.location={pki.client.p12_path}\n"
        f"ssl.keystore.password=store-secret\nssl.key.password=store-secret\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca.cert_path}\n")
    broken = tmp_path / "broken.properties"
    broken.write_text(path.read_text() + "ssl.key.password=\n"
                      f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} "
                      f'required user_alice="{SECRET}-b" oops;\n')
    runs = [_cli("config", action, "--config", str(path)),
            _cli("config", action, "--config", str(path), "--jaas-config", str(jaas)),
            _cli("config", action, "--client", "--config", str(client)),
            _cli("config", action, "--config", str(broken))]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[2].returncode == 0, runs[2].stderr
    assert runs[3].returncode != 0
    if action == "describe":
        assert "[hidden]" in runs[0].stdout
    for r in runs:
        for s in (SECRET, "store-secret"):
            assert s not in r.stdout + r.stderr, r.stdout + r.stderr


def test_delegation_token_cli_shows_hmac_only_where_kafka_does(tmp_path, pki):
    """``--create``/``--describe`` print the HMAC as Kafka's tool does; a
    failed login prints neither the HMAC nor a password."""
    s = TokenServer(tmp_path, pki)
    try:
        props = tmp_path / "alice.properties"
        props.write_text("".join(
            f"{k}={v}\n" for k, v in token_client_configs(pki, "SCRAM-SHA-256", "alice",
                                                          "alice-secret").items()))
        target = ["delegation-tokens", "--bootstrap-server", f"127.0.0.1:{s.port}",
                  "--command-config", str(props)]
        r = _cli(*target, "--create", "--max-life-time-period", "-1")
        assert r.returncode == 0, r.stderr
        [token] = s.service.manager.tokens()
        entry = s.service.manager.get_token(token.token_id)
        assert entry.hmac_base64 in r.stdout
        # Kafka's tool echoes the HMAC given on its command line in its
        # "Calling ... operation with hmac :" line; nowhere else.
        r = _cli(*target, "--renew", "--renew-time-period", "-1", "--hmac", entry.hmac_base64)
        assert r.returncode == 0, r.stderr
        assert [ln for ln in (r.stdout + r.stderr).split("\n") if entry.hmac_base64 in ln] \
            == [f"Calling renew token operation with hmac :{entry.hmac_base64} , "
                "renew-time-period :-1"]
        r = _cli(*target, "--expire", "--expiry-time-period", "-1", "--hmac",
                 "d3JvbmctaG1hYy12YWx1ZQ==")
        assert r.returncode != 0
        assert [ln for ln in (r.stdout + r.stderr).split("\n")
                if "d3JvbmctaG1hYy12YWx1ZQ" in ln] \
            == ["Calling expire token operation with hmac :d3JvbmctaG1hYy12YWx1ZQ== , "
                "expire-time-period :-1"]
        assert entry.hmac_base64 not in r.stdout + r.stderr
        bad = tmp_path / "bad.properties"
        bad.write_text(props.read_text().replace("alice-secret", "Wrong-Pass-4e1d"))
        r = _cli("delegation-tokens", "--bootstrap-server", f"127.0.0.1:{s.port}",
                 "--command-config", str(bad), "--describe")
        assert r.returncode != 0
        for out in (r.stdout, r.stderr):
            assert "Wrong-Pass-4e1d" not in out and "alice-secret" not in out
            assert entry.hmac_base64 not in out
    finally:
        s.close()


def test_oauthbearer_refused_tokens_not_in_errors_or_logs(leaks):
    import json
    import time

    from kchannel.security.sasl.mechanism import create_server

    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()

    now = int(time.time())
    tokens = [
        b64({"alg": "none"}) + "." + b64({"sub": "alice", "exp": now - 1000,
                                          "iat": now - 2000}) + ".",
        b64({"alg": "RS256", "kid": "x"}) + "." + b64({"sub": "alice", "exp": now + 1000,
                                                       "iat": now}) + ".c2lnbmF0dXJl",
        "eyJub3QtYS10b2tlbi1zZWNyZXQ",
        b64({"alg": "none"}) + "." + b64({"exp": now + 1000, "iat": now}) + ".",
    ]
    for tok in tokens:
        server = create_server("OAUTHBEARER", jaas_options={})
        challenge = server.evaluate_response(b"n,,\x01auth=Bearer " + tok.encode() + b"\x01\x01")
        with pytest.raises(SaslAuthenticationError) as err:
            server.evaluate_response(b"\x01")
        leaks.add(challenge, str(err.value), repr(err.value))
    text = leaks.text()
    for tok in tokens:
        for part in filter(None, tok.split(".")):
            assert part not in text


def test_serve_at_debug_logs_no_secret(tmp_path):
    """``kchannel serve`` at DEBUG with secrets in its properties and
    overrides, through a successful and a failed PLAIN login."""
    import re
    import signal
    import threading

    props = tmp_path / "server.properties"
    props.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "inter.broker.listener.name=SASL_PLAINTEXT\n"
        "sasl.enabled.mechanisms=PLAIN\nsasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_MODULE} required "
        f'username="admin" password="{SECRET}-a" user_admin="{SECRET}-a" '
        f'user_alice="{SECRET}-b";\n'
        f"delegation.token.secret.key={SECRET}-dt\n"
        f"log.dirs={tmp_path / 'data'}\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen([sys.executable, "-m", "kchannel", "--log-level", "DEBUG", "serve",
                          "--config", str(props), "--override",
                          f"ssl.key.password={SECRET}-k"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    lines = []
    port = threading.Event()
    found = {}

    def read():
        for raw in p.stdout:
            line = raw.decode("utf-8", "replace")
            lines.append(line)
            m = re.search(r"Awaiting socket connections on 127\.0\.0\.1:(\d+)", line)
            if m:
                found["port"] = int(m.group(1))
                port.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert port.wait(60), "".join(lines)
        ok = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" '
                                  f'password="{SECRET}-b";'}
        with KafkaClient(ok) as c:
            c.connect("127.0.0.1", found["port"])
        bad = dict(ok, **{"sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" '
                                              f'password="{SECRET}-wrong";'})
        with pytest.raises(SaslAuthenticationError):
            KafkaClient(bad).connect("127.0.0.1", found["port"])
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(60)
        reader.join(10)
    out = "".join(lines)
    assert "Successfully authenticated" in out and "Failed authentication" in out, out
    assert SECRET not in out, out


def test_configs_cli_errors_hide_scram_passwords(tmp_path, servers):
    """``kchannel configs`` echoes its arguments in its error line (as
    kafka-configs.sh does) and the credential in a malformed-credential
    error: the passwords in them are hidden."""
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"node.id=1\nlog.dirs={tmp_path / 'data'}\n")
    runs = [
        _cli("configs", "--bootstrap-server", "127.0.0.1:1", "--alter", "--add-config",
             f"SCRAM-SHA-256=[iterations=8192,password={SECRET}],"
             f"SCRAM-SHA-512=[password={SECRET}]x]", "--user", "alice"),
        _cli("configs", "--server-config", str(cfg), "--alter", "--add-config",
             f"SCRAM-SHA-256=[iterations=x,password={SECRET}]", "--user", "alice"),
        _cli("configs", "--server-config", str(cfg), "--alter", "--add-config",
             f"SCRAM-SHA-256=[iterations=100,password={SECRET}]", "--user", "alice"),
    ]
    for r in runs:
        assert r.returncode != 0
        assert SECRET not in r.stdout + r.stderr, r.stdout + r.stderr
    assert ("Error while executing config command with args '--bootstrap-server 127.0.0.1:1 "
            "--alter --add-config SCRAM-SHA-256=[iterations=8192,password=[hidden]],"
            "SCRAM-SHA-512=[password=[hidden]] --user alice'") in runs[0].stderr
    # A successful change prints no credential either.
    r = _cli("configs", "--server-config", str(cfg), "--alter", "--add-config",
             f"SCRAM-SHA-256=[password={SECRET}]", "--user", "alice")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
