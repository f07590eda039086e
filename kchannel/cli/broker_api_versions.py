"""``kchannel broker-api-versions``: kafka-broker-api-versions.sh.

    kchannel broker-api-versions --bootstrap-server HOST:PORT[,HOST:PORT] \\
        [--command-config client.properties]

Asks a bootstrap server for the cluster's brokers (Metadata, all topics), then
each broker, at its advertised address, for its ApiVersions, and prints what
Kafka's tool prints (``Node.toString()`` then ``NodeApiVersions.toString(true)``)::

    localhost:9092 (id: 0 rack: null isFenced: false) -> (
    \tProduce(0): UNSUPPORTED,
    \tMetadata(3): 0 to 12 [usable: 12],
    ...
    )

One line per API key, ascending: every key the broker announced (``min to
max``, or ``v`` when min == max, then ``[usable: v]`` -- the highest version
both sides know -- or ``[unusable: node too new/old]``; ``UNKNOWN(k)`` for keys
this tool does not know), and ``UNSUPPORTED`` for every client-facing API key
(Kafka's ``ApiKeys.clientApis()``: keys served by brokers) the broker did not
announce.  A broker whose ApiVersions fails prints ``... -> ERROR: <message>``.

``--command-config`` takes the admin client's properties (``security.protocol``,
``ssl.*``, ``sasl.*``; librdkafka/kafka-python spellings too).  As Kafka's
tool, ``request.timeout.ms`` defaults to 5000.

Exit status: 0 when the brokers were listed, 1 when the cluster could not be
reached (message on stderr), 2 for command-line errors.
"""
import logging
import sys

from .. import __version__, errors
from ..client.network_client import KafkaClient, _parse_bootstrap
from ..config import load_properties
from ..protocol.api_keys import API_NAMES, API_VALID_VERSIONS, ApiKey
from ..protocol.errors import exception_for

NAME = "broker-api-versions"
HELP = "This tool helps to retrieve broker version information."

# The tool's own request timeout (BrokerApiVersionsCommand's
# DEFAULT_REQUEST_TIMEOUT_MS), used unless the command config sets one.
DEFAULT_REQUEST_TIMEOUT_MS = 5000

# API keys no Kafka 4 broker serves: ApiKeys.clientApis() is every other key.
# The controller-only ones (their schemas' "listeners" do not include a
# broker) and the ZooKeeper-era inter-broker APIs Kafka 4.0 dropped, which
# Kafka 4's kafka-broker-api-versions.sh no longer lists.
_CONTROLLER_ONLY_APIS = frozenset({
    4,   # LeaderAndIsr (ZooKeeper brokers only; gone in Kafka 4.0)
    5,   # StopReplica (idem)
    6,   # UpdateMetadata (idem)
    7,   # ControlledShutdown (idem)
    52,  # Vote
    53,  # BeginQuorumEpoch
    54,  # EndQuorumEpoch
    56,  # AlterPartition
    58,  # Envelope
    59,  # FetchSnapshot
    62,  # BrokerRegistration
    63,  # BrokerHeartbeat
    67,  # AllocateProducerIds
    70,  # ControllerRegistration
    73,  # AssignReplicasToDirs
    82,  # UpdateRaftVoter
})


def add_arguments(parser):
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                        dest="bootstrap_server",
                        help="REQUIRED: The server to connect to.")
    parser.add_argument("--command-config", metavar="FILE",
                        dest="command_config", default=None,
                        help="A property file containing configs to be passed to Admin Client.")
    parser.add_argument("--version", action="version", version=__version__,
                        help="Display kchannel version.")


def client_apis():
    """Kafka's ``ApiKeys.clientApis()``: every known API key a broker may
    serve, ascending."""
    return [k for k in sorted(API_NAMES) if k not in _CONTROLLER_ONLY_APIS]


def node_to_string(node_id, host, port, rack=None, is_fenced=False):
    """Kafka's ``Node.toString()``."""
    rack_text = "null" if rack is None else rack
    fenced = "true" if is_fenced else "false"
    return f"{host}:{port} (id: {node_id} rack: {rack_text} isFenced: {fenced})"


def _api_version_text(api_key, lo, hi):
    name = API_NAMES.get(api_key)
    head = f"{name}({api_key}): " if name is not None else f"UNKNOWN({api_key}): "
    text = head + (str(lo) if lo == hi else f"{lo} to {hi}")
    if name is None:
        return text
    oldest, latest = API_VALID_VERSIONS[api_key]
    if latest < lo:
        return text + " [unusable: node too new]"
    if hi < oldest:
        return text + " [unusable: node too old]"
    return text + f" [usable: {min(latest, hi)}]"


