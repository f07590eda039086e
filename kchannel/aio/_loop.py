"""The event loop as the network layer's OS selector, and the bridge that
lets the blocking-style client code wait on the loop.

:class:`LoopSelector` is a ``selectors.BaseSelector`` whose registrations
are the running loop's readers and writers (``loop.add_reader`` /
``add_writer``): the :class:`~kchannel.network.selector.Selector` keeps
doing all channel work (connect, TLS handshake, SASL, framing) and merely
learns of readiness from the loop instead of from its own epoll.  Its
``select`` hands over the events the loop reported since the last call; it
waits only in a bridged greenlet (below), by awaiting the loop.

:class:`Bridge` runs a synchronous function of the client (the consumer's
``poll``, ``commit``, a group join...) in a greenlet.  Where that function
would block -- ``select`` with a timeout and nothing to report -- the
greenlet switches back to the coroutine that started it, which awaits the
loop's next event for these sockets (or the timeout) and switches back in.
The same code therefore runs, unchanged, on a thread (``kchannel.Consumer``,
the producer's Sender) and on the loop (``kchannel.aio``), with no thread
of its own.  A blocking credential callback it makes through
``kchannel.utils.run_blocking`` is awaited on the loop's default executor.
Cancelling the awaiting task raises ``CancelledError`` at the waiting
``select``, i.e. where the synchronous code is already prepared for a
timeout error to surface.

:class:`Driver` runs one long-lived loop (the producer's Sender) the same
way, but resumed by the loop's callbacks directly instead of by a task.
"""
import asyncio
import contextvars
import inspect
import selectors
import time as _time

from greenlet import GreenletExit, getcurrent, greenlet

from kchannel import _impl
from kchannel.network.wakeup import LoopDrivenSelector
from kchannel.utils import BLOCKING_RUNNER

# LoopSelector.select and _event, run once per pass of the producer's
# Sender, and what they share with this module (compiled when built); see
# kchannel.aio._looppass_py.
_looppass = _impl.load_twin("looppass")
_Resume = _looppass._Resume
_wake_after = _looppass.wake_after
_done = _looppass.done

__all__ = ["LoopSelector", "Bridge", "Driver"]

_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE
_BASE_TIME = asyncio.BaseEventLoop.time


def _fd(fileobj):
    return fileobj if isinstance(fileobj, int) else fileobj.fileno()


