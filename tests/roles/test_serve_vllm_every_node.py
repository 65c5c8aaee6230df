"""A 2-node vLLM tier (TP 8 in each node, PP 2 across) on the sandbox: the engine must be on the worker too.

With `--distributed-executor-backend ray`, vLLM places one {"GPU": 1} bundle per rank and starts a worker actor on
each bundle's node that imports vllm; a node without the engine package fails the whole engine. The SIMULATED
engine does the same (sandbox/engine/ray_member.py), so a playbook that installs the engine on heads
only fails here.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
import yaml

from gridready import inventory
from gridready.artifacts import RunContext
from gridready.spec.serving import VLLM_VERSION
from gridready.stages import serve
from tests.summaries import certification

pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.extended]
TIER = "llama70b-pp"
UNIT = f"vllm-{TIER}"
SERVED = "llama-3.1-70b"
RAY_VENV = "/opt/ray/venv"  # gridready_vllm_venv: vLLM goes into Ray's venv


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(2, healthy=True)
    cluster = yaml.safe_load((fleet.inventory / "cluster.yml").read_text())
    cluster["serving"]["tiers"] = [{
        "name": TIER, "engine": "vllm", "served_name": SERVED,
        "model": {"hf_id": "meta-llama/Llama-3.1-70B-Instruct",
                  "revision": "1605565b47bb9346c5515c34102e054115b4f98b"},
        "tensor_parallel": 8, "pipeline_parallel": 2,
    }]
    (fleet.inventory / "cluster.yml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    # a tier that cannot start fails the run in minutes, not after the role's default 600 s
    (fleet.inventory / "group_vars" / "all" / "zz-test-serve.yml").write_text("gridready_vllm_ready_timeout_s: 240\n")
    root = tmp_path_factory.mktemp("artifacts")
    inv = inventory.load(fleet.inventory)
    certification(inv, fleet.names, root=root, run_id="20261201T000000Z-test")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
        mp.setenv("ANSIBLE_CACHE_PLUGIN_CONNECTION", fleet.ansible_env()["ANSIBLE_CACHE_PLUGIN_CONNECTION"])
        result = serve.run(inv, RunContext(customer=inv.customer, run_id="20261201T010000Z-run1", root=root))
    return {"fleet": fleet, "result": result}


def test_the_tier_serves_with_a_rank_worker_on_each_node(served) -> None:
    result, fleet = served["result"], served["fleet"]
    if result.exit_code != 0:  # say why: the engine's log on the head, the Ray worker's on the worker
        head, worker = fleet.names
        logs = fleet.ssh(head, f"journalctl -u {UNIT} --no-pager -o cat | tail -15").stdout
        logs += fleet.ssh(worker, "journalctl -u ray-worker --no-pager -o cat | grep -v '^ ' | tail -5").stdout
        pytest.fail(f"{result.messages}\n{logs}")
    head, worker = fleet.names
    # the role installed the pinned vllm from the nodes' package index into Ray's venv, workers included
    found = fleet.ssh(worker, f"{RAY_VENV}/bin/python3 -c 'import vllm; print(vllm.__version__)'").stdout.strip()
    assert found == VLLM_VERSION
    info = _get(f"http://{fleet.addresses[head]}:8000/gridready/info")["ray"]
    assert info["ray"] == "joined", info
    assert sorted(info["rank_nodes"]) == sorted(fleet.addresses[n] for n in fleet.names), info


def test_a_worker_without_the_engine_package_fails_the_tier(served) -> None:
    fleet = served["fleet"]
    head, worker = fleet.names
    fleet.ssh(worker, f"{RAY_VENV}/bin/python3 -m pip uninstall -y -q vllm")
    fleet.ssh(head, f"systemctl restart {UNIT}")
    deadline = time.monotonic() + 150
    log = ""
    while time.monotonic() < deadline:
        log = fleet.ssh(head, f"journalctl -u {UNIT} --no-pager -o cat --since=-3min").stdout
        if "No module named 'vllm'" in log:
            break
        time.sleep(3)
    assert "No module named 'vllm'" in log and fleet.addresses[worker] in log, log[-2000:]
    restarts = fleet.ssh(head, f"systemctl show -p NRestarts --value {UNIT}").stdout.strip()
    assert int(restarts or 0) >= 1 or "exited" in log, (restarts, log[-1000:])
