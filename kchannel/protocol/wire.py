"""The active wire-primitives twin (compiled ``kchannel._cwire`` when built,
else the pure ``kchannel.protocol._wire_py``); both expose the same names."""
from kchannel import _impl

_mod = _impl.load("kchannel.protocol._wire_py", "kchannel._cwire")

Reader = _mod.Reader
Writer = _mod.Writer
encode_unsigned_varint = _mod.encode_unsigned_varint
encode_varint = _mod.encode_varint
encode_varlong = _mod.encode_varlong
size_of_unsigned_varint = _mod.size_of_unsigned_varint
parse_request_header = _mod.parse_request_header
encode_request_header = _mod.encode_request_header
encode_response_header = _mod.encode_response_header
decode_response_header = _mod.decode_response_header
frame_message = _mod.frame_message

__all__ = [
    "Reader",
    "Writer",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
    "parse_request_header",
    "encode_request_header",
    "encode_response_header",
    "decode_response_header",
    "frame_message",
]
