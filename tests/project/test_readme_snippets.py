"""The README's configurations, commands and Python examples, run for real.

Every fenced block in the README's sections is preceded by
``<!-- snippet: NAME -->`` (checked), and every snippet is used by a test
below (checked against ``USED``).  Each test is a scenario in a scratch
directory: properties blocks are written to the file their first comment
line names (``# server.properties``, ``# client.properties`` ...); servers
start in-process with ``kchannel.server.build_server`` (what ``kchannel
serve`` runs) and clients connect through ``kchannel.client.KafkaClient``,
checking the principal the server saw (and the session lifetime where the
README promises one);
``sh`` blocks run line by line (``kchannel serve`` starts the in-process
server from the parsed command line, every other ``kchannel`` command runs
as ``python -m kchannel`` in the scratch directory and must exit 0); Python
blocks are executed in that directory, or written as modules when their
first line is ``# NAME.py``; blocks named ``*-output`` are compared with
what the commands printed (``...`` skips lines; dates are not compared).

Placeholders.  The README is written for a real deployment; before use the
text is rewritten:

* ``/etc/kchannel/<file>`` and ``examples/certs/<file>`` -> the ``pki``
  fixture's files (``server.keystore.pem``, ``server.p12``, ``ca.pem``,
  ``truststore.p12``, ``client.keystore.pem``, ``client.p12``,
  ``client.key``, ``client.pem``; ``external.keystore.pem`` is the server's,
  ``broker2.keystore.pem`` the client's), keytabs -> the ``kdc`` fixture's
  (``kafka.keytab`` = the service, ``alice.keytab`` = ``alice@EXAMPLE.COM``),
  the password ``changeit`` -> the fixture's store password;
* ``/var/lib/kchannel`` -> a scratch data directory; the OAUTHBEARER files
  (``jwks.json``, ``token.jwt``, ``oauth-hs256.key``) -> scratch files made
  by the test;
* ``broker1.example.com`` (and the other ``*.example.com`` broker names)
  -> ``localhost`` (the test certificates' and Kerberos service's host);
* every listener binds ``127.0.0.1:0`` and is advertised as ``localhost:0``
  (the bound port); ``localhost:<README port>`` (and ``"localhost", <README
  port>`` in Python) in client text becomes the bound port of the listener
  the README gave that port;
* the delegation token id and HMAC shown in the README -> the ones the
  ``create`` command really printed.
"""
import base64
import hashlib
import hmac
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.config import load_properties
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")

_SNIPPET = re.compile(r"<!-- snippet: (?P<name>[\w.-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```",
                      re.S | re.M)
_FENCE = re.compile(r"^```(\w*)\n", re.M)
SNIPPETS = {m["name"]: (m["lang"], m["body"]) for m in _SNIPPET.finditer(README)}

# Every snippet a scenario below uses (checked against the README both ways).
USED = {
    "example", "implementation",
    "plain-server", "plain-client", "auth-failure", "metrics", "principal-builder",
    "scram-server", "scram-jaas", "scram-setup", "scram-client", "scram-admin",
    "scram-admin-client", "scram-admin-output", "cli-tools", "cli-tools-output", "scram-librdkafka",
    "gssapi-server", "gssapi-client",
    "oauth-server", "oauth-client",
    "oauth-jwks-server", "oauth-token-provider", "oauth-jwks-client",
    "oauth-validator", "oauth-validator-server",
    "tls-server", "tls-client-pem", "tls-client-p12", "tls-client-inline", "jks-error",
    "server-api", "network-client", "producer-consumer", "aio-example",
    "listeners-server", "listeners-setup", "listeners-client-internal",
    "listeners-client-external", "listeners-client-replication", "listeners-clients",
    "listeners-clients-output", "listeners-cluster-nodes", "listeners-inter-broker",
    "listeners-describe", "listeners-describe-output",
    "tokens-server", "tokens-setup", "tokens-alice", "tokens-create", "tokens-create-output",
    "tokens-job", "tokens-job-python", "tokens-manage", "tokens-manage-output",
    "gateway-server", "gateway-setup", "gateway-client",
    "gateway-acls-server", "gateway-acls-admin", "gateway-acls-serve", "gateway-acls-setup",
    "gateway-acls-output",
    "spark-example",    # run by tests/spark/test_spark_kafka.py (needs Spark and Kafka)
    "spark-pipeline",   # run by tests/spark/test_spark_examples.py
}

