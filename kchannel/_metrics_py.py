"""The record path of :mod:`kchannel.metrics`: its stats and :class:`Sensor`.

Kafka's ``SampledStat`` windows (:class:`Rate`, :class:`Avg`, :class:`Max`),
its cumulative stats (:class:`CumulativeSum`, :class:`CumulativeCount`,
:class:`CumulativeSumCount`), :class:`Value`, and the :class:`Sensor` that
records a value into every stat attached to it and then into its parents
(Kafka's sensor hierarchy).  ``kchannel.metrics`` re-exports them; import
them from there.

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel._cmetrics``, where
``_cmetrics.pxd`` makes every stat and the sensor extension types whose
windows, sums and counts are C fields (``double``: Kafka's stats are
doubles) and ``record`` / ``record_many`` C methods: a sensor's
``record()`` is one call from Python that updates all its stats (and its
parents') in C, instead of one interpreted call per stat.  Pure Python runs
the same code with ``__slots__``.

Time is epoch milliseconds supplied by the caller.  A stat's ``record`` is
called from one thread (the client's I/O thread); ``measure`` may be
called from others.
"""
import math

from .metrics_base import MetricConfig, MetricName

__all__ = ["Sample", "Stat", "Rate", "Avg", "Max", "CumulativeSum", "CumulativeSumCount",
           "CumulativeCount", "Value", "Sensor", "one_by_one"]

_NAN = math.nan
_NEG_INF = -math.inf


class Sample:
    """One window of a sampled stat (Kafka's ``SampledStat.Sample``):
    ``start`` (ms the window opened), ``value`` (what the stat folds the
    window's values into: their sum, their maximum...) and ``count`` (events
    recorded in it)."""

    __slots__ = ("start", "value", "count")

    def __init__(self, start, value, count=0):
        self.start = start
        self.value = value
        self.count = count

    def __repr__(self):
        return f"Sample(start={self.start!r}, value={self.value!r}, count={self.count!r})"

    def __eq__(self, other):
        if other.__class__ is not Sample:
            return NotImplemented
        return (self.start, self.value, self.count) == (other.start, other.value, other.count)


class Stat:
    """What a :class:`Sensor` records into: ``record(value, now)``,
    ``record_many(values, now)`` (the same as recording each value in turn
    at ``now``) and ``measure(now)``."""

    __slots__ = ()

    def __init__(self):
        pass

    def record(self, value, now):
        raise NotImplementedError

    def record_many(self, values, now):
        """``record(v, now)`` for each of ``values``, in order."""
        for v in values:
            self.record(v, now)

    def measure(self, now):
        raise NotImplementedError


class _SampledStat(Stat):
    """Kafka's SampledStat: values fall into ``config.samples`` rolling
    windows of ``config.time_window_ms`` (read once, at construction)."""

    __slots__ = ("config", "_samples", "_window", "_nsamples", "_init")

    def __init__(self, config=None):
        if config is None:
            config = MetricConfig()
        self.config = config
        # the windows, oldest first (Sample: start ms, value, event count)
        self._samples = []
        self._window = config.time_window_ms
        self._nsamples = config.samples
        self._init = 0.0        # a new window's value (Max: -inf)

    def _open(self, now):
        """The window ``now`` falls in, opened (and the oldest dropped
        beyond ``config.samples``) when the last one is over."""
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self._window:
                return cur
        cur = Sample(now, self._init)
        samples.append(cur)
        if len(samples) > self._nsamples:
            del samples[0]
        return cur

    def _rest_into_current(self, values, now):
        """After ``record(values[0], now)``: the current sample to fold the
        remaining values into, or None when they must go one by one (a
        zero-length window opens a sample per value)."""
        if len(values) < 2 or self._window <= 0:
            return None
        return self._samples[-1]

    def _live(self, now):
        """Samples still inside the window (read-only: measuring from another
        thread never races with the recording thread's appends)."""
        limit = self._nsamples * self._window
        return [s for s in list(self._samples) if now - s.start < limit]


