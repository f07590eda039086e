"""Apache Kafka's Java client and Kafka's own tools against ``kchannel serve``.

The reference client is the most important peer a Kafka server can have.
One ``kchannel serve`` for the module, with every security protocol:

==============  ===============  =============================================
listener        protocol         principal the Java client gets
==============  ===============  =============================================
PLAINTEXT       PLAINTEXT        User:ANONYMOUS
SSL             SSL              User:ANONYMOUS (no client certificate)
MTLS            SSL              the client certificate's DN
                                 (``ssl.client.auth=required``)
SASL_PLAINTEXT  SASL_PLAINTEXT   PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
                                 (unsecured JWS): admin; GSSAPI: client
SASL_SSL        SASL_SSL         the same over TLS
==============  ===============  =============================================

every listener bound on 127.0.0.1 and advertised as ``localhost`` (the
Kerberos service principal is ``kafka/localhost`` and TLS checks the host
name).  Delegation tokens are enabled; ``super.users`` are admin, client and
the certificate DN.

For every listener x mechanism, ONE JVM (``tests/java/KafkaProbe.java``)
runs kafka-clients' AdminClient -- describeCluster, create / describe / renew
/ expire delegation tokens, a login with the token, describe / alter SCRAM
credentials and a login with the new credential -- and the main classes of
``kafka-broker-api-versions.sh``, ``kafka-delegation-tokens.sh`` and
``kafka-configs.sh``; each tool also runs once as ``java -cp`` in its own JVM,
as its script does.  KIP-368: the Java client re-authenticates on a server
with ``connections.max.reauth.ms``, and the server's log shows it.
"""
import re
import time

import pytest

from tests.fixtures.peers import free_ports, run_kchannel, start_kchannel_server, write_properties

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka]

NODE_ID = 3
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
SASL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL",
             "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

BROKER_API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
DELEGATION_TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
CONFIGS = "kafka.admin.ConfigCommand"

# Kafka's messages, as the Java client shows them.
TOKEN_NOT_ALLOWED = ("Delegation Token requests are not allowed on PLAINTEXT/1-way SSL "
                     "channels and on delegation token authenticated channels.")
SCRAM_FAILURE = ("Authentication failed during authentication due to invalid credentials "
                 "with SASL mechanism {}")
CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."

COMBOS = (["PLAINTEXT", "SSL", "MTLS"]
          + [f"{l}-{m}" for l in ("SASL_PLAINTEXT", "SASL_SSL") for m in SASL_MECHANISMS])


def split(combo):
    listener, _, mechanism = combo.partition("-")
    return listener, mechanism or None


def jaas_quote(value):
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_server_props(pki, kdc, listeners, extra=None):
    """Properties of a ``kchannel serve`` with ``listeners`` (names of
    LISTENERS), each bound at 127.0.0.1:0 and advertised as localhost."""
    mechanisms = SASL_MECHANISMS if kdc else SASL_MECHANISMS[:-1]
    props = {
        "node.id": str(NODE_ID),
        "listeners": ",".join(f"{l}://127.0.0.1:0" for l in listeners),
        "advertised.listeners": ",".join(f"{l}://localhost:0" for l in listeners),
        "listener.security.protocol.map": ",".join(f"{l}:{LISTENERS[l]}" for l in listeners),
        "inter.broker.listener.name": listeners[0],
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "delegation.token.secret.key": "java-interop-secret",
        "super.users": f"User:{ADMIN};User:client;User:{pki.client.dn}",
        "connection.failed.authentication.delay.ms": "0",
    }
    jaas = {
        "plain": f'{PLAIN_MODULE} required user_{ADMIN}="{ADMIN_PASSWORD}" '
                 f'user_{ALICE}="{ALICE_PASSWORD}";',
        "scram-sha-256": f"{SCRAM_MODULE} required;",
        "scram-sha-512": f"{SCRAM_MODULE} required;",
        "oauthbearer": f"{OAUTH_MODULE} required;",
    }
    if kdc:
        props["sasl.kerberos.service.name"] = kdc.service_name
        jaas["gssapi"] = (f'{KRB5_MODULE} required useKeyTab=true storeKey=true '
                          f'keyTab="{kdc.service_keytab}" principal="{kdc.service_principal}";')
    for l in listeners:
        prefix = f"listener.name.{l.lower()}."
        if LISTENERS[l].startswith("SASL"):
            for mech, text in jaas.items():
                props[f"{prefix}{mech}.sasl.jaas.config"] = text
        if LISTENERS[l] in ("SSL", "SASL_SSL"):
            auth = "required" if l == "MTLS" else "none"
            for k, v in pki.server_configs(client_auth=auth).items():
                props[prefix + k] = v
    props.update(extra or {})
    return props


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki, kdc_or_none):
    kdc = kdc_or_none
    props = java_server_props(pki, kdc, list(LISTENERS))
    srv = start_kchannel_server(tmp_path_factory.mktemp("java-serve"), props,
                                env=kdc.env if kdc else None,
                                scram_users={ADMIN: ADMIN_PASSWORD, ALICE: ALICE_PASSWORD})
    srv.kdc = kdc
    srv.pki = pki
    yield srv
    srv.stop_and_check()


