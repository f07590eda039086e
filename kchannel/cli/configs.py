"""``kchannel configs``: kafka-configs.sh for SCRAM user credentials, topic
and broker configs, on :class:`kchannel.Admin`.

Flag for flag as ``kafka-configs.sh`` for the ``users`` (SCRAM credentials),
``topics`` and ``brokers`` entity types::

    kchannel configs --bootstrap-server HOST:PORT [--command-config client.properties] \\
        --alter --entity-type users --entity-name alice --add-config \\
        'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    kchannel configs ... --alter --delete-config 'SCRAM-SHA-512' \\
        --entity-type users --entity-name alice
    kchannel configs ... --describe [--entity-type users] [--entity-name alice]
    kchannel configs ... --alter --topic orders --add-config retention.ms=86400000
    kchannel configs ... --describe [--all] --entity-type brokers [--entity-name 1]

Topics and brokers go through DescribeConfigs (with synonyms) and
IncrementalAlterConfigs, printed as Kafka's tool prints them (``Dynamic
configs for topic orders are:`` then ``  retention.ms=86400000
sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}``).

Targets:

* ``--bootstrap-server HOST:PORT[,HOST:PORT]`` (with ``--command-config`` for
  the client's security settings): talks to a running server through the
  DescribeUserScramCredentials / AlterUserScramCredentials APIs.  As Kafka's
  admin client, the password never leaves this process: it sends a random
  salt and the SaltedPassword.
* ``--server-config server.properties``: kchannel's equivalent of
  ``kafka-configs.sh --zookeeper``, direct access to a server's credential
  store (the SQLite file in the first of its ``log.dirs``).  Use it to create
  credentials before the server first starts.  Validation and messages are
  the same as through the API; running servers see the change at their next
  authentication.

Output is kafka-configs.sh's: ``Completed updating config for user alice.``
and ``SCRAM credential configs for user-principal 'alice' are
SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096``.  Exit status
0 on success, 1 on any failure (message on stderr), 2 for a command line
that cannot be parsed or an invalid combination of options (message and
usage on stderr).
"""
import argparse
import re
import sys

from kchannel import errors
from kchannel.client import admin
from kchannel.client.admin import Admin
from kchannel.config.properties import load_properties
from kchannel.protocol.errors import Errors, error_message, error_name
from kchannel.security.sasl import scram
from kchannel.server.scram_handlers import (alter_user_scram_credentials,
                                            describe_user_scram_credentials)
from kchannel.security.sasl.scram_store import open_store

NAME = "configs"
HELP = ("Describe or alter SCRAM credentials of users and configs of topics and brokers, "
        "as kafka-configs.sh "
        "(via --bootstrap-server or directly in a server's store via --server-config)")

DEFAULT_SCRAM_ITERATIONS = 4096
USER = "users"
TOPIC = "topics"
BROKER = "brokers"
# What each target serves: a running server all three (through the Admin's
# DescribeConfigs / IncrementalAlterConfigs for topics and brokers), a
# server's credential store only SCRAM users.
_API_TYPES = (USER, TOPIC, BROKER)
_ADMIN_RESOURCE = {TOPIC: "TOPIC", BROKER: "BROKER"}

# Kafka's simple exception class names for the error codes these APIs return.
_EXCEPTION_NAMES = {
    -1: "UnknownServerException",
    31: "ClusterAuthorizationException",
    33: "UnsupportedSaslMechanismException",
    35: "UnsupportedVersionException",
    91: "ResourceNotFoundException",
    92: "DuplicateResourceException",
    93: "UnacceptableCredentialException",
    Errors.INVALID_CONFIG: "InvalidConfigurationException",
    Errors.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
}


class CommandError(Exception):
    """Kafka's IllegalArgumentException path: message on stderr, exit 1."""


class _Usage(CommandError):
    """An invalid combination of options (ConfigCommandOptions.checkArgs):
    message and usage on stderr, exit 2."""


class _AppendCsv(argparse.Action):
    """--delete-config k1,k2 (repeatable), as joptsimple's withValuesSeparatedBy."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest) or [])
        items.extend(v for v in values.split(","))
        setattr(namespace, self.dest, items)


class _Ordered(argparse.Action):
    """Records --entity-name / --entity-default in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, "_entity_names", None) or [])
        names.append("" if option_string == "--entity-default" else values)
        setattr(namespace, "_entity_names", names)


