"""The event loop's side of ``kchannel.aio._loop`` run once per pass of the
producer's Sender: ``LoopSelector``'s ``select`` (where the Sender's
greenlet waits for its next event) and ``_event`` (the loop's reader/writer
callback that switches back into it), and the helpers they share with
``_loop`` (``wake_after``, ``done``, the Driver's wait token ``_Resume``).

``LoopSelector`` takes ``select`` and ``on_event`` as its methods (``sel``,
their first parameter, is the selector).  This module is a twin (see
``kchannel._impl``): the same source is compiled by Cython in pure-Python
mode as ``kchannel.aio._clooppass`` (``_clooppass.pxd`` beside it), where
a pass of an ``AIOProducer``'s Sender makes no interpreted frame here.  It
imports nothing from ``_loop`` (which imports it).
"""
from greenlet import getcurrent

__all__ = ["select", "on_event", "wake_after", "done"]


class _Resume:
    """One wait of a :class:`Driver`'s greenlet, with the two methods of a
    future the selector calls (``done``, ``set_result``): setting it, from
    a loop callback, resumes the greenlet at once."""
    __slots__ = ("_driver", "_fired", "woken")

    # (LoopSelector.select makes one per pass of the Sender with
    # _new_resume and sets the three fields itself: no __init__ frame)
    def __init__(self, driver):
        self._driver = driver
        self._fired = False
        self.woken = False       # a wakeup() is scheduled for it (LoopSelector.wakeup)

    def done(self):
        return self._fired

    def set_result(self, _value):
        if not self._fired:
            self._fired = True
            self._driver._resume(self)


_new_resume = object.__new__


def select(sel, timeout=None):
    """``LoopSelector.select``, its method (``sel``): the events the loop
    reported since the last call; in the bridged greenlet with nothing to
    report, waits for them (``timeout`` s at most) on the loop."""
    sel.timeout = timeout
    if not sel._events and not sel._woken and (timeout != 0 or sel.yield_on_zero):
        bridge = sel.bridge
        if bridge is not None:
            g = getcurrent()
            if bridge.current is g:
                wait = timeout
                if sel.max_wait is not None and (wait is None or wait > sel.max_wait):
                    wait = sel.max_wait
                if bridge.resumed_by_callbacks:
                    # Driver.wait_io, inline: once per pass of the
                    # producer's Sender (a Produce response awaited).
                    token = sel._waiter = _new_resume(_Resume)
                    token._driver = bridge
                    token._fired = token.woken = False
                    if wait is not None:
                        if wait > 0 and sel._timer is not None and \
                                sel._timer_when <= sel._now() + wait:
                            pass    # (the timer ends the wait soon enough)
                        else:
                            wake_after(sel, token, wait)
                    bridge._token = token
                    try:
                        g.parent.switch()
                    finally:
                        bridge._token = None
                        sel._waiter = None
                else:
                    bridge.wait_io(sel, wait)
    sel._woken = False
    if sel._paused:
        keys = sel._keys
        for fd in sel._paused:
            key = keys.get(fd)
            if key is not None:
                sel._add(fd, key.events)
        sel._paused.clear()
    if not sel._events:
        return []
    keys = sel._keys
    out = []
    # (a loop, not a comprehension: one frame fewer per pass)
    for fd, mask in sel._events.items():
        key = keys.get(fd)
        if key is not None:
            out.append((key, mask & key.events))
    sel._events.clear()
    return out


def on_event(sel, fd, mask):
    """``LoopSelector._event``, its method (``sel``): the loop's
    reader/writer callback."""
    # The loop's reader/writer callback (registered with its mask: no
    # per-direction wrapper frame).
    events = sel._events
    events[fd] = events.get(fd, 0) | mask
    waiter = sel._waiter
    if waiter is not None:
        if waiter.__class__ is _Resume:
            # The Driver's wait, once per pass of the producer's Sender
            # (a response read): _Resume.set_result and Driver._resume
            # inline, the greenlet switched into from here.
            if not waiter._fired:
                waiter._fired = True
                driver = waiter._driver
                if waiter is driver._token:
                    driver._token = None
                    g = driver.current
                    g.parent = getcurrent()
                    g.switch()
        elif not waiter.done():
            waiter.set_result(None)
        return
    if sel._on_event is not None and sel._on_event():
        return
    key = sel._keys.get(fd)
    if key is not None and fd not in sel._paused:
        sel._paused.add(fd)
        sel._remove(fd, key.events)


def wake_after(sel, waiter, timeout):
    """Ends ``waiter`` (a future or a _Resume) after ``timeout`` seconds
    (None: never; <= 0: at the next loop iteration) with the selector's one
    timer, moved only when this wait must end earlier than it fires."""
    if timeout is None:
        return
    loop = sel._loop or sel.loop
    if timeout <= 0:
        loop.call_soon(done, waiter)
        return
    when = loop.time() + timeout
    timer = sel._timer
    if timer is None or sel._timer_when > when:
        if timer is not None:
            timer.cancel()
        sel._timer = loop.call_at(when, sel._timer_fired)
        sel._timer_when = when


def done(fut):
    if not fut.done():
        fut.set_result(None)
