"""The active wire-primitives twin (compiled ``kchannel._cwire`` when built,
else the pure ``kchannel.protocol._wire_py``); both expose the same names."""
try:
    from kchannel._impl import load as _load
except ImportError:  # pragma: no cover - only while the loader is absent
    _load = None

if _load is not None:
    _mod = _load("kchannel.protocol._wire_py", "kchannel._cwire")
else:  # pragma: no cover
    from kchannel.protocol import _wire_py as _mod

Reader = _mod.Reader
Writer = _mod.Writer
encode_unsigned_varint = _mod.encode_unsigned_varint
encode_varint = _mod.encode_varint
encode_varlong = _mod.encode_varlong
size_of_unsigned_varint = _mod.size_of_unsigned_varint

__all__ = [
    "Reader",
    "Writer",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
]
