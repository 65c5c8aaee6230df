"""A tiny Prometheus text-format registry (the engine is stdlib-only, so no prometheus_client here)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import TypeVar

Labels = tuple[tuple[str, str], ...]


def _fmt_labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    body = ",".join(f'{k}="{v}"' for k, v in items)
    return "{" + body + "}"


def _fmt_value(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


@dataclass
class Metric:
    name: str
    help: str
    kind: str  # counter | gauge | histogram
    values: dict[Labels, float] = field(default_factory=dict)

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = value

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        lines += [f"{self.name}{_fmt_labels(lb)} {_fmt_value(v)}" for lb, v in self.values.items()]
        return lines


@dataclass
class Histogram:
    name: str
    help: str
    buckets: tuple[float, ...]
    series: dict[Labels, list[float]] = field(default_factory=dict)  # bucket counts + [sum, count]

    def observe(self, labels: Labels, value: float) -> None:
        row = self.series.setdefault(labels, [0.0] * (len(self.buckets) + 2))
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.buckets):
            row[i] += 1
        row[-2] += value
        row[-1] += 1

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for lb, row in self.series.items():
            cum = 0.0
            for le, n in zip(self.buckets, row[: len(self.buckets)], strict=True):
                cum += n
                lines.append(f"{self.name}_bucket{_fmt_labels(lb, (('le', _fmt_value(le)),))} {_fmt_value(cum)}")
            lines.append(f"{self.name}_bucket{_fmt_labels(lb, (('le', '+Inf'),))} {_fmt_value(row[-1])}")
            lines.append(f"{self.name}_sum{_fmt_labels(lb)} {_fmt_value(row[-2])}")
            lines.append(f"{self.name}_count{_fmt_labels(lb)} {_fmt_value(row[-1])}")
        return lines


_M = TypeVar("_M", "Metric", "Histogram")


class Registry:
    def __init__(self) -> None:
        self._items: dict[str, Metric | Histogram] = {}

    def counter(self, name: str, help_: str) -> Metric:
        return self._add(Metric(name, help_, "counter"))

    def gauge(self, name: str, help_: str) -> Metric:
        return self._add(Metric(name, help_, "gauge"))

    def histogram(self, name: str, help_: str, buckets: tuple[float, ...]) -> Histogram:
        return self._add(Histogram(name, help_, buckets))

    def _add(self, m: _M) -> _M:
        self._items[m.name] = m
        return m

    def render(self) -> str:
        out: list[str] = []
        for m in self._items.values():
            out += m.render()
        return "\n".join(out) + "\n"
