"""``kchannel serve``: run a kchannel server from a Kafka ``server.properties``.

    kchannel serve server.properties [--override key=value ...]
    kchannel serve --config server.properties [--jaas-config kafka_server_jaas.conf]
                   [--override key=value ...]

The properties file is given as ``kafka-server-start.sh`` takes it (the first
positional argument) or with ``--config``.

Binds every listener in ``listeners`` (logging "Awaiting socket connections on
HOST:PORT." per listener, as Kafka's SocketServer), serves ApiVersions,
Metadata and DescribeCluster plus the SCRAM credential APIs (50/51) backed by the server's SCRAM
credential store (allowed to the principals in ``super.users`` only), DescribeClientQuotas
(no quotas: what ``kafka-configs.sh --describe --entity-type users`` asks first) and, when
delegation tokens are enabled and the token module is installed, the delegation token APIs.
With ``kchannel.upstream.bootstrap.servers`` set it is a gateway in front of that cluster
(see :mod:`kchannel.server.gateway`): every other request is forwarded upstream.  SIGTERM / SIGINT shut it down
cleanly (exit 0).  A configuration error exits 1 with Kafka's message.

``num.network.threads`` = N > 1 starts N worker processes sharing the
listeners, ``kchannel.metrics.file`` and ``kchannel.metrics.prometheus.listen``
export the metrics: all of it is :func:`kchannel.server.workers.serve`, which
this command calls after parsing its arguments (a program gets the same
without the CLI).
"""
import logging

from .. import errors
from ..config import load_properties
from ..server.workers import serve

NAME = "serve"
HELP = "run a Kafka-protocol server (listeners, TLS, SASL) from server.properties"
# Kafka's broker logs INFO (its log4j2.yaml), unlike its tools.
DEFAULT_LOG_LEVEL = "INFO"

log = logging.getLogger("kchannel.cli.serve")


def add_arguments(parser):
    # kafka-server-start.sh takes the file positionally; --config is kept
    # for the scripts written for kchannel's first form.
    parser.add_argument("server_properties", nargs="?", metavar="server.properties",
                        help="server properties file (Kafka's server.properties format), "
                             "as kafka-server-start.sh takes it")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="the server properties file, as a flag")
    parser.add_argument("--jaas-config", metavar="FILE", default=None,
                        help="JAAS file, as -Djava.security.auth.login.config "
                             "(KafkaServer / <listener>.KafkaServer sections)")
    parser.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                        help="override a property (repeatable), as kafka-server-start's "
                             "--override")


def _parse_override(text):
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise errors.ConfigError(f"Invalid override {text!r}: expected key=value",
                                 key=text, value=None)
    return key.strip(), value


def check_arguments(parser, args):
    """Exactly one properties file: positional or ``--config`` (usage error,
    exit 2, otherwise)."""
    if args.server_properties and args.config:
        parser.error("give the properties file once: positionally or with --config, not both")
    if not (args.server_properties or args.config):
        parser.error("the server properties file is required "
                     "(kchannel serve server.properties, or --config FILE)")
    args.config = args.config or args.server_properties


def run(args):
    try:
        props = dict(load_properties(args.config))
        for item in args.override or ():
            k, v = _parse_override(item)
            props[k] = v
        jaas_text = None
        if args.jaas_config:
            with open(args.jaas_config, encoding="utf-8") as f:
                jaas_text = f.read()
        return serve(props, jaas_text, jaas_file_name=args.jaas_config)
    except (OSError, errors.KChannelError) as exc:
        log.error("Cannot start: %s", exc)
        return 1
