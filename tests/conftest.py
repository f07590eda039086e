"""Shared pytest configuration.

Fixtures live in ``tests/fixtures/`` as plugins, one per concern (implementation
twins, certificates, Kerberos KDC, real peers, ZooKeeper, Apache Kafka and its
Java client and tools).
"""
import os
import sys

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
