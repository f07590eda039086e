"""Value types shared by configuration and security code."""
import hmac


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
        # Compared in constant time: a secret's equality must not reveal
        # how long a prefix matched.
        if not isinstance(other, Password):
            return False
        a, b = self._value, other._value
        if type(a) is type(b) and isinstance(a, (str, bytes)):
            return hmac.compare_digest(_secret_bytes(a), _secret_bytes(b))
        return a == b

    def __hash__(self):
        return hash(self._value)


def _secret_bytes(value):
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def reveal(value):
    """Return the plain value of a Password, or the value itself."""
    return value.value if isinstance(value, Password) else value
