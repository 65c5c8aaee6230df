"""serve on Kubernetes ends only when it serves (issue 44, finding 1), end to end without an API server: the real
serving program under Pulumi's own mocks is what `pulumi up` creates; a fake API on loopback reports, for every
workload created, only the status fields its controller publishes; a loopback OpenAI-compatible engine (the
simulated engine of tests/unit/bench) stands where the router answers. Readiness, smoke, benchmark and SLO gate
run through it exactly as on hosts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import bench, inventory, vault
from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving import k8s_status
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from tests.unit.bench.conftest import start_engine
from tests.unit.serving import fake_gateway, fake_k8s_api
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_consistency import triton_tier

KEY = "s" * 43  # the serving API key: the router's master key on Kubernetes
SERVED = "llama-3.3-70b"
FAST = ("--ttft-ms", "5", "--itl-ms", "2", "--prefill-us-per-token", "0")
SLO = {"ttft_ms_p99": 400.0, "tpot_ms_p99": 200.0}
SMALL = {"concurrency": [2], "num_prompts": 6, "duration_s": 3.0, "input_len": 8, "output_len": 4, "warmup": 0}
CRDS = Path(__file__).resolve().parents[3] / "gridready" / "data" / "crds"


def _inventory(make_inv, **serving: Any) -> Inventory:
    inv = make_inv(1, [vllm_tier(slo=SLO)], target="kubernetes")
    path = inv.path / "cluster.yml"
    spec = yaml.safe_load(path.read_text())
    spec["serving"]["wait_timeout_s"] = 20  # readiness through the router: a tier that never answers fails fast
    for key, value in serving.items():
        if key == "router_url":
            spec["serving"]["kubernetes"]["router_url"] = value
        else:
            spec["serving"][key] = value
    path.write_text(yaml.safe_dump(spec))
    vault.write(inv.customer, inv.path, {vault.HF_TOKEN_VAR: "hf_fromthevault", vault.API_KEY_VAR: KEY,
                                         "vault_router_client_key": "c" * 43})
    return inventory.load(inv.path)


class Cluster:
    """What `pulumi up` created (the serving program under Pulumi's mocks) and the fake API that reports on it."""

    def __init__(self, never_ready: set[str] = frozenset(), gateway: dict[str, Any] | None = None,
                 attached: list[dict[str, Any]] | None = None) -> None:
        self.attached = [] if attached is None else attached  # the HTTPRoutes the fake Gateway forwards by
        self.objects: dict[str, dict[str, Any]] = {}
        self.created: list[dict[str, Any]] = []
        self.seen: list[str] = []
        self.never_ready = never_ready
        if gateway is not None:
            self.objects[fake_k8s_api.path_of(gateway)] = gateway

    def up(self, stack: str, customer: str, config: dict[str, Any], secrets: dict[str, str], state: Path,
           preview: bool = False, on_output: Any = None) -> dict[str, Any]:
        rendered = gpulumi.render(stack, config, customer)
        for doc in rendered.manifests:
            if doc["kind"] == "HTTPRoute":
                self.attached.append(doc)
            if doc["kind"] in ("RayService", "LeaderWorkerSet", "Deployment", "HTTPRoute"):
                self.created.append(doc)
                obj = fake_k8s_api.ready(doc)
                if doc["metadata"]["name"] in self.never_ready:
                    obj["status"] = {"conditions": [fake_k8s_api.condition(
                        "Ready", "False", "InitializingTimeout",
                        "RayService failed to initialize within 40m; the operator will not retry")],
                        "numServeEndpoints": 0}
                self.objects[fake_k8s_api.path_of(doc)] = obj
        return {}


def _serve(monkeypatch, inv: Inventory, cluster: Cluster, root: Path) -> Any:
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", cluster.up)
    monkeypatch.setattr(bench, "Workload", lambda **kw: bench.workload.Workload(**(SMALL | kw)))
    monkeypatch.setattr(serve_deploy.k8s_wait, "POLL_S", 0.01)
    with fake_k8s_api.serve(cluster.objects, cluster.seen) as url:
        (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig(url))
        return serve.run(inv, RunContext(customer="acme", run_id="20261206T220000Z-k8sv", root=root))


@pytest.fixture
def engine(tmp_path: Path):
    """The loopback OpenAI-compatible endpoint where the router answers: the model by its route's name, the
    router's master key required."""
    started = []

    def make(*timing: str):
        started.append(start_engine(tmp_path, "--model", SERVED, *(timing or FAST),
                                    env={**os.environ, "VLLM_API_KEY": KEY}))
        return started[-1]

    yield make
    for e in started:
        e.stop()


def test_ready_tiers_are_checked_through_the_router_and_serve_ends_with_the_summary(
        make_inv, write_certify, monkeypatch, engine):
    router = engine()
    inv = _inventory(make_inv, router_url=router.url)
    cluster = Cluster()
    root = write_certify(inv, ["gpu01"])
    result = _serve(monkeypatch, inv, cluster, root)
    assert result.exit_code == 0, result.messages
    # every workload the program created was awaited through the API, before the checks
    workloads = [d for d in cluster.created if d["kind"] != "HTTPRoute"]
    assert {d["kind"] for d in workloads} == {"RayService", "Deployment"}
    for doc in workloads:
        assert f"GET {fake_k8s_api.path_of(doc)}" in cluster.seen
    assert result.data["bench"]["llama70b"]["passed"] is True
    assert result.data["router"] == {"url": router.url, "reached_by": "serving.kubernetes.router_url",
                                     "routes": [SERVED], "overhead": None}
    (report_file,) = root.glob("acme/*/serve/bench/llama70b.json")
    report = json.loads(report_file.read_text())
    assert report["readiness"]["ready"] and report["smoke"]["ok"] and report["gate"]["passed"]
    assert report["endpoint"]["url"] == router.url and report["endpoint"]["model"] == SERVED
    summary = json.loads((report_file.parents[1] / "summary.json").read_text())
    assert summary["exit_code"] == 0 and summary["data"]["router"]["url"] == router.url


def test_through_the_gateway_the_router_is_reached_at_its_published_address(make_inv, write_certify,
                                                                            monkeypatch, engine):
    router = engine()
    inv = _inventory(make_inv, router={"enabled": True, "keys": [{"name": "app", "vault_var":
                                                                   "vault_router_client_key"}]})
    attached: list[dict[str, Any]] = []
    asked: list[str] = []
    with fake_gateway.serve(attached, router.url, asked) as port:
        cluster = Cluster(gateway={**fake_k8s_api.gateway("inference-gateway", "127.0.0.1", port),
                                   "metadata": {"name": "inference-gateway", "namespace": "gridready-serving"}},
                          attached=attached)
        result = _serve(monkeypatch, inv, cluster, write_certify(inv, ["gpu01"]))
    assert result.exit_code == 0, result.messages
    assert result.data["router"]["url"] == f"http://127.0.0.1:{port}"
    assert result.data["router"]["reached_by"] == "Gateway gridready-serving/inference-gateway"
    (route,) = attached
    assert f"GET {fake_k8s_api.path_of(route)}" in cluster.seen  # the route's acceptance was awaited
    # readiness, smoke and benchmark asked only what the router's HTTPRoute hands on
    assert {a.split(" ", 1)[1] for a in asked} >= {"/health", "/v1/models", "/v1/chat/completions"}
    assert not [a for a in asked if a.startswith("404")]


def test_a_never_ready_rayservice_is_exit_3_naming_the_tier_and_its_last_condition(make_inv, write_certify,
                                                                                   monkeypatch, engine):
    router = engine()
    inv = _inventory(make_inv, router_url=router.url)
    result = _serve(monkeypatch, inv, Cluster(never_ready={"llama70b"}), write_certify(inv, ["gpu01"]))
    assert result.exit_code == ExitCode.STAGE_FAILED
    text = "\n".join(result.messages)
    assert "tier llama70b" in text and "InitializingTimeout" in text and "will not retry" in text
    assert "bench" not in result.data  # nothing was measured on a tier that never served


def test_an_slo_miss_through_the_router_is_the_same_exit_as_on_hosts(make_inv, write_certify, monkeypatch,
                                                                    engine):
    router = engine("--ttft-ms", "900", "--itl-ms", "2", "--prefill-us-per-token", "0")  # p99 TTFT > 400 ms
    inv = _inventory(make_inv, router_url=router.url)
    result = _serve(monkeypatch, inv, Cluster(), write_certify(inv, ["gpu01"]))
    assert result.exit_code == ExitCode.STAGE_FAILED  # verify_tiers on hosts: a failed gate is exit 3
    assert result.data["bench"]["llama70b"]["passed"] is False
    assert any("llama70b" in m and "TTFT" in m for m in result.messages), result.messages


def test_an_inventory_that_names_no_way_to_the_router_is_exit_2_before_anything_is_applied(
        make_inv, write_certify, monkeypatch):
    inv = _inventory(make_inv)  # no router_url, router not enabled
    cluster = Cluster()
    ups: list[str] = []
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", lambda stack, *a, **k: ups.append(stack) or {})
    (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig("https://127.0.0.1:6443"))
    result = serve.run(inv, RunContext(customer="acme", run_id="20261206T220100Z-k8sv",
                                       root=write_certify(inv, ["gpu01"])))
    assert result.exit_code == ExitCode.INVALID and ups == [] and not cluster.seen
    (line,) = [m for m in result.messages if "router_url" in m]
    assert line.startswith("inventories/acme/cluster.yml: serving.kubernetes.router_url: ")
    assert "serving.router" in line


def test_a_tier_the_router_does_not_front_is_exit_2_before_anything_is_applied(make_inv, write_certify,
                                                                               monkeypatch):
    inv = make_inv(2, [triton_tier()], target="kubernetes")
    ups: list[str] = []
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", lambda stack, *a, **k: ups.append(stack) or {})
    (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig("https://127.0.0.1:6443"))
    result = serve.run(inv, RunContext(customer="acme", run_id="20261206T220200Z-k8sv",
                                       root=write_certify(inv, ["gpu01", "gpu02"])))
    assert result.exit_code == ExitCode.INVALID and ups == []
    assert any("serving.tiers[0].engine" in m and "not fronted by the router" in m for m in result.messages)


@pytest.mark.parametrize(("crd", "kind"), [("ray.io_rayservices.yaml", "RayService"),
                                           ("leaderworkerset.x-k8s.io_leaderworkersets.yaml", "LeaderWorkerSet"),
                                           ("gateway.networking.k8s.io_httproutes.yaml", "HTTPRoute")])
def test_the_fake_reports_only_status_fields_the_pinned_controllers_publish(crd, kind):
    schema = next(v for v in yaml.safe_load((CRDS / crd).read_text())["spec"]["versions"] if v["name"] == "v1")
    published = schema["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    doc = {"apiVersion": "x/v1", "kind": kind, "metadata": {"name": "t", "namespace": "n"},
           "spec": {"replicas": 2, "parentRefs": [{"name": "g"}]}}
    status = fake_k8s_api.ready(doc)["status"]
    assert set(status) <= set(published)
    if kind == "HTTPRoute":
        parent = published["parents"]["items"]["properties"]
        assert {k for p in status["parents"] for k in p} <= set(parent)
    else:
        assert set(status["conditions"][0]) <= set(published["conditions"]["items"]["properties"])
    assert k8s_status.state(kind, fake_k8s_api.ready(doc)).ready


@pytest.mark.parametrize("url", ["ftp://gateway.example", "http://gateway.example/v1", "gateway.example:80",
                                 "http://user@gateway.example"])
def test_a_router_url_that_is_not_a_bare_http_url_is_exit_2_naming_the_key(make_inv, url: str) -> None:
    with pytest.raises(GridreadyError) as err:
        _inventory(make_inv, router_url=url)
    assert err.value.code == ExitCode.INVALID and "serving.kubernetes.router_url" in str(err.value)
