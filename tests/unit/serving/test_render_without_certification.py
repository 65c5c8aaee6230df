"""`serve --render` needs no cluster and no certification (issue 33, docs that match the code): before any certify
run it renders as if every GPU node were certified and says so; a deployment still refuses (exit 5)."""

from __future__ import annotations

from pathlib import Path

from gridready import ledger
from gridready.artifacts import RunContext
from gridready.exitcodes import ExitCode
from gridready.serving import topology
from gridready.stages import serve
from tests.unit.serving.conftest import vllm_tier


def _ctx(root: Path, run_id: str, **kw) -> RunContext:
    return RunContext(customer="acme", run_id=run_id, root=root, **kw)


def test_a_render_before_any_certification_sizes_on_every_node(make_inv, tmp_path: Path) -> None:
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2)], target="kubernetes")
    res = serve.run(inv, _ctx(tmp_path / "artifacts", "20261202T000000Z-r", render=True))
    assert res.exit_code == ExitCode.OK, res.messages
    assert topology.HYPOTHETICAL in res.messages and res.certification == topology.HYPOTHETICAL
    assert sorted(res.data["certified"]) == ["gpu01", "gpu02"]
    assert any(p.endswith(".yaml") for p in res.data["render"]["files"])
    found = ledger.read(tmp_path / "artifacts", "acme")  # a render records nothing
    assert found is None or (not found[1].nodes and found[1].serving is None)


def test_a_deployment_still_needs_a_certification(make_inv, tmp_path: Path) -> None:
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2)], target="kubernetes")
    res = serve.run(inv, _ctx(tmp_path / "artifacts", "20261202T000000Z-d"))
    assert res.exit_code == ExitCode.NOT_CERTIFIED
    assert "no certification found" in " ".join(res.messages)
