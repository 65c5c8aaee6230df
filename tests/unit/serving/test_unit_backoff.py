"""Engine and router units back off and give up (issue #43, finding 5).

They restarted every 5-10 s for good (StartLimitIntervalSec=0, or systemd's default 10 s window that a 10 s
RestartSec never fills), so a bad option reloaded a 70B model in a loop. Now each unit allows a few starts an hour
(systemd.unit(5) StartLimitIntervalSec=/StartLimitBurst=), waits 120 s between tries on systemd < 254 (Ubuntu
22.04's 249, Debian 12's 252) and grows the wait 15 s -> 600 s on 254+ (systemd.service(5) RestartSteps=,
RestartMaxDelaySec=, "Added in version 254"; Debian 13's 257). The router is tied to the firewall as the engines.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.unit.serving.test_firewall_boot import ROLES, _render

FW = "gridready-firewall.service"
DEFAULT_WINDOW_S, DEFAULT_BURST = 10, 5  # systemd's DefaultStartLimitIntervalSec= / DefaultStartLimitBurst=
ITEM = {"name": "t", "served_name": "m", "ray_address": "10.0.0.1:6379", "expected_gpus": 8, "expected_nodes": 1,
        "args": [], "node_rank": 0, "nnodes": 1}


def _units(version: int) -> dict[str, dict[tuple[str, str], list[str]]]:
    facts = {"ansible_facts": {"systemd": {"version": version}}}
    return {
        "vllm": _render(ROLES / "gridready_vllm", "vllm.service.j2", item=ITEM, gridready_vllm_version="0",
                        gridready_vllm_user="ray", gridready_vllm_wait_script="w", gridready_vllm_venv="/v",
                        gridready_vllm_wait_timeout_s=600, __gridready_vllm_command=["vllm"], **facts),
        "sglang": _render(ROLES / "gridready_sglang", "sglang.service.j2", item=ITEM, gridready_sglang_pip_spec="s",
                          gridready_sglang_user="sglang", gridready_sglang_api_key="",
                          __gridready_sglang_command=["s"], **facts),
        "triton": _render(ROLES / "gridready_triton_trtllm", "gridready-triton.service.j2",
                          gridready_triton_trtllm_tier="t", gridready_triton_trtllm_mode="host",
                          gridready_triton_trtllm_docker="/usr/bin/docker", __gridready_triton_trtllm_container="c",
                          __gridready_triton_trtllm_dir="/d", gridready_triton_trtllm_visible_devices="all",
                          gridready_triton_trtllm_shm_size="1g", gridready_triton_trtllm_engine_cache_dir="/e",
                          gridready_triton_trtllm_weights_dir="/w", gridready_triton_trtllm_image="i", **facts),
        "router": _render(ROLES / "gridready_router", "gridready-router.service.j2", gridready_router_version="1",
                          gridready_router_bind="10.0.0.1", gridready_router_port=4000, gridready_router_user="l",
                          gridready_router_dir="/etc/r", gridready_router_venv="/v", **facts),
    }


def _seconds(values: list[str]) -> float:
    match = re.fullmatch(r"(\d+)\s*(s|min)?", values[-1])
    assert match, values
    return int(match[1]) * (60 if match[2] == "min" else 1)


def _delays(u: dict[tuple[str, str], list[str]], version: int, tries: int) -> list[float]:
    """The waits before restart 1..tries as systemd computes them (service_restart_usec_next: geometric from
    RestartSec to RestartMaxDelaySec over RestartSteps on 254+; RestartSec alone before, the other keys unknown)."""
    first = _seconds(u[("Service", "RestartSec")])
    steps = int(u.get(("Service", "RestartSteps"), ["0"])[-1]) if version >= 254 else 0
    if not steps:
        return [first] * tries
    top = _seconds(u[("Service", "RestartMaxDelaySec")])
    return [min(top, first * (top / first) ** (min(n, steps) / steps)) for n in range(tries)]


@pytest.mark.parametrize("version", [249, 252, 254, 257])
@pytest.mark.parametrize("unit", ["vllm", "sglang", "triton", "router"])
def test_a_crash_loop_backs_off_and_stops(unit: str, version: int) -> None:
    u = _units(version)[unit]
    assert u[("Service", "Restart")] == ["on-failure"]
    window = _seconds(u.get(("Unit", "StartLimitIntervalSec"), [str(DEFAULT_WINDOW_S)]))
    burst = int(u.get(("Unit", "StartLimitBurst"), [str(DEFAULT_BURST)])[-1])
    assert window > 0, "StartLimitIntervalSec=0 never stops restarting"
    delays = _delays(u, version, burst)
    assert min(delays) >= 15, f"restarts every {min(delays)} s"
    # a unit that fails at once is started `burst` times within the window: the limit trips, the loop ends
    assert sum(delays[:burst - 1]) < window, (delays, window, burst)
    assert burst <= 10


@pytest.mark.parametrize("unit", ["vllm", "sglang", "triton", "router"])
def test_growing_delays_only_where_systemd_knows_them(unit: str) -> None:
    old, new = _units(252)[unit], _units(257)[unit]
    assert ("Service", "RestartSteps") not in old and ("Service", "RestartMaxDelaySec") not in old
    assert _seconds(old[("Service", "RestartSec")]) >= 60
    assert int(new[("Service", "RestartSteps")][-1]) > 0
    assert _seconds(new[("Service", "RestartMaxDelaySec")]) > _seconds(new[("Service", "RestartSec")])
    no_facts = _render(ROLES / "gridready_router", "gridready-router.service.j2")  # unknown version: the old way
    assert ("Service", "RestartSteps") not in no_facts


def test_the_router_is_tied_to_the_firewall_as_the_engines_are() -> None:
    for unit in _units(252).values():
        assert FW in unit[("Unit", "Requires")] and FW in unit[("Unit", "After")]


@pytest.mark.parametrize(("role", "handler"), [
    ("gridready_vllm", "Restart the vLLM tiers"), ("gridready_sglang", "Restart the SGLang tiers"),
    ("gridready_triton_trtllm", "Restart gridready-triton"), ("gridready_router", "Restart the router"),
])
def test_a_deploy_restart_clears_the_start_counter_first(role: str, handler: str) -> None:
    """Handlers run in their file's order: the reset-failed listener before the restart it listens to."""
    handlers = yaml.safe_load((ROLES / role / "handlers" / "main.yml").read_text())
    names = [h["name"] for h in handlers]
    reset = next(h for h in handlers if h.get("listen") == handler)
    assert reset["ansible.builtin.command"]["argv"][:2] == ["systemctl", "reset-failed"]
    assert names.index(reset["name"]) < names.index(handler)


def test_serve_gathers_the_systemd_version() -> None:
    play = yaml.safe_load((ROLES.parent / "playbooks" / "serve.yml").read_text())[1]
    setup = next(t for t in play["tasks"] if "ansible.builtin.setup" in t)
    assert "systemd" in setup["ansible.builtin.setup"]["gather_subset"]