def node_api_versions_to_string(api_keys, line_breaks=True):
    """Kafka's ``NodeApiVersions.toString(lineBreaks)`` for an ApiVersions
    response's ``api_keys`` (list of dicts with ``api_key``, ``min_version``,
    ``max_version``)."""
    texts = {}
    for entry in api_keys or ():
        k = int(entry["api_key"])
        texts[k] = _api_version_text(k, int(entry["min_version"]), int(entry["max_version"]))
    for k in client_apis():
        if k not in texts:
            texts[k] = f"{API_NAMES[k]}({k}): UNSUPPORTED"
    separator = ",\n\t" if line_breaks else ", "
    body = separator.join(texts[k] for k in sorted(texts))
    if line_breaks:
        return "(\n\t" + body + "\n)"
    return "(" + body + ")"


def _client_configs(args):
    props = {}
    if args.command_config:
        props = dict(load_properties(args.command_config))
    props["bootstrap.servers"] = args.bootstrap_server
    props.setdefault("request.timeout.ms", str(DEFAULT_REQUEST_TIMEOUT_MS))
    # Kafka's tool identifies itself as admin-<n>.
    props.setdefault("client.id", "admin-1")
    return props


def _bootstrap_nodes(configs):
    return _parse_bootstrap(configs.get("bootstrap.servers"))


def find_brokers(configs):
    """Metadata (all topics) from the first bootstrap server that answers:
    ``[(node_id, host, port, rack)]``.  Authentication errors are not
    retried on other servers (as Kafka's tool)."""
    bootstrap = _bootstrap_nodes(configs)
    if not bootstrap:
        raise errors.ConfigError("No resolvable bootstrap urls given in bootstrap.servers",
                                 key="bootstrap.servers")
    last = None
    for host, port in bootstrap:
        client = KafkaClient(configs)
        try:
            client.connect(host, port)
            md = client.request(ApiKey.METADATA, {"topics": None})
            return [(b["node_id"], b["host"], b["port"], b.get("rack"))
                    for b in md.get("brokers") or ()]
        except errors.AuthenticationError:
            raise
        except errors.KChannelError as exc:
            last = exc
        finally:
            client.close()
    nodes = ", ".join(node_to_string(-1, h, p) for h, p in bootstrap)
    raise RuntimeError(f"Request METADATA failed on brokers [{nodes}]"
                       + (f": {last}" if last is not None else ""))


def broker_api_versions(configs, host, port):
    """The ApiVersions response body of the broker at ``host:port``."""
    client = KafkaClient(configs)
    try:
        client.connect(host, port)
        return client.api_versions_response
    finally:
        client.close()


def _message(exc):
    text = str(exc)
    return text if text else type(exc).__name__


def _quiet_logging(args):
    """Kafka's tools log at WARN (tools-log4j.properties): connection chatter
    must not mix with the report, also when a program calls :func:`run`.  An
    explicit --log-level wins.  Returns the root logger's level to restore."""
    root = logging.getLogger()
    previous = root.level
    if getattr(args, "log_level", None) is None:
        root.setLevel(logging.WARNING)
    return previous


def run(args, out=None, err=None):
    previous = _quiet_logging(args)
    try:
        return _run(args, out, err)
    finally:
        # The process (or the embedding program) keeps its own level.
        logging.getLogger().setLevel(previous)


def _run(args, out, err):
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        configs = _client_configs(args)
        brokers = find_brokers(configs)
    except (OSError, errors.KChannelError, RuntimeError, ValueError) as exc:
        err.write(_message(exc) + "\n")
        return 1
    if not brokers:
        err.write("No brokers found in the cluster metadata\n")
        return 1
    for node_id, host, port, rack in sorted(brokers, key=lambda b: b[0]):
        node = node_to_string(node_id, host, port, rack)
        try:
            body = broker_api_versions(configs, host, port)
            code = (body or {}).get("error_code", 0)
            if code:
                raise exception_for(code)
            text = node_api_versions_to_string(body.get("api_keys"), True)
            out.write(f"{node} -> {text}\n")
        except Exception as exc:  # noqa: BLE001 - one broker's failure is its line
            out.write(f"{node} -> ERROR: {_message(exc)}\n")
    out.flush()
    return 0
