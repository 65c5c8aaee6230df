"""The customer's ansible-vault: where the vLLM API key lives, and the password file Ansible is given.

`inventories/<c>/group_vars/all/vault.yml` is an ansible-vault file (vault id = customer) that Ansible loads
with the rest of group_vars. The password comes from GRIDREADY_VAULT_PASSWORD_FILE; without it, an
inventory may instead keep its own git-ignored `.vault-pass` (inventories/*/.vault-pass).
Encryption and decryption use ansible-core's VaultLib, the library behind `ansible-vault`.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleError
from ansible.parsing.vault import VaultLib, VaultSecret

from gridready.artifacts import write_atomic
from gridready.errors import InvalidInput

API_KEY_VAR = "vault_gridready_vllm_api_key"
# The Hugging Face user access token: gated models (the Llama examples) download only with it. Ansible reads it
# from the vault on the hosts; the Kubernetes target passes it to Pulumi as a secret config value.
HF_TOKEN_VAR = "vault_gridready_hf_token"
INVENTORY_PASSWORD_FILE = ".vault-pass"  # <inventory>/.vault-pass, git-ignored (inventories/*/.vault-pass)


def vault_path(inv_dir: Path) -> Path:
    return inv_dir / "group_vars" / "all" / "vault.yml"


def password_file(inv_dir: Path) -> Path | None:
    """GRIDREADY_VAULT_PASSWORD_FILE, else the inventory's own git-ignored `.vault-pass` when it has one."""
    configured = os.environ.get("GRIDREADY_VAULT_PASSWORD_FILE")
    if configured:
        return Path(configured)
    path = inv_dir / INVENTORY_PASSWORD_FILE
    return path if path.exists() else None


def _vault(customer: str, inv_dir: Path) -> VaultLib:
    path = password_file(inv_dir)
    if path is None:
        raise InvalidInput(
            f"GRIDREADY_VAULT_PASSWORD_FILE: (environment): not set and no {inv_dir / INVENTORY_PASSWORD_FILE}; "
            f"the vLLM API key of {customer} lives in "
            f"{vault_path(inv_dir)} (ansible-vault, vault id {customer})"
        )
    try:
        password = path.read_bytes().strip()  # ansible-vault strips the password file's trailing newline
    except OSError as err:
        raise InvalidInput(f"GRIDREADY_VAULT_PASSWORD_FILE: (environment): cannot read {path}: {err.strerror}") \
            from None
    if not password:
        raise InvalidInput(f"GRIDREADY_VAULT_PASSWORD_FILE: (environment): {path} is empty")
    return VaultLib([(customer, VaultSecret(password))])


def read(customer: str, inv_dir: Path) -> dict[str, Any]:
    """The decrypted variables of the customer's vault file ({} when there is none)."""
    path = vault_path(inv_dir)
    if not path.exists():
        return {}
    vault = _vault(customer, inv_dir)
    try:
        data = yaml.safe_load(vault.decrypt(path.read_bytes()))
    except AnsibleError:
        raise InvalidInput(f"{path}: (vault): cannot be decrypted with GRIDREADY_VAULT_PASSWORD_FILE") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: (top level): must be a mapping of vault_* variables")
    return data


def ensure_api_key(customer: str, inv_dir: Path) -> str:
    """The vLLM API key from the vault; generated (256 bits) and written into the vault when absent."""
    return ensure_secret(customer, inv_dir, API_KEY_VAR)


def ensure_secret(customer: str, inv_dir: Path, var: str) -> str:
    """The vault variable `var`; generated (256 bits, URL-safe) and written into the vault when absent."""
    data = read(customer, inv_dir)
    key = data.get(var)
    if isinstance(key, str) and key:
        return key
    key = secrets.token_urlsafe(32)
    data[var] = key
    write(customer, inv_dir, data)
    return key


def hf_token(customer: str, inv_dir: Path) -> str:
    """The Hugging Face token from the vault ('' when the vault has none: public models need none)."""
    token = read(customer, inv_dir).get(HF_TOKEN_VAR, "")
    if not isinstance(token, str):
        raise InvalidInput(f"{vault_path(inv_dir)}: {HF_TOKEN_VAR}: must be a string (a Hugging Face access token)")
    return token.strip()


def write(customer: str, inv_dir: Path, data: dict[str, Any]) -> None:
    """Encrypt `data` into the customer's vault file (0600), replacing it atomically."""
    vault = _vault(customer, inv_dir)
    secret = vault.secrets[0][1]
    text = vault.encrypt(yaml.safe_dump(data, sort_keys=True), secret, vault_id=customer)
    path = vault_path(inv_dir)
    write_atomic(path, text)
    path.chmod(0o600)
