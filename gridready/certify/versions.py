"""Minimum software versions (gate `min_versions`): the driver against the minimum of its branch, DCGM, and where
the spec sets them CUDA (the driver's level nvidia-smi prints) and NCCL. Defaults: ClusterMAX's table
(spec.certification.MinVersions). Severity from the spec: `fail` blocks, `warn` reports, `off` skips. A version the
probe did not read is never a pass: it gets the same severity as one below the minimum. Where the spec lists `dcgm`
in `not_applicable` (no DCGM on those nodes), the DCGM minimum is not checked."""

from __future__ import annotations

import re
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import gpus
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.WARN


def vtuple(v: str) -> tuple[int, ...]:
    """'580.159.03' -> (580, 159, 3); '4.5.3-1' -> (4, 5, 3) (a package revision is not part of the version);
    a non-numeric part ends the version."""
    out = []
    for part in re.split(r"[-+~ ]", str(v).strip())[0].split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def read_versions(doc: dict[str, Any]) -> dict[str, str | None]:
    smi = doc.get("nvidia_smi") or {}
    q = smi.get("q") or {}
    drivers = {str(g["query"].get("driver_version")) for g in gpus(doc) if g["query"].get("driver_version")}
    driver = q.get("driver_version") or (sorted(drivers)[0] if drivers else None)
    dcgm = ((doc.get("dcgm") or {}).get("parsed") or {}).get("version")
    t = doc.get("torch") or {}
    return {"driver": str(driver) if driver else None, "dcgm": str(dcgm) if dcgm else None,
            "cuda": str(q["cuda_version"]) if q.get("cuda_version") else None,
            "nccl": str((t.get("allreduce") or {}).get("nccl") or "") or None}


def _check(name: str, have: str | None, minimum: str) -> str | None:
    """Why `have` does not meet `minimum`, or None."""
    if have is None:
        return f"{name} version not read (minimum {minimum})"
    if not vtuple(have) or vtuple(have) < vtuple(minimum):
        return f"{name} {have} < {minimum}"
    return None


def min_versions(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    mv = exp.spec.min_versions
    if mv.severity == "off":
        return [exp.result("min_versions", GateStatus.SKIPPED, "minimum versions not checked "
                           "(certification.min_versions.severity: off)", required=False)]
    have = read_versions(doc)
    wanted: dict[str, str] = {}
    problems: list[str] = []
    driver = have["driver"]
    branches = {m.split(".")[0]: m for m in mv.driver}
    if branches:
        branch = driver.split(".")[0] if driver else None
        if driver is None:
            problems.append("driver version not read")
        elif branch not in branches:
            problems.append(f"driver {driver}: branch {branch} is not in the table ({', '.join(sorted(branches))})")
        elif why := _check("driver", driver, branches[branch]):
            problems.append(why)
        if branch in branches:
            wanted["driver"] = branches[branch]
    for name in ("dcgm", "cuda", "nccl"):
        minimum = getattr(mv, name)
        if name == "dcgm" and "dcgm" in exp.spec.not_applicable:
            continue  # the spec says DCGM does not run on these nodes: its minimum does not apply either
        if minimum:
            wanted[name] = minimum
            if why := _check(name.upper() if name != "driver" else name, have[name], minimum):
                problems.append(why)
    expected = Expected(equals={k: f">= {v}" for k, v in wanted.items()}, source=f"spec: {mv.source}")
    kw: dict[str, Any] = {"measured": have, "expected": expected, "evidence": "raw.nvidia_smi_q, dcgm.parsed"}
    if problems:
        status = F if mv.severity == "fail" else W
        return [exp.result("min_versions", status, "below the minimum versions: " + "; ".join(problems), **kw)]
    return [exp.result("min_versions", P, "versions at or above the minimums: " + ", ".join(
        f"{k} {have[k]} >= {v}" for k, v in wanted.items()), **kw)]