def add_arguments(parser):
    target = parser.add_argument_group("target")
    target.add_argument("--bootstrap-server", metavar="server to connect to",
                        help="The Kafka servers to connect to (HOST:PORT[,HOST:PORT]).")
    target.add_argument("--bootstrap-controller", metavar="controller to connect to",
                        help="Accepted for compatibility; same as --bootstrap-server.")
    target.add_argument("--command-config", metavar="command config property file",
                        help="Property file containing configs to be passed to the client "
                             "(security.protocol, sasl.*, ssl.*).")
    target.add_argument("--server-config", metavar="server.properties",
                        help="kchannel's equivalent of kafka-configs.sh --zookeeper: work "
                             "directly on the SCRAM credential store of the server configured "
                             "by this file (in the first of its log.dirs).")
    target.add_argument("--zookeeper", metavar="urls", help=argparse.SUPPRESS)

    action = parser.add_argument_group("action")
    action.add_argument("--alter", action="store_true",
                        help="Alter the configuration for the entity.")
    action.add_argument("--describe", action="store_true",
                        help="List configs for the given entity.")
    action.add_argument("--all", action="store_true",
                        help="List all configs for the given entity (same as --describe "
                             "for users).")

    entity = parser.add_argument_group("entity")
    entity.add_argument("--entity-type", action="append", default=[],
                        help="Type of entity (users/topics/brokers; only users with "
                             "--server-config).")
    entity.add_argument("--entity-name", action=_Ordered, dest="entity_name_flag",
                        help="Name of entity (user principal name, topic name or broker id).")
    entity.add_argument("--entity-default", action=_Ordered, nargs=0, dest="entity_default_flag",
                        help="Default entity name for brokers (users: not allowed with SCRAM "
                             "credentials).")
    entity.add_argument("--user", help="The user's principal name.")
    entity.add_argument("--user-defaults", action="store_true",
                        help="The config defaults for all users.")
    entity.add_argument("--topic", help="The topic's name.")
    entity.add_argument("--broker", help="The broker's ID.")
    entity.add_argument("--broker-defaults", action="store_true",
                        help="The config defaults for all brokers.")
    for flag in ("--client", "--broker-logger", "--ip", "--group", "--client-metrics"):
        entity.add_argument(flag, help=argparse.SUPPRESS)
    for flag in ("--client-defaults", "--ip-defaults"):
        entity.add_argument(flag, action="store_true", help=argparse.SUPPRESS)

    configs = parser.add_argument_group("configs")
    configs.add_argument("--add-config",
                         help="Key Value pairs of configs to add. Square brackets can be used to "
                              "group values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'. "
                              "For users: SCRAM-SHA-256=[iterations=8192,password=secret], "
                              "SCRAM-SHA-512=[password=secret].")
    configs.add_argument("--add-config-file",
                         help="Path to a properties file with configs to add.")
    configs.add_argument("--delete-config", action=_AppendCsv, default=[],
                         help="config keys to remove 'k1,k2'")
    configs.add_argument("--force", action="store_true", help="Suppress console prompts")
    parser.set_defaults(_parser=parser)


# ------------------------------------------------------------- parsing

