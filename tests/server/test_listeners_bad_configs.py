"""Bad listener configurations: the exact error of each, as a broker
operator sees it from ``kchannel serve --config`` (exit status 1, the
message logged on stderr) and ``kchannel config validate`` (exit status 1,
every error listed on stdout).

Messages are Kafka's (KafkaConfig, SocketServerConfigs / CoreUtils
listenerListToEndPoints, JaasContext) except where kchannel checks more
than Kafka does at start-up: port range, key stores, and its own
``kchannel.cluster.nodes``.
"""
import os

import pytest

from kchannel.config import ServerConfig
from kchannel.errors import ConfigError
from tests.fixtures.forked_cli import run_cli_forked
from tests.fixtures.peers import write_properties

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_JAAS = f'{PLAIN} required username="a" password="a" user_a="a";'

LISTENERS_2 = {"listeners": "INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:19093",
               "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
               "inter.broker.listener.name": "INTERNAL"}


def with_(base, **kv):
    out = dict(base)
    out.update({k.replace("__", "."): v for k, v in kv.items()})
    return out


# (id, server properties, [every error, first one is what serve reports])
CASES = [
    ("listener-name-missing-from-map",
     {"listeners": "INTERNAL://127.0.0.1:19092",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"},
     ["Error creating broker listeners from 'INTERNAL://127.0.0.1:19092': No security protocol "
      "defined for listener INTERNAL"]),
    ("advertised-name-missing-from-map",
     with_(LISTENERS_2, advertised__listeners="INTERNAL://h:19092,OTHER://h:19094"),
     ["Error creating broker listeners from 'INTERNAL://h:19092,OTHER://h:19094': No security "
      "protocol defined for listener OTHER",
      # follows from the first: no advertised listener could be read
      "requirement failed: There must be at least one broker advertised listener."]),
    ("duplicate-names",
     {"listeners": "PLAINTEXT://127.0.0.1:19092,PLAINTEXT://127.0.0.1:19093"},
     ["requirement failed: Each listener must have a different name, listeners: "
      "PLAINTEXT://127.0.0.1:19092,PLAINTEXT://127.0.0.1:19093"]),
    ("duplicate-names-differing-in-case",
     with_(LISTENERS_2, listeners="INTERNAL://:19092,internal://:19093"),
     ["requirement failed: Each listener must have a different name, listeners: "
      "INTERNAL://:19092,internal://:19093"]),
    ("duplicate-ports",
     with_(LISTENERS_2, listeners="INTERNAL://:19092,EXTERNAL://:19092"),
     ["requirement failed: Each listener must have a different port, listeners: "
      "INTERNAL://:19092,EXTERNAL://:19092"]),
    ("advertised-wildcard-address",
     with_(LISTENERS_2, advertised__listeners="INTERNAL://0.0.0.0:19092,EXTERNAL://h:19093"),
     ["requirement failed: advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
      "Use a routable IP address."]),
    ("advertised-listener-not-bound",
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,"
           "OTHER:SSL", advertised__listeners="INTERNAL://h:19092,OTHER://h:19094"),
     ["requirement failed: advertised.listeners listener names must be equal to or a subset of "
      "the ones defined in listeners. Found INTERNAL,OTHER. The valid options based on the "
      "current configuration are EXTERNAL,INTERNAL"]),
    ("both-inter-broker-keys",
     with_(LISTENERS_2, security__inter__broker__protocol="PLAINTEXT"),
     ["Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."]),
    ("inter-broker-name-not-in-map",
     with_(LISTENERS_2, inter__broker__listener__name="REPLICATION"),
     ["Listener with name REPLICATION defined in inter.broker.listener.name not found in "
      "listener.security.protocol.map."]),
    ("inter-broker-name-not-a-listener",
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,"
           "REPLICATION:SSL", inter__broker__listener__name="REPLICATION"),
     ["requirement failed: inter.broker.listener.name must be a listener name defined in "
      "advertised.listeners. The valid options based on currently configured listeners are "
      "INTERNAL,EXTERNAL"]),
    ("inter-broker-listener-not-advertised",
     with_(LISTENERS_2, advertised__listeners="EXTERNAL://h:19093"),
     ["requirement failed: inter.broker.listener.name must be a listener name defined in "
      "advertised.listeners. The valid options based on currently configured listeners are "
      "EXTERNAL"]),
    ("default-inter-broker-protocol-has-no-listener",
     # security.inter.broker.protocol defaults to PLAINTEXT: a listener named
     # PLAINTEXT must exist when neither inter-broker key is set.
     {"listeners": "INTERNAL://127.0.0.1:19092",
      "listener.security.protocol.map": "INTERNAL:PLAINTEXT"},
     ["requirement failed: inter.broker.listener.name must be a listener name defined in "
      "advertised.listeners. The valid options based on currently configured listeners are "
      "INTERNAL"]),
    ("unknown-security-protocol",
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_TLS"),
     ["Invalid security protocol `SASL_TLS` defined in listener.security.protocol.map",
      "Error creating broker listeners from 'INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:19093'"
      ": No security protocol defined for listener INTERNAL",
      "Listener with name INTERNAL defined in inter.broker.listener.name not found in "
      "listener.security.protocol.map."]),
    ("protocol-map-entry-without-colon",
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL"),
     ["Error parsing configuration property 'listener.security.protocol.map': begin 0, end -1, "
      "length 8",
      "Error creating broker listeners from 'INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:19093'"
      ": No security protocol defined for listener INTERNAL",
      "Listener with name INTERNAL defined in inter.broker.listener.name not found in "
      "listener.security.protocol.map."]),
    ("port-not-a-number",
     {"listeners": "PLAINTEXT://127.0.0.1:abc"},
     ["Error creating broker listeners from 'PLAINTEXT://127.0.0.1:abc': Unable to parse "
      "PLAINTEXT://127.0.0.1:abc to a broker endpoint"]),
    ("port-out-of-range",
     {"listeners": "PLAINTEXT://127.0.0.1:70000"},
     ["Invalid port 70000 in listeners 'PLAINTEXT://127.0.0.1:70000': a port is 0 (ephemeral) "
      "to 65535"]),
    ("listener-without-scheme",
     {"listeners": "127.0.0.1:19092"},
     ["Error creating broker listeners from '127.0.0.1:19092': Unable to parse 127.0.0.1:19092 to "
      "a broker endpoint"]),
    ("empty-listener-name",
     {"listeners": "://127.0.0.1:19092"},
     ["Error creating broker listeners from '://127.0.0.1:19092': The provided listener name is "
      "null or empty string"]),
    ("inter-broker-mechanism-not-enabled",
     {"listeners": "INTERNAL://127.0.0.1:19092",
      "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
      "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS},
     ["requirement failed: sasl.mechanism.inter.broker.protocol must be included in "
      "sasl.enabled.mechanisms when SASL is used for inter-broker communication"]),
    ("no-jaas-for-a-sasl-listener",
     {"listeners": "INTERNAL://127.0.0.1:19092",
      "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
      "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
      "sasl.mechanism.inter.broker.protocol": "PLAIN"},
     ["Could not find a 'KafkaServer' or 'internal.KafkaServer' entry in the JAAS configuration. "
      "System property 'java.security.auth.login.config' is not set"]),
    ("jaas-prefixed-for-another-listener",
     # listener.name.internal.* does not configure EXTERNAL.
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,"
           "EXTERNAL:SASL_PLAINTEXT", sasl__enabled__mechanisms="PLAIN",
           **{"listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS}),
     ["Could not find a 'KafkaServer' or 'external.KafkaServer' entry in the JAAS configuration. "
      "System property 'java.security.auth.login.config' is not set"]),
    ("jaas-prefixed-for-another-mechanism",
     # listener.name.external.plain.* does not configure SCRAM-SHA-512.
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,"
           "EXTERNAL:SASL_PLAINTEXT", sasl__enabled__mechanisms="PLAIN,SCRAM-SHA-512",
           **{"listener.name.external.plain.sasl.jaas.config": PLAIN_JAAS}),
     ["Could not find a 'KafkaServer' or 'external.KafkaServer' entry in the JAAS configuration. "
      "System property 'java.security.auth.login.config' is not set"]),
    ("jaas-with-listener-prefix-but-no-mechanism",
     # listener.name.<l>.sasl.jaas.config is ignored on a broker (Kafka reads
     # only the listener+mechanism form), so no JAAS is found.
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,"
           "EXTERNAL:SASL_PLAINTEXT", sasl__enabled__mechanisms="PLAIN",
           **{"listener.name.external.sasl.jaas.config": PLAIN_JAAS}),
     ["Could not find a 'KafkaServer' or 'external.KafkaServer' entry in the JAAS configuration. "
      "System property 'java.security.auth.login.config' is not set"]),
    ("ssl-listener-without-keystore",
     with_(LISTENERS_2, listener__security__protocol__map="INTERNAL:PLAINTEXT,EXTERNAL:SSL"),
     ["Invalid value null for configuration ssl.keystore.location: an SSL listener needs a key "
      "store (ssl.keystore.location, or ssl.keystore.type=PEM with ssl.keystore.key and "
      "ssl.keystore.certificate.chain) (listener EXTERNAL, ssl.keystore.location)"]),
    ("bad-listener-prefixed-value",
     with_(LISTENERS_2, **{"listener.name.external.ssl.client.auth": "always"}),
     ["Invalid value always for configuration listener.name.external.ssl.client.auth: String "
      "must be one of: required, requested, none"]),
    ("cluster-nodes-malformed",
     with_(LISTENERS_2, kchannel__cluster__nodes="2@INTERNAL://broker2"),
     ["Invalid value [2@INTERNAL://broker2] for configuration kchannel.cluster.nodes: "
      "'2@INTERNAL://broker2' is not node.id@LISTENER://host:port (Error creating broker "
      "listeners from 'INTERNAL://broker2': Unable to parse INTERNAL://broker2 to a broker "
      "endpoint)"]),
]

