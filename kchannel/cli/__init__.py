"""``kchannel`` command line: one subcommand per module.

Each module in ``_COMMANDS`` defines ``NAME`` (the subcommand), ``HELP`` and
``add_arguments(parser)`` and ``run(args) -> int``, and may define
``DEFAULT_LOG_LEVEL`` and ``check_arguments(parser, args)`` (checks argparse
cannot express, reported as its usage errors).  Exit codes follow Kafka's tools: 0 ok, 1 failure, 2
usage error (argparse's own).

Logging: WARN by default, as Kafka's tools (their ``tools-log4j2.yaml``), so
that a tool prints its result and its errors, not connection chatter;
``kchannel serve`` logs INFO as Kafka's broker does (``log4j2.yaml``).
``--log-level LEVEL`` (before or after the subcommand) changes it.
"""
import argparse
import logging
import sys

from kchannel import __version__
from kchannel.cli import (acls, broker_api_versions, config_tool, configs, console_consumer,
                          console_producer, consumer_groups, delegation_tokens, get_offsets,
                          kafka_dev, perf_test, serve, topics)

_COMMANDS = [serve, broker_api_versions, configs, config_tool, delegation_tokens,
             console_producer, console_consumer, topics, perf_test.ProducerPerfTest,
             perf_test.ConsumerPerfTest, consumer_groups, get_offsets, acls, kafka_dev]


# log4j's level names (and Python's), for --log-level.
LOG_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
              "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL,
              "OFF": logging.CRITICAL + 10}
DEFAULT_LOG_LEVEL = "WARN"
_LOG_LEVEL_HELP = ("Logging level: TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF (default: "
                   "WARN, as Kafka's tools; INFO for serve, as Kafka's broker).")


def log_level(text):
    """argparse type of --log-level: the level's upper-case name."""
    name = str(text).strip().upper()
    if name not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"invalid level {text!r}: choose from {', '.join(sorted(set(LOG_LEVELS)))}")
    return name


def effective_log_level(args):
    """The logging level ``args`` ask for: --log-level, else the
    subcommand's default, else WARN."""
    name = getattr(args, "log_level", None) or getattr(
        getattr(args, "_module", None), "DEFAULT_LOG_LEVEL", DEFAULT_LOG_LEVEL)
    return LOG_LEVELS[name]


def build_parser():
    parser = argparse.ArgumentParser(prog="kchannel", description="Kafka connection security tools")
    parser.add_argument("--log-level", type=log_level, default=None, metavar="LEVEL",
                        help=_LOG_LEVEL_HELP)
    # Handled while parsing, before the COMMAND requirement is checked, so
    # ``kchannel --version`` exits 0 (each subcommand keeps its own too).
    parser.add_argument("--version", action="version", version=__version__,
                        help="Display kchannel version.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _COMMANDS:
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        # The same flag after the subcommand; SUPPRESS keeps one given
        # before it.
        p.add_argument("--log-level", type=log_level, default=argparse.SUPPRESS,
                       metavar="LEVEL", help=_LOG_LEVEL_HELP)
        p.set_defaults(_run=mod.run, _module=mod, _parser=p)
    return parser


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    check = getattr(args._module, "check_arguments", None)
    if check is not None:
        check(args._parser, args)
    # Kafka's tools echo their arguments in some error messages.
    args._argv = argv
    logging.basicConfig(level=effective_log_level(args),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
