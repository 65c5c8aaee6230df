"""The runner wrapper on a real local play: stats per host, check mode, failures, fresh private dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gridready import ansible
from gridready.artifacts import RunContext
from gridready.exitcodes import ExitCode
from gridready.inventory import load
from gridready.stages.common import outcome_from_playbook

PLAY = Path(__file__).parent / "playbooks" / "marker.yml"


@pytest.fixture
def local_inv(tmp_path, monkeypatch):
    inv = tmp_path / "inventories" / "lab"
    inv.mkdir(parents=True)
    (inv / "cluster.yml").write_text(yaml.safe_dump({
        "customer": "lab",
        "node_groups": [{"name": "gpu_nodes", "sku": "h200", "gpus_per_node": 2, "platform": "passthrough"}],
    }))
    hosts = {"all": {"children": {"gpu_nodes": {"hosts": {
        "node-a": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "node-b": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
    }}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    monkeypatch.chdir(tmp_path)
    return load("lab")


def _ctx(tmp_path: Path, **kw) -> RunContext:
    return RunContext(customer="lab", run_id="r1", root=tmp_path / "artifacts", **kw)


def test_converge_then_idempotent_then_check_clean(local_inv, tmp_path):
    out = tmp_path / "markers"
    out.mkdir()
    extra = {"marker_dir": str(out), "marker_text": "hello"}
    first = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1", extravars=extra)
    assert first.status == "successful"
    assert first.changed_hosts == ["node-a", "node-b"]
    assert (out / "node-a.txt").read_text() == "hello\n"
    second = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s2", extravars=extra)
    assert second.changed_hosts == []
    assert outcome_from_playbook(second)[1] == ExitCode.OK
    check = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s3", check=True,
                                 extravars={**extra, "marker_text": "changed"})
    assert check.changed_hosts == ["node-a", "node-b"]
    assert (out / "node-a.txt").read_text() == "hello\n"  # check mode changed nothing


def test_failed_host_is_exit_3_and_the_other_host_carries_on(local_inv, tmp_path):
    out = tmp_path / "markers"
    out.mkdir()
    result = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1",
                                  extravars={"marker_dir": str(out), "marker_text": "x", "fail_on": ["node-b"]})
    status, code, hosts = outcome_from_playbook(result)
    assert (status, code) == ("failed", ExitCode.STAGE_FAILED)
    assert hosts["node-b"].status == "failed"
    assert hosts["node-a"].status == "changed"
    assert result.task_results("node-b", "Fail where asked")[0]["msg"] == "asked to fail on node-b"


def test_limit_restricts_hosts_and_private_dir_is_fresh(local_inv, tmp_path):
    out = tmp_path / "markers"
    out.mkdir()
    result = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1", limit="node-a",
                                  extravars={"marker_dir": str(out), "marker_text": "x"})
    assert set(result.hosts) == {"node-a"}
    assert not (out / "node-b.txt").exists()
    assert not (result.private_data_dir / "env" / "extravars").exists()  # suppress_env_files
    with pytest.raises(FileExistsError):
        ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1")


CANARY = "canary-7f3e9b1d-not-for-artifacts"


def test_controller_secrets_never_reach_the_runner_artifacts(local_inv, tmp_path, monkeypatch):
    """ansible-runner copies os.environ into artifacts/<id>/command; only what Ansible needs may pass."""
    for name in ("AWS_SECRET_ACCESS_KEY", "GRIDREADY_PULUMI_PASSPHRASE", "GRIDREADY_HF_TOKEN", "ANSIBLE_BECOME_PASS",
                 "SOME_UNRELATED_VARIABLE"):
        monkeypatch.setenv(name, CANARY)
    out = tmp_path / "markers"
    out.mkdir()
    result = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1",
                                  extravars={"marker_dir": str(out), "marker_text": "x"})
    assert result.status == "successful"
    command = next(result.private_data_dir.glob("artifacts/*/command"))
    recorded = json.loads(command.read_text())
    assert recorded["env"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"  # ansible-runner would set False
    assert "--diff" not in recorded["command"]
    leaks = [p for p in result.private_data_dir.rglob("*") if p.is_file() and CANARY in p.read_text(errors="ignore")]
    assert leaks == []


def test_scrubbed_env_keeps_what_ansible_needs_and_drops_secret_names():
    env = ansible.scrubbed_env(
        {"HOME": "/root", "LC_ALL": "C.UTF-8", "ANSIBLE_VAULT_PASSWORD_FILE": "/run/vp", "ANSIBLE_BECOME_PASS": "x",
         "AWS_SECRET_ACCESS_KEY": "x", "GITHUB_TOKEN": "x", "PATH": "/usr/bin"},
        {"PATH": "/venv/bin:/usr/bin"},
    )
    assert env == {"HOME": "/root", "LC_ALL": "C.UTF-8", "ANSIBLE_VAULT_PASSWORD_FILE": "/run/vp",
                   "PATH": "/venv/bin:/usr/bin"}


def test_hostvars_leave_no_decrypted_vault_or_environment_on_disk(tmp_path, monkeypatch):
    """The fabric phase reads every host's variables with the vault open; ansible_runner.get_inventory ran that in
    a private data dir under TMPDIR that nothing removed: its stdout and job_events held the decrypted vault,
    its `command` the whole controller environment. Nothing of either may be written anywhere."""
    import shutil
    import tempfile

    from gridready import vault

    inv_dir = tmp_path / "inventories" / "sandbox"
    shutil.copytree(ansible.REPO / "inventories" / "sandbox", inv_dir)
    password = tmp_path / "vault-pass"
    password.write_text("a-test-password\n")
    monkeypatch.setenv("GRIDREADY_VAULT_PASSWORD_FILE", str(password))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CANARY + "env")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    inv = load(str(inv_dir))
    vault.write(inv.customer, inv.path, {"vault_gridready_vllm_api_key": CANARY + "vault"})
    before = {p for p in tmp_path.rglob("*")}
    hv = ansible.hostvars(inv)
    assert hv["node1"]["vault_gridready_vllm_api_key"] == CANARY + "vault"  # the vault was open
    assert hv["node1"]["ansible_host"]
    written = [p for p in tmp_path.rglob("*") if p not in before]
    assert written == []


def _lookup(marker: Path) -> str:
    return "{{ lookup('pipe', 'touch " + str(marker) + "') }}"


def test_a_template_in_a_value_reaches_the_play_as_data(local_inv, tmp_path):
    """Issue 32: a value from the inventory holding a lookup is written literally by a real play; the lookup never
    runs on the controller."""
    out = tmp_path / "markers"
    out.mkdir()
    pwned = tmp_path / "pwned"
    result = ansible.run_playbook(local_inv, str(PLAY), tmp_path / "s1",
                                  extravars={"marker_dir": str(out), "marker_text": _lookup(pwned)})
    assert result.status == "successful"
    assert (out / "node-a.txt").read_text() == _lookup(pwned) + "\n"
    assert not pwned.exists()


def test_unsafe_marks_hold_where_ansible_trusts_the_file(tmp_path):
    """`-e @file` is loaded trusted as a template (ansible-core utils/vars.py load_extra_vars); the marked values
    stay literal there too, while the same file without the marks runs the lookup (the control)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    pwned = tmp_path / "pwned"
    text = _lookup(pwned)
    path = tmp_path / "extravars.json"
    path.write_text(json.dumps(ansible.unsafe({"v": text, "nested": {"l": [text]}, "n": 3, "b": True})))
    data = DataLoader().load_from_file(str(path), trusted_as_template=True)
    templar = Templar(loader=DataLoader(), variables=data)
    assert templar.template(data["v"]) == text
    assert templar.template(data["nested"]) == {"l": [text]}
    assert (data["n"], data["b"]) == (3, True)
    assert not pwned.exists()
    path.write_text(json.dumps({"v": text}))
    data = DataLoader().load_from_file(str(path), trusted_as_template=True)
    Templar(loader=DataLoader(), variables=data).template(data["v"])
    assert pwned.exists()  # the control: unmarked, Ansible would have run it