def java_client_configs(server, listener, mechanism=None, user=ADMIN, password=ADMIN_PASSWORD,
                        token=None):
    """Java client properties for ``listener`` (``token``: (id, hmac) for a
    SCRAM token login)."""
    protocol = LISTENERS[listener]
    c = {"bootstrap.servers": server.bootstrap(listener, "localhost"),
         "security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        c.update(server.pki.client_configs(keystore="pem" if listener == "MTLS" else None))
    if token is not None:
        mechanism = mechanism or "SCRAM-SHA-256"
        c["sasl.mechanism"] = mechanism
        c["sasl.jaas.config"] = (f"{SCRAM_MODULE} required tokenauth=true "
                                 f"username={jaas_quote(token[0])} "
                                 f"password={jaas_quote(token[1])};")
    elif mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
        c["sasl.mechanism"] = mechanism
        c["sasl.jaas.config"] = (f"{module} required username={jaas_quote(user)} "
                                 f"password={jaas_quote(password)};")
    elif mechanism == "OAUTHBEARER":
        c["sasl.mechanism"] = mechanism
        c["sasl.jaas.config"] = (f"{OAUTH_MODULE} required "
                                 f"unsecuredLoginStringClaim_sub={jaas_quote(user)};")
    elif mechanism == "GSSAPI":
        kdc = server.kdc
        c["sasl.mechanism"] = mechanism
        c["sasl.kerberos.service.name"] = kdc.service_name
        c["sasl.jaas.config"] = (f"{KRB5_MODULE} required useKeyTab=true storeKey=true "
                                 f"keyTab={jaas_quote(kdc.client_keytab)} "
                                 f"principal={jaas_quote(kdc.client_principal)};")
    return c


def principal_of(server, combo):
    listener, mechanism = split(combo)
    if listener in ("PLAINTEXT", "SSL"):
        return "User:ANONYMOUS"
    if listener == "MTLS":
        return f"User:{server.pki.client.dn}"
    return "User:client" if mechanism == "GSSAPI" else f"User:{ADMIN}"


def tokens_allowed(combo):
    return split(combo)[0] not in ("PLAINTEXT", "SSL")


def scram_user(combo):
    return "u-" + combo.lower()


def combo_checks(server, combo, tmp_path):
    """The probe's checks for one listener x mechanism."""
    listener, mechanism = split(combo)
    config = java_client_configs(server, listener, mechanism)
    props = write_properties(tmp_path / f"{combo}.properties",
                             {k: v for k, v in config.items() if k != "bootstrap.servers"})
    bootstrap = config["bootstrap.servers"]
    sasl_listener = listener if LISTENERS[listener].startswith("SASL") else "SASL_PLAINTEXT"

    def tool(main, *args):
        return {"op": "tool", "main": main,
                "args": ["--bootstrap-server", bootstrap, "--command-config", props, *args]}

    token = (f"${{{combo}:create.tokenId}}", f"${{{combo}:create.hmac}}")
    token_config = java_client_configs(server, sasl_listener, token=token)
    user = scram_user(combo)
    checks = {
        "cluster": {"op": "describeCluster", "config": config},
        "bav": tool(BROKER_API_VERSIONS),
        "create": {"op": "createToken", "config": config, "renewers": [f"User:{ALICE}"],
                   "maxLifetimeMs": 3600000},
        "describe": {"op": "describeTokens", "config": config},
        "tool-create": tool(DELEGATION_TOKENS, "--create", "--max-life-time-period", "-1",
                            "--renewer-principal", f"User:{ALICE}"),
        "scram-alter": {"op": "alterScram", "config": config, "upserts": [
            {"user": user, "mechanism": "SCRAM-SHA-256", "iterations": 8192,
             "password": "pw-256"},
            {"user": user, "mechanism": "SCRAM-SHA-512", "iterations": 4096,
             "password": "pw-512"}]},
        "scram-describe": {"op": "describeScram", "config": config, "users": [user]},
    }
    if tokens_allowed(combo):
        checks.update({
            "renew": {"op": "renewToken", "config": config, "hmac": token[1],
                      "renewPeriodMs": 60000},
            # Without --owner-principal the tool asks for an empty owner
            # list, which Kafka answers with no tokens.
            "tool-describe": tool(DELEGATION_TOKENS, "--describe", "--owner-principal",
                                  principal_of(server, combo)),
            "token-login": {"op": "describeCluster", "config": token_config},
            "token-create": {"op": "createToken", "config": token_config},
            "expire": {"op": "expireToken", "config": config, "hmac": token[1],
                       "expiryTimePeriodMs": -1},
            "token-login-expired": {"op": "describeCluster", "config": token_config},
        })
    if principal_of(server, combo) != "User:ANONYMOUS":
        checks.update({
            "scram-login": {"op": "describeCluster", "config": java_client_configs(
                server, "SASL_PLAINTEXT", "SCRAM-SHA-512", user=user, password="pw-512")},
            "configs-delete": tool(CONFIGS, "--alter", "--delete-config", "SCRAM-SHA-512",
                                   "--entity-type", "users", "--entity-name", user),
            "configs-describe": tool(CONFIGS, "--describe", "--entity-type", "users",
                                     "--entity-name", user),
        })
    return [dict(c, id=f"{combo}:{name}") for name, c in checks.items()]


@pytest.fixture(scope="module")
def results(server, kafka_java, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("java-probe")
    combos = [c for c in COMBOS if server.kdc or "GSSAPI" not in c]
    checks = [c for combo in combos for c in combo_checks(server, combo, tmp)]
    return kafka_java.probe(checks, kdc=server.kdc)


def need(server, combo):
    if "GSSAPI" in combo and server.kdc is None:
        pytest.skip("the private Kerberos KDC (krb5-kdc) is not available")


def ok(results, check_id):
    r = results[check_id]
    assert r["ok"], r
    return r


def node_line(server, listener):
    return f"localhost:{server.port(listener)} (id: {NODE_ID} rack: null isFenced: false)"


# ---------------------------------------------------------------- the matrix
@pytest.mark.parametrize("combo", COMBOS)
def test_describe_cluster(server, results, combo):
    need(server, combo)
    listener, _ = split(combo)
    r = ok(results, f"{combo}:cluster")
    assert r["clusterId"] == server.cluster_id
    assert r["controller"] == NODE_ID
    assert r["nodes"] == [[NODE_ID, "localhost", server.port(listener)]]


@pytest.mark.parametrize("combo", COMBOS)
def test_broker_api_versions_command(server, results, combo):
    need(server, combo)
    listener, _ = split(combo)
    r = ok(results, f"{combo}:bav")
    assert r["exit"] == 0, r
    assert r["stdout"].startswith(node_line(server, listener) + " -> (\n"), r["stdout"]
    for line in ("\tApiVersions(18): 0 to 4 [usable: 4],",
                 "\tSaslAuthenticate(36): 0 to 2 [usable: 2],",
                 "\tCreateDelegationToken(38): 1 to 3 [usable: 3],",
                 "\tDescribeUserScramCredentials(50): 0 [usable: 0],",
                 "\tDescribeCluster(60): 0 to 1 [usable: 1],"):
        assert line in r["stdout"].splitlines(), r["stdout"]


@pytest.mark.parametrize("combo", COMBOS)
def test_delegation_tokens(server, results, combo):
    need(server, combo)
    if not tokens_allowed(combo):
        # Kafka's KafkaApis.allowTokenRequests: not on PLAINTEXT or 1-way SSL.
        for name in ("create", "describe"):
            r = results[f"{combo}:{name}"]
            assert (r["ok"], r.get("error"), r.get("message")) == \
                (False, "UnsupportedByAuthenticationException", TOKEN_NOT_ALLOWED), r
        r = results[f"{combo}:tool-create"]
        assert r["exit"] == 1 and TOKEN_NOT_ALLOWED in r["stdout"] + r["stderr"], r
        return
    owner = principal_of(server, combo)
    created = ok(results, f"{combo}:create")
    assert (created["owner"], created["requester"], created["renewers"]) == \
        (owner, owner, [f"User:{ALICE}"])
    assert created["maxTimestamp"] == created["issueTimestamp"] + 3600000
    assert created["issueTimestamp"] < created["expiryTimestamp"] <= created["maxTimestamp"]
    described = ok(results, f"{combo}:describe")["tokens"]
    mine = [t for t in described if t["tokenId"] == created["tokenId"]]
    assert mine == [{k: v for k, v in created.items() if k not in ("id", "ok")}], described
    renewed = ok(results, f"{combo}:renew")
    assert created["issueTimestamp"] < renewed["expiry"] < created["expiryTimestamp"]
    # a login with the token, which may not ask for more tokens
    token_login = ok(results, f"{combo}:token-login")
    assert token_login["clusterId"] == server.cluster_id
    r = results[f"{combo}:token-create"]
    assert (r["ok"], r.get("error"), r.get("message")) == \
        (False, "UnsupportedByAuthenticationException", TOKEN_NOT_ALLOWED), r
    ok(results, f"{combo}:expire")
    r = results[f"{combo}:token-login-expired"]
    assert (r["ok"], r.get("error"), r.get("message")) == \
        (False, "SaslAuthenticationException", SCRAM_FAILURE.format("SCRAM-SHA-256")), r
    # kafka-delegation-tokens.sh
    r = ok(results, f"{combo}:tool-create")
    assert r["exit"] == 0, r
    m = re.search(r"Created delegation token with tokenId : (\S+)", r["stdout"])
    assert m, r["stdout"]
    assert f" {owner} " in r["stdout"] and f"[User:{ALICE}]" in r["stdout"], r["stdout"]
    r = ok(results, f"{combo}:tool-describe")
    assert r["exit"] == 0 and created["tokenId"] in r["stdout"], r


@pytest.mark.parametrize("combo", COMBOS)
def test_scram_credentials(server, results, combo):
    need(server, combo)
    user = scram_user(combo)
    if principal_of(server, combo) == "User:ANONYMOUS":
        # kchannel has no ACL authorizer and lets only super.users see or
        # change credentials (README, Limitations); Kafka without an
        # authorizer would allow anyone.
        r = results[f"{combo}:scram-alter"]
        assert r["ok"] and r["results"] == {
            user: f"ClusterAuthorizationException: {CLUSTER_AUTHORIZATION_FAILED}"}, r
        r = results[f"{combo}:scram-describe"]
        assert (r["ok"], r.get("error"), r.get("message")) == \
            (False, "ClusterAuthorizationException", CLUSTER_AUTHORIZATION_FAILED), r
        return
    assert ok(results, f"{combo}:scram-alter")["results"] == {user: "ok"}
    assert ok(results, f"{combo}:scram-describe")["users"] == {
        user: [["SCRAM-SHA-256", 8192], ["SCRAM-SHA-512", 4096]]}
    assert ok(results, f"{combo}:scram-login")["clusterId"] == server.cluster_id
    r = ok(results, f"{combo}:configs-delete")
    assert (r["exit"], r["stdout"]) == (0, f"Completed updating config for user {user}.\n"), r
    r = ok(results, f"{combo}:configs-describe")
    assert (r["exit"], r["stdout"]) == (
        0, f"SCRAM credential configs for user-principal '{user}' are "
           "SCRAM-SHA-256=iterations=8192\n"), r


# ----------------------------------------------------- the tools' own JVMs
@pytest.fixture(scope="module")
def scram_props(server, tmp_path_factory):
    config = java_client_configs(server, "SASL_SSL", "SCRAM-SHA-512")
    path = write_properties(tmp_path_factory.mktemp("java-tools") / "admin.properties",
                            {k: v for k, v in config.items() if k != "bootstrap.servers"})
    return config["bootstrap.servers"], path


def test_kafka_broker_api_versions_sh_matches_kchannel_broker_api_versions(
        server, kafka_java, scram_props):
    """``java -cp ... BrokerApiVersionsCommand`` as the script runs it, and
    kchannel's own command with the same properties print the same."""
    bootstrap, props = scram_props
    r = kafka_java.run_main(BROKER_API_VERSIONS, "--bootstrap-server", bootstrap,
                            "--command-config", props)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(node_line(server, "SASL_SSL") + " -> (\n"), r.stdout
    ours = run_kchannel("broker-api-versions", "--bootstrap-server", bootstrap,
                        "--command-config", props)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == r.stdout.splitlines()


def test_kafka_delegation_tokens_sh(server, kafka_java, scram_props):
    bootstrap, props = scram_props
    r = kafka_java.run_main(DELEGATION_TOKENS, "--bootstrap-server", bootstrap,
                            "--command-config", props, "--create",
                            "--max-life-time-period", "-1")
    assert r.returncode == 0, r.stdout + r.stderr
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", r.stdout).group(1)
    hmac = re.search(rf"^{re.escape(token_id)}\s+(\S+)\s+User:{ADMIN}\s", r.stdout, re.M)
    assert hmac, r.stdout
    r = kafka_java.run_main(DELEGATION_TOKENS, "--bootstrap-server", bootstrap,
                            "--command-config", props, "--renew", "--hmac", hmac.group(1),
                            "--renew-time-period", "-1")
    assert r.returncode == 0 and "Completed renew operation." in r.stdout, r.stdout + r.stderr
    r = kafka_java.run_main(DELEGATION_TOKENS, "--bootstrap-server", bootstrap,
                            "--command-config", props, "--expire", "--hmac", hmac.group(1),
                            "--expiry-time-period", "-1")
    assert r.returncode == 0 and "Completed expire operation." in r.stdout, r.stdout + r.stderr
    r = kafka_java.run_main(DELEGATION_TOKENS, "--bootstrap-server", bootstrap,
                            "--command-config", props, "--describe", "--owner-principal",
                            f"User:{ADMIN}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Total number of tokens : " in r.stdout and token_id not in r.stdout, r.stdout


def test_kafka_configs_sh(server, kafka_java, scram_props):
    bootstrap, props = scram_props
    args = ("--bootstrap-server", bootstrap, "--command-config", props, "--entity-type",
            "users", "--entity-name", "carol")
    r = kafka_java.run_main(CONFIGS, *args, "--alter", "--add-config",
                            "SCRAM-SHA-256=[iterations=4096,password=carol-secret],"
                            "SCRAM-SHA-512=[password=carol-secret]")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user carol.\n"), \
        r.stderr
    r = kafka_java.run_main(CONFIGS, *args, "--describe")
    assert (r.returncode, r.stdout) == (
        0, "SCRAM credential configs for user-principal 'carol' are "
           "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096\n"), r.stderr
    # kchannel's own client logs in with the credential kafka-configs.sh set
    from kchannel.client import KafkaClient
    client = KafkaClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                          "sasl.jaas.config": f'{SCRAM_MODULE} required username="carol" '
                                             f'password="carol-secret";'})
    client.connect("127.0.0.1", server.port("SASL_PLAINTEXT")).close()


# ------------------------------------------------------------------ KIP-368
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def reauth_server(tmp_path_factory, pki, kdc_or_none):
    kdc = kdc_or_none
    props = java_server_props(pki, kdc, ["SASL_PLAINTEXT", "SASL_SSL"],
                              {"connections.max.reauth.ms": str(REAUTH_MS)})
    srv = start_kchannel_server(tmp_path_factory.mktemp("java-reauth"), props,
                                env=kdc.env if kdc else None, log_level="DEBUG",
                                scram_users={ADMIN: ADMIN_PASSWORD})
    srv.kdc = kdc
    srv.pki = pki
    yield srv
    srv.stop_and_check()


def test_java_client_reauthenticates(reauth_server, kafka_java):
    """Each mechanism's AdminClient keeps one connection busy for a few
    sessions: every request succeeds, the server logs successful
    re-authentications with that mechanism and never has to close an
    expired connection."""
    srv = reauth_server
    mechanisms = [m for m in SASL_MECHANISMS if srv.kdc or m != "GSSAPI"]
    mark = srv.mark()
    checks = [{"id": f"{l}-{m}", "op": "repeatDescribeCluster",
               "config": java_client_configs(srv, l, m), "durationMs": 2 * REAUTH_MS,
               "intervalMs": 100}
              for l, m in [("SASL_PLAINTEXT", m) for m in mechanisms]
              + [("SASL_SSL", "SCRAM-SHA-512")]]
    results = kafka_java.probe(checks, kdc=srv.kdc)
    for r in results.values():
        assert r["ok"] and r["calls"] > 0 and r["failures"] == [], r
    lines = srv.log_lines()[mark:]
    text = "".join(lines)
    for m in mechanisms:
        assert re.search(rf"Successfully re-authenticated with 127\.0\.0\.1:\d+ using SASL "
                         rf"mechanism {m}\b", text), (m, text[-4000:])
    assert "Disconnecting expired channel" not in text, text[-4000:]
    assert "Failed re-authentication" not in text, text[-4000:]
