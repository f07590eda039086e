"""Shared pytest configuration.

Fixtures live in ``tests/fixtures/`` as plugins, one per concern (implementation
twins, certificates, Kerberos KDC, real peers, ZooKeeper, Apache Kafka and its
Java client and tools).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest_plugins = [
    "tests.fixtures.impl",
    "tests.fixtures.certs",
    "tests.fixtures.kdc",
    "tests.fixtures.peers",
    "tests.fixtures.zookeeper",
    "tests.fixtures.kafka",
    "tests.fixtures.kafka_cluster",
    "tests.fixtures.java",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: slow interop test (still run in CI)")
    config.addinivalue_line("markers", "interop: talks to a real third-party peer")
    config.addinivalue_line("markers", "kafka: talks to Apache Kafka itself (the reference "
                                       "broker, Java client or tools)")
    config.addinivalue_line("markers", "twin_independent: the outcome cannot depend on which "
                                       "implementation twin is active (static checks of the "
                                       "source, configuration parsing and validation); the "
                                       "pure pass of .ci/test leaves these out, the compiled "
                                       "pass runs them")


# Modules whose tests never reach a twin's code path with anything the twin
# decides: they read the source tree (layering, constants, suite layout, CI
# files), or parse and validate configuration and stop before any byte is
# framed, encoded or encrypted.  Running them once per twin would test the
# same thing twice, so .ci/test's pure pass leaves them out (marker
# ``twin_independent``) and the compiled pass runs them.  A module that
# frames, encodes, authenticates or connects does not belong here.
TWIN_INDEPENDENT = frozenset({
    "tests/project/test_benchmark_report.py",
    "tests/project/test_ci_environment.py",
    "tests/project/test_kafka_constants.py",
    "tests/project/test_layering.py",
    "tests/project/test_readme.py",
    "tests/project/test_suite_layout.py",
    "tests/config/test_config_client.py",
    "tests/config/test_config_definitions.py",
    "tests/config/test_config_jaas.py",
    "tests/config/test_config_listeners.py",
    "tests/config/test_config_properties.py",
    "tests/config/test_config_server.py",
    "tests/config/test_config_unsupported.py",
    "tests/cli/test_config_cli.py",
    "tests/cli/test_cli_version.py",
    "tests/server/test_listeners_bad_configs.py",
})


def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            continue
        if rel in TWIN_INDEPENDENT:
            item.add_marker(pytest.mark.twin_independent)
