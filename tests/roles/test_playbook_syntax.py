"""playbooks/provision.yml parses with the repository's roles (no hosts contacted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_provision_playbook_syntax_check():
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"), "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i",
         str(REPO / "inventories" / "sandbox" / "hosts.yml"), "playbooks/provision.yml"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
