"""Kafka size-prefixed framing (the active implementation twin).

Re-exports either the compiled ``kchannel._cframing`` or the pure-Python
``kchannel._framing_py``; both have the same interface:

* ``encode_frame(payload) -> bytes``: 4-byte signed big-endian size + payload;
* ``encode_frames(payloads) -> bytes``: several frames concatenated;
* ``FrameDecoder(max_size=104857600)`` with ``writable()`` + ``commit(n)``
  (receive straight into it) or ``feed(data)`` (copy),
  ``next_frame() -> bytes | memoryview | None``, ``frames() -> list``
  (frames shorter than ``COPY_BELOW`` bytes as ``bytes``, larger ones as
  read-only views of the decoder's memory, never changed afterwards),
  ``max_size`` (read/write), ``buffered`` and ``has_partial()``.

Invalid size prefixes raise ``kchannel.errors.InvalidReceiveError`` with
Kafka's ``NetworkReceive`` messages.
"""
from . import _impl

_twin = _impl.load("kchannel._framing_py", "kchannel._cframing")

DEFAULT_MAX_SIZE = _twin.DEFAULT_MAX_SIZE
COPY_BELOW = _twin.COPY_BELOW
encode_frame = _twin.encode_frame
encode_frames = _twin.encode_frames
FrameDecoder = _twin.FrameDecoder
IMPLEMENTATION = _impl.loaded_kind("framing")

__all__ = ["DEFAULT_MAX_SIZE", "COPY_BELOW", "encode_frame", "encode_frames", "FrameDecoder",
           "IMPLEMENTATION"]
