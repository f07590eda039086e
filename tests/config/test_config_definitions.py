"""ConfigDef.parseType semantics and the config table."""
import pytest

from kchannel.config.definitions import (CLIENT_CONFIG_DEF, SERVER_CONFIG_DEF, TABLE, Type, parse_type,
                                         resolve_class)
from kchannel.config.types import Password
from kchannel.errors import ConfigError


@pytest.mark.parametrize("type_, raw, expected", [
    (Type.STRING, "  x y  ", "x y"),
    (Type.PASSWORD, "  secret ", Password("secret")),
    (Type.INT, " 42 ", 42),
    (Type.INT, "+7", 7),
    (Type.INT, "-2147483648", -2147483648),
    (Type.SHORT, "32767", 32767),
    (Type.LONG, "9223372036854775807", 9223372036854775807),
    (Type.LONG, 5, 5),
    (Type.BOOLEAN, " TRUE ", True),
    (Type.BOOLEAN, "false", False),
    (Type.BOOLEAN, False, False),
    (Type.DOUBLE, "0.8", 0.8),
    (Type.DOUBLE, 1, 1.0),
    (Type.LIST, "a, b ,c", ["a", "b", "c"]),
    (Type.LIST, "  ", []),
    (Type.LIST, "a,,b,", ["a", "", "b", ""]),   # Java split(..., -1) keeps empties
    (Type.LIST, ["x", "y"], ["x", "y"]),
    (Type.CLASS, " org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder ",
     "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    (Type.CLASS, "kchannel.config.types.Password", "kchannel.config.types.Password"),
])
def test_parse_type(type_, raw, expected):
    assert parse_type("k", raw, type_) == expected


@pytest.mark.parametrize("type_, raw, message", [
    (Type.INT, "2147483648", "Invalid value 2147483648 for configuration k: Not a number of type INT"),
    (Type.INT, "1.0", "Invalid value 1.0 for configuration k: Not a number of type INT"),
    (Type.INT, "", "Invalid value  for configuration k: Not a number of type INT"),
    (Type.LONG, 1.5, "Invalid value 1.5 for configuration k: Expected value to be a 64-bit integer (long), "
                     "but it was a builtins.float"),
    (Type.BOOLEAN, "1", "Invalid value 1 for configuration k: Expected value to be either true or false"),
    (Type.BOOLEAN, 1, "Invalid value 1 for configuration k: Expected value to be either true or false"),
    (Type.DOUBLE, "x", "Invalid value x for configuration k: Not a number of type DOUBLE"),
    (Type.STRING, 3, "Invalid value 3 for configuration k: Expected value to be a string, but it was a "
                     "builtins.int"),
    (Type.LIST, 3, "Invalid value 3 for configuration k: Expected a comma separated list."),
    (Type.CLASS, "nosuchmodule.X", "Invalid value nosuchmodule.X for configuration k: Class nosuchmodule.X "
                                   "could not be found."),
    (Type.CLASS, "kchannel.config.types.Nope", "Invalid value kchannel.config.types.Nope for configuration k: "
                                               "Class kchannel.config.types.Nope could not be found."),
])
def test_parse_type_errors(type_, raw, message):
    with pytest.raises(ConfigError) as ei:
        parse_type("k", raw, type_)
    assert str(ei.value) == message
    assert ei.value.key == "k"


def test_resolve_class():
    assert resolve_class("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder") is None
    assert resolve_class("kchannel.config.types.Password") is Password
    assert resolve_class(None) is None


def test_table_is_one_row_per_key_and_scope():
    seen = set()
    for key in TABLE:
        for scope in (("server", "client") if key.scope == "both" else (key.scope,)):
            assert (key.name, scope) not in seen, key.name
            seen.add((key.name, scope))
        assert key.type in Type and key.doc
        if key.has_default and key.default is not None:
            key.default_value()  # every default parses
    assert SERVER_CONFIG_DEF.key("connections.max.idle.ms").default == 600000
    assert CLIENT_CONFIG_DEF.key("connections.max.idle.ms").default == 540000
    assert "security.protocol" in CLIENT_CONFIG_DEF and "security.protocol" not in SERVER_CONFIG_DEF
    assert "listeners" in SERVER_CONFIG_DEF and "listeners" not in CLIENT_CONFIG_DEF
    assert SERVER_CONFIG_DEF.key("delegation.token.secret.key").type is Type.PASSWORD
