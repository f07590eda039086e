"""Declarative message schemas and their encoder/decoder.

A message is described as Kafka describes it: a list of ``Field`` objects,
each present in a range of versions, optionally nullable in some versions,
optionally a tagged field, optionally a nested struct (``fields``).  From
``flexible_versions`` on, strings/bytes/arrays use the compact encodings and
every struct ends with a tagged-field section.

Bodies are plain dicts keyed by the snake_case form of Kafka's field names
(``ErrorCode`` -> ``error_code``).  On encode, missing fields take the schema
default and fields absent from the version are ignored; on decode, fields
absent from the version are absent from the dict.  Unknown tagged fields
survive a decode/encode round trip under ``"_unknown_tagged_fields"`` (a list
of ``(tag, raw bytes)``), as Kafka keeps them.

For speed each (struct, version) pair is compiled once into generated Python
functions with every field read or write inlined (see "compilation" below).
"""
import copy
import re
import uuid

from kchannel.protocol._codecache import compile_cached
from kchannel.errors import InvalidRequestError, UnsupportedVersionError
from kchannel.protocol.wire import Reader, Writer

__all__ = [
    "Versions",
    "Field",
    "MessageSpec",
    "Api",
    "snake_case",
    "UNKNOWN_TAGGED_FIELDS",
]

UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"

_MAX_VERSION = 0x7FFF


class Versions:
    """A Kafka version range: ``"0+"``, ``"1-3"``, ``"2"`` or ``"none"``."""

    __slots__ = ("lo", "hi")

    def __init__(self, spec):
        if isinstance(spec, Versions):
            self.lo, self.hi = spec.lo, spec.hi
            return
        spec = str(spec).strip()
        if spec == "none" or spec == "":
            self.lo, self.hi = 1, 0  # empty
        elif spec.endswith("+"):
            self.lo, self.hi = int(spec[:-1]), _MAX_VERSION
        elif "-" in spec:
            lo, hi = spec.split("-", 1)
            self.lo, self.hi = int(lo), int(hi)
        else:
            self.lo = self.hi = int(spec)

    def __contains__(self, v):
        return self.lo <= v <= self.hi

    def empty(self):
        return self.lo > self.hi

    def __repr__(self):
        if self.empty():
            return "Versions('none')"
        if self.hi == _MAX_VERSION:
            return f"Versions('{self.lo}+')"
        if self.lo == self.hi:
            return f"Versions('{self.lo}')"
        return f"Versions('{self.lo}-{self.hi}')"