class Rate(_SampledStat):
    """Value recorded per second (``count=True``: events per second, Kafka's
    WindowedCount under a Rate; ``per_ns=True`` makes it a ratio of
    nanoseconds per nanosecond, as Kafka's io-ratio / io-wait-ratio)."""

    __slots__ = ("count", "per_ns")

    def __init__(self, config=None, count=False, per_ns=False):
        _SampledStat.__init__(self, config)
        self.count = count          # WindowedCount: count events, not values
        self.per_ns = per_ns

    def record(self, value, now):
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self._window:
                if self.count:
                    cur.value += 1
                else:
                    cur.value += value
                cur.count += 1
                return
        cur = self._open(now)
        if self.count:
            cur.value += 1
        else:
            cur.value += value
        cur.count += 1

    def record_many(self, values, now):
        # same sample state as recording the values one by one at ``now``
        n = len(values)
        if n == 0:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for i in range(1, n):
                self.record(values[i], now)
            return
        if self.count:
            cur.value += n - 1
        else:
            acc = cur.value
            for i in range(1, n):
                x = values[i]
                # (an int through a C integer, compiled: see Sensor.record)
                if type(x) is int:
                    ix = x
                    acc += ix
                else:
                    dx = x
                    acc += dx
            cur.value = acc
        cur.count += n - 1

    @staticmethod
    def view_of(stat, count=False, per_ns=False):
        """A Rate measured from ``stat``'s samples (an :class:`Avg`'s hold
        each window's sum and event count), never recorded itself: the same
        value a Rate recorded with the same values at the same times would
        measure, at no cost per record."""
        view = Rate(stat.config, count=count, per_ns=per_ns)
        view._samples = stat._samples
        return view

    def measure(self, now):
        live = self._live(now)
        # a count Rate's sample value equals its event count, which a
        # view over an Avg's samples (value = the sum) must use
        total = 0.0
        if self.count:
            for s in live:
                total += s.count
        else:
            for s in live:
                total += s.value
        elapsed_ms = now - (live[0].start if live else now)
        full = elapsed_ms // self._window
        min_full = self._nsamples - 1
        # Kafka pads young windows so a single early event is not reported as
        # a huge rate.
        if full < min_full:
            elapsed_ms += (min_full - full) * self._window
        if elapsed_ms <= 0:
            return 0.0
        if self.per_ns:
            return total / (elapsed_ms * 1e6)
        return total / (elapsed_ms / 1000.0)


class Avg(_SampledStat):
    """Kafka's Avg: the mean of the values in the live windows."""

    __slots__ = ()

    def __init__(self, config=None):
        _SampledStat.__init__(self, config)

    def record(self, value, now):
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self._window:
                cur.value += value
                cur.count += 1
                return
        cur = self._open(now)
        cur.value += value
        cur.count += 1

    def record_many(self, values, now):
        n = len(values)
        if n == 0:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for i in range(1, n):
                self.record(values[i], now)
            return
        acc = cur.value
        for i in range(1, n):
            x = values[i]
            if type(x) is int:
                ix = x
                acc += ix
            else:
                dx = x
                acc += dx
        cur.value = acc
        cur.count += n - 1

    def measure(self, now):
        live = self._live(now)
        count = 0
        total = 0.0
        for s in live:
            count += s.count
            total += s.value
        if count == 0:
            return _NAN
        return total / count


class Max(_SampledStat):
    """Kafka's Max: the largest value in the live windows."""

    __slots__ = ()

    def __init__(self, config=None):
        _SampledStat.__init__(self, config)
        self._init = _NEG_INF

    def record(self, value, now):
        samples = self._samples
        if samples:
            cur = samples[-1]
            if now - cur.start < self._window:
                # same result as max(cur.value, value), NaN included (a
                # double, as Kafka's: the compiled twin's is one)
                if value > cur.value:
                    cur.value = float(value)
                cur.count += 1
                return
        cur = self._open(now)
        if value > cur.value:
            cur.value = float(value)
        cur.count += 1

    def record_many(self, values, now):
        n = len(values)
        if n == 0:
            return
        self.record(values[0], now)
        cur = self._rest_into_current(values, now)
        if cur is None:
            for i in range(1, n):
                self.record(values[i], now)
            return
        m = cur.value
        for i in range(1, n):
            x = values[i]
            if type(x) is int:
                ix = x
                v = ix
            else:
                v = x
            if v > m:
                m = v
        cur.value = float(m)
        cur.count += n - 1

    def measure(self, now):
        found = False
        m = _NEG_INF
        for s in self._live(now):
            if s.count:
                # as max() over the windows' values: the first, then any greater
                if not found or s.value > m:
                    m = s.value
                found = True
        if not found:
            return _NAN
        return m


class CumulativeSum(Stat):
    """Kafka's CumulativeSum: the sum of every value recorded."""

    __slots__ = ("total",)

    def __init__(self, initial=0.0):
        self.total = float(initial)

    def record(self, value, now):
        self.total += value

    def record_many(self, values, now):
        total = self.total
        for x in values:
            if type(x) is int:
                ix = x
                total += ix
            else:
                dx = x
                total += dx
        self.total = total

    def measure(self, now):
        return self.total


class CumulativeSumCount(CumulativeSum):
    """A CumulativeSum that also counts the values recorded; :meth:`count_view`
    is the CumulativeCount of the same records (one record feeds both)."""

    __slots__ = ("count",)

    def __init__(self, initial=0.0):
        CumulativeSum.__init__(self, initial)
        self.count = 0

    def record(self, value, now):
        self.total += value
        self.count += 1

    def record_many(self, values, now):
        total = self.total
        for x in values:
            if type(x) is int:
                ix = x
                total += ix
            else:
                dx = x
                total += dx
        self.total = total
        self.count += len(values)

    def count_view(self):
        return _CountView(self)


