"""vLLM's readiness wait on hosts comes from cluster.yml (serving.ready_timeout_s), not the role's 600 s default
(issue #29, finding 10)."""

from __future__ import annotations

from pathlib import Path

import yaml

from gridready.serving import topology, vllm
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier

PLAYBOOK = Path(__file__).resolve().parents[3] / "playbooks" / "serve.yml"


def test_the_readiness_wait_is_set_from_cluster_yml(make_inv) -> None:
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=1)])
    inv.spec.serving.ready_timeout_s = 2400
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    extra = vllm.hosts_extravars(topology.plan_tiers(inv, cert), cert, inv.spec.serving)
    assert extra["gridready_serve"]["ready_timeout_s"] == 2400
    play = next(p for p in yaml.safe_load(PLAYBOOK.read_text())
                if any(r.get("role") == "gridready_vllm" for r in p.get("roles") or []))
    assert play["vars"]["gridready_vllm_ready_timeout_s"] == "{{ gridready_serve.ready_timeout_s }}"
