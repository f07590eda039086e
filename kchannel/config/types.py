"""Value types shared by configuration and security code."""


class Password:
    """A secret config value.  Never shown in ``repr``/``str`` or logs.

    Mirrors Kafka's ``org.apache.kafka.common.config.types.Password``.
    """

    HIDDEN = "[hidden]"
    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    @property
    def value(self):
        return self._value

    def __repr__(self):
        return self.HIDDEN

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self):
        return hash(self._value)


def reveal(value):
    """Return the plain value of a Password, or the value itself."""
    return value.value if isinstance(value, Password) else value
