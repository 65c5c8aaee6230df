"""The vLLM API key is generated into the customer's ansible-vault when absent, and read back by Ansible."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gridready import vault
from gridready.errors import InvalidInput


@pytest.fixture
def inv(tmp_path, monkeypatch):
    pw = tmp_path / "vault-pass"
    pw.write_text("correct horse battery staple\n")
    monkeypatch.setenv("GRIDREADY_VAULT_PASSWORD_FILE", str(pw))
    path = tmp_path / "inventories" / "acme"
    path.mkdir(parents=True)
    return path


def test_the_key_is_generated_once_into_an_encrypted_vault(inv):
    key = vault.ensure_api_key("acme", inv)
    text = vault.vault_path(inv).read_text()
    assert len(key) >= 43 and key not in text
    assert text.startswith("$ANSIBLE_VAULT;1.2;AES256;acme\n")
    assert vault.vault_path(inv).stat().st_mode & 0o077 == 0
    assert vault.ensure_api_key("acme", inv) == key


def test_ansible_vault_reads_what_was_written(inv, tmp_path):
    key = vault.ensure_api_key("acme", inv)
    out = subprocess.run([str(Path(sys.executable).parent / "ansible-vault"), "view", "--vault-id",
                          f"acme@{tmp_path / 'vault-pass'}", str(vault.vault_path(inv))],
                         capture_output=True, text=True, check=True)
    assert f"{vault.API_KEY_VAR}: {key}" in out.stdout


def test_an_existing_vault_keeps_its_other_secrets(inv):
    vault.ensure_api_key("acme", inv)
    first = vault.read("acme", inv)
    assert vault.ensure_api_key("acme", inv) == first[vault.API_KEY_VAR]


def test_wrong_password_or_none_is_exit_2_without_a_trace(inv, tmp_path, monkeypatch):
    vault.ensure_api_key("acme", inv)
    (tmp_path / "other").write_text("wrong\n")
    monkeypatch.setenv("GRIDREADY_VAULT_PASSWORD_FILE", str(tmp_path / "other"))
    with pytest.raises(InvalidInput, match="cannot be decrypted"):
        vault.ensure_api_key("acme", inv)
    monkeypatch.delenv("GRIDREADY_VAULT_PASSWORD_FILE")
    with pytest.raises(InvalidInput, match="GRIDREADY_VAULT_PASSWORD_FILE: \\(environment\\): not set"):
        vault.ensure_api_key("acme", inv)


def test_an_inventory_password_file_is_read_and_nothing_is_made_for_a_sandbox_yml(tmp_path, monkeypatch):
    """The product makes no password file for any inventory (a sandbox one included: sandbox.prepare_inventory
    does that); it reads `<inventory>/.vault-pass` when GRIDREADY_VAULT_PASSWORD_FILE is unset."""
    monkeypatch.delenv("GRIDREADY_VAULT_PASSWORD_FILE", raising=False)
    inv = tmp_path / "sandbox"
    inv.mkdir()
    (inv / "sandbox.yml").write_text("hosts: 2\n")
    with pytest.raises(InvalidInput, match="not set"):
        vault.ensure_api_key("sandbox", inv)
    assert not (inv / ".vault-pass").exists()
    (inv / ".vault-pass").write_text("pw-of-this-inventory\n")
    key = vault.ensure_api_key("sandbox", inv)
    assert vault.ensure_api_key("sandbox", inv) == key


def test_the_sandbox_prepares_its_inventory_like_a_customer_would(tmp_path, monkeypatch):
    from sandbox import fleet

    monkeypatch.delenv("GRIDREADY_VAULT_PASSWORD_FILE", raising=False)
    inv = tmp_path / "sandbox"
    inv.mkdir()
    (inv / "cluster.yml").write_text("customer: sandbox\n")
    fleet.prepare_inventory(inv)
    assert (inv / ".vault-pass").stat().st_mode & 0o077 == 0
    token = vault.hf_token("sandbox", inv)
    assert token.startswith("hf_") and len(token) == 37
    fleet.prepare_inventory(inv)
    assert vault.hf_token("sandbox", inv) == token

