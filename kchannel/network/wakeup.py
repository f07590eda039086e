"""The wake-up pipe of a :class:`~kchannel.network.selector.Selector`
(java.nio's ``Selector.wakeup``): a socket pair registered with the OS
selector, written to from another thread to make a blocked select return.

Moved out of ``selector.py`` unchanged; the Selector's
:class:`~kchannel.network.os_registrations.OsRegistrations` holds it.

:class:`LoopDrivenSelector` is the interface of an OS selector that has a
wake-up of its own (``kchannel.aio``'s, driven by an event loop): a
Selector given one uses its ``wakeup`` instead of a pipe.
"""
import abc
import selectors
import socket

from .. import _impl

# The key data the per-poll loop (the netloop twin) recognises as the pipe.
_WAKEUP = _impl.load_twin("netloop")._WAKEUP


class LoopDrivenSelector(selectors.BaseSelector):
    """A ``selectors.BaseSelector`` driven from outside, by an event loop's
    readers and writers, whose ``select`` never blocks the loop: it wakes
    itself.  A :class:`~kchannel.network.selector.Selector` registered with
    one calls its :meth:`wakeup` (a scheduled callback) instead of writing
    to a socket pair, and registers no pipe.  Declared here, in the network
    layer, so the Selector tells it by its type, not by probing for a
    method (``kchannel.aio``'s ``LoopSelector`` implements it)."""

    @abc.abstractmethod
    def wakeup(self):
        """Make a ``select`` waiting now return, or the next one not wait
        (thread-safe, coalesced as the pipe's)."""


class _WakeupPipe:
    """The socket pair through which :meth:`Selector.wakeup` makes a
    blocked select return (java.nio's ``Selector.wakeup``)."""

    __slots__ = ("_sel", "_r", "_w", "_pending")

    def __init__(self, os_selector):
        self._sel = os_selector
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self._pending = False
        os_selector.register(self._r, selectors.EVENT_READ, _WAKEUP)

    def wakeup(self):
        # Coalesced: while a wakeup byte is still unread, write nothing.
        if self._pending:
            return
        self._pending = True
        try:
            self._w.send(b"\0")
        except (BlockingIOError, OSError):
            pass

    def drain(self):
        try:
            while self._r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        # Cleared only after draining: a wakeup() that raced with the drain
        # and wrote nothing happened before this poll returns, and every
        # caller of poll() looks at its state again before the next select,
        # so nothing it asked for is missed.  Clearing first could leave the
        # flag set with no byte left to wake the next select.
        self._pending = False

    def close(self):
        try:
            self._sel.unregister(self._r)
        except Exception:
            pass
        self._r.close()
        self._w.close()
