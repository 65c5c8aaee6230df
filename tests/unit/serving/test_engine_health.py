"""The engine health check of roles/gridready_engine_health (run by its timer on the hosts): when it restarts an
engine unit, and its probe against a server that answers, fails and hangs."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import socket
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gridready.serving import topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

SCRIPT = Path(__file__).resolve().parents[3] / "roles" / "gridready_engine_health" / "files" / "gridready-engine-health"
CFG = {"failures": 3, "startup_grace_s": 600, "timeout_s": 2}


def _load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("gridready_engine_health", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


health = _load()


def _unit(invocation: str = "a", started_s: float = 100.0, state: str = "active") -> dict[str, str]:
    return {"ActiveState": state, "InvocationID": invocation,
            "ActiveEnterTimestampMonotonic": str(int(started_s * 1e6))}


def _ticks(answers: list[bool], unit: dict[str, str], now: float = 200.0) -> list[bool]:
    state: dict[str, Any] = {}
    restarts = []
    for healthy in answers:
        state, restart = health.decide(state, unit, healthy, now, CFG)
        restarts.append(restart)
    return restarts


def test_a_healthy_engine_is_left_alone() -> None:
    assert _ticks([True] * 10, _unit()) == [False] * 10


def test_three_failures_in_a_row_after_it_answered_restart_it() -> None:
    assert _ticks([True, False, False, False], _unit()) == [False, False, False, True]


def test_an_answer_between_failures_resets_the_count() -> None:
    assert _ticks([True, False, False, True, False, False, True], _unit()) == [False] * 7


def test_a_loading_engine_is_not_restarted_within_the_grace() -> None:
    # started 100 s ago, never answered, grace 600 s: the model is still loading
    assert _ticks([False] * 10, _unit(started_s=100.0), now=200.0) == [False] * 10


def test_an_engine_that_never_answers_is_restarted_after_the_grace() -> None:
    assert _ticks([False] * 3, _unit(started_s=100.0), now=800.0) == [False, False, True]


def test_a_unit_that_is_not_active_is_left_to_systemd() -> None:
    for state in ("activating", "inactive", "failed", "deactivating"):
        assert _ticks([True, False, False, False, False], _unit(state=state)) == [False] * 5


def test_a_new_start_of_the_unit_starts_the_count_again() -> None:
    state: dict[str, Any] = {}
    for healthy in (True, False, False):
        state, restart = health.decide(state, _unit("first"), healthy, 200.0, CFG)
        assert not restart
    # the unit was restarted (by systemd or an operator): a new invocation, loading again within its grace
    state, restart = health.decide(state, _unit("second", started_s=190.0), False, 200.0, CFG)
    assert not restart and state == {"invocation": "second", "healthy_once": False, "failures": 0}


class _Server:
    """A TCP listener on loopback that answers 200, 503, or accepts and never answers (a hung engine)."""

    def __init__(self, mode: str) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.mode = mode
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "hang":
                self.held.append(conn)
                continue
            conn.recv(4096)
            status = b"200 OK" if self.mode == "ok" else b"503 Service Unavailable"
            conn.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize(("mode", "healthy", "answer"), [
    ("ok", True, "HTTP 200"), ("busy", False, "HTTP 503"), ("hang", False, "TimeoutError")])
def test_the_probe_against_a_real_listener(mode: str, healthy: bool, answer: str) -> None:
    server = _Server(mode)
    try:
        got = health.probe(f"http://127.0.0.1:{server.port}/health", 0.5)
    finally:
        server.close()
    assert got[0] is healthy and answer in got[1], got


def test_a_refused_connection_is_a_failure() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    healthy, answer = health.probe(f"http://127.0.0.1:{port}/health", 0.5)
    assert not healthy and "refused" in answer.lower(), answer


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_engine_gets_its_units_health_url(make_inv, engine: str) -> None:
    """The controller hands each engine role its units and their public health routes (vLLM /health on the
    head, SGLang /health on rank 0) and the spec's settings as the role's extra variables."""
    tier = vllm_tier(**({"name": "llama-sgl", "engine": "sglang"} if engine == "sglang" else {}))
    inv = make_inv(2, [tier])
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    plans = topology.plan_tiers(inv, cert)
    extra = serve_config.hosts_extravars(inv, cert, plans)
    assert extra["gridready_engine_health_failures"] == inv.spec.serving.engine_health.failures == 3
    assert extra["gridready_engine_health_enabled"] is True
    serve = extra["gridready_serve"]
    checks = [t["health"] for t in serve["tiers"]] + [u["health"] for u in serve.get("sglang_units", [])
                                                      if "health" in u]
    head_ip = cert.certified[plans[0].replicas[0].head].ip
    prefix = "vllm" if engine == "vllm" else "sglang"
    assert checks == [{"unit": f"{prefix}-{tier['name']}", "url": f"http://{head_ip}:8000/health"}]
    json.dumps(extra)  # extra variables travel as JSON
