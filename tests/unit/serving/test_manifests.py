"""Offline validation: strict core schemas, strict CRDs, serveConfigV2 and the operator-only rules."""

from __future__ import annotations

import copy

import pytest
import yaml

from gridready.serving import manifests


def rayservice(**spec_over):
    gpu_pod = {"enableServiceLinks": False, "containers": [{
        "name": "w", "image": "rayproject/ray-llm:2.60.0-py311-cu128",
        "resources": {"limits": {"nvidia.com/gpu": 8, "cpu": "8"}}}]}
    serve = {"applications": [{"name": "a", "import_path": "ray.serve.llm:build_openai_app", "route_prefix": "/",
                               "args": {"llm_configs": [{
                                   "model_loading_config": {"model_id": "m"},
                                   "engine_kwargs": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
                                   "placement_group_config": {"bundles": [{"GPU": 1}] * 16},
                                   "deployment_config": {"autoscaling_config": {"min_replicas": 1,
                                                                                "max_replicas": 1}}}]}}]}
    spec = {
        "upgradeStrategy": {"type": "None"},
        "serveConfigV2": yaml.safe_dump(serve),
        "rayClusterConfig": {
            "rayVersion": "2.60.0",
            "headGroupSpec": {"rayStartParams": {"num-gpus": "0"}, "template": {"spec": {
                "enableServiceLinks": False,
                "containers": [{"name": "h", "image": "rayproject/ray-llm:2.60.0-py311-cu128"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "rayStartParams": {"num-gpus": "8"}, "template": {"spec": gpu_pod}}],
        },
    }
    spec.update(spec_over)
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llama"}, "spec": spec}


def test_a_good_rayservice_validates():
    assert manifests.validate([rayservice()]) == []


def test_unknown_fields_are_rejected_in_crds():
    doc = rayservice()
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["maxReplica"] = 2
    errors = manifests.validate([doc])
    assert any("'maxReplica' was unexpected" in e for e in errors), errors


def test_int_or_string_quantities_accept_both():
    doc = rayservice()
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "8", "cpu": 8, "memory": "64Gi"}}
    assert manifests.validate([doc]) == []


def test_missing_required_fields_in_crds():
    doc = rayservice()
    del doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["minReplicas"]
    assert any("'minReplicas' is a required property" in e for e in manifests.validate([doc]))


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["metadata"].update(name="x" * 48), "longer than 47"),
    (lambda d: d["metadata"].update(name="Llama_70b"), "DNS-1035"),
    (lambda d: d["spec"].update(upgradeStrategy={"type": "Recreate"}), "upgradeStrategy.type"),
    (lambda d: d["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParams"].update({"num-gpus": "8"}),
     "head must not take GPUs"),
    (lambda d: d["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(replicas=3), "outside [2, 2]"),
    (lambda d: d["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["rayStartParams"].update({"num-gpus": "4"}),
     "must equal the container's nvidia.com/gpu"),
    (lambda d: d["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"].pop("enableServiceLinks"),
     "enableServiceLinks"),
    (lambda d: d["spec"].update(serveConfigV2="applications: [unclosed"), "not YAML"),
    (lambda d: d["spec"].update(serveConfigV2="applications: []"), "non-empty list"),
])
def test_operator_rules(mutate, message):
    doc = copy.deepcopy(rayservice())
    mutate(doc)
    errors = manifests.validate([doc])
    assert any(message in e for e in errors), errors


def test_serve_config_llm_checks():
    doc = rayservice()
    conf = yaml.safe_load(doc["spec"]["serveConfigV2"])
    llm = conf["applications"][0]["args"]["llm_configs"][0]
    llm["placement_group_config"]["bundles"] = [{"GPU": 1}] * 8
    llm["deployment_config"]["autoscaling_config"]["max_replicas"] = 2
    llm["engine_kwarg"] = {}
    doc["spec"]["serveConfigV2"] = yaml.safe_dump(conf)
    errors = "\n".join(manifests.validate([doc]))
    assert "8 GPUs for TP x PP = 16" in errors
    assert "32 GPUs, the worker groups have 16" in errors
    assert "unknown keys ['engine_kwarg']" in errors


def test_core_kinds_strict_and_service_names():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "vllm"},
           "spec": {"ports": [{"port": 8000}], "selectr": {}}}
    errors = manifests.validate([svc])
    assert any("'selectr' was unexpected" in e for e in errors)
    assert any("VLLM_PORT" in e for e in errors)
    svc["metadata"]["name"] = "vllm-api"
    assert any("VLLM_" in e for e in manifests.validate([svc]))


def test_strict_schema_transform():
    schema = {"type": "object", "properties": {
        "q": {"x-kubernetes-int-or-string": True, "type": "string"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"a": {}}},
        "n": {"type": "string", "nullable": True},
    }}
    out = manifests.strict_schema(schema)
    assert out["additionalProperties"] is False
    assert out["properties"]["q"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert "additionalProperties" not in out["properties"]["free"]
    assert out["properties"]["n"]["type"] == ["string", "null"]
