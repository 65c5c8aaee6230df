"""The nvidia_driver role's rules that hold without a host: the headers of the kernel's series (GA or HWE) and
persistence mode for every driver the role accepts, packaged or preinstalled (issue 45, findings 3 and 8)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "gridready_nvidia_driver"


def _kernel_filter():
    path = REPO / "playbooks" / "filter_plugins" / "gridready_kernel.py"
    spec = importlib.util.spec_from_file_location("gridready_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterModule().filters()["gridready_headers_packages"]


@pytest.mark.parametrize(("kernel", "installed", "release", "series"), [
    # Ubuntu 22.04's GA kernel (5.15) and its HWE kernel (6.8, linux-generic-hwe-22.04)
    ("5.15.0-126-generic", ["linux-generic"], "22.04", "linux-headers-generic"),
    ("6.8.0-49-generic", ["linux-generic-hwe-22.04", "linux-image-generic-hwe-22.04"], "22.04",
     "linux-headers-generic-hwe-22.04"),
    ("6.8.0-49-generic", ["linux-image-generic-hwe-22.04"], "22.04", "linux-headers-generic-hwe-22.04"),
    ("6.8.0-49-lowlatency", ["linux-lowlatency-hwe-22.04"], "22.04", "linux-headers-lowlatency-hwe-22.04"),
    # another flavour's or release's HWE metapackage says nothing of this kernel
    ("6.8.0-49-generic", ["linux-lowlatency-hwe-22.04"], "22.04", "linux-headers-generic"),
    ("6.8.0-49-generic", ["linux-generic-hwe-20.04"], "22.04", "linux-headers-generic"),
    # Debian 12: no HWE series
    ("6.1.0-26-cloud-amd64", [], "12.7", "linux-headers-cloud-amd64"),
    ("6.1.0-26-amd64", [], "12", "linux-headers-amd64"),
])
def test_the_headers_follow_the_kernels_series(kernel: str, installed: list[str], release: str, series: str) -> None:
    assert _kernel_filter()(kernel, installed, release) == [f"linux-headers-{kernel}", series]


def test_the_role_installs_the_headers_of_the_kernels_series() -> None:
    """The GA metapackage for every kernel was the bug: an HWE kernel's next update came without headers."""
    wanted = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__gridready_nvidia_driver_headers_packages"]
    assert "gridready_headers_packages" in wanted and "__gridready_nvidia_driver_kernel_packages" in wanted


def _tasks(rel: str) -> list[dict]:
    return yaml.safe_load((ROLE / "tasks" / rel).read_text())


def test_persistence_is_managed_for_preinstalled_drivers_too() -> None:
    """A runfile driver (mode preinstalled) gets nvidia-persistenced with persistence mode as a packaged one does:
    the persistence tasks are not part of the package install and are not limited to the package mode."""
    assert not [t["name"] for t in _tasks("packages.yml") if "persistenced" in str(t)]
    (include,) = [t for t in _tasks("main.yml") if t.get("ansible.builtin.include_tasks") == "persistence.yml"]
    assert "__gridready_nvidia_driver_mode" not in str(include.get("when"))
    names = [t["name"] for t in _tasks("persistence.yml")]
    assert "Persistence | Install a unit for a daemon that came without one" in names
    unit = (ROLE / "templates" / "nvidia-persistenced.service.j2").read_text()
    assert "--no-persistence-mode" not in unit and "ExecStart={{ __gridready_nvidia_driver_persistenced_found.daemon" \
        in unit


def test_the_report_says_where_nvidia_smi_and_the_module_package_are() -> None:
    (report,) = [t for t in _tasks("main.yml") if t["name"] == "Set the driver report"]
    assert {"nvidia_smi", "kernel_module_package"} <= set(report["ansible.builtin.set_fact"]
                                                          ["gridready_nvidia_driver_report"])
