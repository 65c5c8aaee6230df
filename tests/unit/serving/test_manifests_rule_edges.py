"""Offline manifest validation word for word: every operator rule's line at its edge (name lengths 47/48 and
53/54, replicas at min and max, GPUs of the head, num-gpus vs the container), serveConfigV2's and the LLM
configs' checks with the GPU capacity counted per worker group, the strict-schema transform, error paths and
kubernetes-validate's verdicts for core kinds."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gridready.serving import manifests
from tests.unit.serving.test_manifests import rayservice

W = "RayService/llama"


def worker(gpus: Any = 8, lo: Any = 1, hi: Any = 1, n: Any = 1, params: dict | None = None, **over: Any) -> dict:
    group = {"groupName": "gpu", "replicas": n, "minReplicas": lo, "maxReplicas": hi,
             "rayStartParams": {"num-gpus": str(gpus)} if params is None else params,
             "template": {"spec": {"enableServiceLinks": False, "containers": [{
                 "name": "w", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}}
    group.update(over)
    return group


def cluster_errors(*groups: dict, head: dict | None = None) -> list[str]:
    return manifests._ray_cluster_errors(W, {"headGroupSpec": head or {}, "workerGroupSpecs": list(groups)})


def test_name_length_limits_per_kind_at_their_edge():
    for kind, limit in (("RayService", 47), ("RayCluster", 53)):
        ok = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "a" * limit}}
        assert manifests._name_errors(ok) == []
        long = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "a" * (limit + 1)}}
        assert manifests._name_errors(long) == [
            f"{kind}/{'a' * (limit + 1)}: metadata.name: longer than {limit} characters (KubeRay rule)"]
    # other kinds: no KubeRay rule
    assert manifests._name_errors({"kind": "ConfigMap", "metadata": {"name": "A_" * 40}}) == []


@pytest.mark.parametrize("name, ok", [("a", True), ("a-1", True), ("a1b", True), ("1a", False), ("a-", False),
                                      ("-a", False), ("aB", False), ("a.b", False), ("a_b", False)])
def test_dns_1035_names(name, ok):
    doc = {"kind": "RayCluster", "metadata": {"name": name}}
    assert manifests._name_errors(doc) == ([] if ok else [
        f"RayCluster/{name}: metadata.name: not a DNS-1035 label (KubeRay rule)"])


def test_a_missing_name_is_the_only_error():
    for meta, where in (({}, "RayService/?"), ({"name": ""}, "RayService/"), ({"name": None}, "RayService/None")):
        doc = {"kind": "RayService", "metadata": meta}
        assert manifests._name_errors(doc) == [f"{where}: metadata.name: required (no auto-naming in rendered "
                                               "manifests)"]
    assert manifests._name_errors({"kind": "RayService"}) == [
        "RayService/?: metadata.name: required (no auto-naming in rendered manifests)"]
    assert manifests.operator_errors({"metadata": {}}) == [
        "?/?: metadata.name: required (no auto-naming in rendered manifests)"]


@pytest.mark.parametrize("name, bad", [("vllm", True), ("vllm-api", True), ("VLLM_x", True), ("vllmx", False),
                                       ("my-vllm", False), ("vll", False)])
def test_service_names_that_inject_vllm_variables(name, bad):
    errors = manifests._name_errors({"kind": "Service", "metadata": {"name": name}})
    assert errors == ([f"Service/{name}: metadata.name: a Service named {name!r} injects VLLM_* env vars into pods "
                       "(VLLM_PORT=tcp://...), which break vLLM; rename it"] if bad else [])


def test_the_head_takes_no_gpu_by_param_or_container():
    head = {"rayStartParams": {"num-gpus": 1}, "template": {"spec": {"containers": [
        {"name": "a"}, {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
        {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 0}}}]}}}
    assert cluster_errors(head=head) == [
        f"{W}: headGroupSpec.rayStartParams.num-gpus: the head must not take GPUs",
        f"{W}: headGroupSpec.template.spec.containers[1]: the head must not request GPUs"]
    assert cluster_errors(head={"rayStartParams": {"num-gpus": "0"}}) == []


@pytest.mark.parametrize("lo, hi, n, errors", [
    (1, 3, 1, []), (1, 3, 3, []), (2, 2, 2, []),
    (1, 3, 0, ["workerGroupSpecs[0].replicas: 0 is outside [1, 3]"]),
    (1, 3, 4, ["workerGroupSpecs[0].replicas: 4 is outside [1, 3]"]),
    (3, 2, 2, ["workerGroupSpecs[0]: minReplicas 3 > maxReplicas 2", "workerGroupSpecs[0].replicas: 2 is outside "
               "[3, 2]"]),
    (1, 3, None, []),  # replicas unset: the operator's default
    ("1", 3, 9, []),  # not integers: the schema's business
])
def test_replicas_within_min_and_max(lo, hi, n, errors):
    assert cluster_errors(worker(lo=lo, hi=hi, n=n)) == [f"{W}: {e}" for e in errors]


def test_worker_resources_set_once_and_num_gpus_equal_to_the_container():
    both = worker(resources={"GPU": "8"}, params={"num-cpus": "8"})
    assert cluster_errors(both) == [f"{W}: workerGroupSpecs[0]: set resources either in rayStartParams or in "
                                    ".resources, not both"]
    assert cluster_errors(worker(resources={"GPU": "8"}, params={"block": "true"})) == []
    mismatch = worker(gpus=8, params={"num-gpus": "4"})
    assert cluster_errors(worker(), mismatch) == [
        f"{W}: workerGroupSpecs[1].rayStartParams.num-gpus: must equal the container's nvidia.com/gpu (8)"]
    no_container = worker(params={"num-gpus": "0"})
    no_container["template"]["spec"]["containers"] = []
    assert cluster_errors(no_container) == []  # no container: 0 GPUs, as the param says


def _serve(apps: Any) -> str:
    return yaml.safe_dump({"applications": apps})


def _llm(tp: Any = 8, pp: Any = 1, bundles: Any = None, lo: int = 1, hi: int = 1, **extra: Any) -> dict:
    cfg: dict = {"model_loading_config": {"model_id": "m"},
                 "engine_kwargs": {"tensor_parallel_size": tp, "pipeline_parallel_size": pp},
                 "deployment_config": {"autoscaling_config": {"min_replicas": lo, "max_replicas": hi}}}
    if bundles is not None:
        cfg["placement_group_config"] = {"bundles": bundles}
    cfg.update(extra)
    return cfg


def _app(*configs: dict, **over: Any) -> dict:
    app = {"name": "a", "import_path": "ray.serve.llm:build_openai_app", "route_prefix": "/",
           "args": {"llm_configs": list(configs)}}
    app.update(over)
    return app


SPEC = {"rayClusterConfig": {"workerGroupSpecs": [worker(gpus=8, hi=2), worker(gpus="4", hi=1),
                                                  {"maxReplicas": 5}]}}  # 8 x 2 + 4 x 1 + 0 = 20 GPUs
K = "spec.serveConfigV2"


def test_the_gpu_capacity_is_summed_over_worker_groups():
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=10, pp=2))]), SPEC) == []
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=7, pp=3))]), SPEC) == [
        f"{W}: {K}.applications[0].args.llm_configs[0]: max_replicas x TP x PP = 21 GPUs, the worker groups have 20"]
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=4, pp=1, hi=5))]), SPEC) == []
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1, pp=1))]), {}) == [
        f"{W}: {K}.applications[0].args.llm_configs[0]: max_replicas x TP x PP = 1 GPUs, the worker groups have 0"]


def test_bundles_must_hold_tp_times_pp_gpus():
    ok = _llm(tp=2, pp=2, bundles=[{"GPU": 2}, {"GPU": 1, "CPU": 4}, {"GPU": 1}, {"CPU": 1}])
    assert manifests.serve_config_errors(W, _serve([_app(ok)]), SPEC) == []
    short = _llm(tp=2, pp=2, bundles=[{"GPU": 1}] * 3)
    assert manifests.serve_config_errors(W, _serve([_app(short)]), SPEC) == [
        f"{W}: {K}.applications[0].args.llm_configs[0].placement_group_config.bundles: 3 GPUs for TP x PP = 4"]


def test_replicas_and_parallel_sizes():
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1, lo=2, hi=1))]), SPEC) == [
        f"{W}: {K}.applications[0].args.llm_configs[0].deployment_config.autoscaling_config: min_replicas > "
        "max_replicas"]
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1, lo=2, hi=2))]), SPEC) == []
    bad = f"{W}: {K}.applications[0].args.llm_configs[0].engine_kwargs: tensor/pipeline_parallel_size must be " \
          "positive integers"
    for tp, pp in ((0, 1), (1, 0), ("2", 1), (1, 1.0), (-1, 1)):
        assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=tp, pp=pp))]), SPEC) == [bad]
    defaults = {"model_loading_config": {"model_id": "m"}}  # TP and PP 1, one replica
    assert manifests.serve_config_errors(W, _serve([_app(defaults)]), SPEC) == []


def test_each_llm_config_key_and_lora_path():
    odd = _llm(tp=1, extra_key=1, lora_config={"dynamic_lora_loading_path": "/srv/lora"})
    odd["model_loading_config"] = {}
    assert manifests.serve_config_errors(W, _serve([_app(odd, "text")]), SPEC) == [
        f"{W}: {K}.applications[0].args.llm_configs[0]: unknown keys ['extra_key']",
        f"{W}: {K}.applications[0].args.llm_configs[0].lora_config.dynamic_lora_loading_path: '/srv/lora' is not a "
        "remote URI (s3://, gs://, abfss://, azure://): Ray Serve LLM's LoraConfig rejects it",
        f"{W}: {K}.applications[0].args.llm_configs[0].model_loading_config.model_id: required",
        f"{W}: {K}.applications[0].args.llm_configs[1]: must be a mapping",
    ]
    for uri in ("s3://b/l", "gs://b/l", "abfss://c@a.dfs.core.windows.net/l", "azure://c/l"):
        cfg = _llm(tp=1, lora_config={"dynamic_lora_loading_path": uri}, accelerator_type="H200",
                   runtime_env={}, experimental_configs={}, log_engine_metrics=True)
        assert manifests.serve_config_errors(W, _serve([_app(cfg)]), SPEC) == []
    for empty in ([], None, "x"):
        assert manifests.serve_config_errors(W, _serve([_app(**{"args": {"llm_configs": empty}})]), SPEC) == [
            f"{W}: {K}.applications[0].args.llm_configs: a non-empty list is required"]


def test_applications_names_prefixes_and_import_paths():
    apps = [_app(_llm(tp=1)),
            {"name": "a", "import_path": "mod:attr", "route_prefix": "/"},
            {"import_path": "mod.sub:app.attr", "route_prefix": "/b", "deployments": [], "runtime_env": {},
             "external_scaler_enabled": False, "args": {}},
            {"name": "c", "import_path": "no-colon", "route_prefix": "/c", "bogus": 1, "other": 2},
            "just a string",
            {"name": "d", "import_path": "ray.serve.llm:build_openai_app", "route_prefix": "/d"}]
    assert manifests.serve_config_errors(W, _serve(apps), SPEC) == [
        f"{W}: {K}.applications[1].name: 'a' used twice",
        f"{W}: {K}.applications[1].route_prefix: '/' used twice",
        f"{W}: {K}.applications[2].name: required",
        f"{W}: {K}.applications[3]: unknown keys ['bogus', 'other']",
        f"{W}: {K}.applications[3].import_path: must be module:attribute",
        f"{W}: {K}.applications[4]: must be a mapping",
        f"{W}: {K}.applications[5].args.llm_configs: a non-empty list is required",
    ]
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1), import_path="modé:x")]), SPEC) == [
        f"{W}: {K}.applications[0].import_path: must be module:attribute"]  # ASCII word characters only


def test_serve_config_that_is_not_a_yaml_string_or_has_no_applications():
    assert manifests.serve_config_errors(W, {"applications": []}, SPEC) == [f"{W}: {K}: must be a YAML string"]
    assert manifests.serve_config_errors(W, "a: [b\nc: d", SPEC)[0].startswith(f"{W}: {K}: not YAML (")
    for text in ("[]", "applications: {}", "applications: []", "x: 1", ""):
        assert manifests.serve_config_errors(W, text, SPEC) == [
            f"{W}: {K}.applications: a non-empty list is required"]


def test_upgrade_strategies():
    assert manifests.operator_errors(rayservice()) == []
    doc = rayservice(upgradeStrategy={"type": "Recreate"})
    assert manifests.operator_errors(doc) == [
        f"{W}: spec.upgradeStrategy.type: one of ['NewCluster', 'NewClusterWithIncrementalUpgrade', 'None']"]
    doc = rayservice(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade"})
    assert manifests.operator_errors(doc) == [
        f"{W}: spec.upgradeStrategy: incremental upgrades need enableInTreeAutoscaling",
        f"{W}: spec.upgradeStrategy.clusterUpgradeOptions.gatewayClassName: required"]
    doc = rayservice(upgradeStrategy={"type": "NewClusterWithIncrementalUpgrade",
                                      "clusterUpgradeOptions": {"gatewayClassName": "istio"}})
    doc["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    assert manifests.operator_errors(doc) == []
    assert manifests.operator_errors(rayservice(upgradeStrategy={"type": "NewCluster"})) == []
    assert manifests.operator_errors(rayservice(upgradeStrategy={})) == []


def test_service_links_are_named_once_per_object_for_ray_kinds_only():
    doc = rayservice()
    cluster = doc["spec"]["rayClusterConfig"]
    cluster["headGroupSpec"]["template"]["spec"]["enableServiceLinks"] = True
    cluster["workerGroupSpecs"][0]["template"]["spec"].pop("enableServiceLinks")
    line = f"{W}: template.spec.enableServiceLinks: set false (Service env vars such as VLLM_PORT break vLLM)"
    assert manifests.operator_errors(doc) == [line]
    rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
          "spec": copy.deepcopy(cluster)}
    assert manifests.operator_errors(rc) == [line.replace(W, "RayCluster/rc")]
    rc["spec"]["headGroupSpec"]["template"]["spec"]["enableServiceLinks"] = False
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["enableServiceLinks"] = False
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 9
    assert manifests.operator_errors(rc) == ["RayCluster/rc: workerGroupSpecs[0].replicas: 9 is outside [2, 2]"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    assert manifests.operator_errors(pod) == []


def test_error_paths_name_fields_and_indices():
    assert manifests._path(["spec", "workerGroupSpecs", 0, "template"]) == "spec.workerGroupSpecs[0].template"
    assert manifests._path([0, "a"]) == "[0].a"
    assert manifests._path([]) == "(object)"
    doc = rayservice()
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = "two"
    assert "RayService/llama: spec.rayClusterConfig.workerGroupSpecs[0].replicas: 'two' is not of type " \
           "'integer'" in manifests.validate([doc])


def test_core_kinds_go_to_kubernetes_validate_for_the_version_asked():
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    assert manifests.validate([cm]) == [] and manifests.validate([cm], "1.30") == []
    bad = {**cm, "data": {"k": 1}}
    assert manifests.validate([bad]) == ["ConfigMap/c: data.k: 1 is not of type 'string', 'null'"]
    assert manifests.validate([{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}]) == [
        "Widget/w: (kind): no schema for example.com/v1 Widget in Kubernetes 1.32 or the CRDs"]
    assert manifests.validate(["text", {"kind": "Pod"}, {"apiVersion": "v1"}]) == [
        "?/?: (document): not a Kubernetes object (apiVersion and kind required)"] * 3


def test_every_vendored_crd_version_is_validated_strictly():
    validators = manifests.crd_validators()
    assert {("ray.io/v1", "RayService"), ("ray.io/v1", "RayCluster"),
            ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
            ("gateway.networking.k8s.io/v1", "HTTPRoute")} <= set(validators)
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "x"},
           "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": []}}},
                    "replicaz": 1}}
    assert manifests.validate([lws]) == [
        "LeaderWorkerSet/x: spec: Additional properties are not allowed ('replicaz' was unexpected)"]


def test_strict_schema_keeps_what_it_does_not_touch():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True,
              "items": [{"type": "object", "properties": {}}]}
    out = manifests.strict_schema(schema)
    assert out == {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True,
                   "items": [{"type": "object", "properties": {}, "additionalProperties": False}]}
    assert manifests.strict_schema({"nullable": True}) == {}  # no type to widen
    assert manifests.strict_schema({"nullable": False, "type": "string"}) == {"type": "string"}
    assert manifests.strict_schema({"x-kubernetes-int-or-string": False, "type": "string"}) == {"type": "string"}
    assert manifests.strict_schema({"properties": {}, "x-kubernetes-preserve-unknown-fields": False}) == {
        "properties": {}, "x-kubernetes-preserve-unknown-fields": False, "additionalProperties": False}


def test_several_schema_errors_come_in_path_order():
    doc = rayservice()
    cluster = doc["spec"]["rayClusterConfig"]
    cluster["workerGroupSpecs"][0]["replicas"] = "two"
    cluster["headGroupSpec"]["rayStartParamz"] = {}
    doc["spec"]["aaa"] = 1
    errors = [e for e in manifests.validate([doc]) if "unexpected" in e or "is not of type" in e]
    assert errors == [
        "RayService/llama: spec: Additional properties are not allowed ('aaa' was unexpected)",
        "RayService/llama: spec.rayClusterConfig.headGroupSpec: Additional properties are not allowed "
        "('rayStartParamz' was unexpected)",
        "RayService/llama: spec.rayClusterConfig.workerGroupSpecs[0].replicas: 'two' is not of type 'integer'",
    ]


def test_worker_resources_against_each_start_parameter_and_a_container_without_gpus():
    line = f"{W}: workerGroupSpecs[0]: set resources either in rayStartParams or in .resources, not both"
    for key in ("num-cpus", "num-gpus", "memory"):
        group = worker(resources={"GPU": "8"}, params={key: "8"})
        group["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8}}
        assert line in cluster_errors(group)
    no_params = worker(resources={"GPU": "8"})
    del no_params["rayStartParams"]
    assert cluster_errors(no_params) == []
    cpu_only = worker(params={"num-gpus": "0"})
    cpu_only["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "8"}}
    assert cluster_errors(cpu_only) == []  # no GPU asked by the container: "0", as the parameter says


def test_capacity_of_a_group_without_max_replicas_is_zero_and_defaults_are_one_gpu():
    spec = {"rayClusterConfig": {"workerGroupSpecs": [{"template": {"spec": {"containers": [
        {"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}]}}
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1))]), spec) == [
        f"{W}: {K}.applications[0].args.llm_configs[0]: max_replicas x TP x PP = 1 GPUs, the worker groups have 0"]
    one = {"model_loading_config": {"model_id": "m"}, "placement_group_config": {"bundles": [{"GPU": 1}]}}
    assert manifests.serve_config_errors(W, _serve([_app(one)]), SPEC) == []  # TP and PP default to 1


def test_every_config_is_checked_after_a_bad_one():
    bad_tp = _llm(tp=0)
    late = _llm(tp=1, extra=1)
    assert manifests.serve_config_errors(W, _serve([_app("text", bad_tp, late)]), SPEC) == [
        f"{W}: {K}.applications[0].args.llm_configs[0]: must be a mapping",
        f"{W}: {K}.applications[0].args.llm_configs[1].engine_kwargs: tensor/pipeline_parallel_size must be positive "
        "integers",
        f"{W}: {K}.applications[0].args.llm_configs[2]: unknown keys ['extra']",
    ]


def test_the_yaml_error_quotes_its_first_line():
    text = "a: [b\nc: d"
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0]
    assert manifests.serve_config_errors(W, text, SPEC) == [f"{W}: {K}: not YAML ({first})"]


def test_one_replica_by_default_fits_one_gpu_exactly():
    spec = {"rayClusterConfig": {"workerGroupSpecs": [worker(gpus=1, hi=1)]}}
    assert manifests.serve_config_errors(W, _serve([_app(_llm(tp=1, hi=1))]), spec) == []
    no_autoscaling = {"model_loading_config": {"model_id": "m"}}
    assert manifests.serve_config_errors(W, _serve([_app(no_autoscaling)]), spec) == []


def test_a_rayservice_names_itself_in_its_cluster_errors():
    doc = rayservice()
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 3
    assert manifests.operator_errors(doc) == [f"{W}: workerGroupSpecs[0].replicas: 3 is outside [2, 2]"]
    doc = rayservice(serveConfigV2="applications: []")
    assert manifests.operator_errors(doc) == [f"{W}: {K}.applications: a non-empty list is required"]


def test_service_links_of_a_worker_alone_and_every_rule_of_one_object_and_of_every_document():
    rc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "Bad_name"},
          "spec": copy.deepcopy(rayservice()["spec"]["rayClusterConfig"])}
    rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["enableServiceLinks"] = True  # the head's is False
    rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    assert manifests.operator_errors(rc) == [
        "RayCluster/Bad_name: metadata.name: not a DNS-1035 label (KubeRay rule)",
        "RayCluster/Bad_name: workerGroupSpecs[0].replicas: 3 is outside [2, 2]",
        "RayCluster/Bad_name: template.spec.enableServiceLinks: set false (Service env vars such as VLLM_PORT "
        "break vLLM)"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": 1}}
    assert manifests.validate([cm, {**cm, "metadata": {"name": "d"}}]) == [
        "ConfigMap/c: data.k: 1 is not of type 'string', 'null'", "ConfigMap/d: data.k: 1 is not of type 'string', "
        "'null'"]
