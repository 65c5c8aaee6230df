"""The GRIDREADY_* environment as a whole, checked before anything runs: each variable one line, a documented
`1` flag exactly `1`, a named file there, and nothing of the customer's kept under artifacts/ (which CI uploads).

Each problem is one line `GRIDREADY_X: (environment): ...`; a value is never echoed (some are secrets)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from gridready.errors import InvalidInput
from gridready.inventory import Inventory, display_path
from gridready.vault import INVENTORY_PASSWORD_FILE

PREFIX = "GRIDREADY_"
# README "Environment": variables documented as `1` (set) or unset
FLAGS = ("GRIDREADY_SERVE_SKIP_BENCH",)
# variables that name a file on the controller, read when a stage needs it
FILES = ("GRIDREADY_VAULT_PASSWORD_FILE", "GRIDREADY_EVIDENCE_KEY", "GRIDREADY_EVIDENCE_PUBKEY")
# what must never sit under artifacts/: secrets (the vault password, the signing key) and Pulumi's state
KEPT_OUT_OF_ARTIFACTS = ("GRIDREADY_VAULT_PASSWORD_FILE", "GRIDREADY_EVIDENCE_KEY", "GRIDREADY_STATE")


def problems(environ: Mapping[str, str], inv: Inventory, artifacts_root: Path) -> list[str]:
    """One line per unsound GRIDREADY_* variable, and for an inventory, its kubeconfig or an ssh key kept under the
    artifacts root."""
    inventory_dir = inv.path
    out: list[str] = []
    bad_line = set()
    for name in sorted(environ):
        if name.startswith(PREFIX) and any(c in environ[name] for c in "\0\n\r"):
            out.append(f"{name}: (environment): must be one line (no newline or NUL character)")
            bad_line.add(name)
    for name in FLAGS:
        if environ.get(name) and environ[name] != "1" and name not in bad_line:
            out.append(f"{name}: (environment): must be 1 or unset (README, Environment)")
    for name in FILES:
        raw = environ.get(name)
        if raw and name not in bad_line and not _regular_file(Path(raw)):
            out.append(f"{name}: (environment): names no regular file (missing, a directory or a device)")
    artifacts = artifacts_root.resolve()
    for name in KEPT_OUT_OF_ARTIFACTS:
        raw = environ.get(name)
        if raw and name not in bad_line and _under(Path(raw), artifacts):
            out.append(f"{name}: (environment): is under the artifacts folder {artifacts_root}, which CI uploads; "
                       "keep it outside")
    for name in ("GRIDREADY_VAULT_PASSWORD_FILE", "GRIDREADY_EVIDENCE_KEY"):
        raw = environ.get(name)
        ignored = inventory_dir / INVENTORY_PASSWORD_FILE  # git-ignored (inventories/*/.vault-pass)
        if raw and name not in bad_line and _under(Path(raw), inventory_dir.resolve()) \
                and not (name == "GRIDREADY_VAULT_PASSWORD_FILE" and _same(Path(raw), ignored)):
            out.append(f"{name}: (environment): is inside the inventory {display_path(inventory_dir)}, which is "
                       f"committed; keep it outside (or as the git-ignored {INVENTORY_PASSWORD_FILE})")
    kubeconfig = inv.spec.serving.kubeconfig
    if kubeconfig and _under(inventory_dir / kubeconfig, artifacts):
        out.append(f"{display_path(inv.path / 'cluster.yml')}: serving.kubeconfig: is under the artifacts folder, "
                   "which CI uploads (a kubeconfig holds the cluster's credentials)")
    for host, hvars in sorted(inv.hosts.items()):
        key = hvars.get("ansible_ssh_private_key_file") or hvars.get("ansible_private_key_file")
        if isinstance(key, str) and "{{" not in key and _under(Path(key).expanduser(), artifacts):
            out.append(f"{display_path(inv.hosts_file)}: {host}.ansible_ssh_private_key_file: is under the "
                       "artifacts folder, which CI uploads")
    if _under(inventory_dir, artifacts):
        out.append(f"{display_path(inventory_dir)}: (inventory): is under the artifacts folder {artifacts_root}, "
                   "which CI uploads; keep inventories in inventories/")
    elif _under(artifacts_root, inventory_dir.resolve()):
        out.append(f"GRIDREADY_ARTIFACTS: (environment): the artifacts folder is inside the inventory "
                   f"{display_path(inventory_dir)}; runs would write into the customer's committed files")
    return out


def check(inv: Inventory, artifacts_root: Path, environ: Mapping[str, str] | None = None) -> None:
    """InvalidInput listing every problem of `problems`."""
    lines = problems(os.environ if environ is None else environ, inv, artifacts_root)
    if lines:
        raise InvalidInput(lines)


def _regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return False


def _under(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, ValueError, RuntimeError):
        return False
