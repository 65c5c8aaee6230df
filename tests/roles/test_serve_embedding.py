"""`serve` of a fixed-cost tier on a sandbox host: an ONNX embedding model behind Triton (the pinned image under
Docker, both SIMULATED by the sandbox) with its dynamic batcher, the benchmark, and the max_queue_delay_microseconds
sweep recorded in the decision record.

Docker comes first, through the provision roles (gridready_container_engine, gridready_container_toolkit). The
serve stage runs for real (gridready.stages.serve -> playbooks/serve.yml -> role gridready_triton_trtllm in
embedding mode, gridready_model_weights for the Hugging Face snapshot), with the image digest of the sandbox
registry from the inventory's pins (triton_versions.yml); only the certification is written by the test. The
image's tritonserver reads the config.pbtxt the role copied and batches as Triton's dynamic batcher does
(sandbox/engine/fixed_model.py); each sweep setting is a redeploy through the role.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from gridready.artifacts import RunContext
from tests.roles.serve_run import fleet_env, provision_docker, serve_fleet

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
RUN = "20261201T020000Z-embedding"
CONFIGURED_US = 1000
SWEEP = [0, 1000, 8000]
TIER = {
    "name": "embed", "engine": "triton-embedding", "served_name": "bge-small", "port": 8100,
    "tensor_parallel": 1,
    "model": {"hf_id": "BAAI/bge-small-en-v1.5", "revision": "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"},
    "slo": {"e2e_ms_p99": 1500, "goodput_min": 0.9},
    "embedding": {
        "model_file": "onnx/model.onnx", "max_batch_size": 32,
        "inputs": [{"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]},
                   {"name": "attention_mask", "data_type": "TYPE_INT64", "dims": [-1], "fill": "ones"},
                   {"name": "token_type_ids", "data_type": "TYPE_INT64", "dims": [-1], "fill": "zeros"}],
        "outputs": [{"name": "last_hidden_state", "data_type": "TYPE_FP32", "dims": [-1, 384]}],
        "dynamic_batching": {"max_queue_delay_microseconds": CONFIGURED_US, "preferred_batch_size": [8, 16]},
        "instance_groups": [{"count": 2, "gpus": [0]}],
        "bench": {"request_rates": [40], "requests": 160, "duration_s": 8, "seq_len": 8},
        "sweep": {"max_queue_delay_microseconds": SWEEP, "request_rate": 60},
    },
}


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory):
    def edit(cluster: dict[str, Any]) -> None:
        cluster["serving"]["tiers"] = [TIER]
        cluster["serving"]["router"] = {"enabled": False}
        cluster.setdefault("certification", {})["min_certified_nodes"] = 1

    fleet = make_module_fleet(1, healthy=True)
    provision_docker(fleet, tmp_path_factory.mktemp("docker"))
    with fleet_env(fleet):
        yield serve_fleet(fleet, tmp_path_factory.mktemp("artifacts"), RUN, edit)


def _stage(served: dict[str, Any]) -> Any:
    return served["root"] / served["inv"].customer / RUN / "serve"


def _journal(served: dict[str, Any]) -> str:
    fleet = served["fleet"]
    return fleet.ssh(fleet.names[0], "journalctl -u gridready-triton-embed --no-pager -o cat -n 40").stdout


def _get(served: dict[str, Any], path: str, port: int = 8100) -> Any:
    ip = served["fleet"].addresses[served["fleet"].names[0]]
    with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=10) as resp:  # the sandbox host's own address
        return json.loads(resp.read())


def test_serve_deploys_benchmarks_and_sweeps(served) -> None:
    result = served["result"]
    if result.exit_code != 0:
        raise AssertionError(f"{result.messages}\n--- unit log\n{_journal(served)[-3000:]}")
    print(f"serve with the queue-delay sweep: {served['seconds']:.1f} s")
    report = json.loads((_stage(served) / "bench" / "embed.json").read_text())
    assert report["smoke"]["ok"], report["smoke"]
    assert report["gate"]["passed"], report["gate"]["message"]
    assert report["batching"]["inferences"] >= 160 and report["batching"]["executions"] >= 1


def test_the_sweep_is_in_the_decision_record(served) -> None:
    folder = _stage(served) / "decision" / "BAAI--bge-small-en-v1.5"
    record = json.loads((folder / "queue-delay.json").read_text())
    assert [p["max_queue_delay_microseconds"] for p in record["points"]] == SWEEP
    assert all(p["ready"] and p["summary"]["completed"] > 0 for p in record["points"]), record["points"]
    assert record["simulated"] is True
    passing = [p for p in record["points"] if p["meets_slo"]]
    assert passing, record["reason"]
    best = min(passing, key=lambda p: p["summary"]["e2e"]["p99"])
    assert record["best_us"] == best["max_queue_delay_microseconds"]
    # the batcher holds requests longer at a longer delay: it forms larger batches (Triton's own counters)
    batch = {p["max_queue_delay_microseconds"]: p["batching"]["mean_batch_size"] for p in record["points"]}
    assert batch[8000] > batch[0], batch
    md = (folder / "queue-delay.md").read_text()
    assert f"**Best: {record['best_us']} us.**" in md and "SIMULATED" in md
    assert served["result"].data["queue_delay"]["embed"]["best_us"] == record["best_us"]


def test_the_tier_serves_its_configured_setting_after_the_sweep(served) -> None:
    config = _get(served, "/v2/models/bge-small/config")
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == CONFIGURED_US
    fleet = served["fleet"]
    host = fleet.names[0]
    text = fleet.ssh(host, "cat /var/lib/gridready/triton/embed/repo/bge-small/config.pbtxt").stdout
    assert f"max_queue_delay_microseconds: {CONFIGURED_US}" in text
    model = fleet.ssh(host, "cat /var/lib/gridready/triton/embed/repo/bge-small/1/model.onnx").stdout
    assert "BAAI/bge-small-en-v1.5@5c38ec7c405ec4b44b94cc5a9bb96e735b38267a onnx/model.onnx" in model
    assert fleet.ssh(host, "systemctl is-active gridready-triton-embed").stdout.strip() == "active"
    meta = _get(served, "/v2/models/bge-small")
    assert [i["name"] for i in meta["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]


def test_every_triton_listener_is_behind_the_firewall(served) -> None:
    """Triton has no authentication: the Triton play applies the serving firewall to its node (the record the
    firewall tasks write names the ports open only to members and clients)."""
    fleet = served["fleet"]
    record = json.loads(fleet.ssh(fleet.names[0], "cat /etc/gridready/firewall-ray.json").stdout)
    assert {8100, 8001, 8002} <= {int(p) for p in record["client_ports"]}, record
    assert record["members"] == [fleet.addresses[fleet.names[0]]]


def test_a_second_run_changes_nothing_and_check_mode_agrees(served) -> None:
    from gridready.serving import topology
    from gridready.stages.serve import embedding as serve_embedding
    from gridready.stages.serve import plan as serve_plan

    inv, root = served["inv"], served["root"]
    for run_id, check in (("20261201T030000Z-again", False), ("20261201T030100Z-check", True)):
        ctx = RunContext(customer=inv.customer, run_id=run_id, root=root, check=check)
        cert = serve_plan.current_certification(inv, ctx)
        plans = topology.plan_tiers(inv, cert)
        result = serve_embedding.redeploy_embedding(inv, ctx, cert, plans, plans[0], None, "serve")
        assert result.changed_hosts == [], (check, result.changed_hosts)
