"""KIP-103 listener parsing and Kafka's listener validation rules."""
import pytest

from kchannel.config.listeners import (DEFAULT_SECURITY_PROTOCOL_MAP, Endpoint, format_address,
                                       parse_listeners, parse_security_protocol_map, validate_listeners)
from kchannel.errors import ConfigError

MAP = dict(DEFAULT_SECURITY_PROTOCOL_MAP, CLIENT="SASL_SSL", REPLICATION="SSL", A="PLAINTEXT", B="PLAINTEXT",
           C="PLAINTEXT")


def test_parse_forms():
    eps = parse_listeners("PLAINTEXT://myhost:9092, ssl://:9091,client://[fe80::1%eth0]:9093,"
                          "REPLICATION://10.0.0.1:0", MAP)
    assert eps == [Endpoint("PLAINTEXT", "myhost", 9092, "PLAINTEXT"), Endpoint("SSL", None, 9091, "SSL"),
                   Endpoint("CLIENT", "fe80::1%eth0", 9093, "SASL_SSL"),
                   Endpoint("REPLICATION", "10.0.0.1", 0, "SSL")]
    assert eps[2].connection_string == "CLIENT://[fe80::1%eth0]:9093"
    assert format_address("::1", 1) == "[::1]:1" and format_address("h", 1) == "h:1"
    assert parse_listeners("", MAP) == [] and parse_listeners(" , ", MAP) == []


def test_protocol_map_semantics():
    m = parse_security_protocol_map("internal:SSL, EXTERNAL : SASL_SSL,a:b:PLAINTEXT")
    assert m == {"INTERNAL": "SSL", "EXTERNAL": "SASL_SSL", "A:B": "PLAINTEXT"}  # last ':' splits
    assert parse_security_protocol_map("X:SSL,X:PLAINTEXT") == {"X": "PLAINTEXT"}
    assert parse_security_protocol_map("X:SSL, ,") == {"X": "SSL"}
    with pytest.raises(ConfigError) as ei:
        parse_security_protocol_map("X:SSL,,Y:SSL")
    assert str(ei.value) == ("Error parsing configuration property 'listener.security.protocol.map': "
                             "begin 0, end -1, length 0")
    with pytest.raises(ConfigError, match="Invalid security protocol `ssl` defined in listener.security.protocol.map"):
        parse_security_protocol_map("X:ssl")
    with pytest.raises(ConfigError, match="The provided listener name is null or empty string"):
        parse_security_protocol_map(":SSL")


@pytest.mark.parametrize("text, ok", [
    ("A://127.0.0.1:9092,B://[::1]:9092", True),
    ("A://127.0.0.1:9092,B://127.0.0.1:9092", False),
    ("A://[::1]:9092,B://[::2]:9092", False),
    ("A://127.0.0.1:9092,B://[::1]:9092,C://[::2]:9092", False),
    ("A://127.0.0.1:9092,B://[::1]:9092,C://host:9092", False),
    ("A://host1:9092,B://host2:9092", False),
    ("A://:0,B://:0,C://:0", True),
])
def test_port_rules(text, ok):
    eps = parse_listeners(text, MAP)
    if ok:
        validate_listeners(eps, text)
    else:
        with pytest.raises(ConfigError):
            validate_listeners(eps, text)
    validate_listeners(eps, text, require_distinct_ports=False)  # advertised.listeners may share ports


@pytest.mark.parametrize("text, message", [
    ("PLAINTEXT//:9092", "Unable to parse PLAINTEXT//:9092 to a broker endpoint"),
    ("PLAINTEXT://host", "Unable to parse PLAINTEXT://host to a broker endpoint"),
    ("PLAINTEXT://host:port", "Unable to parse PLAINTEXT://host:port to a broker endpoint"),
    ("PLAINTEXT://host:9092abc", "Unable to parse PLAINTEXT://host:9092abc to a broker endpoint"),
    ("PLAINTEXT://host:9092/", "Unable to parse PLAINTEXT://host:9092/ to a broker endpoint"),
    ("://:9092", "The provided listener name is null or empty string"),
    ("UNKNOWN://:9092", "No security protocol defined for listener UNKNOWN"),
])
def test_parse_errors(text, message):
    with pytest.raises(ConfigError) as ei:
        parse_listeners(text, MAP)
    assert str(ei.value) == f"Error creating broker listeners from '{text}': {message}"
