"""gridready_tree_digests: a digest of each role's code, computed in the controller's own process.

Used by playbooks/provision.yml (the converged fast path, docs/provision.md "Re-runs"): a filter costs no worker
process and no module transfer, where a task delegated to localhost costs both on every run.
Filter plugin API: https://docs.ansible.com/ansible/latest/dev_guide/developing_plugins.html#filter-plugins
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator


def _files(root: str) -> Iterator[str]:
    """The files (and links) under root in a stable order; root itself when it is a file."""
    if os.path.islink(root) or os.path.isfile(root):
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name != "README.md":  # a role's documentation (tools/role_readmes.py) is no input of a run
                yield os.path.join(dirpath, name)


def tree_digests(roots: dict[str, str], common: list[str] | None = None) -> dict[str, str]:
    """name -> sha256 over the relative path and content of every file of its root and of the common files."""
    out = {}
    for name, root in roots.items():
        h = hashlib.sha256()
        for top in [root, *(common or [])]:
            base = os.path.dirname(top) if os.path.isfile(top) else top
            for path in _files(top) if os.path.lexists(top) else []:
                h.update(os.path.relpath(path, base).encode() + b"\0")
                if os.path.islink(path):
                    h.update(b"link " + os.readlink(path).encode())
                else:
                    with open(path, "rb") as fh:
                        h.update(hashlib.sha256(fh.read()).digest())
        out[name] = h.hexdigest()
    return out


class FilterModule:
    def filters(self) -> dict[str, Callable[..., dict[str, str]]]:
        return {"gridready_tree_digests": tree_digests}
