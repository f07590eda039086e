"""``kchannel config``: describe or validate a server/client configuration.

    kchannel config describe --config server.properties [--jaas-config FILE]
    kchannel config validate --config server.properties [--jaas-config FILE]
    kchannel config validate --client --config client.properties

``describe`` prints, for every listener, its security protocol, bind and
advertised address, enabled SASL mechanisms, TLS settings and JAAS entries,
each with the source of its value; secrets are masked.  ``validate`` lists
every error found (exit 1) or says the configuration is valid (exit 0).
"""
import sys

from kchannel.config._common import mask
from kchannel.config.client import ClientConfig
from kchannel.config.definitions import CLIENT_CONFIG_DEF
from kchannel.config.properties import load_properties
from kchannel.config.server import ServerConfig
from kchannel.errors import ConfigError

NAME = "config"
HELP = "describe or validate a Kafka server/client configuration (.properties + JAAS)"


def add_arguments(parser):
    sub = parser.add_subparsers(dest="config_action", metavar="ACTION")
    sub.required = True
    for action, text in (("describe", "show every listener's effective security settings and their sources"),
                         ("validate", "check the configuration and list every error")):
        p = sub.add_parser(action, help=text, description=text)
        p.add_argument("--config", required=True, metavar="FILE",
                       help="server.properties (or client.properties with --client)")
        p.add_argument("--jaas-config", metavar="FILE",
                       help="JAAS configuration file (as -Djava.security.auth.login.config=FILE)")
        p.add_argument("--client", action="store_true", help="the file is a client configuration")


def _load(args, out):
    try:
        props = load_properties(args.config)
    except OSError as exc:
        print(f"Error: cannot read {args.config}: {exc.strerror or exc}", file=out)
        return None, None
    except ConfigError as exc:
        print(f"Error: {args.config}: {exc}", file=out)
        return None, None
    jaas_text = None
    if args.jaas_config:
        try:
            with open(args.jaas_config, "rb") as f:
                jaas_text = f.read().decode("utf-8")
        except OSError as exc:
            print(f"Error: cannot read {args.jaas_config}: {exc.strerror or exc}", file=out)
            return None, None
    return props, jaas_text


def _build(args, props, jaas_text):
    errors = []
    cls = ClientConfig if args.client else ServerConfig
    try:
        cfg = cls(props, jaas_text, jaas_file_name=args.jaas_config, _errors=errors)
    except ConfigError as exc:  # defensive: construction collects
        errors.append(exc)
        cfg = None
    return cfg, errors


def _src(row):
    if row.source_key and row.source not in ("default",):
        return f"{row.source}: {row.source_key}"
    return row.source


def _describe_server(cfg, out):
    print(f"node.id: {cfg.node_id}", file=out)
    if cfg.inter_broker_listener_name:
        print(f"inter-broker listener: {cfg.inter_broker_listener_name} "
              f"({cfg.inter_broker_security_protocol}, "
              f"sasl.mechanism.inter.broker.protocol={cfg.sasl_mechanism_inter_broker_protocol})", file=out)
    print(f"data directory: {cfg.data_dir}", file=out)
    print(f"delegation tokens: {'enabled' if cfg.token_auth_enabled else 'disabled'}", file=out)
    if cfg.jaas_sections():
        print(f"JAAS file sections: {', '.join(cfg.jaas_sections())}", file=out)
    current = None
    mech = None
    for row in cfg.describe():
        if row.listener != current:
            current, mech = row.listener, None
            print(f"\nListener {row.listener}", file=out)
        if row.mechanism != mech:
            mech = row.mechanism
            if mech is not None:
                print(f"  mechanism {mech}:", file=out)
        indent = "    " if row.mechanism else "  "
        print(f"{indent}{row.key} = {row.value}    ({_src(row)})", file=out)
    upstream = getattr(cfg, "upstream", None)
    if upstream is not None:
        print("\nUpstream cluster (gateway; kchannel.upstream.*)", file=out)
        vals = upstream.values()
        for key in CLIENT_CONFIG_DEF.names():
            if key in upstream.originals:
                print(f"  {key} = {mask(vals.get(key))}    (kchannel.upstream.{key})", file=out)
        jc = upstream.jaas()
        if jc is not None:
            for e in jc.entries:
                opts = " ".join(f"{k}={v}" for k, v in e.masked_options().items())
                print(f"  jaas = {e.login_module} {e.control_flag} {opts}", file=out)
    if cfg.unused:
        print(f"\nUnused configurations: {', '.join(cfg.unused)}", file=out)


def _describe_client(cfg, out):
    vals = cfg.values()
    print(f"security.protocol = {cfg.security_protocol}", file=out)
    for key in CLIENT_CONFIG_DEF.names():
        if key == "security.protocol":
            continue
        src = "configured" if key in cfg.originals else "default"
        if key in cfg.originals and key not in cfg.supplied:
            src = "translated alias"
        print(f"  {key} = {mask(vals.get(key))}    ({src})", file=out)
    jc = cfg.jaas()
    if jc is not None:
        for e in jc.entries:
            opts = " ".join(f"{k}={v}" for k, v in e.masked_options().items())
            print(f"  jaas = {e.login_module} {e.control_flag} {opts}    ({jc.source} {jc.context_name})",
                  file=out)
    if cfg.unused:
        print(f"\nUnused configurations: {', '.join(cfg.unused)}", file=out)


def _print_errors(errors, out):
    print(f"{len(errors)} error(s) found:", file=out)
    for i, e in enumerate(errors, 1):
        print(f"  {i}. {e}", file=out)


def run(args):
    out = sys.stdout
    props, jaas_text = _load(args, sys.stderr)
    if props is None:
        return 1
    cfg, errors = _build(args, props, jaas_text)
    if args.config_action == "validate":
        if errors:
            _print_errors(errors, out)
            return 1
        print(f"{args.config}: configuration is valid", file=out)
        return 0
    if cfg is not None:
        if args.client:
            _describe_client(cfg, out)
        else:
            _describe_server(cfg, out)
    if errors:
        print("", file=out)
        _print_errors(errors, out)
        return 1
    return 0