_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text):
    """kafka-configs.sh's --add-config parsing: split on commas outside
    ``[]``, then on ``=`` outside ``[]``; brackets are then dropped."""
    props = {}
    if not text:
        return props
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise CommandError('Invalid entity config: all configs to be added must be in the '
                               'format "key=val".')
        props[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return props


def _validate_keys(props):
    for key in props:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise CommandError(f"Invalid character found for config key: {key}")


def _scram_iterations_and_password(mechanism, value):
    """ConfigCommand.iterationsAndPasswordBytes."""
    m = re.fullmatch(r"(?:iterations=(-?[0-9]*),)?password=(.*)", value, re.S)
    mech = scram.mechanism_for(mechanism)
    if m is None:
        raise CommandError(f"Invalid credential property {mech}={_mask_passwords(value)}")
    iterations, password = m.group(1), m.group(2)
    iterations = (int(iterations) if iterations not in (None, "", "-1")
                  else DEFAULT_SCRAM_ITERATIONS)
    if iterations < mech.min_iterations:
        raise CommandError(f"Iterations {iterations} is less than the minimum "
                           f"{mech.min_iterations} required for {mech.mechanism_name}")
    return iterations, password


def _entities(args):
    types = list(args.entity_type)
    names = list(getattr(args, "_entity_names", None) or [])
    if args.user is not None:
        types.append(USER)
        names.append(args.user)
    if args.user_defaults:
        types.append(USER)
        names.append("")
    for flag, etype in (("topic", "topics"), ("client", "clients"), ("broker", "brokers"),
                        ("broker_logger", "broker-loggers"), ("ip", "ips"), ("group", "groups"),
                        ("client_metrics", "client-metrics")):
        if getattr(args, flag) is not None:
            types.append(etype)
            names.append(getattr(args, flag))
    for flag, etype in (("client_defaults", "clients"), ("broker_defaults", "brokers"),
                        ("ip_defaults", "ips")):
        if getattr(args, flag):
            types.append(etype)
            names.append("")
    return types, names


def _check_args(args, parser):
    """ConfigCommandOptions.checkArgs, for what kchannel supports."""
    if int(bool(args.alter)) + int(bool(args.describe)) != 1:
        raise _Usage("Command must include exactly one action: --describe, --alter")
    if args.describe and (args.add_config or args.add_config_file or args.delete_config):
        raise _Usage("Option \"[describe]\" can't be used with option \"[add-config]\", "
                           "\"[add-config-file]\" or \"[delete-config]\"")
    types, names = _entities(args)
    if len(types) != len(set(types)):
        dup = sorted({t for t in types if types.count(t) > 1})
        raise _Usage(f"Duplicate entity type(s) specified: {','.join(dup)}")
    if args.zookeeper:
        raise _Usage("kchannel configs has no ZooKeeper mode: use --server-config "
                           "server.properties to work directly on a server's credential store")
    connects = sum(1 for v in (args.bootstrap_server, args.bootstrap_controller,
                               args.server_config) if v)
    if connects == 0:
        raise _Usage("One of the required --bootstrap-server, --bootstrap-controller, or "
                           "--server-config arguments must be specified")
    if connects > 1:
        raise _Usage("Only one of --bootstrap-server, --bootstrap-controller, and "
                           "--server-config can be specified")
    if not types:
        raise _Usage("At least one entity type must be specified")
    allowed = (USER,) if args.server_config else _API_TYPES
    for t in types:
        if t not in allowed:
            target = ("--server-config (a server's SCRAM credential store)"
                      if args.server_config else "--bootstrap-server")
            raise _Usage(f"Invalid entity type {t}, the entity type must be one of "
                         f"{', '.join(allowed)} with kchannel configs {target}")
    if len(types) > 1:
        raise _Usage("Only 'users' and 'clients' entity types may be specified together")
    if args.alter and types[0] == TOPIC and not [n for n in names if n]:
        raise _Usage(f"An entity name must be specified with --alter of {TOPIC}")
    if (args.entity_type or getattr(args, "_entity_names", None)) and \
            (args.user is not None or args.user_defaults or args.topic is not None
             or args.broker is not None or args.broker_defaults):
        raise _Usage("--entity-{type,name,default} should not be used in conjunction with "
                           "specific entity flags")
    if args.alter:
        if not names:
            raise _Usage("An entity-name or default entity must be specified with --alter "
                               "of users, clients, brokers or ips")
        if args.add_config and args.add_config_file:
            raise _Usage("Only one of --add-config or --add-config-file must be specified")
        if not (args.add_config or args.add_config_file or args.delete_config):
            raise _Usage("At least one of --add-config, --add-config-file, or "
                               "--delete-config must be specified with --alter")
        if len(names) != len(types):
            raise _Usage("An entity name must be specified for every entity type")
    return types, names


# ------------------------------------------------------------ backends

def _admin(bootstrap, command_config):
    """:class:`kchannel.Admin` on a running server (the SCRAM credential
    APIs 50/51), tried on each bootstrap server in turn."""
    configs = dict(load_properties(command_config)) if command_config else {}
    for address in [a.strip() for a in bootstrap.split(",") if a.strip()]:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"Invalid url in bootstrap.servers: {address}")
    # A tool's request fails fast, as kafka-configs.sh's (no retrying for
    # a minute on an unreachable cluster).
    configs.setdefault("default.api.timeout.ms", 0)
    return Admin(dict(configs, **{"bootstrap.servers": bootstrap}))