_CAMEL1 = re.compile(r"(.)([A-Z][a-z]+)")
_CAMEL2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name):
    """Kafka field name to dict key: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return _CAMEL2.sub(r"\1_\2", _CAMEL1.sub(r"\1_\2", name)).lower()


_PRIMITIVES = ("bool", "int8", "int16", "uint16", "int32", "uint32", "int64",
               "float64", "uuid", "string", "bytes", "records")

_FIXED_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4,
               "uint32": 4, "int64": 8, "float64": 8, "uuid": 16}

def _type_default(t):
    if t in ("bool",):
        return False
    if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return 0
    if t == "float64":
        return 0.0
    if t == "string":
        return ""
    if t in ("bytes", "records"):
        return b""
    if t == "uuid":
        return uuid.UUID(int=0)
    return None


class Field:
    """One field of a message or struct, as in Kafka's JSON schemas.

    ``type`` is a Kafka type name: a primitive (``int32``, ``string``, ...),
    ``[]<primitive>``, ``[]<StructName>`` or ``<StructName>`` (the last two with
    ``fields``).  ``default`` is the Python value (``None`` for Kafka's
    ``"null"``); when omitted the type's zero value is used (empty list for
    arrays).
    """

    _NO_DEFAULT = object()

    def __init__(self, name, type, versions, nullable_versions="none",
                 tag=None, tagged_versions=None, default=_NO_DEFAULT,
                 ignorable=False, fields=(), entity_type=None,
                 flexible_versions=None, map_key=False, about=""):
        self.name = name
        self.key = snake_case(name)
        self.type = type
        self.versions = Versions(versions)
        self.nullable_versions = Versions(nullable_versions)
        self.tag = tag
        if tag is not None and tagged_versions is None:
            tagged_versions = versions
        self.tagged_versions = Versions(tagged_versions) if tagged_versions is not None \
            else Versions("none")
        self.ignorable = ignorable
        self.fields = tuple(fields)
        self.entity_type = entity_type
        # Per-field override of the message's flexible versions (RequestHeader's
        # ClientId is always a classic int16 string, whatever the header version).
        self.flexible_versions = Versions(flexible_versions) if flexible_versions is not None \
            else None
        self.map_key = map_key
        self.about = about
        self.is_array = type.startswith("[]")
        self.element_type = type[2:] if self.is_array else type
        self.is_struct = self.element_type not in _PRIMITIVES
        if default is Field._NO_DEFAULT:
            if self.is_array:
                default = []
            elif self.is_struct:
                default = None  # meaning: a struct with every field at its default
            else:
                default = _type_default(type)
        self.default = default

    def __repr__(self):
        return f"Field({self.name!r}, {self.type!r}, {self.versions!r})"

    def default_value(self):
        d = self.default
        return copy.copy(d) if isinstance(d, list) else d


# -- compilation ---------------------------------------------------------------
#
# Each (message, version) is compiled once into the Python source of a few
# straight-line functions that are ``exec``-ed (as ``dataclasses`` builds its
# methods).  A decode is then one call with every field read inlined as a call
# of an unbound Reader method bound in the functions' namespace, nested
# structs inlined too (arrays of structs as loops), each dict built by one
# literal: no loop over per-field closures, no per-field call layers.
#
# The error behaviour is that of a field-by-field codec: a non-nullable
# string/bytes read names its field, a write error names its field, a null
# array names its field; tests/protocol/test_protocol_schema_codec.py checks it against
# the closure codec this replaced (tests/fixtures/schema_reference.py).  Try
# blocks cost nothing until they raise (CPython 3.11+; two cheap opcodes
# before), so those wrappers stay inline.

class _Struct:
    """Compiled (fields, version, flexible) codec: ``decode(reader) -> dict``,
    ``decode_message(buf, offset) -> dict``, ``encode(writer, body)``,
    ``encode_message(body) -> bytes``."""

    __slots__ = ("decode", "decode_message", "encode", "encode_message")


_MISSING = object()

# Names every generated function sees; the bound Reader/Writer methods are
# added per name on first use (see _Source.method).
_BASE_NAMESPACE = {
    "InvalidRequestError": InvalidRequestError,
    "Reader": Reader,
    "Writer": Writer,
    "_MISSING": _MISSING,
    "_copy": copy.copy,
}


def _read_error(e, name):
    return InvalidRequestError(f"{e} (field {name})")


def _write_error(e, name):
    return ValueError(f"field {name}: {e}")


def _list_error(v, name):
    return ValueError(f"field {name}: expected a list, got {type(v).__name__}")


def _dict_error(v, name):
    return ValueError(f"field {name}: expected a dict, got {type(v).__name__}")


def _null_error(name):
    return InvalidRequestError(f"non-nullable field {name} was serialized as null")


_BASE_NAMESPACE.update(_read_error=_read_error, _write_error=_write_error,
                       _list_error=_list_error, _dict_error=_dict_error,
                       _null_error=_null_error)

_LITERAL_TYPES = (int, bool, str, bytes, type(None))


def _reader_name(t, flexible, nullable):
    """The Reader method reading one value of primitive type t."""
    if t in _FIXED_SIZE:
        return "read_boolean" if t == "bool" else "read_" + t
    if t == "string":
        if flexible:
            return "read_compact_nullable_string" if nullable else "read_compact_string"
        return "read_nullable_string" if nullable else "read_string"
    if t == "records" and nullable:
        # A view of the frame (no copy of the batches).
        return "read_compact_nullable_records" if flexible else "read_nullable_records"
    if t in ("bytes", "records"):
        if flexible:
            return "read_compact_nullable_bytes" if nullable else "read_compact_bytes"
        return "read_nullable_bytes" if nullable else "read_bytes"
    raise ValueError(f"unknown type {t}")


def _writer_name(t, flexible, nullable):
    if t in _FIXED_SIZE:
        return "write_boolean" if t == "bool" else "write_" + t
    if t == "string":
        if flexible:
            return "write_compact_nullable_string" if nullable else "write_compact_string"
        return "write_nullable_string" if nullable else "write_string"
    if t in ("bytes", "records"):
        if flexible:
            return "write_compact_nullable_bytes" if nullable else "write_compact_bytes"
        return "write_nullable_bytes" if nullable else "write_bytes"
    raise ValueError(f"unknown type {t}")


def _prim_min_size(t, flexible):
    if t in _FIXED_SIZE:
        return _FIXED_SIZE[t]
    if t == "string":
        return 1 if flexible else 2
    return 1 if flexible else 4  # bytes / records


class _Source:
    """The lines and namespace of generated functions."""

    def __init__(self):
        self.lines = []
        self.ns = dict(_BASE_NAMESPACE)
        self._n = 0

    def add(self, indent, line):
        self.lines.append("    " * indent + line)

    def var(self, prefix="v"):
        self._n += 1
        return f"{prefix}{self._n}"

    def method(self, cls, name):
        # Unbound methods called as functions: a global plus a call, cheaper
        # than a method lookup on the compiled Reader/Writer.
        self.ns[name] = getattr(cls, name)
        return name

    def const(self, value):
        """A source expression for value: a literal when it is one, else a
        name bound in the namespace (the very object, as the closures used)."""
        if type(value) in _LITERAL_TYPES:
            return repr(value)
        name = self.var("_c")
        self.ns[name] = value
        return name

    def build(self, filename):
        """Executes the source; returns the namespace holding its functions.
        The compiled code comes from the codec cache when it has it (see
        ``_codecache``: compiling is most of a codec's first-use cost)."""
        exec(compile_cached("\n".join(self.lines) + "\n", filename), self.ns)
        return self.ns


class _Layout:
    """One struct's fields at one version, split as the wire lays them out."""

    def __init__(self, fields, version, flexible):
        self.version = version
        self.flexible = flexible
        # (field, flexible, nullable, _Layout of a nested struct or None)
        self.regular = []
        self.tagged = []  # the same, by ascending tag
        # The fewest bytes one struct takes (bounds an array's count).
        self.min_size = 1 if flexible else 0
        self.tagged_reader = None  # generated on first use
        for f in fields:
            if version not in f.versions:
                continue
            f_flex = flexible
            if f.flexible_versions is not None:
                f_flex = version in f.flexible_versions
            nullable = version in f.nullable_versions
            sub = _Layout(f.fields, version, f_flex) if f.is_struct else None
            entry = (f, f_flex, nullable, sub)
            if f.tag is not None and flexible and version in f.tagged_versions:
                self.tagged.append(entry)
                continue
            self.regular.append(entry)
            if f.is_array:
                self.min_size += 1 if f_flex else 4
            elif f.is_struct:
                self.min_size += 1 if nullable else sub.min_size
            else:
                self.min_size += _prim_min_size(f.element_type, f_flex)
        self.tagged.sort(key=lambda e: e[0].tag)


def _compile_message_function(fields, version, flexible, part):
    """Only ``encode_message`` (``part`` "encode") or ``decode_message``
    ("decode") of (fields, version, flexible), the same function
    :func:`_compile_struct` makes.  A client encodes requests and decodes
    responses, a server the reverse: generating and compiling one of the
    four functions of a message, not all of them, is a quarter of the
    first-use cost that every process pays per API it uses."""
    layout = _Layout(fields, version, flexible)
    src = _Source()
    if part == "decode":
        src.add(0, "def decode_message(buf, offset):")
        src.add(1, "r = Reader(buf, offset)")
        _gen_decode_struct(src, 1, layout, "d")
        src.add(1, "return d")
        return src.build(f"<schema codec v{version}>")["decode_message"]
    src.add(0, "def encode_message(d):")
    src.add(1, "w = Writer()")
    _gen_encode_struct(src, 1, layout, "d", "w")
    src.add(1, "return w.getvalue()")
    return src.build(f"<schema codec v{version}>")["encode_message"]


def _compile_struct(fields, version, flexible):
    """The _Struct of (fields, version, flexible).

    Nested structs are inlined into their parent's functions (in loops for
    arrays of structs): a message is one call whatever its depth.  Only a
    tagged-field section that is not empty on the wire costs a call more,
    of a function of its own (most are empty, and it keeps the loops and try
    blocks of a deep message under Python's limit of nested blocks).
    """
    layout = _Layout(fields, version, flexible)
    s = _Struct()
    src = _Source()
    src.add(0, "def decode(r):")
    _gen_decode_struct(src, 1, layout, "d")
    src.add(1, "return d")
    src.add(0, "def decode_message(buf, offset):")
    src.add(1, "r = Reader(buf, offset)")
    _gen_decode_struct(src, 1, layout, "d")
    src.add(1, "return d")
    src.add(0, "def encode(w, d):")
    src.add(1, "pass")  # for a struct without fields
    _gen_encode_struct(src, 1, layout, "d", "w")
    src.add(0, "def encode_message(d):")
    src.add(1, "w = Writer()")
    _gen_encode_struct(src, 1, layout, "d", "w")
    src.add(1, "return w.getvalue()")
    ns = src.build(f"<schema codec v{version}>")
    s.decode = ns["decode"]
    s.decode_message = ns["decode_message"]
    s.encode = ns["encode"]
    s.encode_message = ns["encode_message"]
    return s


def _gen_decode_struct(src, ind, layout, target):
    """Lines reading one struct of ``layout`` from ``r`` into the dict target."""
    items = []
    for entry in layout.regular:
        v = src.var()
        _gen_read(src, ind, entry, v)
        items.append(f"{entry[0].key!r}: {v}")
    for f, _, _, _ in layout.tagged:
        d = f.default
        if isinstance(d, list):
            value = "[]" if not d else f"_copy({src.const(d)})"
        else:
            value = src.const(d)
        items.append(f"{f.key!r}: {value}")
    src.add(ind, f"{target} = {{" + ", ".join(items) + "}")
    if layout.flexible:
        count = src.var("count")
        src.add(ind, f"{count} = {src.method(Reader, 'read_unsigned_varint')}(r)")
        src.add(ind, f"if {count}:")
        if layout.tagged_reader is None:
            layout.tagged_reader = _gen_read_tagged(layout)
        src.add(ind + 1, f"{src.const(layout.tagged_reader)}(r, {target}, {count})")


def _gen_read_tagged(layout):
    """A function reading the tagged fields of one struct into its dict."""
    src = _Source()
    src.add(0, "def read_tagged(r, d, count):")
    # Reading a known field moves r.end to the field's end and back again.
    src.add(1, "end = r.end")
    src.add(1, "if count * 2 > end - r.pos:")
    src.add(2, "raise InvalidRequestError(")
    src.add(3, "f'Tagged field count {count} exceeds the remaining bytes')")
    src.add(1, "unknown = None")
    src.add(1, "for _ in range(count):")
    src.add(2, f"tag, size = {src.method(Reader, 'read_tag_header')}(r)")
    keyword = "if"
    for entry in layout.tagged:
        f = entry[0]
        src.add(2, f"{keyword} tag == {f.tag}:")
        keyword = "elif"
        # The field's value must use exactly its declared size.
        src.add(3, "stop = r.pos + size")
        src.add(3, "r.end = stop")
        src.add(3, "try:")
        v = src.var()
        _gen_read(src, 4, entry, v)
        src.add(4, f"d[{f.key!r}] = {v}")
        src.add(4, "if r.pos != stop:")
        src.add(5, "raise InvalidRequestError(")
        src.add(6, f"f'Tagged field {f.key} declared {{size}} bytes but used '")
        src.add(6, "f'{size - (stop - r.pos)}')")
        src.add(3, "finally:")
        src.add(4, "r.end = end")
    ind = 2
    if layout.tagged:
        src.add(2, "else:")
        ind = 3
    src.add(ind, "if unknown is None:")
    src.add(ind + 1, f"unknown = d[{UNKNOWN_TAGGED_FIELDS!r}] = []")
    src.add(ind, f"unknown.append((tag, {src.method(Reader, 'read_raw')}(r, size)))")
    return src.build("<schema tagged fields>")["read_tagged"]


def _gen_read(src, ind, entry, target):
    """Lines assigning one value of the field of entry, read from ``r``, to
    target."""
    f, flexible, nullable, sub = entry
    name = repr(f.name)
    if f.is_array:
        if sub is not None:
            elem_size = max(1, sub.min_size)
        else:
            elem_size = max(1, _prim_min_size(f.element_type, flexible))
        read_len = "read_compact_array_length" if flexible else "read_array_length"
        n = src.var("n")
        src.add(ind, f"{n} = {src.method(Reader, read_len)}(r, {elem_size})")
        src.add(ind, f"if {n} < 0:")
        if nullable:
            src.add(ind + 1, f"{target} = None")
        else:
            src.add(ind + 1, f"raise _null_error({name})")
        src.add(ind, "else:")
        src.add(ind + 1, f"{target} = []")
        src.add(ind + 1, f"for _ in range({n}):")
        if sub is not None:
            e = src.var("e")
            _gen_decode_struct(src, ind + 2, sub, e)
            src.add(ind + 2, f"{target}.append({e})")
        else:
            # Elements are never null, and their errors do not name the field.
            rd = src.method(Reader, _reader_name(f.element_type, flexible, False))
            src.add(ind + 2, f"{target}.append({rd}(r))")
    elif sub is not None:
        if nullable:
            # Kafka encodes nullable structs with an int8 presence marker (-1
            # null, 1 present).
            src.add(ind, f"if {src.method(Reader, 'read_int8')}(r) < 0:")
            src.add(ind + 1, f"{target} = None")
            src.add(ind, "else:")
            ind += 1
        _gen_decode_struct(src, ind, sub, target)
    elif f.element_type in ("string", "bytes", "records") and not nullable:
        # The reader already refuses null; report it with the field's name.
        rd = src.method(Reader, _reader_name(f.element_type, flexible, False))
        src.add(ind, "try:")
        src.add(ind + 1, f"{target} = {rd}(r)")
        src.add(ind, "except InvalidRequestError as e:")
        src.add(ind + 1, f"raise _read_error(e, {name}) from None")
    else:
        rd = src.method(Reader, _reader_name(f.element_type, flexible, nullable))
        src.add(ind, f"{target} = {rd}(r)")


def _gen_encode_struct(src, ind, layout, d, w):
    """Lines writing the struct dict named d to the writer named w."""
    for entry in layout.regular:
        f = entry[0]
        v = src.var()
        src.add(ind, f"{v} = {d}.get({f.key!r}, {src.const(f.default)})")
        _gen_write(src, ind, entry, v, w)
    if not layout.flexible:
        return
    items = src.var("items")
    src.add(ind, f"{items} = None")
    for entry in layout.tagged:
        f = entry[0]
        v = src.var()
        src.add(ind, f"{v} = {d}.get({f.key!r}, _MISSING)")
        # Kafka writes a tagged field only when it differs from its default.
        src.add(ind, f"if {v} is not _MISSING and not {v} == {src.const(f.default)}:")
        tw = src.var("tw")
        src.add(ind + 1, f"{tw} = Writer()")
        _gen_write(src, ind + 1, entry, v, tw)
        src.add(ind + 1, f"if {items} is None:")
        src.add(ind + 2, f"{items} = []")
        src.add(ind + 1, f"{items}.append(({f.tag}, {tw}.getvalue()))")
    unknown = src.var("unknown")
    src.add(ind, f"{unknown} = {d}.get({UNKNOWN_TAGGED_FIELDS!r})")
    src.add(ind, f"if {unknown}:")
    src.add(ind + 1, f"if {items} is None:")
    src.add(ind + 2, f"{items} = []")
    src.add(ind + 1, f"{items}.extend({unknown})")
    src.add(ind, f"if {items} is None:")
    src.add(ind + 1, f"{src.method(Writer, 'write_raw')}({w}, b'\\x00')")
    src.add(ind, "else:")
    src.add(ind + 1, f"{src.method(Writer, 'write_tagged_fields')}({w}, {items})")


def _gen_write(src, ind, entry, value, w):
    """Lines writing the value of the field of entry (held by the name value)
    to the writer named w."""
    f, flexible, nullable, sub = entry
    name = repr(f.name)
    if f.is_array:
        write_len = src.method(Writer, "write_compact_array_length" if flexible
                               else "write_array_length")
        src.add(ind, f"if {value} is None:")
        if nullable:
            src.add(ind + 1, f"{write_len}({w}, -1)")
        else:
            src.add(ind + 1, f"raise ValueError('null value for non-nullable field ' + {name})")
        src.add(ind, "else:")
        n = src.var("n")
        src.add(ind + 1, "try:")
        src.add(ind + 2, f"{n} = len({value})")
        src.add(ind + 1, "except TypeError:")
        src.add(ind + 2, f"raise _list_error({value}, {name}) from None")
        src.add(ind + 1, f"{write_len}({w}, {n})")
        item = src.var("x")
        src.add(ind + 1, f"for {item} in {value}:")
        if sub is not None:
            src.add(ind + 2, f"if not isinstance({item}, dict):")
            src.add(ind + 3, f"raise _dict_error({item}, {name})")
            _gen_encode_struct(src, ind + 2, sub, item, w)
        else:
            # Elements are never null, and their errors do not name the field.
            wr = src.method(Writer, _writer_name(f.element_type, flexible, False))
            src.add(ind + 2, f"{wr}({w}, {item})")
    elif sub is not None:
        if nullable:
            # The int8 presence marker (-1 null, 1 present).
            write_int8 = src.method(Writer, "write_int8")
            src.add(ind, f"if {value} is None:")
            src.add(ind + 1, f"{write_int8}({w}, -1)")
            src.add(ind, "else:")
            ind += 1
            src.add(ind, f"{write_int8}({w}, 1)")
        else:
            # None: a struct with every field at its default.
            src.add(ind, f"if {value} is None:")
            src.add(ind + 1, f"{value} = {{}}")
        src.add(ind, f"if not isinstance({value}, dict):")
        src.add(ind + 1, f"raise _dict_error({value}, {name})")
        _gen_encode_struct(src, ind, sub, value, w)
    else:
        wr = src.method(Writer, _writer_name(f.element_type, flexible, nullable))
        src.add(ind, "try:")
        src.add(ind + 1, f"{wr}({w}, {value})")
        src.add(ind, "except (ValueError, TypeError) as e:")
        src.add(ind + 1, f"raise _write_error(e, {name}) from None")


class MessageSpec:
    """A request, response or header schema."""

    def __init__(self, name, valid_versions, flexible_versions, fields,
                 api_key=None, type=None):
        self.api_key = api_key
        self.name = name
        self.type = type
        self.valid_versions = Versions(valid_versions)
        self.flexible_versions = Versions(flexible_versions)
        self.fields = tuple(fields)
        self._compiled = {}
        # The generated functions of each compiled version, looked up
        # directly by the per-request encode/decode.
        self._encoders = {}
        self._decoders = {}

    @property
    def min_version(self):
        return self.valid_versions.lo

    @property
    def max_version(self):
        return self.valid_versions.hi

    def __repr__(self):
        return f"MessageSpec({self.name!r}, {self.valid_versions!r})"

    def is_flexible(self, version):
        return version in self.flexible_versions

    def _check_version(self, version):
        if version not in self.valid_versions:
            raise UnsupportedVersionError(
                f"{self.name} version {version} is not supported "
                f"(supported: {self.valid_versions.lo}-{self.valid_versions.hi})")

    def _message_function(self, version, part):
        """``encode_message`` or ``decode_message`` of ``version``, compiled
        alone on first use (see _compile_message_function)."""
        c = self._compiled.get(version)
        if c is not None:
            return c.encode_message if part == "encode" else c.decode_message
        self._check_version(version)
        fn = _compile_message_function(self.fields, version,
                                       version in self.flexible_versions, part)
        (self._encoders if part == "encode" else self._decoders)[version] = fn
        return fn

    def _codec(self, version):
        c = self._compiled.get(version)
        if c is None:
            self._check_version(version)
            c = _compile_struct(self.fields, version, version in self.flexible_versions)
            self._compiled[version] = c
            self._encoders[version] = c.encode_message
            self._decoders[version] = c.decode_message
        return c

    def encode(self, body, version):
        """Encode ``body`` (a dict) at ``version``.  Raises ValueError for values
        that cannot be represented, UnsupportedVersionError for a bad version."""
        # the generated function straight from the cache (one call per
        # request fewer); _message_function compiles it and checks the
        # version the first time
        encode = self._encoders.get(version)
        if encode is None:
            encode = self._message_function(version, "encode")
        if type(body) is not dict:
            if body is None:
                body = {}
            elif not isinstance(body, dict):
                raise ValueError(f"{self.name} body must be a dict, got {type(body).__name__}")
        return encode(body)

    def encode_into(self, writer, body, version):
        self._codec(version).encode(writer, body if body is not None else {})

    def decode(self, buf, version, offset=0):
        """Decode one body from ``buf[offset:]``; trailing bytes are ignored,
        as Kafka does.  Raises InvalidRequestError on truncated/invalid data."""
        decode = self._decoders.get(version)
        if decode is None:
            decode = self._message_function(version, "decode")
        return decode(buf, offset)

    def decode_from(self, buf, offset, version):
        """(body dict, offset just past the body)."""
        codec = self._codec(version)
        r = Reader(buf, offset)
        body = codec.decode(r)
        return body, r.pos

    def read(self, reader, version):
        """Decode from an existing Reader, advancing it."""
        return self._codec(version).decode(reader)

    def default_body(self, version):
        """A body with every field of ``version`` at its default."""
        out = {}
        for f in self.fields:
            if version in f.versions:
                out[f.key] = f.default_value()
        return out


class Api:
    """One Kafka API: its key, Kafka name, request/response schemas and the
    version range kchannel supports."""

    __slots__ = ("api_key", "name", "request", "response", "min_version", "max_version")

    def __init__(self, api_key, name, request, response, min_version=None, max_version=None):
        self.api_key = api_key
        self.name = name
        self.request = request
        self.response = response
        self.min_version = request.min_version if min_version is None else min_version
        self.max_version = request.max_version if max_version is None else max_version

    def __repr__(self):
        return f"Api({self.api_key}, {self.name!r}, {self.min_version}-{self.max_version})"

    def is_version_supported(self, version):
        return self.min_version <= version <= self.max_version
