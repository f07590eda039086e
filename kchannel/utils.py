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


def set_wal_journal(db, wait_s=30.0):
    """``PRAGMA journal_mode=WAL`` on the sqlite3 connection ``db``, retried.

    Switching the journal mode does not go through SQLite's busy handler:
    several server processes (``kchannel serve`` workers) opening the same
    new file at the same moment get "database is locked" at once instead of
    waiting, so retry for as long as ``connect()``'s own timeout would have
    waited.  Any other error, or a lock that outlasts ``wait_s``, is raised.
    """
    import sqlite3  # only the stores need it; keep `import kchannel` light
    deadline = time.monotonic() + wait_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