# Found only when the server is built (they need node.id / the protocol
# map together): ``kchannel serve`` reports them, ``config validate`` does not.
SERVE_ONLY = [
    ("cluster-nodes-listener-not-in-map",
     with_(LISTENERS_2, kchannel__cluster__nodes="2@INTERNL://broker2:19092"),
     "Invalid value 2@INTERNL://broker2:19092 for configuration kchannel.cluster.nodes: listener "
     "INTERNL of node 2 is not defined in listener.security.protocol.map"),
    ("cluster-nodes-lists-this-node",
     with_(LISTENERS_2, node__id="2", kchannel__cluster__nodes="2@INTERNAL://broker2:19092"),
     "Invalid value for configuration kchannel.cluster.nodes: it lists node 2, which is this node "
     "(node.id); this node's endpoints are its advertised.listeners"),
]


def test_case_ids_are_unique():
    ids = [c[0] for c in CASES] + [c[0] for c in SERVE_ONLY]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("name, props, messages", CASES, ids=[c[0] for c in CASES])
def test_server_config_errors(name, props, messages):
    assert [str(e) for e in ServerConfig.validate(props)] == messages
    with pytest.raises(ConfigError) as exc:
        ServerConfig(props)
    assert str(exc.value) == messages[0]


# ------------------------------------------------------------ through the CLI
@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """``{case: (serve result, validate result or None)}``: each a process
    of its own (``python -m kchannel`` forked from one interpreter that
    imported the CLI once: tests/fixtures/forked_cli.py), run concurrently
    to keep the module fast."""
    directory = tmp_path_factory.mktemp("bad-configs")
    names, jobs = [], {}
    for name, props, _ in CASES + [(n, p, None) for n, p, _ in SERVE_ONLY]:
        props = dict(props, **{"log.dirs": str(directory / name / "data")})
        path = write_properties(os.path.join(directory, f"{name}.properties"), props)
        names.append(name)
        jobs[f"serve {name}"] = ["serve", "--config", path]
        jobs[f"validate {name}"] = ["config", "validate", "--config", path]
    done = run_cli_forked(jobs, preload=("kchannel.cli", "kchannel.cli.serve",
                                         "kchannel.cli.config_tool"))
    return {name: (done[f"serve {name}"], done[f"validate {name}"]) for name in names}


