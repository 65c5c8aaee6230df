"""The customer's ansible-vault: where the vLLM API key lives, and the password file Ansible is given.

`inventories/<c>/group_vars/all/vault.yml` is an ansible-vault file (vault id = customer) that Ansible loads
with the rest of group_vars. The password comes from GRIDREADY_VAULT_PASSWORD_FILE; a sandbox inventory (one
with sandbox.yml) that has none gets its own sandbox-only password file beside it, git-ignored.
Encryption and decryption use ansible-core's VaultLib, the library behind `ansible-vault`.
"""

from __future__ import annotations

import os
import secrets
import string
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
SANDBOX_PASSWORD_FILE = ".vault-pass"


def vault_path(inv_dir: Path) -> Path:
    return inv_dir / "group_vars" / "all" / "vault.yml"


def password_file(inv_dir: Path) -> Path | None:
    """GRIDREADY_VAULT_PASSWORD_FILE, else a sandbox inventory's own password file (made on first use)."""
    configured = os.environ.get("GRIDREADY_VAULT_PASSWORD_FILE")
    if configured:
        return Path(configured)
    if not (inv_dir / "sandbox.yml").exists():
        return None
    path = inv_dir / SANDBOX_PASSWORD_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    return path


def _vault(customer: str, inv_dir: Path) -> VaultLib:
    path = password_file(inv_dir)
    if path is None:
        raise InvalidInput(
            f"GRIDREADY_VAULT_PASSWORD_FILE: (environment): not set; the vLLM API key of {customer} lives in "
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


def ensure_sandbox_hf_token(customer: str, inv_dir: Path) -> None:
    """A sandbox inventory gets a token for the sandbox's simulated Hub (gridready/sandbox/engine/hub.py), which
    opens its gated repositories to any token, so the vault -> hosts path of the token runs there as it would
    on a real fleet. Never for a customer inventory: its token is the customer's own."""
    if not (inv_dir / "sandbox.yml").exists():
        raise InvalidInput(f"{vault_path(inv_dir)}: {HF_TOKEN_VAR}: only a sandbox inventory gets a generated token")
    data = read(customer, inv_dir)
    if data.get(HF_TOKEN_VAR):
        return
    alphabet = string.ascii_letters + string.digits
    data[HF_TOKEN_VAR] = "hf_" + "".join(secrets.choice(alphabet) for _ in range(34))
    write(customer, inv_dir, data)


def write(customer: str, inv_dir: Path, data: dict[str, Any]) -> None:
    """Encrypt `data` into the customer's vault file (0600), replacing it atomically."""
    vault = _vault(customer, inv_dir)
    secret = vault.secrets[0][1]
    text = vault.encrypt(yaml.safe_dump(data, sort_keys=True), secret, vault_id=customer)
    path = vault_path(inv_dir)
    write_atomic(path, text)
    path.chmod(0o600)
