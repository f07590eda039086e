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
    "tests.fixtures.servers",
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
    config.addinivalue_line("markers", "serial: .ci/test runs it in a serial pytest run after "
                                       "the parallel (pytest-xdist) one")


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
    "tests/cli/test_cli_config.py",
    "tests/cli/test_cli_version.py",
    "tests/server/test_listeners_bad_configs.py",
    "tests/server/test_server_interface.py",
})


# .ci/test runs each pass on pytest-xdist workers with ``--dist loadfile
# --no-loadscope-reorder``.  Every module is one work unit (its module-scoped
# servers, brokers and clusters start once, on one worker, and its tests keep
# their order); the modules under a prefix below share one unit, so they run
# one after another on one worker: each would start its own Spark JVM (local
# session, cluster master and workers, a few hundred MB and a core each), and
# the cluster tests take the process's only SparkContext from the local one.
# (xdist_group marks with --dist loadgroup would say the same, but
# pytest-xdist 3.8 puts them in the node id, which pytest 9.2 no longer lets
# it change: the groups were silently ignored.)
XDIST_GROUPS = {
    "tests/spark/": "spark",
}


def _xdist_group(rel):
    for prefix, group in XDIST_GROUPS.items():
        if rel.startswith(prefix):
            return group
    return rel


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return _xdist_group(nodeid.split("::", 1)[0])
    return ModuleGroupScheduling(config, log)


# tryfirst: before -m deselects by the marker added here.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    worker = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    group_of = {}
    slow_in = {}
    for item in items:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            rel = item.nodeid.split("::")[0]
        if rel in TWIN_INDEPENDENT:
            item.add_marker(pytest.mark.twin_independent)
        if worker:
            group = group_of[item.nodeid] = _xdist_group(rel)
            slow_in[group] = slow_in.get(group, 0) + bool(item.get_closest_marker("slow"))
    if worker:
        # Longest work first, so that no long unit starts last while the
        # other workers idle: units with the most slow tests lead, the others
        # keep their order (the sort is stable, every worker sorts alike, and
        # the scheduler hands units out in this order).
        items.sort(key=lambda i: -slow_in[group_of[i.nodeid]])
