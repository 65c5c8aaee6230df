"""The tier router: vllm-router (Rust, the PyPI wheel `vllm-router`) in front of the replicas of one tier.

What it brings that the front router (LiteLLM) lacks, each a documented flag of `vllm-router --help` (0.1.17):
- `--policy cache_aware`: a request goes to the replica whose approximate radix tree of earlier prompts shares the
  longest prefix with it, unless the replicas' loads differ beyond `--balance-abs-threshold`/`--balance-rel-threshold`,
  when the least loaded one takes it (the SGLang router's cache-aware policy, from which vllm-router is forked);
  `round_robin` and `power_of_two` are the load-only alternatives;
- `--health-check-interval-secs`, `--health-failure-threshold`: a replica failing its /health leaves the rotation;
- `--retry-max-retries` with a circuit breaker: a failed request is retried on another replica;
- `GET /list_workers`, `POST /remove_worker?url=`, `POST /add_worker?url=`: the replica set changes at run time, with
  no restart (the drain path: gridready.serving.router_drain).
Measured beside LiteLLM on the same tier (benchmarks/router_overhead.py, docs/layer3.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VERSION = "0.1.17"  # the wheel `vllm-router` on PyPI (cp38-abi3 manylinux_2_28 x86_64)
EXECUTABLE = "vllm-router"
POLICIES = ("cache_aware", "round_robin", "power_of_two")


@dataclass(frozen=True)
class TierRouter:
    """One tier router: where it listens and the replicas (http://<head ip>:<tier port>) it balances."""

    tier: str
    bind: str
    port: int
    workers: tuple[str, ...]
    policy: str = "cache_aware"
    health_check_interval_s: int = 5
    retries: int = 1

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"tier router policy {self.policy!r}: one of {', '.join(POLICIES)}")
        if not self.workers:
            raise ValueError(f"tier {self.tier}: a tier router needs at least one replica")

    @property
    def url(self) -> str:
        return f"http://{self.bind}:{self.port}"


def argv(router: TierRouter) -> list[str]:
    """The router's command line; no secret on it (the replicas check their own API key, which the router passes
    on in the request's Authorization header)."""
    return [EXECUTABLE, "--host", router.bind, "--port", str(router.port), "--worker-urls", *router.workers,
            "--policy", router.policy, "--health-check-interval-secs", str(router.health_check_interval_s),
            "--retry-max-retries", str(router.retries), "--log-level", "warning"]


def worker_changes(listed: Iterable[str], wanted: Iterable[str]) -> tuple[list[str], list[str]]:
    """(to remove, to add) that turn the router's current replicas into the wanted ones, each sorted; URLs compare
    without a trailing slash."""
    have = {u.rstrip("/") for u in listed}
    want = {u.rstrip("/") for u in wanted}
    return sorted(have - want), sorted(want - have)
