"""Day-one facts (issue 49, point 5): docs/getting-started.md says what the controller and the nodes need, and the
checks it promises exist: validate warns about a gated model without a Hugging Face token (it failed with 401 at
serve time, unsaid), the vault's missing password names the variable to set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gridready import inventory, usage, vault
from gridready.errors import InvalidInput

REPO = Path(__file__).resolve().parents[2]


def test_the_page_lists_the_prerequisites_of_controller_and_nodes() -> None:
    text = (REPO / "docs/getting-started.md").read_text()
    prereq = text.split("## 3. Before your own machines", 1)[1].split("\n## ", 1)[0]
    for fact in ("Python >= 3.11", "known_hosts", "NOPASSWD", "vault_gridready_hf_token",
                 "GRIDREADY_VAULT_PASSWORD_FILE", "reboot", "package_mirror", "provision --check` 24.7 s", "49 s"):
        assert fact in prereq, fact
    assert "./setup.sh --sandbox && .venv/bin/gridready -i sandbox provision certify serve" in text


def _copy(tmp_path: Path, hf_id: str | None = None) -> inventory.Inventory:
    dest = tmp_path / "acme-h200"
    shutil.copytree(REPO / "inventories/acme-h200", dest)
    if hf_id:
        path = dest / "cluster.yml"
        path.write_text(path.read_text().replace("meta-llama/Llama-3.3-70B-Instruct", hf_id))
    return inventory.load(dest)


def test_a_gated_model_without_a_token_is_warned_at_validate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(vault.ENV, raising=False)
    lines = usage.gated_model_warnings(_copy(tmp_path))
    assert lines[0].endswith("cluster.yml: serving.tiers[0].model.hf_id: meta-llama/Llama-3.3-70B-Instruct is gated "
                             "on Hugging Face: put a token of an account that accepted its licence in the vault as "
                             "vault_gridready_hf_token (docs/getting-started.md), or serve's download fails with 401")
    assert len(lines) == 2  # both tiers serve the gated model


def test_no_warning_with_a_token_or_for_an_open_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      vault_password_file: Path) -> None:
    inv = _copy(tmp_path / "a")
    monkeypatch.setenv(vault.ENV, str(vault_password_file))
    vault.write(inv.customer, inv.path, {vault.HF_TOKEN_VAR: "hf_" + "x" * 34})
    assert usage.gated_model_warnings(inv) == []
    assert usage.gated_model_warnings(_copy(tmp_path / "b", "Qwen/Qwen2.5-72B-Instruct")) == []


def test_a_missing_vault_password_names_the_variable_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inv = _copy(tmp_path)
    pw = tmp_path / "pw"
    pw.write_text("test-only\n")
    pw.chmod(0o600)
    monkeypatch.setenv(vault.ENV, str(pw))
    vault.write(inv.customer, inv.path, {vault.HF_TOKEN_VAR: "hf_" + "x" * 34})
    monkeypatch.delenv(vault.ENV)
    with pytest.raises(InvalidInput) as err:
        vault.read(inv.customer, inv.path)
    assert err.value.lines[0].startswith("GRIDREADY_VAULT_PASSWORD_FILE: (environment): not set")
