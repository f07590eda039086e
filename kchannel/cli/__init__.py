"""``kchannel`` command line: one subcommand per module.

Each module in ``_COMMANDS`` defines ``NAME`` (the subcommand), ``HELP`` and
``add_arguments(parser)`` and ``run(args) -> int``.  Exit codes follow Kafka's
tools: 0 ok, 1 failure, 2 usage error (argparse's own).
"""
import argparse
import logging
import sys

from kchannel import __version__
from kchannel.cli import (broker_api_versions, config_tool, configs, console_consumer,
                          console_producer, delegation_tokens, kafka_dev, perf_test, serve,
                          topics)

_COMMANDS = [serve, broker_api_versions, configs, config_tool, delegation_tokens,
             console_producer, console_consumer, topics, perf_test.ProducerPerfTest,
             perf_test.ConsumerPerfTest, kafka_dev]


def build_parser():
    parser = argparse.ArgumentParser(prog="kchannel", description="Kafka connection security tools")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    # Handled while parsing, before the COMMAND requirement is checked, so
    # ``kchannel --version`` exits 0 (each subcommand keeps its own too).
    parser.add_argument("--version", action="version", version=__version__,
                        help="Display kchannel version.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _COMMANDS:
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None):
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    # Kafka's tools echo their arguments in some error messages.
    args._argv = argv
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
