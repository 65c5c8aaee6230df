"""Whether a wanted kernel argument is in force, read as the kernel reads its command line (the reboot-owed rule of
provision and the host_tuning role's state): playbooks/filter_plugins/gridready_kernel.py, gridready_cmdline_missing.
A literal word match owed a reboot forever where the boot loader spelt a name with '-' (the kernel's parameq takes
'-' and '_' as one) and recorded converged a host whose later argument overrode the wanted one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


def _missing():
    path = REPO / "playbooks" / "filter_plugins" / "gridready_kernel.py"
    spec = importlib.util.spec_from_file_location("gridready_kernel", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["gridready_cmdline_missing"]


BOOT = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-49-generic root=UUID=0b1c ro"


@pytest.mark.parametrize(("wanted", "cmdline", "missing"), [
    (["iommu=pt"], f"{BOOT} iommu=pt quiet splash", []),
    (["iommu=pt"], f"{BOOT} quiet splash", ["iommu=pt"]),
    # '-' and '_' are one character in a parameter's name (kernel/params.c, parameq)
    (["intel_iommu=on"], f"{BOOT} intel-iommu=on", []),
    (["pci-acs-override=x"], f"{BOOT} pci_acs_override=x", []),
    # but not in its value
    (["foo=a_b"], f"{BOOT} foo=a-b", ["foo=a_b"]),
    # the last occurrence is in force: GRUB_CMDLINE_LINUX_DEFAULT comes after GRUB_CMDLINE_LINUX on the linux line
    (["iommu=pt"], f"{BOOT} iommu=pt quiet iommu=nopt", ["iommu=pt"]),
    (["iommu=pt"], f"{BOOT} iommu=nopt iommu=pt", []),
    # a quoted value is one argument (lib/cmdline.c, next_arg); its quotes are not part of the value
    (['dyndbg=file x +p'], f'{BOOT} dyndbg="file x +p" iommu=pt', []),
    (["iommu=pt"], f'{BOOT} dyndbg="iommu=pt x"', ["iommu=pt"]),
    # after "--" the arguments are init's, not the kernel's
    (["iommu=pt"], f"{BOOT} -- iommu=pt", ["iommu=pt"]),
    # a flag is in force when present, whatever value it carries; a wanted value is compared
    (["nokaslr"], f"{BOOT} nokaslr", []),
    (["pcie_aspm=off"], f"{BOOT} pcie_aspm", ["pcie_aspm=off"]),
    (["iommu=pt", "amd_iommu=on"], "", ["iommu=pt", "amd_iommu=on"]),
])
def test_an_argument_is_in_force_as_the_kernel_reads_it(wanted: list[str], cmdline: str, missing: list[str]) -> None:
    assert _missing()(wanted, cmdline) == missing


def test_provision_and_the_tuning_role_judge_with_the_one_rule() -> None:
    verify = (REPO / "playbooks/tasks/provision-verify.yml").read_text()
    tuning = (REPO / "roles/gridready_host_tuning/tasks/cmdline.yml").read_text()
    assert "gridready_cmdline_missing(__state.cmdline" in verify and 'echo "cmdline=$(cat /proc/cmdline)"' in verify
    assert "gridready_cmdline_missing(__gridready_host_tuning_proc_cmdline.content | b64decode)" in tuning
    # no literal word match left in either
    assert "*\" $a \"*" not in verify and "| split) | sort" not in tuning
    judge = next(t for t in yaml.safe_load(verify) if t["name"] == "Judge the state the converged record vouches for")
    assert "__wanted_args" in judge["vars"] and "__cmdline_missing" in judge["vars"]
