"""What a :class:`~kchannel.network.selector.Selector` has registered with
its OS selector (Kafka's ``nioSelector`` and the selection keys it keeps):
the channels' file descriptors and the events asked for each, the listening
sockets, and the wake-up pipe.

The Selector decides which events a channel wants (its state, mute and
back-pressure); :meth:`OsRegistrations.set_interest` only brings the OS
registration in line, touching it when the wanted events changed.  The
per-poll loop (``_netloop_py``) reads ``ops`` to skip that call when nothing
changed, and waits on ``epoll`` directly when there is one.
"""
import selectors

from .. import _impl
from ..log import get_logger
from .ops import OP_NONE
from .wakeup import _WakeupPipe

_Listener = _impl.load_twin("netloop")._Listener

# The selector's own logger: these registrations are the selector's.
log = get_logger("kchannel.network.selector")

__all__ = ["OsRegistrations"]


class OsRegistrations:
    """The OS selector ``sel`` and what is registered with it: ``fds`` (id ->
    file descriptor at registration, which unregisters it even once its
    socket is closed), ``ops`` (id -> events registered) and ``waker`` (the
    wake-up pipe, or None when the event loop driving ``sel`` wakes it);
    ``epoll``/``fd_to_key``: see ``__init__``."""

    __slots__ = ("sel", "fds", "ops", "waker", "epoll", "fd_to_key")

    def __init__(self, os_selector, wakeup_pipe=True):
        self.sel = os_selector
        self.fds = {}
        self.ops = {}
        self.waker = _WakeupPipe(os_selector) if wakeup_pipe else None
        # The stdlib's epoll selector is waited on directly (its select()
        # inlined in the Selector's poll: one Python call and a list less
        # per poll): its epoll object and fd -> key map; None for any other
        # (an event loop's, another platform's), waited on through select().
        self.epoll = self.fd_to_key = None
        if type(os_selector) is selectors.EpollSelector:
            self.epoll = os_selector._selector
            self.fd_to_key = os_selector._fd_to_key

    def set_interest(self, id, ch, want):
        """Register channel ``ch`` (``id``) for the events ``want`` (OP_NONE:
        none, which unregisters it)."""
        ops = self.ops
        have = ops.get(id, OP_NONE)
        if want == have:
            return
        try:
            if want == OP_NONE:
                self.sel.unregister(self.fds[id])
                del ops[id]
            elif have == OP_NONE:
                fd = ch.fileno()
                self.sel.register(fd, want, ch)
                self.fds[id] = fd
                ops[id] = want
            else:
                self.sel.modify(self.fds[id], want, ch)
                ops[id] = want
        except (ValueError, KeyError, OSError) as exc:
            # socket already closed underneath us
            log.debug("Selector registration failed for %s: %s", id, exc)

    def unregister(self, id):
        """Stop watching channel ``id`` (its descriptor is kept until
        :meth:`forget`)."""
        if id in self.ops:
            try:
                self.sel.unregister(self.fds[id])
            except (KeyError, ValueError, OSError):
                pass
            del self.ops[id]

    def forget(self, id):
        """Channel ``id`` is closed: unregister it and drop its descriptor."""
        self.unregister(id)
        self.fds.pop(id, None)

    def add_listener(self, sock, on_acceptable):
        sock.setblocking(False)
        self.sel.register(sock, selectors.EVENT_READ, _Listener(sock, on_acceptable))

    def remove_listener(self, sock):
        try:
            self.sel.unregister(sock)
        except (KeyError, ValueError):
            pass

    def close(self):
        """Close the wake-up pipe and the OS selector."""
        if self.waker is not None:
            self.waker.close()
        self.sel.close()