# The README's example delegation token (replaced by the real one).
README_TOKEN_ID = "4pG2hVJ3Sy2mJ6m0yrqXcQ"
_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def snippet(name):
    assert name in SNIPPETS, f"README has no <!-- snippet: {name} --> block"
    return SNIPPETS[name][1]


# ------------------------------------------------------------------ scenario
class Scenario:
    """A scratch directory with the README's files, servers and commands."""

    def __init__(self, tmp_path, pki, monkeypatch, kdc=None):
        self.dir = tmp_path
        self.data = tmp_path / "data"
        self.monkeypatch = monkeypatch
        self.subs = {
            "/var/lib/kchannel": str(self.data),
            "broker1.example.com": "localhost",
            "broker1.internal.example.com": "localhost",
            "broker2.internal.example.com": "localhost",
            "broker3.internal.example.com": "localhost",
            "broker2.example.com": "localhost",
            "changeit": pki.truststore_password,
        }
        files = {
            "server.keystore.pem": pki.server.keystore_pem_path,
            "server.p12": pki.server.p12_path,
            "ca.pem": pki.ca.cert_path,
            "truststore.p12": pki.truststore_p12_path,
            "client.keystore.pem": pki.client.keystore_pem_path,
            "client.p12": pki.client.p12_path,
            "client.key": pki.client.key_path,
            "client.pem": pki.client.chain_path,
            "external.keystore.pem": pki.server.keystore_pem_path,
            "broker2.keystore.pem": pki.client.keystore_pem_path,
            "server.keystore.jks": str(tmp_path / "server.keystore.jks"),
            "jwks.json": str(tmp_path / "jwks.json"),
            "oauth-hs256.key": str(tmp_path / "oauth-hs256.key"),
        }
        if kdc is not None:
            files["kafka.keytab"] = kdc.service_keytab
            files["alice.keytab"] = kdc.user2_keytab
        for name, path in files.items():
            self.subs[f"/etc/kchannel/{name}"] = path
            self.subs[f"examples/certs/{name}"] = path
        self.subs["/var/run/kchannel/token.jwt"] = str(tmp_path / "token.jwt")
        self.ports = {}        # README port -> bound port
        self.servers = []
        self.closers = []
        self.output = []
        monkeypatch.chdir(tmp_path)
        monkeypatch.syspath_prepend(str(tmp_path))

    def close(self):
        for server in self.servers:
            server.shutdown()
        for close in self.closers:
            close()

    # -- text
    def text(self, name_or_text, raw=False):
        text = name_or_text if raw else snippet(name_or_text)
        for key in sorted(self.subs, key=len, reverse=True):
            text = text.replace(key, self.subs[key])
        for orig, bound in self.ports.items():
            text = re.sub(rf"\blocalhost:{orig}\b", f"localhost:{bound}", text)
            text = re.sub(rf'"localhost", {orig}\b', f'"localhost", {bound}', text)
        return text

    def write(self, name, file_name=None):
        """Write snippet ``name`` to the file its first comment line names
        (or ``file_name``); returns the path."""
        text = self.text(name)
        if file_name is None:
            m = re.match(r"(?:#|//) ([\w.-]+\.(?:properties|conf|py))\b", text)
            assert m, f"snippet {name} does not name its file on its first line"
            file_name = m.group(1)
        path = self.dir / file_name
        path.write_text(text, encoding="utf-8")
        return path

    # -- servers
    def start(self, server_file="server.properties", jaas_file=None, extra=None):
        from kchannel.server import build_server
        props = load_properties(str(self.dir / server_file))
        props.update(extra or {})
        original = {}
        listeners = []
        for item in props["listeners"].split(","):
            m = re.fullmatch(r"\s*(\w+)://(.*):(\d+)\s*", item)
            original[m.group(1).upper()] = int(m.group(3))
            listeners.append(f"{m.group(1)}://127.0.0.1:0")
        props["listeners"] = ",".join(listeners)
        props["advertised.listeners"] = ",".join(f"{n}://localhost:0" for n in original)
        props["log.dirs"] = str(self.data)
        jaas_text = None
        if jaas_file is not None:
            jaas_text = (self.dir / jaas_file).read_text(encoding="utf-8")
        server, closers = build_server(props, jaas_text, jaas_file)
        self.closers.extend(closers)
        self.seen = []
        metadata = server.handlers.get(ApiKey.METADATA)

        def recording(ctx, seen=self.seen):
            seen.append(ctx.principal)
            return metadata.fn(ctx)

        server.register_handler(ApiKey.METADATA, recording, metadata.min_version,
                                metadata.max_version)
        server.start()
        self.servers.append(server)
        for name, port in original.items():
            self.ports[port] = server.bound_port(name)
        return server

    def stop(self, server):
        server.shutdown()
        self.servers.remove(server)

    def connect(self, client_file, port=None):
        """Connect with a client properties file, send Metadata; returns
        (principal seen by the server, session lifetime ms or None)."""
        configs = load_properties(str(self.dir / client_file))
        bound = port if port is not None else next(iter(self.ports.values()))
        configs["bootstrap.servers"] = f"localhost:{bound}"
        before = len(self.seen)
        with KafkaClient(configs).connect() as client:
            body = client.request(ApiKey.METADATA, {"topics": []})
            assert body["brokers"][0]["port"] == bound
            authenticator = client.selector.channel(client.node_id).authenticator
            lifetime = getattr(authenticator, "session_lifetime_ms", None)
        assert len(self.seen) == before + 1
        return self.seen[-1], lifetime

    # -- commands and Python
    def run_sh(self, name, expect_rc=0):
        outputs = []
        text = self.text(name).replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            argv = shlex.split(line)
            assert argv[0] == "kchannel", line
            if argv[1] == "serve":
                from kchannel.cli import build_parser
                args = build_parser().parse_args(argv[1:])
                assert not args.override
                self.start(args.config, args.jaas_config)
                continue
            result = self.kchannel(argv[1:])
            assert result.returncode == expect_rc, (line, result.stdout, result.stderr)
            outputs.append(result.stdout)
        self.output.extend(outputs)
        return outputs

    def kchannel(self, args):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(self.dir),
                                             env.get("PYTHONPATH", "")])
        return subprocess.run([sys.executable, "-m", "kchannel", *args], cwd=self.dir,
                              env=env, capture_output=True, text=True, timeout=60)

    def run_python(self, name):
        code = self.text(name)
        namespace = {"__name__": f"readme_{name.replace('-', '_')}"}
        exec(compile(code, f"README:{name}", "exec"), namespace)
        return namespace

    def check_output(self, name, actual=None):
        """Every line of the README's output block (but ``...``) appears in
        what the commands printed, in order; dates are not compared."""
        actual = "\n".join(self.output) if actual is None else actual
        got = [_DATE.sub("DATE", line.rstrip()) for line in actual.splitlines()]
        pos = 0
        for want in self.text(name).splitlines():
            want = _DATE.sub("DATE", want.rstrip())
            if want in ("...", ""):
                continue
            assert want in got[pos:], f"{name}: {want!r} not printed; got:\n" + "\n".join(got)
            pos = got.index(want, pos) + 1


