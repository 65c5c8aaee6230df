"""`invoke plan --offline` (issue 33, dry runs): the plan from the inventory alone, with no SSH and no fleet: the
roles provision would run on each host and what each is set to, the gates per the spec, the tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridready import ansible, inventory
from gridready.artifacts import RunContext
from gridready.stages import plan

REPO = Path(__file__).resolve().parents[2]


def _run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    def contact(*_a, **_k):
        raise AssertionError("an offline plan contacted the hosts")

    monkeypatch.setattr(ansible, "run_playbook", contact)
    inv = inventory.load(REPO / "inventories" / name)
    ctx = RunContext(customer=inv.customer, run_id="20261202T000000Z-plan", root=tmp_path, check=True, render=True)
    return plan.run(inv, ctx, offline_only=True)


def test_an_hgx_fleet_plan_names_every_role_and_the_fabric_gates(tmp_path, monkeypatch) -> None:
    out = _run("acme-h200", tmp_path, monkeypatch)
    hosts = out["provision"]["hosts"]
    assert len(hosts) == 4
    roles = next(iter(hosts.values()))["roles"]
    assert list(roles) == list(plan.PROVISION_ROLES)
    assert roles["fabricmanager"].startswith("nvidia-fabricmanager")
    assert "from the release gridready ships" in roles["nccl"]
    assert "ACS expect disabled" in roles["host_tuning"]
    gates = out["certify"]["gates"]
    assert {"dcgm", "nccl_allreduce", "hca_gdr_bw", "nccl_multinode_all_reduce"} <= set(gates)
    assert not [g for g in gates if g.startswith("roce_")]  # InfiniBand only
    assert set(out["serve"]["tiers"]) == {"llama70b-vllm", "llama70b-trtllm"}
    assert (tmp_path / "acme-h200" / "20261202T000000Z-plan" / "plan" / "plan.json").exists()


def test_a_single_gpu_host_plan_skips_what_it_lacks(tmp_path, monkeypatch) -> None:
    out = _run("local", tmp_path, monkeypatch)
    (roles,) = [h["roles"] for h in out["provision"]["hosts"].values()]
    assert roles["fabricmanager"].startswith("skipped: no NVSwitch")
    assert roles["rdma"].startswith("skipped: no InfiniBand/RoCE NIC")
    gates = set(out["certify"]["gates"])
    assert not gates & {"hca", "nccl_multinode_all_reduce"}  # one host: no fabric phase
    inv = inventory.load(REPO / "inventories" / "local")
    assert not gates & set(inv.spec.certification.not_applicable)
