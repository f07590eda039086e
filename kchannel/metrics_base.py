"""The names and window settings of kchannel's metrics: :class:`MetricName`
(name, group, tags) and :class:`MetricConfig` (Kafka's
``metrics.num.samples`` and ``metrics.sample.window.ms``).

Apart from :mod:`kchannel.metrics` (which exports them) because its record
path, the twin ``kchannel._metrics_py``, uses them too and is imported by
it: both import them from here.
"""
from dataclasses import dataclass, field

__all__ = ["MetricName", "MetricConfig"]


@dataclass(frozen=True)
class MetricName:
    name: str
    group: str
    description: str = field(default="", compare=False)
    tags: tuple = ()          # sorted tuple of (key, value) pairs, hashable

    @classmethod
    def of(cls, name, group, description="", tags=None):
        return cls(name, group, description, tuple(sorted((tags or {}).items())))

    def __str__(self):
        tags = ",".join(f"{k}={v}" for k, v in self.tags)
        return f"{self.group}:{self.name}" + (f"{{{tags}}}" if tags else "")


@dataclass
class MetricConfig:
    """Window configuration (Kafka's ``metrics.num.samples`` = 2 and
    ``metrics.sample.window.ms`` = 30000)."""
    samples: int = 2
    time_window_ms: int = 30000
