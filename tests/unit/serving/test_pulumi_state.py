"""The encrypted Pulumi state lives apart from artifacts/ (which CI uploads)."""

from __future__ import annotations

from typing import Any

from gridready.artifacts import RunContext
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from tests.unit.serving import fake_k8s_api


def test_pulumi_state_is_kept_out_of_the_artifacts(make_inv, write_certify, monkeypatch, tmp_path):
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", lambda stack, customer, config, secrets, state, preview=False,
                        **_kw: calls.append({"stack": stack, "state": state}) or {})
    # the wait for the tiers after `up` has its own tests (test_k8s_wait.py, through a fake API)
    monkeypatch.setattr(serve_deploy.k8s_wait, "after_up", lambda *a, **k: [])
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the checks through the router: test_k8s_serves.py
    monkeypatch.delenv("GRIDREADY_STATE", raising=False)
    inv = make_inv(1, target="kubernetes")
    (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig("https://127.0.0.1:6443"))  # read before up
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, RunContext(customer="acme", run_id="r-state", root=root))
    assert result.exit_code == 0, result.messages
    assert {c["stack"] for c in calls} == {"platform", "serving"}
    for call in calls:
        assert call["state"] == tmp_path / "state" / "acme" / "pulumi"
        assert not call["state"].is_relative_to(root)
