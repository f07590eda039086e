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


_LAZY = {"Producer": "kchannel.producer", "Consumer": "kchannel.consumer",
         "Admin": "kchannel.client.admin"}


def __getattr__(name):
    # kchannel.Producer, Consumer and Admin load on first use, by name (as
    # the twin loader does): the connection layer does not pay for the data
    # plane, and this core package does not import the layers above it.
    module = _LAZY.get(name)
    if module is not None:
        import importlib  # by name, see above
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'kchannel' has no attribute {name!r}")
