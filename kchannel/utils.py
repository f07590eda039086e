"""Small helpers shared across kchannel."""
import contextvars
import time


def now_ms():
    """Wall-clock time in epoch milliseconds, as Kafka's ``Time.milliseconds()``.

    Sans-I/O code never calls this itself: callers pass ``now`` in, so tests
    can drive time without sleeping.
    """
    return int(time.time() * 1000)


# How a call that may block for long (a credential callback: an OAuth token
# fetch) is made.  Unset: called directly.  kchannel.aio sets it while the
# client's code runs on the event loop, so that such a call is awaited on an
# executor instead of stopping the loop.
BLOCKING_RUNNER = contextvars.ContextVar("kchannel_blocking_runner", default=None)


def run_blocking(fn, *args):
    """``fn(*args)``, through the current :data:`BLOCKING_RUNNER` if one is
    set (see there)."""
    runner = BLOCKING_RUNNER.get()
    if runner is None:
        return fn(*args)
    return runner(fn, *args)
