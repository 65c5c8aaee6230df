"""`serve` on a 3-host sandbox fleet with a vLLM tier and an SGLang tier on the same model: the prefix-reuse
shootout (SIMULATED engines).

The serve stage runs for real (gridready.stages.serve -> playbooks/serve.yml -> roles gridready_ray_node,
gridready_vllm, gridready_sglang); only the certification is written by the test (through the certify stage's
writer). The vLLM tier runs on node1
(Ray, TP 8); the SGLang tier spans node2 and node3 (TP 8 x PP 2 through --nnodes/--node-rank/--dist-init-addr,
no Ray). The benchmark carries a shared 120-token system prompt; the decision record must show both engines'
prefix-cache hit rates, read from their own metrics, and name the winner.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from gridready import vault
from gridready.artifacts import RunContext
from gridready.stages import serve
from tests.roles.serve_run import fleet_env, serve_fleet

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]
MODEL = {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": "0e9e39f249a16976918f6564b8830bc894c89659"}
SLO = {"ttft_ms_p99": 3000, "tpot_ms_p99": 200, "goodput_min": 0.9}


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory):
    def edit(cluster: dict[str, Any]) -> None:
        cluster["serving"]["tiers"] = [
            {"name": "llama-vllm", "engine": "vllm", "served_name": "llama-vllm", "model": MODEL,
             "tensor_parallel": 8, "pipeline_parallel": 1, "slo": SLO},
            {"name": "llama-sgl", "engine": "sglang", "served_name": "llama-sgl", "model": MODEL, "port": 30000,
             "tensor_parallel": 8, "pipeline_parallel": 2, "slo": SLO},
        ]
        cluster["serving"]["decision"] = {"objective": "goodput", "prefix_reuse": {"system_prompt_tokens": 120,
                                                                                   "share": 0.9}}

    fleet = make_module_fleet(3, healthy=True)
    with fleet_env(fleet):
        yield serve_fleet(fleet, tmp_path_factory.mktemp("artifacts"), "20261201T010000Z-shootout", edit)


def _decision(served: dict[str, Any]) -> tuple[dict[str, Any], str]:
    stage = served["root"] / served["inv"].customer / "20261201T010000Z-shootout" / "serve"
    (folder,) = (stage / "decision").iterdir()
    return json.loads((folder / "decision.json").read_text()), (folder / "decision.md").read_text()


def _journal(fleet: Any, host: str, unit: str) -> str:
    return fleet.ssh(host, f"journalctl -u {unit} --no-pager -o cat -n 40").stdout


def test_serve_runs_both_tiers_and_the_shootout(served) -> None:
    result = served["result"]
    fleet = served["fleet"]
    if result.exit_code != 0:  # say why: the units' own logs
        logs = {f"{h} {u}": _journal(fleet, h, u)[-3000:] for h, u in
                ((fleet.names[0], "ray-head"), (fleet.names[0], "vllm-llama-vllm"),
                 (fleet.names[1], "sglang-llama-sgl"), (fleet.names[2], "sglang-llama-sgl"))}
        raise AssertionError(f"{result.messages}\n" + "\n".join(f"--- {k}\n{v}" for k, v in logs.items()))
    print(f"serve with the shootout: {served['seconds']:.1f} s")
    plans = {p["tier"]: p for p in result.data["plan"]}
    assert (plans["llama-sgl"]["tensor_parallel"], plans["llama-sgl"]["pipeline_parallel"]) == (8, 2)


def test_sglang_units_span_two_nodes_without_ray(served) -> None:
    fleet = served["fleet"]
    _vllm_host, rank0, rank1 = fleet.names
    for host, rank in ((rank0, 0), (rank1, 1)):
        h = fleet.host(host)
        assert h.service("sglang-llama-sgl").is_running, host
        assert not h.service("ray-head").is_running and not h.service("ray-worker").is_running
        text = h.file("/etc/systemd/system/sglang-llama-sgl.service").content_string
        assert f"--node-rank {rank}" in text and "--nnodes 2" in text  # the product's unit: no sandbox word
        assert f"--dist-init-addr {fleet.addresses[rank0]}:50000" in text
    assert fleet.host(rank0).socket("tcp://0.0.0.0:30000").is_listening
    assert not fleet.host(rank1).socket("tcp://0.0.0.0:30000").is_listening  # rank >= 1 serves no HTTP
    url = f"http://{fleet.addresses[rank0]}:30000"
    # SGLang's API-key middleware: /v1 only with the customer's key (the --config file's api-key), /metrics public
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{url}/v1/models", timeout=5)
    assert refused.value.code == 401
    key = vault.read(served["inv"].customer, served["inv"].path)[vault.API_KEY_VAR]
    models = urllib.request.Request(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(models, timeout=5) as resp:
        assert [m["id"] for m in json.loads(resp.read())["data"]] == ["llama-sgl"]
    config = fleet.host(rank0).file("/etc/gridready/sglang-llama-sgl.yaml")
    assert (config.user, config.group, config.mode) == ("root", "sglang", 0o640)
    assert key not in fleet.host(rank0).file("/etc/systemd/system/sglang-llama-sgl.service").content_string
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        assert "sglang:cache_hit_rate" in resp.read().decode()


def test_decision_record_compares_prefix_hit_rates(served) -> None:
    decision, md = _decision(served)
    reuse = decision["prefix_reuse"]
    rates = reuse["hit_rates"]
    assert set(rates) == {"llama-vllm", "llama-sgl"} and all(0 < v < 1 for v in rates.values()), rates
    assert reuse["winner"] == max(rates, key=rates.get) == "llama-sgl"  # token-granular radix vs 16-token blocks
    rows = {t["tier"]: t for t in decision["tiers"]}
    assert rows["llama-vllm"]["prefix_hit_source"].startswith("vllm:prefix_cache_hits_total")
    assert rows["llama-sgl"]["prefix_hit_source"].startswith("sglang:cached_tokens_total")
    assert rows["llama-sgl"]["prefix_engine_reported"] is not None
    assert "**Prefix-reuse winner: llama-sgl**" in md and "SIMULATED" in md
    assert decision["simulated"] is True


def test_second_run_changes_nothing(served) -> None:
    inv = served["inv"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
        second = serve.run(inv, RunContext(customer=inv.customer, run_id="20261201T020000Z-again",
                                           root=served["root"]))
    assert second.exit_code == 0, second.messages
    assert {h: o.changed for h, o in second.hosts.items() if o.changed} == {}