class LoopSelector(LoopDrivenSelector):
    """``selectors.BaseSelector`` over ``loop``'s readers and writers.

    An event no greenlet waiting in :meth:`select` takes goes to
    ``on_event()``; when that returns False (nobody will poll now) the
    socket's reader/writer is taken off the loop until the next
    :meth:`select` hands the event over, so a level-triggered loop does not
    spin on it meanwhile.  :meth:`wakeup` is what the Selector's ``wakeup``
    becomes.  The loop is looked up on first use, so the client may be built
    before the loop runs."""

    def __init__(self, on_event=None):
        self._loop = None
        self._keys = {}          # fd -> SelectorKey
        self._events = {}        # fd -> mask reported by the loop, not yet selected
        self._paused = set()     # fds taken off the loop until select() (see above)
        self._on_event = on_event
        self._woken = False      # wakeup() while no greenlet waited: select() must not
        # Seconds the last select() was asked to wait at most (None: no
        # limit): when the driver must poll again.
        self.timeout = None
        self.bridge = None       # Bridge whose greenlet may wait in select()
        self.max_wait = None     # longest wait in select() (s), whatever it is asked
        # Whether a zero-timeout select() yields to the loop once.  Its
        # events are the loop's readers and writers, which run only when
        # the loop does: a driver that loops on its own polling with no
        # wait (the producer's Sender, with work it cannot do yet, e.g. the
        # in-flight limit reached) would otherwise never see the responses
        # it waits for.  Off for calls that return to the application (the
        # consumer's), which poll(0) where a cancellation must not land.
        self.yield_on_zero = False
        self._waiter = None      # future a greenlet waiting in select() awaits
        self._timer = None       # the loop timer ending such waits (Bridge.wait_io)
        self._timer_when = 0.0   # its loop time (not asked of the timer per wait)
        self._now = None         # the loop's clock (set with the loop)

    @property
    def loop(self):
        if self._loop is None:
            self._loop = loop = asyncio.get_running_loop()
            # loop.time() per wait of the Driver: asyncio's own loops'
            # is time.monotonic() behind a Python method; others' (uvloop's
            # cached clock) is called as is.
            self._now = (_time.monotonic if type(loop).time is _BASE_TIME else loop.time)
        return self._loop

    # -- loop callbacks --------------------------------------------------------------
    def _timer_fired(self):
        self._timer = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # (the looppass twin's: the loop's reader/writer callback, registered
    # with its mask, no per-direction wrapper frame; compiled when built)
    _event = _looppass.on_event

    def wakeup(self):
        """The Selector's ``wakeup``: a greenlet waiting in select() returns,
        or the next select() does not wait."""
        waiter = self._waiter
        if waiter is not None:
            if not waiter.done():
                if waiter.__class__ is _Resume:
                    # Not from here: wakeup() is called by the application's
                    # coroutines, or by the driver's own callbacks.  Once
                    # per wait, as the Selector's waker writes one byte
                    # while one is unread: an application appending while
                    # the Sender waits calls this per batch it opens.
                    if not waiter.woken:
                        waiter.woken = True
                        self.loop.call_soon(_done, waiter)
                else:
                    waiter.set_result(None)
        else:
            self._woken = True

    def _add(self, fd, events):
        loop = self.loop
        if events & _READ:
            loop.add_reader(fd, self._event, fd, _READ)
        if events & _WRITE:
            loop.add_writer(fd, self._event, fd, _WRITE)

    def _remove(self, fd, events):
        loop = self.loop
        if events & _READ:
            loop.remove_reader(fd)
        if events & _WRITE:
            loop.remove_writer(fd)

    # -- BaseSelector ----------------------------------------------------------------
    def register(self, fileobj, events, data=None):
        fd = _fd(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        self._add(fd, events)
        return key

    def unregister(self, fileobj):
        fd = _fd(fileobj)
        key = self._keys.pop(fd)
        if fd in self._paused:
            self._paused.discard(fd)
        else:
            self._remove(fd, key.events)
        self._events.pop(fd, None)
        return key

    def modify(self, fileobj, events, data=None):
        fd = _fd(fileobj)
        old = self._keys[fd]
        key = selectors.SelectorKey(old.fileobj, fd, events, data)
        self._keys[fd] = key
        if fd not in self._paused:
            self._remove(fd, old.events & ~events)
            self._add(fd, events & ~old.events)
        if fd in self._events:
            self._events[fd] &= events
        return key

    # (the looppass twin's, once per pass of the producer's Sender:
    # compiled when built)
    select = _looppass.select

    def get_map(self):
        return _KeyMap(self._keys)

    def get_key(self, fileobj):
        return self._keys[_fd(fileobj)]

    def fileno(self):
        raise NotImplementedError("an event loop's selector has no descriptor of its own")

    def close(self):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._loop is not None and not self._loop.is_closed():
            for fd, key in list(self._keys.items()):
                if fd not in self._paused:
                    self._remove(fd, key.events)
        self._keys.clear()
        self._events.clear()
        self._paused.clear()


class _KeyMap:
    def __init__(self, keys):
        self._keys = keys

    def __len__(self):
        return len(self._keys)

    def __getitem__(self, fileobj):
        return self._keys[_fd(fileobj)]

    def get(self, fileobj, default=None):
        return self._keys.get(_fd(fileobj), default)

    def __iter__(self):
        return iter(self._keys)


class Bridge:
    """Runs synchronous client code in a greenlet, one call at a time,
    awaiting the loop wherever that code waits (see the module docstring)."""

    # (LoopSelector.select: a wait is a future this class's task awaits)
    resumed_by_callbacks = False

    def __init__(self):
        self.current = None          # the greenlet of the call in progress
        self._lock = asyncio.Lock()

    @property
    def busy(self):
        return self.current is not None

    async def run(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` on the loop; returns or raises what it does.
        Blocking credential callbacks it makes (``kchannel.utils.run_blocking``)
        are awaited on the loop's default executor."""
        async with self._lock:
            g = greenlet(lambda: self._enter(fn, args, kwargs), parent=getcurrent())
            # The caller's context variables, plus the blocking-call runner.
            g.gr_context = contextvars.copy_context()
            self.current = g
            try:
                # Until the greenlet ends, what it switches back is what
                # it waits for (await_); then it is its return value.
                value = g.switch()
                while not g.dead:
                    try:
                        result = await value
                    except BaseException as exc:   # CancelledError included
                        value = g.throw(exc)
                    else:
                        value = g.switch(result)
                return value
            finally:
                self.current = None

    def _enter(self, fn, args, kwargs):
        BLOCKING_RUNNER.set(self._run_blocking)
        return fn(*args, **kwargs)

    def _run_blocking(self, fn, *args):
        """From the bridged greenlet: ``fn(*args)`` without stopping the loop
        -- awaited when it is a coroutine function (aiokafka's async token
        providers), else run on the loop's default executor."""
        if inspect.iscoroutinefunction(fn):
            return self.await_(fn(*args))
        return self.await_(asyncio.get_running_loop().run_in_executor(None, fn, *args))

    def await_(self, awaitable):
        """From the bridged greenlet: wait for ``awaitable`` on the loop and
        return its result (an async rebalance listener)."""
        g = getcurrent()
        if g is not self.current:
            raise RuntimeError("await_ called outside a bridged call")
        return g.parent.switch(awaitable)

    def wait_io(self, sel, timeout):
        """From the bridged greenlet, in ``sel.select``: wait until the loop
        reports an event for ``sel``'s sockets or ``timeout`` s pass.

        The bridged call awaits the future itself (no coroutine per wait),
        and one timer serves every wait: it is moved only when a wait must
        end earlier than it fires.  A timer firing before a later wait's
        end is a spurious wake-up, which every poll loop above tolerates
        (it polls again with what is left), as after an OS select."""
        waiter = sel._waiter = sel.loop.create_future()
        _wake_after(sel, waiter, timeout)
        try:
            self.await_(waiter)
        finally:
            sel._waiter = None


class Driver:
    """Runs one long-lived synchronous loop (the producer's Sender) in a
    greenlet that the event loop's callbacks resume directly.

    :class:`Bridge` resumes its greenlet from a task: each wait is a future,
    and each wake-up (a response readable, a timer, ``wakeup``) goes
    readiness callback -> future -> a loop iteration later the task's step
    -> switch.  The Sender waits once per request it gets a response to, so
    that hop was paid per Produce request.  Here the readiness callback
    switches into the greenlet itself: the pass runs in the loop iteration
    that saw the event, with no future, task step or extra iteration.  Waits
    of another kind (``await_``: a blocking credential callback on the
    executor) resume it from the awaited future's done callback.

    ``done`` is an ``asyncio.Future`` set with the loop's end (its result or
    exception); :meth:`cancel` raises ``CancelledError`` in the greenlet
    where it waits, as cancelling a bridged task does."""

    # (LoopSelector.select: a wait is a _Resume the loop's callbacks
    # resume, made and waited on there, Driver.wait_io inline)
    resumed_by_callbacks = True

    def __init__(self):
        self.current = None          # the greenlet, while it runs
        self.done = None
        self._token = None           # the _Resume the greenlet waits on

    @property
    def busy(self):
        return self.current is not None

    def start(self, loop, fn):
        """Run ``fn()`` in a greenlet from the loop's next iteration."""
        self.done = loop.create_future()
        g = greenlet(lambda: self._main(fn))
        g.gr_context = contextvars.copy_context()
        self.current = g
        loop.call_soon(self._first, g)

    def _first(self, g):
        if g is self.current and not g and not g.dead:
            g.parent = getcurrent()
            g.switch()

    def _main(self, fn):
        BLOCKING_RUNNER.set(self._run_blocking)
        try:
            outcome = (True, fn())
        except BaseException as exc:     # CancelledError, GreenletExit included
            outcome = (False, exc)
        self.current = None
        self._token = None
        done = self.done
        # (A greenlet collected with its loop gone: nobody waits on done.)
        if not done.done() and not done.get_loop().is_closed():
            ok, value = outcome
            if ok:
                done.set_result(value)
            elif isinstance(value, (asyncio.CancelledError, GreenletExit)):
                # (GreenletExit: the greenlet collected while it waited.)
                done.cancel()
            else:
                done.set_exception(value)

    def _resume(self, token):
        # From a loop callback: run the greenlet until it waits again (its
        # switch to its parent returns here) or ends.
        if token is not self._token:
            return
        self._token = None
        g = self.current
        g.parent = getcurrent()
        g.switch()

    def _suspend(self, token):
        """In the greenlet: wait until ``token`` is resumed."""
        self._token = token
        try:
            self.current.parent.switch()
        finally:
            self._token = None

    def cancel(self):
        """Raise ``CancelledError`` in the greenlet where it waits (it runs
        until it waits again or ends); False if it is not waiting."""
        g = self.current
        if g is not None and not g and not g.dead:
            # Not started yet: it never will.
            self.current = None
            self.done.cancel()
            return True
        if g is None or self._token is None:
            return False
        self._token = None
        g.parent = getcurrent()
        g.throw(asyncio.CancelledError())
        return True

    def wait_io(self, sel, timeout):
        """:meth:`Bridge.wait_io`, resumed by the selector's callbacks.
        Once per pass of the producer's Sender: ``_wake_after``'s usual
        case (the timer already due earlier: left alone) and
        :meth:`_suspend` are inline."""
        token = sel._waiter = _Resume(self)
        # (LoopSelector.select has this inline for its Driver)
        if timeout is not None:
            if timeout > 0 and sel._timer is not None and \
                    sel._timer_when <= sel._now() + timeout:
                pass
            else:
                _wake_after(sel, token, timeout)
        self._token = token
        try:
            self.current.parent.switch()
        finally:
            self._token = None
            sel._waiter = None

    def await_(self, awaitable):
        """From the greenlet: wait for ``awaitable`` on the loop and return
        its result."""
        if getcurrent() is not self.current:
            raise RuntimeError("await_ called outside the driver")
        fut = asyncio.ensure_future(awaitable)
        token = _Resume(self)
        fut.add_done_callback(token.set_result)
        try:
            self._suspend(token)
        except BaseException:
            fut.cancel()
            raise
        return fut.result()

    def _run_blocking(self, fn, *args):
        if inspect.iscoroutinefunction(fn):
            return self.await_(fn(*args))
        return self.await_(asyncio.get_running_loop().run_in_executor(None, fn, *args))
