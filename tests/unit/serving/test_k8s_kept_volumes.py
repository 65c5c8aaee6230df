"""`serve --down` keeps the weights and engine-cache claims; `--purge-volumes` deletes them (issue 44, finding 2)."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gridready import pulumi as gpulumi
from gridready.artifacts import RunContext
from gridready.serving import topology
from gridready.stages.serve import config as serve_config
from gridready.stages.serve import down as serve_down
from tests.summaries import certified_ledger
from tests.unit.serving import fake_k8s_api
from tests.unit.serving.test_consistency import triton_tier

CLAIMS = "/api/v1/namespaces/gridready-serving/persistentvolumeclaims"


def test_the_claims_are_retained_on_destroy_and_adopted_again(make_inv, monkeypatch) -> None:
    made: list[tuple[str, pulumi.ResourceOptions]] = []
    original = k8s.core.v1.PersistentVolumeClaim

    def claim(name: str, *args: Any, opts: pulumi.ResourceOptions, **kwargs: Any) -> Any:
        made.append((name, opts))
        return original(name, *args, opts=opts, **kwargs)

    monkeypatch.setattr(k8s.core.v1, "PersistentVolumeClaim", claim)
    inv = make_inv(2, [triton_tier()], target="kubernetes")
    cert = topology.read_certification(inv, certified_ledger(inv, ["gpu01", "gpu02"]))
    config = serve_config.stack_configs(inv, cert, topology.plan_tiers(inv, cert))["serving"]
    rendered = gpulumi.render("serving", config, "acme")
    assert sorted(n for n, _ in made) == ["llama70b-trt-engines", "llama70b-trt-weights"]
    assert all(opts.retain_on_delete for _, opts in made)
    # the provider that adopts an existing claim instead of failing with AlreadyExists
    assert all(opts.provider is not None and opts.provider._name == "k8s-kept-claims" for _, opts in made)
    kept = [d for d in rendered.manifests if d["kind"] == "PersistentVolumeClaim"]
    assert len(kept) == 2 and all(d["metadata"]["labels"]["gridready.io/kept-volume"] == "true" for d in kept)


def _down(make_inv, monkeypatch, tmp_path, objects: dict[str, Any], seen: list[str], **flags: Any) -> Any:
    monkeypatch.setattr(gpulumi, "cli_available", lambda: True)
    destroyed: list[str] = []
    monkeypatch.setattr(gpulumi, "destroy", lambda stack, customer, state, **kw: destroyed.append(stack))
    inv = make_inv(2, [triton_tier()], target="kubernetes")
    with fake_k8s_api.serve(objects, seen) as url:
        (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig(url))
        res = serve_down.run(inv, RunContext(customer="acme", run_id="20261202T000000Z-k1", root=tmp_path, **flags))
    assert destroyed == ["serving"]
    return res


def _objects() -> dict[str, Any]:
    listed = {"items": [{"metadata": {"name": "llama70b-trt-weights"}}, {"metadata": {"name": "llama70b-trt-engines"}}]}
    return {f"{CLAIMS}?labelSelector=gridready.io/kept-volume=true,app.kubernetes.io/managed-by=gridready": listed,
            f"{CLAIMS}/llama70b-trt-weights": {"kind": "PersistentVolumeClaim"},
            f"{CLAIMS}/llama70b-trt-engines": {"kind": "PersistentVolumeClaim"}}


def test_down_keeps_the_claims_by_default(make_inv, monkeypatch, tmp_path) -> None:
    seen: list[str] = []
    res = _down(make_inv, monkeypatch, tmp_path, _objects(), seen)
    assert res.exit_code == 0, res.messages
    assert not [s for s in seen if s.startswith("DELETE")]
    assert any("kept the weights and engine-cache claims" in m for m in res.messages)


def test_purge_volumes_deletes_the_kept_claims(make_inv, monkeypatch, tmp_path) -> None:
    seen: list[str] = []
    objects = _objects()
    res = _down(make_inv, monkeypatch, tmp_path, objects, seen, purge_volumes=True)
    assert res.exit_code == 0, res.messages
    assert sorted(s for s in seen if s.startswith("DELETE")) == [f"DELETE {CLAIMS}/llama70b-trt-engines",
                                                                  f"DELETE {CLAIMS}/llama70b-trt-weights"]
    assert any("deleted the kept claims: llama70b-trt-engines, llama70b-trt-weights" in m for m in res.messages)
