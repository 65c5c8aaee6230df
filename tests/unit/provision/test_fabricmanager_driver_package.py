"""gridready_fabricmanager follows whichever driver flavour the host has (issue 28, finding 8): the open or the
proprietary kernel module package, or Ubuntu's -server flavours; it looked only for the open package, so a host
with the proprietary driver (open_kernel_modules: false) or a preinstalled one failed. The role's own shell runs
here against a stand-in dpkg-query that answers as dpkg does for the installed package."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_fabricmanager"
DPKG = """#!/bin/sh
# dpkg-query -W -f FORMAT PACKAGE: one line for an installed package, exit 1 with nothing on stdout otherwise
[ "$4" = "{installed}" ] || {{ echo "dpkg-query: no packages found matching $4" >&2; exit 1; }}
echo "{installed}|ii |{version}"
"""


def _packages(os_vars: str, branch: str = "580") -> list[str]:
    raw = yaml.safe_load((ROLE / "vars" / os_vars).read_text())["__gridready_fabricmanager_os_driver_packages"]
    return [jinja2.Template(p).render(gridready_fabricmanager_branch=branch) for p in raw]


def _first_installed(tmp_path: Path, packages: list[str], installed: str, version: str) -> str:
    task = next(t for t in yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
                if t["name"] == "Install | Read the installed driver package and its version")
    env = jinja2.Environment()
    env.filters["quote"] = shlex.quote
    cmd = env.from_string(task["ansible.builtin.shell"]["cmd"]).render(
        __gridready_fabricmanager_driver_packages=packages)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dpkg-query"
    fake.write_text(DPKG.format(installed=installed, version=version))
    fake.chmod(0o755)
    run = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return run.stdout.strip()


@pytest.mark.parametrize(("os_vars", "installed"), [
    ("Debian-12.yml", "nvidia-kernel-open-dkms"),
    ("Debian-12.yml", "nvidia-kernel-dkms"),  # the proprietary modules
    ("Ubuntu-22.yml", "nvidia-driver-580"),
    ("Ubuntu-24.yml", "nvidia-driver-580-server-open"),  # a host that came with Ubuntu's server flavour
])
def test_the_installed_driver_flavour_is_found(tmp_path, os_vars, installed):
    got = _first_installed(tmp_path, _packages(os_vars), installed, "580.95.05-1")
    assert got == f"{installed}|ii |580.95.05-1"


def test_no_driver_package_reads_as_none(tmp_path):
    assert _first_installed(tmp_path, _packages("Debian-12.yml"), "nvidia-driver-cuda", "580.95.05-1") == ""