@pytest.fixture
def scenario(tmp_path, pki, monkeypatch):
    s = Scenario(tmp_path, pki, monkeypatch)
    yield s
    s.close()


# --------------------------------------------------------------- the README
def test_every_snippet_is_run_and_every_block_is_a_snippet():
    assert set(SNIPPETS) == USED, (
        f"README snippets not run: {sorted(set(SNIPPETS) - USED)}; "
        f"run but missing from the README: {sorted(USED - set(SNIPPETS))}")
    begin, end = README.index("<!-- sections:begin -->"), README.index("<!-- sections:end -->")
    sections = README[begin:end]
    fences = [m.start() for m in _FENCE.finditer(sections)]
    marked = [m.start("lang") - 3 - begin for m in _SNIPPET.finditer(README)
              if begin < m.start() < end]
    # Each opening fence in the sections is a snippet's.
    openings = fences[0::2]
    assert sorted(openings) == sorted(marked), "a code block in the README sections has no " \
        "<!-- snippet: NAME --> marker"


def _slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_internal_links_resolve():
    prose = re.sub(r"^```.*?^```", "", README, flags=re.S | re.M)
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", prose, re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", README))
    assert links and links <= anchors, sorted(links - anchors)


def test_placeholders_for_merged_sections():
    for marker in ("<!-- listeners-section -->", "<!-- tokens-section -->",
                   "<!-- benchmarks-section -->"):
        assert README.count(marker) == 1, marker


