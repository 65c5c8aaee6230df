"""gridready.stages.serve: fail closed, quarantine, render, and the hosts path with the playbook mocked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from gridready import ansible, vault
from gridready.artifacts import RunContext
from gridready.exitcodes import ExitCode
from gridready.serving import manifests
from gridready.stages import serve
from gridready.stages.serve import deploy as serve_deploy
from tests.unit.serving import fake_k8s_api
from tests.unit.serving.conftest import vllm_tier


def _ctx(root: Path, **flags: Any) -> RunContext:
    return RunContext(customer="acme", run_id="20261130T040000Z-bbbb", root=root, **flags)


def _summary(root: Path) -> dict[str, Any]:
    return json.loads((root / "acme" / "20261130T040000Z-bbbb" / "serve" / "summary.json").read_text())


def test_no_certification_refuses_with_exit_5(make_inv, tmp_path):
    inv = make_inv(2)
    result = serve.run(inv, _ctx(tmp_path / "artifacts"))
    assert result.exit_code == ExitCode.NOT_CERTIFIED
    assert result.status == "not-certified"
    assert "no certification found" in result.messages[0]
    assert _summary(tmp_path / "artifacts")["exit_code"] == 5


def test_too_few_nodes_after_quarantine_is_exit_5(make_inv, write_certify):
    inv = make_inv(2, [vllm_tier(tensor_parallel=8, pipeline_parallel=2)])
    root = write_certify(inv, ["gpu01"], ["gpu02"])
    result = serve.run(inv, _ctx(root))
    assert result.exit_code == 5
    assert result.hosts["gpu02"].status == "skipped"


def test_render_writes_valid_manifests_without_a_cluster(make_inv, write_certify):
    inv = make_inv(2, target="kubernetes")
    root = write_certify(inv, ["gpu01", "gpu02"])
    result = serve.run(inv, _ctx(root, render=True))
    assert result.exit_code == 0, result.messages
    out = root / "acme" / "20261130T040000Z-bbbb" / "serve" / "render"
    docs = list(yaml.safe_load_all((out / "serving" / "manifests.yaml").read_text()))
    docs += list(yaml.safe_load_all((out / "platform" / "manifests.yaml").read_text()))
    assert {d["kind"] for d in docs} >= {"RayService", "Service", "Secret", "Namespace", "Node"}
    assert manifests.validate(docs) == []
    releases = yaml.safe_load((out / "platform" / "helm-releases.yaml").read_text())
    assert {r["chart"] for r in releases} == {"gpu-operator", "kuberay-operator", "oci://registry.k8s.io/lws/charts/lws"}
    assert result.data["plan"][0]["pipeline_parallel"] == 2


def test_kubernetes_target_without_the_pulumi_cli_renders(make_inv, write_certify, monkeypatch):
    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: False)
    inv = make_inv(1, target="kubernetes")
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, _ctx(root))
    assert result.exit_code == 0
    assert any("pulumi CLI is not installed" in m for m in result.messages)


def test_kubernetes_target_with_the_cli_goes_through_the_automation_api(make_inv, write_certify, monkeypatch,
                                                                       tmp_path):
    calls = []
    tokens = []
    secrets_seen: dict[str, dict[str, str]] = {}
    configs_seen: dict[str, dict[str, Any]] = {}

    def up(stack, customer, config, secrets, state, preview, on_output):
        on_output(f"+ kubernetes:apps/v1:Deployment {stack} creating")  # Pulumi's lines reach the console
        secrets_seen[stack], configs_seen[stack] = secrets, config
        calls.append((stack, customer, sorted(secrets), preview))
        tokens.append(secrets.get("hfToken"))
        return {"ok": stack}

    monkeypatch.setattr(serve_deploy.gpulumi, "cli_available", lambda: True)
    monkeypatch.setattr(serve_deploy.gpulumi, "up", up)
    # the wait for the tiers after `up` has its own tests (test_k8s_wait.py, through a fake API)
    monkeypatch.setattr(serve_deploy.k8s_wait, "after_up", lambda *a, **k: [])
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the checks through the router: test_k8s_serves.py
    monkeypatch.setenv("GRIDREADY_HF_TOKEN", "hf_from_the_environment")  # not a source: the vault only
    inv = make_inv(1, target="kubernetes")
    (inv.path / "kubeconfig.yml").write_text(fake_k8s_api.kubeconfig("https://127.0.0.1:6443"))  # read before up
    vault.write(inv.customer, inv.path, {vault.HF_TOKEN_VAR: "hf_fromthevault"})
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, _ctx(root))
    assert result.exit_code == 0, result.messages
    assert calls == [("platform", "acme", ["kubeconfig"], False),
                     ("serving", "acme", ["hfToken", "kubeconfig", "loraBucketEnv", "mpiSshKeys", "routerKeys",
                                          "vllmApiKey"],
                      False)]
    assert tokens == [None, "hf_fromthevault"]  # a Pulumi secret config value of the serving stack only
    # the vLLM API key comes from the customer's vault (made there on first use) as Pulumi secret config; the
    # stack config (plain) never holds it
    key = vault.read(inv.customer, inv.path)[vault.API_KEY_VAR]
    assert len(key) >= 32 and secrets_seen["serving"]["vllmApiKey"] == key
    assert key not in json.dumps(configs_seen["serving"])
    # mpirun's ssh keys: made in the vault once, passed as secret config, never in the plain stack config
    data = vault.read(inv.customer, inv.path)
    client, host = data[vault.MPI_CLIENT_KEY_VAR], data[vault.MPI_HOST_KEY_VAR]
    assert client.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and client != host
    assert json.loads(secrets_seen["serving"]["mpiSshKeys"]) == {"client": client, "host": host}
    assert client not in json.dumps(configs_seen["serving"])


def _fake_playbook(captured: dict[str, Any], changed: int = 0):
    def run_playbook(inv, playbook, stage_dir, **kwargs):
        captured.update(playbook=playbook, **kwargs)
        hosts = {h: ansible.HostStats(ok=10, changed=changed) for h in kwargs["extravars"]["gridready_serve"]["hosts"]}
        events = [{"event": "runner_on_ok", "event_data": {
            "host": "gpu01", "task": "Record the firewall decision",
            "res": {"ansible_facts": {"gridready_ray_node_firewall_record": {"tool": "none"}}}}}]
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts=hosts, events=events)
    return run_playbook


def test_hosts_target_runs_serve_yml_on_certified_nodes_only(make_inv, write_certify, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(3, [vllm_tier(pipeline_parallel=2)])
    root = write_certify(inv, ["gpu01", "gpu03"], ["gpu02"])
    result = serve.run(inv, _ctx(root))
    assert result.exit_code == 0, result.messages
    assert captured["playbook"] == "serve.yml"
    plan = captured["extravars"]["gridready_serve"]
    assert sorted(plan["hosts"]) == ["gpu01", "gpu03"]
    assert plan["tiers"][0]["args"][0] == "serve"
    assert plan["tiers"][0]["expected_gpus"] == 16
    assert result.hosts["gpu02"].status == "skipped"
    assert result.hosts["gpu01"].detail["firewall"] == {"tool": "none"}


def test_a_sandbox_inventory_gets_the_same_engine_command_and_its_own_ray_sizing(make_inv, write_certify,
                                                                               monkeypatch):
    """No simulation switch: an inventory with sandbox.yml renders the real `vllm serve` line; the small Ray
    resources of the sandbox come from serving.ray_node like any customer's."""
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(1)
    root = write_certify(inv, ["gpu01"])
    serve.run(inv, _ctx(root))
    plain = captured["extravars"]["gridready_serve"]
    (inv.path / "sandbox.yml").write_text("defaults: {}\n")
    inv.spec.serving.ray_node.num_cpus = 1
    serve.run(inv, RunContext(customer="acme", run_id="20261130T050000Z-dddd", root=root))
    plan = captured["extravars"]["gridready_serve"]
    assert "engine_mode" not in plan
    assert plan["tiers"][0]["args"] == plain["tiers"][0]["args"]
    assert "--ray-address" not in plan["tiers"][0]["args"]
    assert (plain["ray_sizing"]["num_cpus"], plan["ray_sizing"]["num_cpus"]) == (0, 1)

