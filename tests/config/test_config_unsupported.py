"""Kafka keys kchannel accepts but does not implement are never ignored
silently: setting one logs one WARNING at configuration load, and the
generated configuration reference marks them."""
import logging

import pytest

from kchannel.config import ClientConfig, ServerConfig
from kchannel.config.definitions import TABLE, UNSUPPORTED, unsupported_keys
from kchannel.config.reference import render

SERVER_BASE = {"listeners": "PLAINTEXT://127.0.0.1:0"}

SERVER_KEYS = {
    "control.plane.listener.name": "CONTROLLER",
    "ssl.allow.dn.changes": "true",
    "ssl.allow.san.changes": "true",
    "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
    "sasl.login.refresh.window.factor": "0.9",
    "ssl.engine.factory.class": "collections.OrderedDict",
}
CLIENT_KEYS = {
    "sasl.client.callback.handler.class": "collections.OrderedDict",
    "sasl.login.class": "collections.OrderedDict",
    "sasl.kerberos.ticket.renew.window.factor": "0.8",
    "sasl.kerberos.ticket.renew.jitter": "0.05",
    "sasl.kerberos.min.time.before.relogin": "60000",
    "sasl.login.refresh.window.jitter": "0.05",
    "sasl.login.refresh.min.period.seconds": "60",
    "sasl.login.refresh.buffer.seconds": "300",
    "sasl.login.connect.timeout.ms": "1000",
    "sasl.login.read.timeout.ms": "1000",
    "sasl.login.retry.backoff.ms": "100",
    "sasl.login.retry.backoff.max.ms": "10000",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
    "sasl.oauthbearer.header.urlencode": "true",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
}


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "not supported by kchannel" in r.getMessage()]


def test_every_unsupported_key_is_covered_here():
    assert set(SERVER_KEYS) | set(CLIENT_KEYS) == UNSUPPORTED
    assert {k.name for k in TABLE if not k.supported} == UNSUPPORTED


@pytest.mark.parametrize("key", sorted(SERVER_KEYS))
def test_server_key_warns_once(caplog, key):
    caplog.set_level(logging.WARNING, logger="kchannel.config")
    config = ServerConfig(dict(SERVER_BASE, **{key: SERVER_KEYS[key]}))
    assert _warnings(caplog) == [f"{key} is not supported by kchannel and is ignored"]
    assert config.unsupported == [key]


@pytest.mark.parametrize("key", sorted(CLIENT_KEYS))
def test_client_key_warns_once(caplog, key):
    caplog.set_level(logging.WARNING, logger="kchannel.config")
    config = ClientConfig({"bootstrap.servers": "localhost:9092", key: CLIENT_KEYS[key]})
    assert _warnings(caplog) == [f"{key} is not supported by kchannel and is ignored"]
    assert config.unsupported == [key]


def test_prefixed_forms_warn_with_the_key_as_written(caplog):
    caplog.set_level(logging.WARNING, logger="kchannel.config")
    ServerConfig(dict(SERVER_BASE, **{
        "listener.name.plaintext.ssl.allow.dn.changes": "true",
        "listener.name.plaintext.plain.sasl.login.class": "collections.OrderedDict",
    }))
    assert _warnings(caplog) == [
        "listener.name.plaintext.plain.sasl.login.class is not supported by kchannel and is "
        "ignored",
        "listener.name.plaintext.ssl.allow.dn.changes is not supported by kchannel and is "
        "ignored"]


def test_supported_keys_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="kchannel.config")
    ServerConfig(dict(SERVER_BASE, **{
        "max.connections": "10", "socket.send.buffer.bytes": "-1",
        "sasl.login.callback.handler.class": "collections.OrderedDict",
        "sasl.oauthbearer.jwks.endpoint.url": "file:/x"}))
    ClientConfig({"bootstrap.servers": "localhost:9092",
                  "sasl.login.callback.handler.class": "collections.OrderedDict",
                  # Kafka's own classes select kchannel's equivalents.
                  "sasl.login.class": "org.apache.kafka.common.security.authenticator.DefaultLogin",
                  "ssl.engine.factory.class":
                      "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory"})
    assert _warnings(caplog) == []
    assert unsupported_keys({"sasl.login.callback.handler.class": "x",
                             "ssl.engine.factory.class.extra": "x"}) == []


def test_reference_marks_unsupported_keys():
    text = render()
    for name in UNSUPPORTED:
        rows = [line for line in text.splitlines() if line.startswith(f"| `{name}`")]
        assert rows and all("(not supported; ignored)" in row for row in rows), name
    row = next(line for line in text.splitlines() if line.startswith("| `max.connections`"))
    assert "not supported" not in row
