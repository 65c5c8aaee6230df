"""The customer's ansible-vault: where the vLLM API key lives, and the password file Ansible is given.

`inventories/<c>/group_vars/all/vault.yml` is an ansible-vault file (vault id = customer) that Ansible loads
with the rest of group_vars. The password comes from GRIDREADY_VAULT_PASSWORD_FILE; without it, an
inventory may instead keep its own git-ignored `.vault-pass` (inventories/*/.vault-pass).
Encryption and decryption use ansible-core's VaultLib, the library behind `ansible-vault`.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleError
from ansible.parsing.vault import VaultLib, VaultSecret

from gridready import inventory_checks, safefile
from gridready.artifacts import write_atomic
from gridready.errors import InvalidInput
from gridready.yamlio import MAX_BYTES, VAULT_HEADER

ENV = "GRIDREADY_VAULT_PASSWORD_FILE"
MAX_PASSWORD_BYTES = 4096  # a password file holds one line; a device or a log file is not one
# what goes on the runner's command line as `--vault-id <customer>@<path>`: no whitespace, quote or `@`
PASSWORD_PATH = re.compile(r"[A-Za-z0-9_./+:=,~-]{1,4095}")
ROUTER_MASTER_VAR = "vault_gridready_router_master_key"

API_KEY_VAR = "vault_gridready_vllm_api_key"
# The Hugging Face user access token: gated models (the Llama examples) download only with it. Ansible reads it
# from the vault on the hosts; the Kubernetes target passes it to Pulumi as a secret config value.
HF_TOKEN_VAR = "vault_gridready_hf_token"
# mpirun's ssh between the pods of a multi-node Triton tier on Kubernetes (gridready/serving/mpi_ssh.py)
MPI_CLIENT_KEY_VAR = "vault_gridready_mpi_ssh_client_key"
MPI_HOST_KEY_VAR = "vault_gridready_mpi_ssh_host_key"
INVENTORY_PASSWORD_FILE = ".vault-pass"  # <inventory>/.vault-pass, git-ignored (inventories/*/.vault-pass)


def vault_path(inv_dir: Path) -> Path:
    return inv_dir / "group_vars" / "all" / "vault.yml"


def password_file(inv_dir: Path) -> Path | None:
    """GRIDREADY_VAULT_PASSWORD_FILE, else the inventory's own git-ignored `.vault-pass` when it has one. Nothing
    is ever made here (validate writes nothing)."""
    configured = os.environ.get(ENV)
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
    return VaultLib([(customer, VaultSecret(read_password(path, _root_of(path, inv_dir))))])


def _root_of(password: Path, inv_dir: Path) -> Path | None:
    """The inventory, for its own .vault-pass (read beneath it); None for GRIDREADY_VAULT_PASSWORD_FILE."""
    return inv_dir if password == inv_dir / INVENTORY_PASSWORD_FILE else None


def read_password(path: Path, root: Path | None = None) -> bytes:
    """The password in `path`: a regular, non-executable file of at most MAX_PASSWORD_BYTES whose path can go
    on Ansible's command line as it is. InvalidInput naming the variable otherwise; the password is never shown."""
    where = f"{ENV}: (environment)"
    if not PASSWORD_PATH.fullmatch(str(path)):
        raise InvalidInput(f"{where}: the path may hold only letters, digits and ./_+:=,~- (no whitespace, quote "
                           "or @): it goes on Ansible's command line as --vault-id <customer>@<path>")
    try:
        info = os.stat(path)
    except OSError as err:
        raise InvalidInput(f"{where}: cannot read {path}: {err.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"{where}: {path} is not a regular file (a device, FIFO or directory)")
    if info.st_mode & 0o111:
        raise InvalidInput(f"{where}: {path} is executable; Ansible would run it as a script, gridready reads it "
                           "as the password")
    if info.st_size > MAX_PASSWORD_BYTES:
        raise InvalidInput(f"{where}: {path} has {info.st_size} bytes; a password file holds one line "
                           f"(at most {MAX_PASSWORD_BYTES} bytes)")
    try:  # the inventory's own .vault-pass is read beneath it (`root`), like every inventory file
        password = safefile.read_bytes(path, MAX_PASSWORD_BYTES, root).strip()  # ansible-vault strips the newline
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{where}: {path}: {err}") from None
    if not password:
        raise InvalidInput(f"{where}: {path} is empty")
    return password


def read(customer: str, inv_dir: Path) -> dict[str, Any]:
    """The decrypted variables of the customer's vault file ({} when there is none)."""
    path = vault_path(inv_dir)
    try:
        ciphertext = safefile.read_optional(path, MAX_BYTES, root=inv_dir)
    except safefile.UnsafeFile as err:
        raise InvalidInput(f"{path}: (file): {err}") from None
    if ciphertext is None:
        return {}
    vault = _vault(customer, inv_dir)
    try:
        data = yaml.safe_load(vault.decrypt(ciphertext))
    except AnsibleError:
        raise InvalidInput(f"{path}: (vault): cannot be decrypted with GRIDREADY_VAULT_PASSWORD_FILE") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: (top level): must be a mapping of vault_* variables")
    return data


def vault_files(inv_dir: Path) -> list[Path]:
    """The ansible-vault files of group_vars/ and host_vars/ (regular files inside the inventory only)."""
    out = []
    for sub in ("group_vars", "host_vars"):
        for dirpath, _, filenames in os.walk(inv_dir / sub, followlinks=False):
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:  # a link, FIFO or oversized file is named by gridready.inventory, never opened here
                    head = safefile.read_bytes(path, MAX_BYTES, root=inv_dir, follow_inside=False)
                except safefile.UnsafeFile:
                    continue
                if head.startswith(VAULT_HEADER.encode()):
                    out.append(path)
    return out


def check(customer: str, inv_dir: Path, needed: dict[str, str], shown: Any = str) -> list[str]:
    """What `invoke validate` knows of the vault, decrypted in memory with ansible-core's VaultLib: the password
    file is usable, every vault file opens and holds a mapping, and every variable in `needed` (variable -> the
    `file: key` that references it) is defined as a non-empty string. Lines name files, keys and variables only."""
    files = vault_files(inv_dir)
    inline = {ref.removeprefix("!vault "): where for ref, where in needed.items() if ref.startswith("!vault ")}
    needed = {var: where for var, where in needed.items() if not var.startswith("!vault ")}
    if os.environ.get(ENV):
        try:
            read_password(Path(os.environ[ENV]))
        except InvalidInput as err:
            return err.lines
    if not files and not inline:
        return [f"{where}: {var} is referenced but no vault file defines it" for var, where in needed.items()]
    path = password_file(inv_dir)
    if path is None:
        what = shown(files[0]) if files else next(iter(inline.values())).split(": ", 1)[0]
        return [f"{ENV}: (environment): not set; {what} is encrypted (ansible-vault, vault id {customer})"]
    try:
        vault = VaultLib([(customer, VaultSecret(read_password(path, _root_of(path, inv_dir))))])
    except InvalidInput as err:
        return err.lines
    lines: list[str] = []
    defined: dict[str, Any] = {}
    for file in files:
        lines.extend(_open(vault, file, shown(file), defined, inv_dir))
    for ciphertext, where in inline.items():
        try:
            plain = vault.decrypt(ciphertext.encode())
        except (AnsibleError, ValueError, TypeError):
            lines.append(f"{where}: (!vault): cannot be decrypted with {ENV} (wrong password, another vault id's "
                         "password, or a damaged value)")
            continue
        if problem := inventory_checks.template_problem(plain.decode("utf-8", errors="replace")):
            lines.append(f"{where}: (!vault): {problem}")
    if lines:
        return lines
    for var, where in needed.items():
        value = defined.get(var)
        if var not in defined:
            lines.append(f"{where}: {var} is referenced but no vault file defines it")
        elif not isinstance(value, str) or not value.strip():
            lines.append(f"{shown(files[0])}: {var}: must be a non-empty string")
    return lines


def needed(inv: Any) -> dict[str, str]:
    """The vault variables a plain file of `inv` (gridready.inventory.Inventory) references, less those `serve`
    generates when absent (the API key, the router's master and client keys)."""
    generated = {API_KEY_VAR, ROUTER_MASTER_VAR, *(k.vault_var for k in inv.spec.serving.router.keys)}
    return {var: where for var, where in inv.vault_refs.items() if var not in generated}


def _open(vault: VaultLib, path: Path, shown: str, defined: dict[str, Any], inv_dir: Path) -> Iterator[str]:
    try:
        text = vault.decrypt(safefile.read_bytes(path, MAX_BYTES, root=inv_dir))
    except safefile.UnsafeFile as err:
        yield f"{shown}: (file): {err}"
        return
    except (AnsibleError, OSError, ValueError, TypeError):
        yield (f"{shown}: (vault): cannot be decrypted with {ENV} (wrong password, another vault id's password, "
               "or a damaged file)")
        return
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        yield f"{shown}: (vault): the decrypted text is not YAML"
        return
    if data is None:
        return
    if not isinstance(data, dict):
        yield f"{shown}: (top level): must be a mapping of vault_* variables"
        return
    # Ansible templates vault values like any other: a lookup there runs on the controller too
    for where, problem in [*inventory_checks.controller_command_problems(data),
                           *inventory_checks.template_problems(data)]:
        yield f"{shown}: {where}: {problem}"
    defined.update({str(k): v for k, v in data.items()})


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


def ensure_ssh_key(customer: str, inv_dir: Path, var: str, make: Callable[[], str]) -> str:
    """The vault variable `var`, an OpenSSH private key; made by `make` and written into the vault when absent."""
    data = read(customer, inv_dir)
    key = data.get(var)
    if isinstance(key, str) and key.startswith("-----BEGIN OPENSSH PRIVATE KEY-----"):
        return key
    if key is not None:
        raise InvalidInput(f"{vault_path(inv_dir)}: {var}: must be an OpenSSH private key (gridready makes one when "
                           "the variable is absent)")
    data[var] = make()
    write(customer, inv_dir, data)
    return data[var]


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
    write_atomic(vault_path(inv_dir), text, root=inv_dir)  # 0600, never through a link