def test_setup_commands_parse():
    from kchannel.cli import build_parser
    setup = README[README.index("## Set-up"):README.index("## Which implementation")]
    serve = re.search(r"kchannel serve [^\n`]*", setup).group(0)
    args = build_parser().parse_args(shlex.split(serve)[1:])
    assert (ROOT / args.config).is_file()
    assert "bash examples/make-certs.sh" in setup
    assert (ROOT / ".ci/install").is_file() and (ROOT / ".ci/test").is_file()


def test_implementation_commands():
    """Both commands run and print what the README says they print."""
    lines = [line.split("#")[0].strip() for line in snippet("implementation").splitlines()]
    outputs = []
    for line in filter(None, lines):
        argv = shlex.split(line)
        assert argv[0] == "python"
        result = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout.strip())
    assert outputs[0] in ("compiled", "pure", "mixed")
    loaded = eval(outputs[1], {})                  # a dict literal
    assert set(loaded.values()) <= {"compiled", "pure"} and "framing" in loaded


def test_example_against_the_example_server(scenario, capsys):
    """The ~10-line example, against examples/server.properties."""
    (scenario.dir / "server.properties").write_text(
        scenario.text((ROOT / "examples/server.properties").read_text(), raw=True))
    scenario.start()
    scenario.run_python("example")
    out = capsys.readouterr().out
    assert f"'port': {scenario.ports[9093]}" in out and out.startswith("(0, 12)")
    # The output the README shows under the example is what it prints.
    shown = re.search(r"<!-- snippet: example -->\n```python\n.*?```\n.*?\n```\n(.*?)```",
                      README, re.S).group(1)
    assert out.strip() == shown.strip().replace("9093", str(scenario.ports[9093]))


def test_plain(scenario, capsys):
    scenario.write("plain-server")
    scenario.write("plain-client")
    scenario.start()
    assert scenario.connect("client.properties")[0] == KafkaPrincipal("User", "alice")
    scenario.run_python("auth-failure")
    out = capsys.readouterr().out
    assert "Authentication failed: Invalid username or password False" in out
    scenario.run_python("metrics")
    assert capsys.readouterr().out.split() == ["1.0", "1"]
    # principal.builder.class, as the Principals section says.
    scenario.write("principal-builder")
    scenario.stop(scenario.servers[0])
    scenario.start(extra={"principal.builder.class": "mybuilders.ListenerPrincipalBuilder"})
    assert scenario.connect("client.properties")[0] == KafkaPrincipal("User", "SASL_SSL/alice")


def test_scram_and_cli_tools(scenario):
    scenario.write("scram-server")
    scenario.write("scram-jaas")
    scenario.write("scram-client")
    scenario.run_sh("scram-setup")
    principal, lifetime = scenario.connect("client.properties")
    assert principal == KafkaPrincipal("User", "alice")
    assert lifetime == 3600000            # connections.max.reauth.ms
    scenario.output.clear()
    # alice is no super user: the server refuses her credential requests.
    refused = scenario.kchannel(["configs", "--bootstrap-server",
                                 f"localhost:{scenario.ports[9093]}", "--command-config",
                                 "client.properties", "--describe", "--entity-type", "users"])
    assert refused.returncode == 1
    assert "ClusterAuthorizationException: Cluster authorization failed." in refused.stderr
    scenario.write("scram-admin-client")
    scenario.run_sh("scram-admin")
    scenario.check_output("scram-admin-output")
    scenario.output.clear()
    scenario.run_sh("cli-tools")
    scenario.check_output("cli-tools-output")
    assert "Listener SASL_SSL" in scenario.output[1]
    # bob, created through the running server, can log in.
    bob = (scenario.dir / "client.properties").read_text().replace(
        'username="alice" password="alice-secret"', 'username="bob" password="bob-secret"')
    (scenario.dir / "bob.properties").write_text(bob.replace("SCRAM-SHA-512", "SCRAM-SHA-256"))
    assert scenario.connect("bob.properties")[0] == KafkaPrincipal("User", "bob")


