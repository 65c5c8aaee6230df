"""Ray membership of the simulated engine: a ray_member.py child under the host's Ray interpreter."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("gridready.sim")

RAY_PYTHONS = ("/opt/ray/venv/bin/python3", "/opt/rayvenv/bin/python3")


def find_ray_python(explicit: str | None) -> str | None:
    """The interpreter that can `import ray`: --ray-python, this one, or a known host venv."""
    if explicit:
        return explicit if Path(explicit).exists() else None
    if importlib.util.find_spec("ray") is not None:
        return sys.executable
    return next((p for p in RAY_PYTHONS if Path(p).exists()), None)


class RayLink:
    """Holds the ray_member child; its stdin stays open while the engine lives."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.status: dict[str, Any] = {"ray": "standalone", "reason": "no --ray-address given"}

    async def join(self, address: str, name: str, info: dict[str, Any], python: str | None,
                   timeout_s: float, world_size: int = 0) -> bool:
        """Join as a driver; with world_size > 0 also place the ranks as vLLM's Ray executor does (ray_member.py)."""
        exe = find_ray_python(python)
        if exe is None:
            self.status = {"ray": "standalone", "address": address,
                           "reason": f"no Ray interpreter found (tried --ray-python, {', '.join(RAY_PYTHONS)})"}
            return False
        member = str(Path(__file__).with_name("ray_member.py"))
        self.proc = await asyncio.create_subprocess_exec(
            exe, member, "--address", address, "--name", name, "--info", json.dumps(info),
            "--world-size", str(world_size), "--engine-dir", str(Path(__file__).resolve().parent),
            "--pg-timeout", str(timeout_s),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None)
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout_s)
            event = json.loads(line or b'{"event": "ray-failed", "error": "ray_member exited silently"}')
        except (TimeoutError, ValueError) as err:
            event = {"event": "ray-failed", "error": f"no answer from ray_member in {timeout_s:.0f} s ({err!r})"}
        if event.get("event") == "ray-joined":
            self.status = {"ray": "joined", "python": exe, **event}
            return True
        self.status = {"ray": "standalone", "address": address, "python": exe,
                       "reason": f"ray join failed: {event.get('error')}"}
        await self.close()
        return False

    async def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None