class _StoreBackend:
    """Direct access to a server's SCRAM credential store, answering the
    same requests as a server (its handlers) with the Admin's results."""

    def __init__(self, server_config):
        try:
            props = load_properties(server_config)
        except OSError as exc:
            raise CommandError(f"Cannot read {server_config}: {exc}") from exc
        kind = str(props.get("kchannel.scram.credential.store", "sqlite")).strip().lower()
        if kind == "memory":
            raise CommandError("The server keeps SCRAM credentials in memory "
                               "(kchannel.scram.credential.store=memory); use --bootstrap-server")
        self.store = open_store(server_config=props)

    def describe_user_scram_credentials_results(self, users=None):
        return admin.describe_scram_results(describe_user_scram_credentials(
            admin.describe_scram_request(users), self.store))

    def alter_user_scram_credentials(self, alterations):
        body, failed = admin.alter_scram_request(alterations)
        results = dict.fromkeys(a.user for a in alterations)
        results.update(failed)
        if body["deletions"] or body["upsertions"]:
            results.update(admin.alter_scram_results(
                alter_user_scram_credentials(body, self.store)))
        for exc in results.values():
            if exc is not None:
                raise exc

    def close(self):
        self.store.close()


# ------------------------------------------------------------ commands

def _exception_text(exc):
    """Kafka's ``SimpleClassName: message`` for an Admin result's error."""
    code = Errors.UNSUPPORTED_VERSION if isinstance(exc, errors.UnsupportedVersionError) \
        else exc.error_code
    message = exc.message if isinstance(exc, errors.KafkaError) else str(exc)
    name = _EXCEPTION_NAMES.get(code)
    if name is None:
        name = "".join(w.capitalize() for w in error_name(code).split("_")) + "Exception"
    return f"{name}: {message or error_message(code)}"


def _changes(args):
    """``--add-config-file`` then ``--add-config`` (which wins), validated,
    and the ``--delete-config`` names, as Kafka's ConfigCommand reads them."""
    to_add = {}
    if args.add_config_file:
        try:
            to_add.update(load_properties(args.add_config_file))
        except OSError as exc:
            raise CommandError(f"Cannot read {args.add_config_file}: {exc}") from exc
    to_add.update(parse_add_config(args.add_config))
    _validate_keys(to_add)
    return to_add, [k.strip() for k in args.delete_config]


def _alter(backend, user, args):
    configs_to_add, to_delete = _changes(args)
    unknown_add = [k for k in configs_to_add if not scram.is_scram(k)]
    unknown_delete = [k for k in to_delete if not scram.is_scram(k)]
    if unknown_add:
        raise CommandError("Only SCRAM credential configs can be added for 'users' with kchannel "
                           f"configs. Unexpected config names: {', '.join(unknown_add)}")
    if unknown_delete:
        raise CommandError("Only SCRAM credential configs can be deleted for 'users' with "
                           "kchannel configs. Unexpected config names: "
                           f"{', '.join(unknown_delete)}")
    if user == "":
        raise CommandError("The use of --entity-default or --user-defaults is not allowed with "
                           "User SCRAM Credentials using --bootstrap-server.")
    alterations = [admin.UserScramCredentialDeletion(user, m) for m in to_delete]
    for mechanism, value in configs_to_add.items():
        iterations, password = _scram_iterations_and_password(mechanism, value)
        alterations.append(admin.UserScramCredentialUpsertion(
            user, admin.ScramCredentialInfo(mechanism, iterations), password))
    try:
        # Kafka's ConfigCommand waits for all(): the first user's error.
        backend.alter_user_scram_credentials(alterations)
    except (errors.KafkaError, errors.AuthenticationError,
            errors.UnsupportedVersionError) as exc:
        raise _OperationFailed(_exception_text(exc)) from exc
    print(f"Completed updating config for user {user}.")


def _resource(entity_type, name):
    if entity_type == BROKER and name and not name.isdigit():
        raise CommandError("The entity name for brokers must be a valid integer broker id, "
                           f"but it is: {name}")
    return admin.ConfigResource(_ADMIN_RESOURCE[entity_type], name)


def _resource_configs(backend, entity_type, name, describe_all, synonyms=True):
    """ConfigCommand.getResourceConfig: the resource's entries sorted by
    name; without ``describe_all`` only its dynamic ones."""
    res = _resource(entity_type, name)
    try:
        entries = backend.describe_configs([res], include_synonyms=synonyms)[res]
    except (errors.KafkaError, errors.UnsupportedVersionError) as exc:
        raise _OperationFailed(_exception_text(exc)) from exc
    if not describe_all:
        wanted = ("DYNAMIC_TOPIC_CONFIG" if entity_type == TOPIC
                  else "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG")
        entries = {k: e for k, e in entries.items() if e.source == wanted}
    return [entries[k] for k in sorted(entries)]