@pytest.mark.interop
def test_scram_with_librdkafka(scenario, capsys):
    pytest.importorskip("confluent_kafka", reason="confluent-kafka (librdkafka) not installed")
    scenario.write("scram-server")
    scenario.write("scram-jaas")
    scenario.run_sh("scram-setup")
    scenario.run_python("scram-librdkafka")
    out = capsys.readouterr().out
    assert f"localhost:{scenario.ports[9093]}" in out and "1:" in out


def test_gssapi(tmp_path, pki, kdc, monkeypatch):
    s = Scenario(tmp_path, pki, monkeypatch, kdc)
    try:
        s.write("gssapi-server")
        s.write("gssapi-client")
        s.start()
        assert s.connect("client.properties")[0] == KafkaPrincipal("User", "alice")
    finally:
        s.close()


def test_oauthbearer_unsecured(scenario):
    scenario.write("oauth-server")
    scenario.write("oauth-client")
    scenario.start()
    principal, lifetime = scenario.connect("client.properties")
    assert principal == KafkaPrincipal("User", "alice")
    assert 3_590_000 <= lifetime <= 3_600_001


def _b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _jwt(header, claims, sign):
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64url(sign(signing_input.encode()))}"


def _claims(**extra):
    now = int(time.time())
    return {"sub": "alice", "iat": now, "exp": now + 3600, **extra}