@pytest.mark.parametrize("name, props, messages", CASES, ids=[c[0] for c in CASES])
def test_kchannel_serve_refuses_to_start(cli_results, name, props, messages):
    serve, _ = cli_results[name]
    assert serve.returncode == 1, serve.stderr
    assert f"ERROR kchannel.cli.serve: Cannot start: {messages[0]}\n" in serve.stderr
    assert "Awaiting socket connections" not in serve.stderr + serve.stdout


@pytest.mark.parametrize("name, props, messages", CASES, ids=[c[0] for c in CASES])
def test_kchannel_config_validate_lists_every_error(cli_results, name, props, messages):
    _, validate = cli_results[name]
    assert validate.returncode == 1
    expected = f"{len(messages)} error(s) found:\n" + "".join(
        f"  {i}. {m}\n" for i, m in enumerate(messages, 1))
    assert validate.stdout == expected


@pytest.mark.parametrize("name, props, message", SERVE_ONLY, ids=[c[0] for c in SERVE_ONLY])
def test_kchannel_serve_refuses_bad_cluster_nodes(cli_results, name, props, message):
    serve, validate = cli_results[name]
    assert serve.returncode == 1, serve.stderr
    assert f"ERROR kchannel.cli.serve: Cannot start: {message}\n" in serve.stderr
    # Syntax is fine, so the table-driven validation accepts it.
    assert validate.returncode == 0 and "configuration is valid" in validate.stdout
