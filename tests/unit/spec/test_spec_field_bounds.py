"""Every numeric limit of cluster.yml's models at its edge: the limit itself is accepted, one step beyond is refused
with the exact one-line error naming the key and the limit (pydantic's wording, as inventory.load prints it)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from gridready.spec.bastion import Bastion
from gridready.spec.certification import CertificationSpec, Limits, NcclSettings, ProbeJobs
from gridready.spec.cluster import Nic, NodeGroup, SoftwarePins
from gridready.spec.decision import DecisionSpec, PrefixReuse
from gridready.spec.embedding import DynamicBatching, EmbeddingBench, InstanceGroup, QueueDelaySweep
from gridready.spec.router import HAProxySettings, RouterSpec, RouteTarget, TierRouters
from gridready.spec.serving import EngineHealth, ServingSpec, Slo, Tier
from gridready.spec.sglang import SglangSettings
from gridready.spec.triton import TritonSettings
from tests.unit.spec.spec_lines import lines
from tests.unit.spec.test_bastion_values import bastion
from tests.unit.spec.test_rule_messages import tier

GE, GT, LE, LT = "greater than or equal to", "greater than", "less than or equal to", "less than"
BASES: dict[type[BaseModel], dict[str, Any]] = {
    NodeGroup: {"name": "g", "sku": "H200-SXM-141GB"},
    Nic: {"name": "mlx5_0", "rate_gbps": 400},
    Tier: tier(),
    Bastion: bastion(),
    PrefixReuse: {"system_prompt_tokens": 100},
    RouteTarget: {"tier": "llama"},
    QueueDelaySweep: {"max_queue_delay_microseconds": [0, 100]},
}


@pytest.mark.parametrize(("model", "key", "ok", "bad", "word", "limit"), [
    (NodeGroup, "gpus_per_node", 8, 17, LE, "16"),
    (NodeGroup, "gpus_per_node", 8, 0, GT, "0"),
    (Nic, "rail", 0, -1, GE, "0"),
    (Nic, "rate_gbps", 1, 0, GT, "0"),
    (SoftwarePins, "dcgm_major", 3, 2, GE, "3"),
    (SoftwarePins, "dcgm_major", 4, 5, LE, "4"),
    (CertificationSpec, "dcgm_level", 1, 0, GE, "1"),
    (CertificationSpec, "dcgm_level", 4, 5, LE, "4"),
    (CertificationSpec, "dcgm_outlier_tolerance_pcnt", 100.0, 100.5, LE, "100"),
    (CertificationSpec, "dcgm_outlier_tolerance_pcnt", 0.1, 0.0, GT, "0"),
    (CertificationSpec, "outlier_mad_threshold", 100.0, 100.1, LE, "100"),
    (CertificationSpec, "parallel", 5000, 5001, LE, "5000"),
    (Limits, "max_gpu_temp_c", 30.0, 29.9, GE, "30"),
    (Limits, "max_gpu_temp_c", 120.0, 120.5, LE, "120"),
    (ProbeJobs, "start_timeout_s", 86400, 86401, LE, "86400"),
    (ProbeJobs, "poll_s", 600, 601, LE, "600"),
    (NcclSettings, "check_iters", 100, 101, LE, "100"),
    (NcclSettings, "multinode_fraction_of_nic", 1.2, 1.25, LE, "1.2"),
    (NcclSettings, "multinode_fraction_of_nic", 0.01, 0.0, GT, "0"),
    (Tier, "gpu_memory_utilization", 1.0, 1.01, LE, "1"),
    (Tier, "gpu_memory_utilization", 0.01, 0.0, GT, "0"),
    (Tier, "drain_timeout_s", 3600, 3601, LE, "3600"),
    (Tier, "port", 1024, 1023, GE, "1024"),
    (Tier, "port", 65535, 65536, LE, "65535"),
    (Slo, "goodput_min", 1.0, 1.1, LE, "1"),
    (EngineHealth, "interval_s", 5, 4, GE, "5"),
    (EngineHealth, "interval_s", 3600, 3601, LE, "3600"),
    (EngineHealth, "timeout_s", 600, 601, LE, "600"),
    (EngineHealth, "failures", 100, 101, LE, "100"),
    (EngineHealth, "startup_grace_s", 0, -1, GE, "0"),
    (EngineHealth, "startup_grace_s", 86400, 86401, LE, "86400"),
    (ServingSpec, "ray_port", 1024, 1023, GE, "1024"),
    (RouteTarget, "weight", 1000, 1001, LE, "1000"),
    (RouteTarget, "weight", 0, -1, GE, "0"),
    (HAProxySettings, "max_body_kib", 16, 15, GE, "16"),
    (HAProxySettings, "max_body_kib", 65536, 65537, LE, "65536"),
    (HAProxySettings, "maxconn", 64, 63, GE, "64"),
    (HAProxySettings, "maxconn", 1_000_000, 1_000_001, LE, "1000000"),
    (TierRouters, "port", 1024, 1023, GE, "1024"),
    (RouterSpec, "num_retries", 5, 6, LE, "5"),
    (DecisionSpec, "tie_margin", 0.5, 0.51, LE, "0.5"),
    (DecisionSpec, "tie_margin", 0.0, -0.01, GE, "0"),
    (PrefixReuse, "share", 1.0, 1.01, LE, "1"),
    (SglangSettings, "dist_init_port", 1024, 1023, GE, "1024"),
    (SglangSettings, "chunked_prefill_size", -1, -2, GE, "-1"),
    (TritonSettings, "kv_cache_free_gpu_mem_fraction", 1.0, 1.01, LE, "1"),
    (InstanceGroup, "count", 64, 65, LE, "64"),
    (DynamicBatching, "max_queue_delay_microseconds", 10_000_000, 10_000_001, LE, "10000000"),
    (EmbeddingBench, "requests", 100_000, 100_001, LE, "100000"),
    (EmbeddingBench, "duration_s", 3600.0, 3600.5, LE, "3600"),
    (EmbeddingBench, "seq_len", 65536, 65537, LE, "65536"),
    (Bastion, "port", 65535, 65536, LE, "65535"),
    (QueueDelaySweep, "request_rate", 0.001, 0.0, GT, "0"),
])
def test_limit_accepted_and_one_step_beyond_refused(model, key, ok, bad, word, limit):
    base = BASES.get(model, {})
    assert lines(model, {**base, key: ok}) == []
    assert lines(model, {**base, key: bad}) == [f"cluster.yml: {key}: Input should be {word} {limit}"]


@pytest.mark.parametrize(("delays", "ok"), [
    (list(range(2)), True), (list(range(12)), True), ([0], False), (list(range(13)), False)])
def test_a_sweep_has_two_to_twelve_settings(delays, ok):
    assert (lines(QueueDelaySweep, {"max_queue_delay_microseconds": delays}) == []) is ok
