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

For speed each (struct, version) pair is compiled once into a list of small
closures; decoding a body is then a loop over those closures.
"""
import copy
import re
import uuid

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

def _null_error(field):
    return InvalidRequestError(f"non-nullable field {field.name} was serialized as null")


def _prim_reader(t, flexible, nullable):
    """A function reading one value of primitive type t."""
    if t == "bool":
        return Reader.read_boolean
    if t == "int8":
        return Reader.read_int8
    if t == "int16":
        return Reader.read_int16
    if t == "uint16":
        return Reader.read_uint16
    if t == "int32":
        return Reader.read_int32
    if t == "uint32":
        return Reader.read_uint32
    if t == "int64":
        return Reader.read_int64
    if t == "float64":
        return Reader.read_float64
    if t == "uuid":
        return Reader.read_uuid
    if t == "string":
        if flexible:
            return Reader.read_compact_nullable_string if nullable else Reader.read_compact_string
        return Reader.read_nullable_string if nullable else Reader.read_string
    if t == "records" and nullable:
        # A view of the frame (no copy of the batches).
        return Reader.read_compact_nullable_records if flexible else \
            Reader.read_nullable_records
    if t in ("bytes", "records"):
        if flexible:
            return Reader.read_compact_nullable_bytes if nullable else Reader.read_compact_bytes
        return Reader.read_nullable_bytes if nullable else Reader.read_bytes
    raise ValueError(f"unknown type {t}")


def _prim_writer(t, flexible, nullable):
    if t == "bool":
        return Writer.write_boolean
    if t == "int8":
        return Writer.write_int8
    if t == "int16":
        return Writer.write_int16
    if t == "uint16":
        return Writer.write_uint16
    if t == "int32":
        return Writer.write_int32
    if t == "uint32":
        return Writer.write_uint32
    if t == "int64":
        return Writer.write_int64
    if t == "float64":
        return Writer.write_float64
    if t == "uuid":
        return Writer.write_uuid
    if t == "string":
        if flexible:
            return Writer.write_compact_nullable_string if nullable else Writer.write_compact_string
        return Writer.write_nullable_string if nullable else Writer.write_string
    if t in ("bytes", "records"):
        if flexible:
            return Writer.write_compact_nullable_bytes if nullable else Writer.write_compact_bytes
        return Writer.write_nullable_bytes if nullable else Writer.write_bytes
    raise ValueError(f"unknown type {t}")


def _prim_min_size(t, flexible):
    if t in _FIXED_SIZE:
        return _FIXED_SIZE[t]
    if t == "string":
        return 1 if flexible else 2
    return 1 if flexible else 4  # bytes / records


class _Struct:
    """Compiled (fields, version, flexible) codec."""

    __slots__ = ("decode", "encode", "min_size")


def _compile_struct(fields, version, flexible):
    """Returns a _Struct whose decode(r) -> dict and encode(w, d)."""
    regular = []      # (key, read_fn)
    regular_enc = []  # (key, write_fn, default)
    tagged_dec = {}   # tag -> (key, read_fn)
    tagged_enc = []   # (tag, key, write_fn, default)
    tagged_defaults = []  # (key, default field)
    min_size = 1 if flexible else 0
    for f in fields:
        if version not in f.versions:
            continue
        f_flex = flexible
        if f.flexible_versions is not None:
            f_flex = version in f.flexible_versions
        nullable = version in f.nullable_versions
        rd, wr, size = _compile_field(f, version, f_flex, nullable)
        if f.tag is not None and flexible and version in f.tagged_versions:
            tagged_dec[f.tag] = (f.key, rd)
            tagged_enc.append((f.tag, f.key, wr, f.default, f))
            tagged_defaults.append(f)
        else:
            regular.append((f.key, rd))
            regular_enc.append((f.key, wr, f))
            min_size += size
    tagged_enc.sort(key=lambda e: e[0])

    if flexible:
        def decode(r):
            d = {}
            for key, rd in regular:
                d[key] = rd(r)
            for f in tagged_defaults:
                d[f.key] = f.default_value()
            count = r.read_unsigned_varint()
            if count:
                if count * 2 > r.end - r.pos:
                    raise InvalidRequestError(
                        f"Tagged field count {count} exceeds the remaining bytes")
                unknown = None
                for _ in range(count):
                    tag, size = r.read_tag_header()
                    known = tagged_dec.get(tag)
                    if known is None:
                        if unknown is None:
                            unknown = d[UNKNOWN_TAGGED_FIELDS] = []
                        unknown.append((tag, r.read_raw(size)))
                        continue
                    key, rd = known
                    saved_end = r.end
                    stop = r.pos + size
                    r.end = stop
                    try:
                        d[key] = rd(r)
                        if r.pos != stop:
                            raise InvalidRequestError(
                                f"Tagged field {key} declared {size} bytes but used "
                                f"{size - (stop - r.pos)}")
                    finally:
                        r.end = saved_end
            return d

        def encode(w, d):
            get = d.get
            for key, wr, f in regular_enc:
                v = get(key, _MISSING)
                wr(w, f.default if v is _MISSING else v)
            items = []
            for tag, key, wr, default, f in tagged_enc:
                v = get(key, _MISSING)
                # Kafka writes a tagged field only when it differs from its default.
                if v is _MISSING or v == default:
                    continue
                sub = Writer()
                wr(sub, v)
                items.append((tag, sub.getvalue()))
            unknown = get(UNKNOWN_TAGGED_FIELDS)
            if unknown:
                items.extend(unknown)
            w.write_tagged_fields(items)
    else:
        def decode(r):
            d = {}
            for key, rd in regular:
                d[key] = rd(r)
            return d

        def encode(w, d):
            get = d.get
            for key, wr, f in regular_enc:
                v = get(key, _MISSING)
                wr(w, f.default if v is _MISSING else v)

    s = _Struct()
    s.decode = decode
    s.encode = encode
    s.min_size = min_size
    return s


_MISSING = object()


def _compile_field(f, version, flexible, nullable):
    """(read_fn(r), write_fn(w, value), min encoded size) for field f."""
    name = f.name
    if f.is_struct:
        sub = _compile_struct(f.fields, version, flexible)
        elem_read = sub.decode

        def elem_write(w, v, _enc=sub.encode, _name=name):
            if not isinstance(v, dict):
                raise ValueError(f"field {_name}: expected a dict, got {type(v).__name__}")
            _enc(w, v)
        elem_size = max(1, sub.min_size)
    else:
        elem_read = _prim_reader(f.element_type, flexible,
                                 nullable and not f.is_array)
        elem_write = _prim_writer(f.element_type, flexible,
                                  nullable and not f.is_array)
        elem_size = max(1, _prim_min_size(f.element_type, flexible))

    if f.is_array:
        if flexible:
            read_len = Reader.read_compact_array_length
            write_len = Writer.write_compact_array_length
        else:
            read_len = Reader.read_array_length
            write_len = Writer.write_array_length

        def read(r):
            n = read_len(r, elem_size)
            if n < 0:
                if nullable:
                    return None
                raise _null_error(f)
            return [elem_read(r) for _ in range(n)]

        def write(w, v):
            if v is None:
                if not nullable:
                    raise ValueError(f"null value for non-nullable field {name}")
                write_len(w, -1)
                return
            try:
                n = len(v)
            except TypeError:
                raise ValueError(
                    f"field {name}: expected a list, got {type(v).__name__}") from None
            write_len(w, n)
            for item in v:
                elem_write(w, item)
        return read, write, (1 if flexible else 4)

    if f.is_struct:
        # A single nested struct; Kafka encodes nullable structs with an int8
        # presence marker (-1 null, 1 present).
        if nullable:
            def read(r):
                marker = r.read_int8()
                if marker < 0:
                    return None
                return elem_read(r)

            def write(w, v):
                if v is None:
                    w.write_int8(-1)
                    return
                w.write_int8(1)
                elem_write(w, v)
            return read, write, 1

        def write(w, v):
            elem_write(w, {} if v is None else v)
        return elem_read, write, sub.min_size

    def write(w, v, _wr=elem_write):
        try:
            _wr(w, v)
        except ValueError as e:
            raise ValueError(f"field {name}: {e}") from None
        except TypeError as e:
            raise ValueError(f"field {name}: {e}") from None
    if f.element_type in ("string", "bytes", "records") and not nullable:
        # The reader already refuses null; report it with the field's name.
        def read(r, _rd=elem_read):
            try:
                return _rd(r)
            except InvalidRequestError as e:
                raise InvalidRequestError(f"{e} (field {name})") from None
        return read, write, _prim_min_size(f.element_type, flexible)
    return elem_read, write, _prim_min_size(f.element_type, flexible)


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

    def _codec(self, version):
        c = self._compiled.get(version)
        if c is None:
            if version not in self.valid_versions:
                raise UnsupportedVersionError(
                    f"{self.name} version {version} is not supported "
                    f"(supported: {self.valid_versions.lo}-{self.valid_versions.hi})")
            c = _compile_struct(self.fields, version, version in self.flexible_versions)
            self._compiled[version] = c
        return c

    def encode(self, body, version):
        """Encode ``body`` (a dict) at ``version``.  Raises ValueError for values
        that cannot be represented, UnsupportedVersionError for a bad version."""
        # the compiled codec straight from the cache (one call per request
        # fewer); _codec compiles it and checks the version the first time
        codec = self._compiled.get(version)
        if codec is None:
            codec = self._codec(version)
        if body is None:
            body = {}
        elif not isinstance(body, dict):
            raise ValueError(f"{self.name} body must be a dict, got {type(body).__name__}")
        w = Writer()
        codec.encode(w, body)
        return w.getvalue()

    def encode_into(self, writer, body, version):
        self._codec(version).encode(writer, body if body is not None else {})

    def decode(self, buf, version, offset=0):
        """Decode one body from ``buf[offset:]``; trailing bytes are ignored,
        as Kafka does.  Raises InvalidRequestError on truncated/invalid data."""
        codec = self._compiled.get(version)
        if codec is None:
            codec = self._codec(version)
        return codec.decode(Reader(buf, offset))

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
