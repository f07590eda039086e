"""Kafka principals and the default principal builder.

Mirrors ``org.apache.kafka.common.security.auth.KafkaPrincipal`` and
``DefaultKafkaPrincipalBuilder``: PLAINTEXT gives ``User:ANONYMOUS``; SSL gives
the client certificate's subject DN mapped by ``ssl.principal.mapping.rules``
(``User:ANONYMOUS`` without a client certificate); SASL gives the authorization
id, mapped by ``sasl.kerberos.principal.to.local.rules`` for GSSAPI.
"""
import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    token_authenticated: bool = field(default=False, compare=False)

    USER_TYPE = "User"

    def __str__(self):
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def from_string(cls, text):
        """Parse ``Type:name`` (Kafka's SecurityUtils.parseKafkaPrincipal)."""
        if text is None or ":" not in text:
            raise ValueError(
                f"Expected a string in format principalType:principalName but got {text}")
        ptype, _, name = text.partition(":")
        return cls(ptype, name)

    def with_token_authenticated(self, flag=True):
        return KafkaPrincipal(self.principal_type, self.name, flag)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


def parse_super_users(value):
    """The principals of Kafka's ``super.users`` as a frozenset.

    ``value`` is the property text (``"User:admin;User:ops"``, split on
    semicolons as Kafka's authorizer does, empty items dropped), an iterable
    of ``Type:name`` strings or :class:`KafkaPrincipal`, or None.  A
    malformed item raises ``ValueError`` with Kafka's message."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        value = value.split(";")
    principals = set()
    for item in value:
        if isinstance(item, KafkaPrincipal):
            principals.add(item)
        elif str(item).strip():
            principals.add(KafkaPrincipal.from_string(str(item).strip()))
    return frozenset(principals)


@dataclass
class PlaintextAuthenticationContext:
    client_address: object = None
    listener_name: str = None
    security_protocol: str = "PLAINTEXT"


@dataclass
class SslAuthenticationContext:
    peer_certificate_der: bytes = None   # DER of the peer's leaf certificate, or None
    peer_subject_dn: str = None          # RFC 2253 DN of that certificate, or None
    client_address: object = None
    listener_name: str = None
    security_protocol: str = "SSL"


@dataclass
class SaslAuthenticationContext:
    mechanism: str = None
    authorization_id: str = None         # SaslServer.getAuthorizationID()
    token_authenticated: bool = False
    ssl_peer_subject_dn: str = None      # set on SASL_SSL when a client cert was sent
    client_address: object = None
    listener_name: str = None
    security_protocol: str = "SASL_PLAINTEXT"


class DefaultKafkaPrincipalBuilder:
    """Kafka's DefaultKafkaPrincipalBuilder.

    ``ssl_principal_mapper``: object with ``get_name(dn) -> str``
    (``ssl.principal.mapping.rules``).  ``kerberos_short_namer``: object with
    ``short_name(principal: str) -> str``
    (``sasl.kerberos.principal.to.local.rules``).
    """

    def __init__(self, ssl_principal_mapper=None, kerberos_short_namer=None):
        self.ssl_principal_mapper = ssl_principal_mapper
        self.kerberos_short_namer = kerberos_short_namer

    def build(self, context):
        if isinstance(context, PlaintextAuthenticationContext):
            return ANONYMOUS
        if isinstance(context, SslAuthenticationContext):
            if not context.peer_subject_dn:
                return ANONYMOUS
            name = context.peer_subject_dn
            if self.ssl_principal_mapper is not None:
                name = self.ssl_principal_mapper.get_name(name)
            return KafkaPrincipal("User", name)
        if isinstance(context, SaslAuthenticationContext):
            name = context.authorization_id
            if context.mechanism == "GSSAPI" and self.kerberos_short_namer is not None:
                name = self.kerberos_short_namer.short_name(name)
            return KafkaPrincipal("User", name, context.token_authenticated)
        raise TypeError(f"Unhandled authentication context type: {type(context).__name__}")


def load_principal_builder(dotted_path, **kwargs):
    """Load ``principal.builder.class`` given as ``package.module.ClassName``.

    The class is instantiated with no arguments; if it has a ``configure``
    method it is called with ``kwargs`` (the effective config).
    """
    module_name, _, cls_name = dotted_path.rpartition(".")
    if not module_name:
        raise ValueError(f"principal.builder.class must be a dotted path, got {dotted_path!r}")
    cls = getattr(importlib.import_module(module_name), cls_name)
    builder = cls()
    if hasattr(builder, "configure"):
        builder.configure(kwargs)
    return builder
