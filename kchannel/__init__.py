"""kchannel: Apache Kafka's connection-security layer for Python.

``implementation()`` reports whether the compiled (Cython) hot paths or their
pure-Python twins are active.  ``KCHANNEL_NO_EXTENSIONS=1`` forces pure Python.
"""
from . import _impl

__version__ = "0.1.0"


def implementation():
    """Return ``"compiled"`` when every compiled twin is active, ``"pure"`` when
    none is, ``"mixed"`` otherwise.

    ``implementation(detail=True)`` style details are in
    ``kchannel._impl.loaded()``.
    """
    return _impl.implementation()


def __getattr__(name):
    # Producer and Consumer load on first use: importing kchannel for its
    # connection layer does not pay for the data plane.
    if name == "Producer":
        from .producer import Producer
        return Producer
    if name == "Consumer":
        from .consumer import Consumer
        return Consumer
    raise AttributeError(f"module 'kchannel' has no attribute {name!r}")