def test_check_mode_with_changes_is_exit_6(make_inv, write_certify, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured, changed=2))
    inv = make_inv(1)
    root = write_certify(inv, ["gpu01"])
    result = serve.run(inv, _ctx(root, check=True))
    assert captured["check"] is True
    assert result.exit_code == ExitCode.CHANGES_PENDING


def test_the_newest_certification_wins(make_inv, write_certify):
    inv = make_inv(1, target="kubernetes")
    write_certify(inv, ["gpu01"], run_id="20261130T010000Z-aaaa")
    root = write_certify(inv, [], ["gpu01"], run_id="20261130T020000Z-cccc")
    result = serve.run(inv, _ctx(root, render=True))
    assert result.exit_code == 5


def test_triton_tiers_ride_along_then_get_their_own_tagged_runs(make_inv, write_certify, monkeypatch):
    calls: list[dict[str, Any]] = []

    def run_playbook(inv, playbook, stage_dir, **kwargs):
        calls.append({"stage_dir": stage_dir, **kwargs})
        hosts = {h: ansible.HostStats(ok=1) for h in kwargs["extravars"]["gridready_serve"]["hosts"]}
        return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts=hosts)

    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", run_playbook)
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    trt = {"engine": "triton-trtllm", "tensor_parallel": 8, "pipeline_parallel": 1,
           "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                     "revision": "0e9e39f249a16976918f6564b8830bc894c89659"}}
    inv = make_inv(3, [vllm_tier(pipeline_parallel=1), {**trt, "name": "trt-a", "served_name": "a", "port": 9000},
                       {**trt, "name": "trt-b", "served_name": "b", "port": 9100}])
    (inv.path / "sandbox.yml").write_text("defaults: {}\n")
    root = write_certify(inv, inv.gpu_hosts())
    result = serve.run(inv, _ctx(root))
    assert result.exit_code == 0, result.messages
    assert [c["extravars"]["gridready_serve_triton_hosts"] for c in calls] == [["gpu02"], ["gpu03"]]
    assert (calls[0]["tags"], calls[1]["tags"], calls[1]["limit"]) == (None, "triton", "gpu03")
    assert calls[0]["extravars"]["gridready_triton_trtllm_tier"] == "trt-a"
    assert calls[1]["extravars"]["gridready_triton_trtllm_tier"] == "trt-b"
    assert calls[0]["stage_dir"] != calls[1]["stage_dir"]
    assert [t["tier"] for t in result.data["triton"]] == ["trt-a", "trt-b"]


def test_plan_view_for_hosts_and_kubernetes(make_inv, write_certify):
    inv = make_inv(2)
    root = write_certify(inv, ["gpu01", "gpu02"])
    view = serve.render(inv, _ctx(root))
    assert view["hosts"]["gpu02"]["role"] == "worker"
    assert view["tiers"][0]["args"][:2] == ["serve", "meta-llama/Llama-3.3-70B-Instruct"]
    k8s = serve.render(make_inv(2, target="kubernetes"), _ctx(root))
    # 2 Secrets, RayService, Service, NetworkPolicy; the router's ConfigMap, Deployment, Service, NetworkPolicy
    assert k8s["manifests"]["counts"]["serving"]["manifests"] == 9


def test_plan_view_without_certification(make_inv, tmp_path):
    assert serve.render(make_inv(1), _ctx(tmp_path / "none"))["exit_code"] == 5