class _CountView:
    """The count of a :class:`CumulativeSumCount`, as a metric of its own
    (fed through the viewed stat, never recorded itself)."""

    __slots__ = ("stat",)

    def __init__(self, stat):
        self.stat = stat

    def record(self, value, now):   # fed through the viewed stat
        pass

    def measure(self, now):
        return float(self.stat.count)


class CumulativeCount(CumulativeSum):
    """Kafka's CumulativeCount: the number of values recorded."""

    __slots__ = ()

    def __init__(self, initial=0.0):
        CumulativeSum.__init__(self, initial)

    def record(self, value, now):
        self.total += 1

    def record_many(self, values, now):
        self.total += len(values)


class Value(Stat):
    """Kafka's Value: the last value recorded."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = _NAN

    def record(self, value, now):
        self.value = float(value)

    def record_many(self, values, now):
        for v in values:
            self.value = float(v)

    def measure(self, now):
        return self.value


class Sensor:
    """Records a value into every stat attached to it, then into its
    ``parents`` (Kafka's sensor hierarchy: a parent records every value of
    each of its children, after the child's own stats)."""

    __slots__ = ("registry", "name", "parents", "_stats", "_recorders", "_fast", "_other",
                 "_other_many", "__weakref__")

    def __init__(self, registry, name, parents=()):
        self.registry = registry
        self.name = name
        self.parents = list(parents)
        self._stats = []
        self._recorders = []    # bound stat.record of every stat, in order
        self._fast = []         # the Stat instances recorded (C calls, compiled)
        self._other = []        # record of any other recorded stat
        self._other_many = []   # its record_many (or one record per value)

    def add(self, metric_name, stat):
        self.registry._register(metric_name, stat)
        self._stats.append(stat)
        self._recorders.append(stat.record)
        if isinstance(stat, Stat):
            self._fast.append(stat)
        else:
            self._other.append(stat.record)
            self._other_many.append(getattr(stat, "record_many", None) or one_by_one(stat))
        return self

    def add_view(self, metric_name, stat):
        """Register a metric measured from ``stat`` without recording into
        it from this sensor (a view of a stat fed elsewhere, or an alias of
        one); removed with the sensor."""
        self.registry._register(metric_name, stat)
        self._stats.append(stat)
        return self

    def add_meter(self, group, base, description="", tags=None, count=False):
        """Kafka's Meter: ``<base>-rate`` (per second) and ``<base>-total``."""
        rate_name = MetricName.of(f"{base}-rate", group,
                                  f"The number of {description} per second", tags)
        total_name = MetricName.of(f"{base}-total", group,
                                   f"The total number of {description}", tags)
        self.add(rate_name, Rate(self.registry.config, count=count))
        self.add(total_name, CumulativeCount() if count else CumulativeSum())
        return self

    def recorders(self):
        """The bound ``record(value, now)`` of every stat of this sensor (the
        live list: stats added later are in it).  Its parents' are not in
        it; :meth:`record` is one call for all of them."""
        return self._recorders

    def record(self, value=1.0, now=None):
        # Sensors are recorded from the single I/O thread; readers in other
        # threads only measure, which tolerates a concurrent append under
        # the GIL, so the hot path takes no lock.
        if now is None:
            now = self.registry.time()
        fast = self._fast
        if fast:
            # The value and the time as C doubles once for every stat
            # (compiled; pure Python: themselves).  An int goes through a C
            # integer: a double's conversion of an int builds a float
            # object first (epoch milliseconds take its slowest path).
            # (type(x), not x.__class__: compiled, type(x) is int is a
            # pointer comparison, x.__class__ a generic attribute lookup,
            # ~300 instructions each, two per call)
            if type(value) is int:
                iv = value
                v = iv
            else:
                v = value
            if type(now) is int:
                it = now
                t = it
            else:
                t = now
            for stat in fast:
                stat.record(v, t)
        if self._other:
            for record in self._other:
                record(value, now)
        if self.parents:
            for parent in self.parents:
                parent.record(value, now)

    def record_many(self, values, now=None):
        """``record(v, now)`` for each of ``values`` (a sequence), with one
        call per stat instead of one per stat and value."""
        if not values:
            return
        if now is None:
            now = self.registry.time()
        if len(values) == 1:
            # the usual case (one request or response per poll)
            self.record(values[0], now)
            return
        fast = self._fast
        if fast:
            if type(now) is int:
                it = now
                t = it
            else:
                t = now
            for stat in fast:
                stat.record_many(values, t)
        if self._other_many:
            for record_many in self._other_many:
                record_many(values, now)
        if self.parents:
            for parent in self.parents:
                parent.record_many(values, now)


def one_by_one(stat):
    """A ``record_many(values, now)`` recording each value into ``stat``."""
    def record_many(values, now):
        for v in values:
            stat.record(v, now)
    return record_many
