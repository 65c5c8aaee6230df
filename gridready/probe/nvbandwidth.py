"""nvbandwidth (where installed): copy-engine bandwidth matrices per testcase, used when torch is absent.

Format (v0.6): `Running <testcase>.`, a title line, a column header of indices, one row per source (`0  369.36 ...`,
`N/A` for the diagonal), then `SUM <testcase> <GB/s>`; a waived testcase prints `Waived:`.
"""

from __future__ import annotations

import re
from typing import Any

from .tools import run

TESTCASES = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce")


def parse(text: str) -> dict[str, Any]:
    """-> {version, tests: {testcase: {matrix: {row: {col: GB/s | None}}, sum: GB/s}}}."""
    out: dict[str, Any] = {"version": None, "tests": {}}
    cur: dict[str, Any] | None = None
    cols: list[str] = []
    for ln in text.splitlines():
        s = ln.strip()
        if m := re.match(r"nvbandwidth Version: (\S+)", s):
            out["version"] = m.group(1)
        elif m := re.match(r"Running (\w+)\.", s):
            cur = {"matrix": {}, "sum": None}
            out["tests"][m.group(1)] = cur
            cols = []
        elif m := re.match(r"SUM (\w+) ([\d.]+)", s):
            out["tests"].setdefault(m.group(1), {"matrix": {}, "sum": None})["sum"] = float(m.group(2))
            cur = None
        elif cur is not None and s and all(t.isdigit() for t in s.split()):
            cols = s.split()
        elif cur is not None and cols and (m := re.match(r"^(\d+)\s+(.*)$", s)):
            vals = m.group(2).split()
            cur["matrix"][m.group(1)] = {c: (float(v) if re.match(r"^[\d.]+$", v) else None)
                                        for c, v in zip(cols, vals, strict=False)}
    return out


def collect(timeout_s: float) -> dict[str, Any]:
    raw, tests = [], {}
    for tc in TESTCASES:
        res = run(["nvbandwidth", "-t", tc], timeout_s=timeout_s)
        if res["absent"]:
            return {"present": False}
        raw.append(res["stdout"])
        tests.update(parse(res["stdout"])["tests"])
    return {"present": True, "tests": tests, "raw": "\n".join(raw)}


def per_gpu(parsed_tests: dict[str, Any], testcase: str) -> dict[int, float]:
    """host<->device testcases: the CPU row 0 entry of each GPU column."""
    row = (parsed_tests.get(testcase) or {}).get("matrix", {}).get("0", {})
    return {int(c): v for c, v in row.items() if v is not None}
