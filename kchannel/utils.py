"""Small helpers shared across kchannel."""
import time


def now_ms():
    """Wall-clock time in epoch milliseconds, as Kafka's ``Time.milliseconds()``.

    Sans-I/O code never calls this itself: callers pass ``now`` in, so tests
    can drive time without sleeping.
    """
    return int(time.time() * 1000)
