"""A worker whose head is down still finishes booting, and rejoins when the head returns (issue #43, finding 4).

Two certified hosts serve one vLLM tier across both (TP 8 x PP 2, SIMULATED engine): one host runs ray-head and the
tier's unit, the other ray-headwatch and ray-worker. With the head stopped, the worker host reboots for real. Its
ray-headwatch waited for the head without a start timeout, and multi-user.target was ordered after it (the default
dependencies of a unit a target wants, systemd.target(5)): the boot never finished, `systemctl is-system-running`
answered "starting" for good. Now the target does not wait, each wait is bounded and retried with no job queued in
between, so the boot finishes while the head is down; when the head starts again the worker joins and the tier
answers. On both releases of the sandbox (systemd 252 on Debian 12, 257 on Debian 13), reached as a customer
reaches theirs: the login user with sudo.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.roles.serve_run import fleet_env, serve_fleet
from tests.sandbox.waiting import health, wait

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
TIER = "llama8b-pp2"
API = 8000  # the tier's default port
BOOT_S = 120  # a sandbox host's boot to multi-user.target takes seconds; the old units never got there
READY_S = 360  # the head, the worker's rejoin, then vLLM (SIMULATED) until /health answers


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module", params=["debian-12", "debian-13"])
def served(request, make_module_fleet, tmp_path_factory, monkeypatch_module) -> Iterator[dict[str, Any]]:
    release = request.param  # both hosts: one node group has one OS
    fleet = make_module_fleet(2, healthy=True, profiles={h: {"os": release} for h in ("node1", "node2")})

    def edit(cluster: dict[str, Any]) -> None:
        serving = cluster["serving"]
        serving["tiers"] = [{
            "name": TIER, "engine": "vllm", "served_name": "llama-3.1-8b",
            "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                      "revision": "0e9e39f249a16976918f6564b8830bc894c89659"},
            "tensor_parallel": 8, "pipeline_parallel": 2, "replicas": 1,
        }]
        serving["router"]["enabled"] = False  # one engine across two nodes is the witness here

    monkeypatch_module.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the bench has its own tests
    with fleet_env(fleet):
        out = serve_fleet(fleet, tmp_path_factory.mktemp("artifacts"), "20261206T010000Z-headdown", edit)
    assert out["result"].exit_code == 0, out["result"].messages
    active = {h: fleet.ssh(h, "systemctl is-active ray-head", check=False).stdout.strip() for h in fleet.names}
    (head,) = [h for h, state in active.items() if state == "active"]
    (worker,) = [h for h in fleet.names if h != head]
    version = fleet.ssh(worker, ". /etc/os-release; echo $VERSION_ID").stdout.strip()
    assert f"debian-{version}" == release
    yield {**out, "head": head, "worker": worker}
    fleet.down()  # before the other release's fleet comes up: two cores


def test_a_worker_boots_while_its_head_is_down_and_rejoins_when_it_returns(served) -> None:
    fleet, head, worker = served["fleet"], served["head"], served["worker"]
    head_ip = fleet.addresses[head]
    assert health(head_ip, API)
    fleet.ssh(head, "systemctl stop ray-head")  # the tier's unit is PartOf ray-head: it stops too
    wait(lambda: fleet.ssh(worker, "systemctl is-active ray-worker", check=False).stdout.strip() != "active",
          120, f"ray-worker on {worker} to stop with its head")

    fleet.reboot(worker)

    def booted() -> bool:
        state = fleet.ssh(worker, "systemctl is-system-running", check=False).stdout.strip()
        return state in ("running", "degraded")

    try:
        wait(booted, BOOT_S, f"{worker} to finish booting with its head down")
    except AssertionError as err:
        jobs = fleet.ssh(worker, "systemctl list-jobs --no-pager; systemctl --failed --no-pager", check=False).stdout
        raise AssertionError(f"{err}; pending jobs:\n{jobs}") from None
    watch = fleet.ssh(worker, "systemctl show -p ActiveState --value ray-headwatch").stdout.strip()
    assert watch != "active", watch  # still waiting for the head (or between two bounded tries), boot done
    assert fleet.ssh(worker, "systemctl is-active ray-worker", check=False).stdout.strip() != "active"

    fleet.ssh(head, "systemctl start ray-head")
    wait(lambda: fleet.ssh(worker, "systemctl is-active ray-worker", check=False).stdout.strip() == "active",
          READY_S, f"ray-worker on {worker} to join the returned head")
    wait(lambda: health(head_ip, API), READY_S, f"tier {TIER} on {head} to answer again")
