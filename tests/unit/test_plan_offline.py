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


SAMPLE_TIER = {"name": "llama8b", "engine": "vllm", "served_name": "llama-3.1-8b",
               "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                         "revision": "0e9e39f249a16976918f6564b8830bc894c89659"}}


def _sample(tmp_path: Path, **tier: object) -> inventory.Inventory:
    """A copy of the committed sample (two hosts of 8 H200, no RDMA NIC) as customer `acme`, with its commented
    8B tier written out as a new user does (its keys as the sample lists them, `tier` over them)."""
    import shutil

    import yaml

    inv_dir = tmp_path / "inventories" / "acme"
    shutil.copytree(REPO / "inventories" / "_sample", inv_dir)
    spec = yaml.safe_load((inv_dir / "cluster.yml").read_text())
    spec["customer"] = "acme"
    spec["serving"] = {"tiers": [{**SAMPLE_TIER, **tier}]}
    assert "hf_id: meta-llama/Llama-3.1-8B-Instruct" in (inv_dir / "cluster.yml").read_text()
    (inv_dir / "cluster.yml").write_text(yaml.safe_dump(spec))
    return inventory.load(inv_dir)


def test_the_samples_8b_model_on_two_hosts_plans_one_node_with_the_resolved_values(tmp_path) -> None:
    """Issue 49, point 4: the sample's 8B model on its two hosts rendered as TP 8 x PP 2 (16 GPUs, pipeline stages
    over TCP), and plan --offline printed "derive" instead of the values serve would use."""
    (tier,) = plan.offline(_sample(tmp_path))["serve"]["tiers"].values()
    assert tier["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert (tier["tensor_parallel"], tier["pipeline_parallel"], tier["replicas"], tier["nodes_per_replica"],
            tier["gpus"]) == (8, 1, 1, 1, 8)
    assert tier["derived"] == ["tensor_parallel", "pipeline_parallel"] and tier["warnings"] == []


def test_pipeline_stages_across_nodes_without_rdma_are_warned(tmp_path, capsys) -> None:
    inv = _sample(tmp_path, pipeline_parallel=2)
    (tier,) = plan.offline(inv)["serve"]["tiers"].values()
    assert (tier["pipeline_parallel"], tier["nodes_per_replica"], tier["gpus"]) == (2, 2, 16)
    assert tier["warnings"] == ["warning: tier llama8b: pipeline parallel 2 spans 2 nodes of gpu_nodes, which has "
                                "no RDMA NIC (InfiniBand or RoCE): activations cross nodes over TCP; "
                                "pipeline_parallel: 1 keeps a replica on one node"]
    plan._print(plan.offline(inv), False, tmp_path)
    err = capsys.readouterr().err
    assert "TP 8 x PP 2 (derived: tensor_parallel), 1 replica(s) x 2 node(s) = 16 GPUs" in err
    assert "  warning: tier llama8b: pipeline parallel 2 spans 2 nodes" in err


def test_no_warning_where_the_nodes_have_rdma(tmp_path, monkeypatch) -> None:
    out = _run("acme-h200", tmp_path, monkeypatch)  # InfiniBand HCAs on every node
    assert all(t["warnings"] == [] for t in out["serve"]["tiers"].values())
    assert all(isinstance(t["pipeline_parallel"], int) for t in out["serve"]["tiers"].values())
