"""kchannel broker-api-versions quiets logging to WARNING while it runs (as
Kafka's tools) and gives the root logger its level back afterwards, so a
program that calls it keeps its own logging."""
import io
import logging

import pytest

from kchannel.cli import build_parser
from kchannel.cli import broker_api_versions
from kchannel.server import Server


@pytest.fixture
def server():
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    s.start()
    yield s
    s.shutdown()


@pytest.fixture
def root_level():
    root = logging.getLogger()
    saved = root.level
    yield root
    root.setLevel(saved)


@pytest.mark.parametrize("level,extra", [(logging.INFO, []), (logging.DEBUG, []),
                                         (logging.INFO, ["--log-level", "DEBUG"])])
def test_root_level_restored(server, root_level, level, extra):
    root_level.setLevel(level)
    args = build_parser().parse_args(
        extra + ["broker-api-versions", "--bootstrap-server",
                 f"127.0.0.1:{server.bound_port('PLAINTEXT')}"])
    out = io.StringIO()
    assert broker_api_versions.run(args, out=out, err=io.StringIO()) == 0
    assert "ApiVersions(18)" in out.getvalue()
    assert root_level.level == level


def test_root_level_restored_after_failure(root_level):
    root_level.setLevel(logging.INFO)
    args = build_parser().parse_args(["broker-api-versions", "--bootstrap-server",
                                      "not a url"])
    err = io.StringIO()
    assert broker_api_versions.run(args, out=io.StringIO(), err=err) == 1
    assert err.getvalue()
    assert root_level.level == logging.INFO
