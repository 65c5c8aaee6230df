"""Measured and expected values as a person writes them: `Gen4 x8`, `>= 312 GB/s`, `count 2, device 0x2335`."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gridready.certify.result import Expected, GateResult

MAX_CHARS = 140  # a table cell, not a dump: longer texts end in an ellipsis (the JSON report keeps everything)


def number(x: float | int, unit: str | None = None) -> str:
    text = f"{x:.4g}" if isinstance(x, float) else str(x)
    return f"{text} {unit}" if unit else text


def _shown(k: str, v: Any, long: bool, keep: Collection[str]) -> bool:
    """A dict entry worth a cell: set, and in a long dict (error counters) not a zero unless it is compared."""
    empty = v is None or (isinstance(v, dict | list | tuple | set | frozenset) and not v)
    return not empty and (k in keep or not (long and v in (0, False)))


def _grouped(v: Any) -> bool:
    """A dict value written in parentheses: a nested dict, or a list of several items."""
    return isinstance(v, dict) or (isinstance(v, list | tuple | set | frozenset) and len(v) > 1)


def _value(x: Any, keep: Collection[str] = ()) -> str:
    """Any measured/expected value as words: `key value, key value`, a nested dict or list in parentheses, list items
    joined by commas (dicts among them by semicolons). Never a Python repr. `keep`: keys shown even when 0."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float | int):
        return number(x)
    if isinstance(x, dict):
        long = len(x) > 4
        parts = [f"{k} ({_value(v)})" if _grouped(v) else f"{k} {_value(v)}"
                 for k, v in x.items() if _shown(k, v, long, keep)]
        return ", ".join(parts) or "none"
    if isinstance(x, set | frozenset):
        return _value(sorted(x, key=str))
    if isinstance(x, list | tuple):
        sep = "; " if any(isinstance(v, dict | list | tuple) for v in x) else ", "
        return sep.join(_value(v) for v in x) or "none"
    return str(x)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def _pcie(m: dict[str, Any]) -> str:
    """The link as trained (under load when read then, else at idle) and what the endpoint is capable of."""
    gen = m.get("gen_load") or m.get("gen_idle") or m.get("gen_current")
    width = m.get("width_load") or m.get("width_idle") or m.get("width_current")
    when = " under load" if m.get("gen_load") else ""
    text = f"Gen{gen} x{width}{when}" if gen or width else "not readable"
    cap_gen, cap_width = m.get("gen_max"), m.get("width_max")
    if cap_gen or cap_width:
        text += f" (capable Gen{cap_gen} x{cap_width})"
    if m.get("replays"):
        text += f", {m['replays']} replays"
    return text


def _allreduce(m: dict[str, Any], unit: str | None) -> str:
    best = m.get("max_busbw_gbps")
    if best is None:
        return _value({k: v for k, v in m.items() if k != "sweep"})
    text = f"{number(best, unit)} busbw"
    if m.get("at_bytes"):
        text += f" at {m['at_bytes'] / 2**20:g} MiB"
    if m.get("algo"):
        text += f" ({m['algo']})"
    if m.get("wrong"):
        text += f", #wrong {m['wrong']}"
    return text


def measured_text(r: GateResult) -> str:
    m = r.measured
    if m is None:
        return ""
    if r.gate == "pcie_link" and isinstance(m, dict):
        return _clip(_pcie(m))
    if r.gate == "nccl_allreduce" and isinstance(m, dict):
        return _clip(_allreduce(m, r.unit))
    if r.gate == "iommu" and isinstance(m, dict):
        return _clip(_value({k: v for k, v in m.items() if k != "cmdline"}))
    if isinstance(m, float | int) and not isinstance(m, bool):
        return number(m, r.unit)
    compared = r.expected.equals if r.expected and isinstance(r.expected.equals, dict) else {}
    text = _value(m, keep=tuple(compared))
    return _clip(f"{text} {r.unit}" if r.unit and isinstance(m, dict) and text else text)


def expected_text(e: Expected | None, unit: str | None = None) -> str:
    if e is None:
        return ""
    parts = []
    if e.floor is not None:
        parts.append(f">= {number(e.floor, unit)}")
    if e.ceiling is not None:
        parts.append(f"<= {number(e.ceiling, unit)}")
    if e.equals is not None:
        parts.append(_value(e.equals) if e.equals != [] else "none")
    text = " and ".join(parts)
    if e.source:
        text += f" ({e.source})"
    return _clip(text)
