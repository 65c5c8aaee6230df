"""Scale the timing profile by the host's SIMULATED hardware (/etc/gridready-sim/profile.json on sandbox hosts).

Decode is memory-bound, so ITL scales with HBM bandwidth (H100 SXM 3.35 TB/s is the baseline; H200 4.8 TB/s gives
x0.70); prefill is compute-bound and H100/H200 share the compute. A throttled GPU (hw_slowdown, power_brake,
thermal_throttle) slows the whole tensor-parallel group: every delay x1.5.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from .profile import Profile

DEFAULT_PATH = "/etc/gridready-sim/profile.json"
HBM_TBPS = {"H100": 3.35, "H200": 4.8}  # SXM parts; the key is matched in the SKU name
THROTTLES = {"hw_slowdown", "power_brake", "thermal_throttle"}
THROTTLE_FACTOR = 1.5


def resolve_path(arg: str) -> Path | None:
    """--hardware-profile: 'auto' = $GRIDREADY_SIM_PROFILE or the sandbox path if present; 'none' = off."""
    if arg == "none":
        return None
    if arg != "auto":
        return Path(arg)
    env = os.environ.get("GRIDREADY_SIM_PROFILE")
    for p in (env, DEFAULT_PATH):
        if p and Path(p).is_file():
            return Path(p)
    return None


def apply(profile: Profile, path: Path | None) -> tuple[Profile, dict[str, Any]]:
    """The scaled profile and what was applied (for /gridready/info and the log)."""
    if path is None:
        return profile, {"hardware": "none"}
    data = json.loads(path.read_text())
    sku = str(data.get("sku", ""))
    bw = next((v for k, v in HBM_TBPS.items() if k in sku.upper()), HBM_TBPS["H100"])
    decode = HBM_TBPS["H100"] / bw
    throttled = sorted({f["kind"] for f in data.get("faults", []) if f.get("kind") in THROTTLES})
    slow = THROTTLE_FACTOR if throttled else 1.0
    scaled = dataclasses.replace(profile, itl_ms=profile.itl_ms * decode * slow, ttft_ms=profile.ttft_ms * slow,
                                 prefill_us_per_token=profile.prefill_us_per_token * slow)
    return scaled, {"hardware": str(path), "sku": sku, "decode_factor": round(decode, 3),
                    "throttle_faults": throttled, "throttle_factor": slow}