def _describe_resources(backend, entity_type, names, describe_all):
    if names:
        entities = names
    elif entity_type == TOPIC:
        entities = sorted(backend.list_topics(list_internal=True))
    else:
        entities = [str(n.id) for n in backend.describe_cluster().nodes] + [""]
    for entity in entities:
        if entity == "":
            print(f"Default configs for {entity_type} in the cluster are:")
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} "
                  f"{entity} are:")
        for e in _resource_configs(backend, entity_type, entity, describe_all):
            synonyms = ", ".join(f"{y.source}:{y.name}={_java_str(y.value)}"
                                 for y in e.synonyms)
            print(f"  {e.name}={_java_str(e.value)} sensitive={str(e.is_sensitive).lower()} "
                  f"synonyms={{{synonyms}}}")


def _java_str(value):
    # Kafka prints a sensitive (hidden) value as Java's "null".
    return "null" if value is None else value


def _alter_resource(backend, entity_type, name, args):
    to_add, to_delete = _changes(args)
    # (Kafka 4's ConfigCommand sends the deletion of a config the resource
    # does not have; the broker ignores it.)
    ops = [admin.AlterConfigOp(k, v, "SET") for k, v in to_add.items()]
    ops += [admin.AlterConfigOp(k, "", "DELETE") for k in to_delete]
    try:
        backend.incremental_alter_configs({_resource(entity_type, name): ops})
    except (errors.KafkaError, errors.UnsupportedVersionError) as exc:
        raise _OperationFailed(_exception_text(exc)) from exc
    if name:
        print(f"Completed updating config for {entity_type[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {entity_type} in the cluster.")


class _OperationFailed(Exception):
    """Kafka's generic Throwable path: 'Error while executing config command'."""


def _describe(backend, names):
    if "" in names:
        # --entity-default / --user-defaults: no SCRAM credentials to show.
        return
    try:
        results = backend.describe_user_scram_credentials_results(names)
    except (errors.KafkaError, errors.AuthenticationError,
            errors.UnsupportedVersionError) as exc:
        raise _OperationFailed(_exception_text(exc)) from exc
    # As ConfigCommand: result.users() (those without credentials left
    # out), then result.description(user) for each.
    for user, result in results.items():
        if isinstance(result, errors.KafkaError) and \
                result.error_code == Errors.RESOURCE_NOT_FOUND:
            continue
        if isinstance(result, Exception):
            print(f"Error retrieving SCRAM credential configs for user-principal '{user}': "
                  f"{_exception_text(result)}")
            continue
        infos = ", ".join(f"{i.mechanism}=iterations={i.iterations}"
                          for i in result.credential_infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {infos}")


def _mask_passwords(text):
    """``text`` with the value of every ``password=`` (up to the closing
    bracket of its --add-config entry) replaced by ``[hidden]``: error
    messages echo what was given, and must not echo a password."""
    return _PASSWORD_VALUE.sub(r"\1[hidden]", str(text))


# A value runs to the "]" that closes its entry (followed by "," or the end);
# without brackets, to the end.
_PASSWORD_VALUE = re.compile(r"(password\s*=).*?(?=\](?:,|$)|$)", re.I | re.S)


def _command_line(args):
    """The options as given (Kafka prints them in its error line): what
    ``kchannel.cli.main`` parsed after the command name, passwords hidden."""
    raw = list(getattr(args, "_argv", None) or ())
    raw = raw[raw.index(NAME) + 1:] if NAME in raw else raw
    return " ".join(_mask_passwords(a) for a in raw)


def run(args):
    backend = None
    parser = getattr(args, "_parser", None)
    try:
        types, names = _check_args(args, parser)
    except _Usage as exc:
        print(str(exc), file=sys.stderr)
        if parser is not None:
            parser.print_usage(sys.stderr)
        return 2
    try:
        if args.server_config:
            backend = _StoreBackend(args.server_config)
        else:
            backend = _admin(args.bootstrap_server or args.bootstrap_controller,
                             args.command_config)
        if types[0] != USER:
            if args.alter:
                _alter_resource(backend, types[0], names[0], args)
            else:
                _describe_resources(backend, types[0], names, args.all)
        elif args.alter:
            _alter(backend, names[0], args)
        else:
            _describe(backend, names)
        return 0
    except CommandError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"Error while executing config command with args '{_command_line(args)}'",
              file=sys.stderr)
        # Kafka prints the admin future's ExecutionException, which names
        # the broker's error as its cause.
        print(f"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.{exc}"
              if isinstance(exc, _OperationFailed)
              else f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if backend is not None:
            try:
                backend.close()
            except Exception:
                pass
