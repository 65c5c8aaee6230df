"""gpu-burn (burn-in profile, where installed): parse the per-GPU verdicts; NEVER trust its exit code
(it exits 0 with every GPU FAULTY, gpu-burn#12)."""

from __future__ import annotations

import re
from typing import Any

from .tools import run

_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$")


def parse(text: str) -> dict[str, Any]:
    """-> {tested: n | None, gpus: {idx: 'OK'|'FAULTY'}, warnings: count of negative-error WARNING marks}."""
    tested = re.search(r"Tested (\d+) GPUs", text)
    gpus = {m.group(1): m.group(2) for ln in text.splitlines() if (m := _VERDICT.match(ln))}
    return {"tested": int(tested.group(1)) if tested else None, "gpus": gpus, "warnings": text.count("WARNING!")}


def collect(seconds: int, timeout_s: float) -> dict[str, Any]:
    res = run(["gpu_burn", "-d", "-tc", str(seconds)], timeout_s=timeout_s)
    return {"present": not res["absent"], "rc": res["rc"], "timed_out": res["timed_out"],
            "parsed": parse(res["stdout"]) if not res["absent"] else None, "stdout_tail": res["stdout"][-4000:]}
