"""The Automation API path with the workspace mocked (the pulumi CLI is not installed here)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pulumi import automation as auto

from gridready import pulumi as gpulumi
from gridready.errors import GridreadyError, StageFailed
from gridready.exitcodes import ExitCode


class FakeStack:
    def __init__(self, fail: bool = False) -> None:
        self.config: dict[str, Any] = {}
        self.calls: list[str] = []
        self.fail = fail

    def set_config(self, key: str, value: auto.ConfigValue) -> None:
        self.config[key] = value

    def up(self, **kwargs: Any) -> Any:
        self.calls.append("up")
        if self.fail:
            raise auto.errors.CommandError(
                auto.CommandResult(stdout="", stderr="error: the cluster is unreachable", code=255))
        return SimpleNamespace(outputs={"namespace": auto.OutputValue(value="gridready-serving", secret=False)})

    def preview(self, **kwargs: Any) -> Any:
        self.calls.append("preview")
        return SimpleNamespace(change_summary={"create": 4})


@pytest.fixture
def workspace(monkeypatch: pytest.MonkeyPatch):
    made: dict[str, Any] = {}

    def create_or_select_stack(**kwargs: Any) -> FakeStack:
        made.update(kwargs)
        made["stack"] = FakeStack(fail=made.get("fail", False))
        return made["stack"]

    monkeypatch.setattr(auto, "create_or_select_stack", create_or_select_stack)
    monkeypatch.setenv("GRIDREADY_PULUMI_PASSPHRASE", "test-passphrase")
    return made


SECRETS = {"kubeconfig": "apiVersion: v1\nkind: Config\n", "hfToken": "hf_xxx", "vllmApiKey": "k" * 43,
           "mpiSshKeys": '{"client": "c", "host": "h"}', "routerKeys": "[]", "loraBucketEnv": "{}"}


def test_up_uses_a_file_backend_an_inline_program_and_secret_config(workspace, tmp_path: Path):
    out = gpulumi.up("serving", "acme", {"customer": "acme"}, SECRETS, tmp_path / "state")
    assert out == {"namespace": "gridready-serving"}
    assert workspace["stack_name"] == "acme" and workspace["project_name"] == "gridready-serving"
    opts: auto.LocalWorkspaceOptions = workspace["opts"]
    assert opts.project_settings.backend.url == f"file://{tmp_path / 'state'}"
    assert opts.secrets_provider == "passphrase"
    assert callable(workspace["program"])
    stack = workspace["stack"]
    assert stack.calls == ["up"]
    assert stack.config["kubeconfig"].secret and stack.config["hfToken"].secret and stack.config["vllmApiKey"].secret
    assert not stack.config["stack"].secret


def test_preview_in_check_mode(workspace, tmp_path: Path):
    out = gpulumi.up("platform", "acme", {}, {"kubeconfig": "x"}, tmp_path, preview=True)
    assert out == {"change_summary": {"create": 4}}
    assert workspace["stack"].calls == ["preview"]


def test_pulumi_errors_are_stage_failures(workspace, tmp_path: Path):
    workspace["fail"] = True
    with pytest.raises(StageFailed) as err:
        gpulumi.up("platform", "acme", {}, {"kubeconfig": "x"}, tmp_path)
    assert err.value.code == ExitCode.STAGE_FAILED
    assert "the cluster is unreachable" in str(err.value)


def test_missing_secrets_or_passphrase_are_invalid_input(workspace, tmp_path: Path, monkeypatch):
    with pytest.raises(GridreadyError) as err:
        gpulumi.up("serving", "acme", {}, {"kubeconfig": "x"}, tmp_path)
    assert err.value.code == ExitCode.INVALID and "hfToken" in str(err.value)
    monkeypatch.delenv("GRIDREADY_PULUMI_PASSPHRASE")
    with pytest.raises(GridreadyError) as err:
        gpulumi.up("platform", "acme", {}, {"kubeconfig": "x"}, tmp_path)
    assert "GRIDREADY_PULUMI_PASSPHRASE" in str(err.value)
