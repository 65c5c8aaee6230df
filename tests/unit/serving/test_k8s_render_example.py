"""docs/examples/k8s-render/ is what `invoke serve --render` writes for inventories/acme-h200-k8s (every node
certified): both stacks, both tiers, the multi-node Triton tier on a LeaderWorkerSet. The files must match the
code; regenerate them with

    GRIDREADY_REGENERATE_EXAMPLES=1 PYTHONPATH=$PWD .venv/bin/pytest -q tests/unit/serving/test_k8s_render_example.py
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml

from gridready import inventory
from gridready.artifacts import RunContext
from gridready.serving import consistency, manifests
from gridready.stages import serve
from tests.summaries import certification

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "docs" / "examples" / "k8s-render"
INVENTORY = REPO / "inventories" / "acme-h200-k8s"
HOSTS = ["acme-gpu01", "acme-gpu02", "acme-gpu03", "acme-gpu04"]


def _render(tmp_path: Path) -> Path:
    inv = inventory.load(INVENTORY)
    root = tmp_path / "artifacts"
    certification(inv, HOSTS, run_id="20261201T000000Z-cert", root=root)
    ctx = RunContext(customer=inv.customer, run_id="20261201T010000Z-render", root=root, render=True)
    result = serve.run(inv, ctx)
    assert result.exit_code == 0, result.messages
    return ctx.stage_dir("serve") / "render"


def _files(folder: Path) -> dict[str, list[object]]:
    """Each file's documents (mappings compare regardless of the order the mocks resolved keys in)."""
    return {str(p.relative_to(folder)): list(yaml.safe_load_all(p.read_text())) for p in sorted(folder.rglob("*.yaml"))}


def test_the_committed_example_is_what_the_code_renders(tmp_path: Path) -> None:
    out = _render(tmp_path)
    if os.environ.get("GRIDREADY_REGENERATE_EXAMPLES"):
        for stack in ("platform", "serving"):
            shutil.rmtree(EXAMPLE / stack, ignore_errors=True)
            shutil.copytree(out / stack, EXAMPLE / stack)
    assert _files(EXAMPLE) == _files(out), "stale docs/examples/k8s-render: regenerate it (see the module docstring)"


def test_the_example_passes_the_schemas_and_the_checker() -> None:
    docs = [d for stack in ("platform", "serving")
            for d in yaml.safe_load_all((EXAMPLE / stack / "manifests.yaml").read_text())]
    releases = yaml.safe_load((EXAMPLE / "platform" / "helm-releases.yaml").read_text())
    assert manifests.validate(docs) == []
    assert consistency.check(docs, releases) == []
    lws = next(d for d in docs if d["kind"] == "LeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 2 and lws["spec"]["startupPolicy"] == "LeaderCreated"
    assert {d["kind"] for d in docs} >= {"RayService", "LeaderWorkerSet", "Service", "ConfigMap", "Job", "Node"}