def test_oauthbearer_jwks(scenario):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
           "n": _b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
           "e": _b64url(numbers.e.to_bytes(3, "big"))}
    (scenario.dir / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    token = _jwt({"alg": "RS256", "kid": "k1", "typ": "JWT"},
                 _claims(iss="https://idp.example.com", aud="kafka"),
                 lambda data: key.sign(data, padding.PKCS1v15(), hashes.SHA256()))
    (scenario.dir / "token.jwt").write_text(token + "\n")
    scenario.write("oauth-jwks-server")
    scenario.write("oauth-token-provider")
    scenario.write("oauth-jwks-client")
    scenario.start()
    principal, lifetime = scenario.connect("client.properties")
    assert principal == KafkaPrincipal("User", "alice")
    assert 3_500_000 <= lifetime <= 3_600_000
    # A token from another issuer is refused.
    (scenario.dir / "token.jwt").write_text(_jwt(
        {"alg": "RS256", "kid": "k1"}, _claims(iss="https://evil.example.com", aud="kafka"),
        lambda data: key.sign(data, padding.PKCS1v15(), hashes.SHA256())))
    from kchannel.errors import SaslAuthenticationError
    with pytest.raises(SaslAuthenticationError):
        scenario.connect("client.properties")


def test_oauthbearer_custom_validator(scenario):
    secret = b"0123456789abcdef0123456789abcdef"
    (scenario.dir / "oauth-hs256.key").write_bytes(secret + b"\n")
    token = _jwt({"alg": "HS256", "typ": "JWT"}, _claims(scope="read write"),
                 lambda data: hmac.new(secret, data, hashlib.sha256).digest())
    (scenario.dir / "token.jwt").write_text(token)
    scenario.write("oauth-validator")
    scenario.write("oauth-validator-server")
    scenario.write("oauth-token-provider")
    scenario.write("oauth-jwks-client")
    scenario.start()
    assert scenario.connect("client.properties")[0] == KafkaPrincipal("User", "alice")
    (scenario.dir / "token.jwt").write_text(token[:-4] + "AAAA")
    from kchannel.errors import SaslAuthenticationError
    with pytest.raises(SaslAuthenticationError):
        scenario.connect("client.properties")


def test_tls(scenario, capsys):
    scenario.write("tls-server")
    scenario.start()
    for name in ("tls-client-pem", "tls-client-p12"):
        scenario.write(name)
        assert scenario.connect("client.properties")[0] == KafkaPrincipal("User", "client")
    scenario.run_python("tls-client-inline")
    assert f"'port': {scenario.ports[9093]}" in capsys.readouterr().out
    assert scenario.seen[-1] == KafkaPrincipal("User", "client")


def test_jks_is_refused_with_the_documented_message(scenario):
    (scenario.dir / "server.keystore.jks").write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    server = scenario.text("tls-server").replace(
        "ssl.keystore.location=" + scenario.subs["/etc/kchannel/server.p12"],
        "ssl.keystore.location=" + scenario.subs["/etc/kchannel/server.keystore.jks"])
    (scenario.dir / "server.properties").write_text(server)
    result = scenario.kchannel(["serve", "--config", "server.properties"])
    assert result.returncode == 1
    assert scenario.text("jks-error").strip() in result.stderr


def test_server_api(capsys):
    ns = {"__name__": "readme_server_api"}
    exec(compile(snippet("server-api"), "README:server-api", "exec"), ns)
    out = capsys.readouterr().out
    assert out.startswith("User:ANONYMOUS on PLAINTEXT (PLAINTEXT) from 127.0.0.1")


def test_network_client(capsys):
    ns = {"__name__": "readme_network_client"}
    exec(compile(snippet("network-client"), "README:network-client", "exec"), ns)
    lines = sorted(capsys.readouterr().out.splitlines())
    assert [line.split()[0] for line in lines] == ["1", "2"]
    assert all("'node_id': " + line.split()[0] in line for line in lines)


def test_producer_consumer(tansu, capsys):
    code = snippet("producer-consumer").replace("localhost:9092", tansu.bootstrap)
    ns = {"__name__": "readme_producer_consumer"}
    exec(compile(code, "README:producer-consumer", "exec"), ns)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("written to orders ")
    offset = lines[0].split()[-1]
    assert lines[1] == f"{offset} b'order-17' b'{{\"total\": 42}}' [('source', b'web')]"


def test_aio_example(tansu, capsys):
    code = snippet("aio-example").replace("localhost:9092", tansu.bootstrap)
    ns = {"__name__": "readme_aio_example"}
    exec(compile(code, "README:aio-example", "exec"), ns)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("written to page-views ")
    offset = lines[0].split()[-1]
    assert lines[1] == f"{offset} b'user-7' b'/pricing'"


def test_delegation_tokens(scenario):
    scenario.write("tokens-server")
    scenario.write("tokens-alice")
    scenario.run_sh("tokens-setup")
    [created] = scenario.run_sh("tokens-create")
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", created).group(1)
    row = next(line for line in created.splitlines() if line.startswith(token_id + " "))
    token_hmac = row.split()[1]
    readme_row = next(line for line in snippet("tokens-create-output").splitlines()
                      if line.startswith(README_TOKEN_ID + " "))
    scenario.subs[README_TOKEN_ID] = token_id
    scenario.subs[readme_row.split()[1]] = token_hmac
    scenario.check_output("tokens-create-output", created)
    scenario.write("tokens-job")
    scenario.run_python("tokens-job-python")
    principal = scenario.connect("job.properties")[0]
    assert principal == KafkaPrincipal("User", "alice") and principal.token_authenticated
    scenario.output.clear()
    scenario.run_sh("tokens-manage")
    scenario.check_output("tokens-manage-output")
    from kchannel.errors import SaslAuthenticationError
    with pytest.raises(SaslAuthenticationError):
        scenario.connect("job.properties")


@pytest.mark.slow
def test_gateway_in_front_of_tansu(scenario, tansu):
    """The README's gateway: Tansu (PLAINTEXT) behind SASL_SSL + SCRAM +
    delegation tokens, from one server.properties."""
    from kchannel.tokens.admin import DelegationTokenAdmin
    scenario.subs["tansu.example.com:9092"] = tansu.bootstrap
    scenario.write("gateway-server")
    scenario.write("gateway-client")
    scenario.run_sh("gateway-setup")
    server = scenario.servers[-1]
    bound = server.bound_port("SASL_SSL")
    node_ports = {l.upstream_node: l.bound_port for l in server.listeners
                  if l.upstream_node is not None}
    configs = load_properties(str(scenario.dir / "client.properties"))
    configs["bootstrap.servers"] = f"localhost:{bound}"
    with KafkaClient({"bootstrap.servers": tansu.bootstrap}).connect() as direct:
        upstream = direct.request(ApiKey.METADATA, {"topics": []})
    with KafkaClient(configs).connect() as client:
        md = client.request(ApiKey.METADATA, {"topics": []})
        token = DelegationTokenAdmin(client).create()
    assert md["cluster_id"] == upstream["cluster_id"]
    assert [(b["node_id"], b["host"], b["port"]) for b in md["brokers"]] == \
        [(b["node_id"], "localhost", node_ports[b["node_id"]]) for b in upstream["brokers"]]
    token_configs = dict(configs, **{
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="{token.token_info.token_id}" '
                            f'password="{token.hmac_base64}" tokenauth="true";'})
    with KafkaClient(token_configs).connect() as client:
        assert client.request(ApiKey.METADATA, {"topics": []})["cluster_id"] == \
            upstream["cluster_id"]


def test_gateway_acls(scenario):
    """The README's ACL set-up: a gateway with Kafka's StandardAuthorizer
    (here in front of a kchannel server standing for Kafka), ACLs added and
    listed with kchannel acls, then enforced."""
    from kchannel.server import Server
    upstream = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=1).start()
    try:
        scenario.subs["kafka1.example.com:9092"] = \
            f"127.0.0.1:{upstream.bound_port('PLAINTEXT')}"
        scenario.write("gateway-acls-server")
        scenario.write("gateway-acls-admin")
        scenario.run_sh("gateway-acls-serve")
        scenario.run_sh("gateway-acls-setup")
        scenario.check_output("gateway-acls-output")
        configs = load_properties(str(scenario.dir / "admin.properties"))
        configs["bootstrap.servers"] = f"localhost:{scenario.ports[9093]}"
        configs["sasl.jaas.config"] = configs["sasl.jaas.config"].replace(
            'username="admin" password="admin-secret"', 'username="bob" password="bob-secret"')
        with KafkaClient(configs).connect() as bob:
            topics = bob.request(ApiKey.METADATA, {"topics": [
                {"name": "orders"}, {"name": "payroll"}, {"name": "public.news"}],
                "allow_auto_topic_creation": False})["topics"]
            acls = bob.request(ApiKey.DESCRIBE_ACLS, {
                "resource_type_filter": 1, "resource_name_filter": None,
                "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                "operation": 1, "permission_type": 1})
        # bob may describe orders (READ) and public.* (everyone READs),
        # not payroll; nor the ACLs (no DESCRIBE on the cluster)
        assert {t["name"]: t["error_code"] for t in topics} == {
            "orders": 3, "payroll": 29, "public.news": 3}
        assert acls["error_code"] == 31
    finally:
        upstream.shutdown()


def test_named_listeners(scenario, pki, capsys):
    scenario.write("listeners-server")
    for name in ("listeners-client-internal", "listeners-client-external",
                 "listeners-client-replication"):
        scenario.write(name)
    scenario.run_sh("listeners-describe")
    scenario.check_output("listeners-describe-output")
    scenario.output.clear()
    scenario.run_sh("listeners-setup")
    ports = dict(scenario.ports)
    expected = {"client-internal.properties": (9092, KafkaPrincipal("User", "alice")),
                "client-external.properties": (9093, KafkaPrincipal("User", "alice")),
                "client-replication.properties": (9094, KafkaPrincipal("User", pki.client.dn))}
    for client_file, (port, principal) in expected.items():
        assert scenario.connect(client_file, ports[port])[0] == principal
    scenario.run_sh("listeners-clients")
    scenario.check_output("listeners-clients-output")
    # The inter-broker client (this broker's REPLICATION settings) against itself.
    scenario.run_python("listeners-inter-broker")
    assert f"'port': {ports[9094]}" in capsys.readouterr().out

    # kchannel.cluster.nodes: per-listener broker lists.
    scenario.stop(scenario.servers[0])
    scenario.start(extra=load_properties(scenario.text("listeners-cluster-nodes")))
    for client_file, port, nodes in (("client-external.properties", 9093, [1, 2]),
                                     ("client-internal.properties", 9092, [1, 2, 3])):
        configs = load_properties(str(scenario.dir / client_file))
        configs["bootstrap.servers"] = f"localhost:{scenario.ports[port]}"
        with KafkaClient(configs).connect() as client:
            brokers = client.request(ApiKey.METADATA, {"topics": []})["brokers"]
        assert sorted(b["node_id"] for b in brokers) == nodes
