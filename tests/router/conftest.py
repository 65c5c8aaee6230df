"""The real LiteLLM router (from the role's hash-pinned lock) on loopback in front of simulated engines."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gridready.serving import router
from gridready.spec.router import Route, RouterSpec, RouteTarget
from tests.router.harness import Harness

MODEL = "llama-sim"
CANARY_MODEL = "llama-sim-next"  # its route starts split: batch 70 %, the slow canary tier `next` 30 %
CANARY_BASE = Route(model=CANARY_MODEL, targets=[RouteTarget(tier="batch")])


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    """Tiers `batch` (weight 3) and `hot` (weight 1) behind one model name, `spare` as the fallback tier; keys
    `ci` (no limit) and `tight` (2 requests per minute). Model CANARY_MODEL routes 30 % to `next`, whose time to
    first token (900 ms) breaks a 300 ms SLO."""
    h = Harness.create(tmp_path_factory.mktemp("router"))  # pytest keeps the logs of recent runs
    try:
        for tier in ("batch", "hot", "spare"):
            h.start_engine(tier, MODEL, "--ttft-ms", "5", "--itl-ms", "1", "--seed", "7")
        h.start_engine("next", MODEL, "--ttft-ms", "900", "--itl-ms", "1", "--seed", "7")
        spec = RouterSpec(enabled=True, keys=[{"name": "ci", "vault_var": "k"}], cooldown_s=60, num_retries=1,
                          health_check_interval_s=5)
        route = Route(model=MODEL, targets=[RouteTarget(tier="batch", weight=3), RouteTarget(tier="hot", weight=1)],
                      fallback=["spare"])
        canary = router.with_canary(CANARY_BASE, "next", 30)
        h.start_router(spec, [route, canary], {"ci": None, "tight": 2})
        yield h
    finally:
        h.close()
