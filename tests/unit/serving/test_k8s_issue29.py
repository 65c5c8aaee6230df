"""Issue #29, the Kubernetes findings: each rendered fix, and the offline checks (gridready/serving/manifests.py,
gridready/serving/consistency.py) catching the old manifest."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gridready import pulumi as gpulumi
from gridready.errors import InvalidInput
from gridready.monitoring import kubernetes_monitors
from gridready.serving import consistency, manifests, topology
from gridready.stages.serve import config as serve_config
from tests.summaries import certified_ledger
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_consistency import PROMETHEUS, triton_tier

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def sglang_tier(**over: Any) -> dict[str, Any]:
    return vllm_tier(**{"name": "llama-sgl", "engine": "sglang", "port": 8200, "served_name": "llama-sgl",
                        "tensor_parallel": 8, "pipeline_parallel": 1, **over})


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    from tests.unit.serving import conftest

    make = conftest.make_inv.__wrapped__(tmp_path_factory.mktemp("inv"), mp)  # type: ignore[attr-defined]
    inv = make(6, [vllm_tier(tensor_parallel=8, pipeline_parallel=2), triton_tier(), sglang_tier()],
               target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    plans = topology.plan_tiers(inv, cert)
    configs = serve_config.stack_configs(inv, cert, plans)
    out = {stack: gpulumi.render(stack, cfg, "acme") for stack, cfg in configs.items()}
    docs = out["platform"].manifests + out["serving"].manifests
    docs += kubernetes_monitors("acme", [p.tier for p in plans], inv.spec.serving.kubernetes.namespace)
    mp.undo()
    return {"docs": docs, "releases": out["platform"].helm_releases}


def _check(docs: list[dict[str, Any]], r: dict[str, Any]) -> list[str]:
    return consistency.check(docs, r["releases"], external_controllers=PROMETHEUS)


def _doc(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def _worker(docs: list[dict[str, Any]]) -> dict[str, Any]:
    rs = next(d for d in docs if d["kind"] == "RayService")
    return rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]


def test_the_render_passes_every_rule(rendered) -> None:
    assert _check(rendered["docs"], rendered) == []


# 1. LoRA on Kubernetes: Ray Serve LLM's LoraConfig takes remote URIs only
def test_a_node_local_lora_folder_is_refused_on_kubernetes(make_inv) -> None:
    inv = make_inv(4, [vllm_tier(lora_adapters=[{"name": "sql", "path": "/adapters/sql"}])], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    with pytest.raises(InvalidInput, match=r"lora_adapters: .*s3://"):
        serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))


def test_the_manifest_check_refuses_a_local_lora_path(rendered) -> None:
    rs = copy.deepcopy(next(d for d in rendered["docs"] if d["kind"] == "RayService"))
    conf = yaml.safe_load(rs["spec"]["serveConfigV2"])
    conf["applications"][0]["args"]["llm_configs"][0]["lora_config"] = {"dynamic_lora_loading_path": "/adapters"}
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(conf)
    assert any("dynamic_lora_loading_path: '/adapters' is not a remote URI" in e for e in manifests.operator_errors(rs))


# 2. the HF cache hostPath is handed to the Ray image's user (uid 1000) before the engine starts
def test_the_ray_workers_cache_is_chowned_by_a_root_init_container(rendered) -> None:
    pod = _worker(rendered["docs"])
    (init,) = pod["initContainers"]
    assert init["securityContext"]["runAsUser"] == 0
    assert "chown 1000:100 /var/lib/gridready/hf" in init["command"][-1]
    assert pod["containers"][0]["securityContext"]["runAsUser"] == 1000


def test_the_check_catches_a_cache_the_ray_user_cannot_write(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    del _worker(docs)["initContainers"]
    errors = _check(docs, rendered)
    assert any("hostPath /var/lib/gridready/hf" in e and "uid 1000" in e for e in errors), errors


# 4. the weights PVC is made and filled; every PVC a pod names exists; the storage class comes from cluster.yml
def test_the_triton_weights_claim_is_made_and_filled(rendered) -> None:
    docs = rendered["docs"]
    pvc = _doc(docs, "PersistentVolumeClaim", "llama70b-trt-weights")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    job = next(d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].startswith("llama70b-trt-weights-"))
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "snapshot_download" in script and "meta-llama/Llama-3.3-70B-Instruct 6f6073b4" in script
    lws = _doc(docs, "LeaderWorkerSet", "llama70b-trt")
    vols = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["volumes"]
    assert {"name": "weights", "persistentVolumeClaim": {"claimName": "llama70b-trt-weights", "readOnly": True}} \
        in vols


def test_the_check_catches_a_claim_that_is_not_rendered(rendered) -> None:
    docs = [d for d in copy.deepcopy(rendered["docs"])
            if not (d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == "llama70b-trt-weights")]
    errors = _check(docs, rendered)
    assert any("PersistentVolumeClaim 'llama70b-trt-weights' is not rendered" in e for e in errors), errors


def test_the_storage_class_of_cluster_yml_reaches_the_claims(make_inv) -> None:
    inv = make_inv(4, [triton_tier()], target="kubernetes")
    inv.spec.serving.kubernetes.storage_class = "fast-rwx"
    inv.spec.serving.kubernetes.engine_cache_size = "300Gi"
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    cfg = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    docs = gpulumi.render("serving", cfg, "acme").manifests
    claims = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    assert {c["storageClassName"] for c in claims.values()} == {"fast-rwx"}
    assert claims["llama70b-trt-engines"]["resources"]["requests"]["storage"] == "300Gi"


# 5. Triton pods tolerate the GPU taint and select certified nodes
def test_triton_pods_tolerate_the_gpu_taint_and_select_certified_nodes(rendered) -> None:
    docs = rendered["docs"]
    lws = _doc(docs, "LeaderWorkerSet", "llama70b-trt")
    jobs = [d for d in docs if d["kind"] == "Job" and d["metadata"]["name"].startswith("llama70b-trt-engine-")]
    pods = [lws["spec"]["leaderWorkerTemplate"][k]["spec"] for k in ("leaderTemplate", "workerTemplate")]
    pods += [j["spec"]["template"]["spec"] for j in jobs]
    for pod in pods:
        assert GPU_TOLERATION in pod["tolerations"]
        assert pod["nodeSelector"]["gridready.io/certified"] == "true"


def test_the_check_catches_a_gpu_pod_without_toleration_or_selector(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    spec = _doc(docs, "LeaderWorkerSet", "llama70b-trt")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    del spec["tolerations"]
    del spec["nodeSelector"]
    errors = _check(docs, rendered)
    assert any("does not tolerate the GPU pool's taint" in e for e in errors), errors
    assert any("does not select certified nodes" in e for e in errors), errors


# 6. Pulumi waits as long as the model takes to load
def test_pulumi_waits_for_the_workloads_as_long_as_their_startup(rendered) -> None:
    docs = rendered["docs"]
    for d in docs:
        if d["kind"] in ("Deployment", "Job") and "gridready.io/tier" in d["metadata"].get("labels", {}):
            assert int(d["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) > 600, d["metadata"]["name"]
    sgl = _doc(docs, "Deployment", "llama-sgl")
    probe = sgl["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    assert int(sgl["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) >= \
        probe["periodSeconds"] * probe["failureThreshold"]


def test_the_check_catches_pulumis_default_timeout(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    del _doc(docs, "Deployment", "llama-sgl")["metadata"]["annotations"]
    errors = _check(docs, rendered)
    assert any(e.startswith("Deployment/llama-sgl: metadata.annotations: no pulumi.com/timeoutSeconds")
               for e in errors), errors


# 13. vLLM metrics: every Ray pod declares the metrics port; Ray's ray_vllm_* names go back to vllm:*
def test_ray_workers_declare_the_metrics_port_and_names_are_restored(rendered) -> None:
    pod = _worker(rendered["docs"])
    assert {"name": "metrics", "containerPort": 8080} in pod["containers"][0]["ports"]
    mon = _doc(rendered["docs"], "PodMonitor", "llama70b-engine")
    (rename,) = mon["spec"]["podMetricsEndpoints"][0]["metricRelabelings"]
    import re

    rx = re.compile(rename["regex"])
    for exported in ("ray_vllm_num_requests_running", "ray_vllm:num_requests_running"):
        assert rx.fullmatch(exported).expand(rename["replacement"].replace("$1", r"\1")) == \
            "vllm:num_requests_running"


def test_the_check_catches_a_pod_template_without_the_monitor_port(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    del _worker(docs)["containers"][0]["ports"]
    errors = _check(docs, rendered)
    assert any("PodMonitor/llama70b-engine" in e and "workerGroupSpecs[0]" in e for e in errors), errors


# 14. SGLang's ServiceMonitor names the Service's port
def test_the_sglang_service_monitor_targets_the_http_port(rendered) -> None:
    mon = _doc(rendered["docs"], "ServiceMonitor", "llama-sgl-engine")
    assert mon["spec"]["endpoints"][0]["port"] == "http"
    svc = _doc(rendered["docs"], "Service", "llama-sgl-openai")
    assert [p["name"] for p in svc["spec"]["ports"]] == ["http"]


# 12. an authenticating front: the LiteLLM router, the only peer of Ray Serve's port
def test_the_router_fronts_the_tiers_with_the_api_key(rendered) -> None:
    docs = rendered["docs"]
    dep = _doc(docs, "Deployment", "gridready-router")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c["env"]}
    assert env["LITELLM_MASTER_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "vllm-api-key", "key": "VLLM_API_KEY"}
    conf = yaml.safe_load(_doc(docs, "ConfigMap", "gridready-router")["data"]["config.yaml"])
    assert conf["general_settings"]["master_key"] == "os.environ/LITELLM_MASTER_KEY"
    params = {m["litellm_params"]["api_base"]: m["litellm_params"]["model"] for m in conf["model_list"]}
    assert params["http://llama70b-openai.gridready-serving:8000/v1"].startswith("hosted_vllm/")
    assert _doc(docs, "Service", "gridready-router")["spec"]["ports"][0]["name"] == "http"


def test_the_check_catches_clients_admitted_to_ray_serve(rendered) -> None:
    docs = copy.deepcopy(rendered["docs"])
    pol = _doc(docs, "NetworkPolicy", "llama70b-ingress")
    pol["spec"]["ingress"].append({"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}],
                                   "ports": [{"protocol": "TCP", "port": 8000}]})
    errors = _check(docs, rendered)
    assert any("checks no API key" in e for e in errors), errors


# 8. the Gateway hands /v1 to the router, no header that nothing sets
def test_the_httproute_sends_v1_to_the_router_without_a_model_header(make_inv) -> None:
    tier = vllm_tier(tensor_parallel=8, pipeline_parallel=1)
    inv = make_inv(2, [tier], target="kubernetes")
    inv.spec.serving.router.enabled = True
    inv.spec.serving.router.keys = []
    cert = topology.read_certification(inv, certified_ledger(inv, inv.gpu_hosts()))
    cfg = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    (route,) = cfg["router_routes"]
    (rule,) = route["spec"]["rules"]
    # /health too: serve's readiness check through the Gateway (issue 44; test_k8s_serves.py)
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}},
                               {"path": {"type": "PathPrefix", "value": "/health"}}]
    assert rule["backendRefs"] == [{"name": "gridready-router", "port": 4000}]


def test_the_check_catches_a_route_on_the_body_routing_header(rendered) -> None:
    from gridready.serving.router_k8s import httproute
    from gridready.spec.router import Route, RouteTarget

    old = httproute(Route(model="m", targets=[RouteTarget(tier="llama70b")]), "gridready-serving",
                    "inference-gateway", {"llama70b": 8000})
    errors = _check([*rendered["docs"], old], rendered)
    assert any("X-Gateway-Model-Name is set only by the Inference Extension" in e for e in errors), errors
