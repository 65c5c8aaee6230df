"""Kernel filters.

gridready_headers_packages: the kernel headers DKMS builds the NVIDIA module against, for the running kernel.

The running kernel's own headers, and the metapackage of its series that brings the next kernel's headers with the
next kernel: on Ubuntu a hardware enablement (HWE) kernel follows linux-<flavour>-hwe-<release>, whose headers
metapackage is linux-headers-<flavour>-hwe-<release>; the GA series' linux-headers-<flavour> would pull the GA
kernel's headers and leave the next HWE kernel without a module (Ubuntu wiki, "Kernel/LTSEnablementStack":
`apt-get install --install-recommends linux-generic-hwe-22.04`, https://wiki.ubuntu.com/Kernel/LTSEnablementStack;
NVIDIA Driver Installation Guide, "Ubuntu": the kernel headers of the running kernel,
https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/ubuntu.html). Debian's flavours
(linux-headers-amd64, -cloud-amd64) have no HWE series.
gridready_cmdline_missing: the wanted kernel arguments the running command line does not give their value, read as
the kernel reads it: an argument is `name` or `name=value`, a double-quoted value holds spaces (lib/cmdline.c,
next_arg), '-' and '_' are the same in a name (kernel/params.c, parameq), arguments after `--` go to init, and where
a name comes more than once its last value is the one in force (each occurrence calls the parameter's handler in
order: `iommu=pt ... iommu=nopt` leaves pass-through off).
Filter plugin API: https://docs.ansible.com/ansible/latest/dev_guide/developing_plugins.html#filter-plugins
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

_ABI = re.compile(r"^[0-9.]+-[0-9]+-")


def headers_packages(kernel: str, installed: Iterable[str], distribution_version: str) -> list[str]:
    """linux-headers-<running kernel> and the headers metapackage of the series `kernel` belongs to: the HWE one
    where the installed packages hold the HWE kernel metapackage of that flavour for this release."""
    flavour = _ABI.sub("", kernel)
    hwe = f"{flavour}-hwe-{distribution_version}"
    series = f"linux-headers-{hwe}" if {f"linux-image-{hwe}", f"linux-{hwe}"} & set(installed) \
        else f"linux-headers-{flavour}"
    return [f"linux-headers-{kernel}", series]


def _kernel_args(cmdline: str) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for word in re.findall(r'(?:[^\s"]|"[^"]*"?)+', cmdline):
        if word == "--":
            break
        name, eq, value = word.partition("=")
        out.append((name.replace('"', "").replace("-", "_"), value.replace('"', "") if eq else None))
    return out


def cmdline_missing(wanted: Iterable[str], cmdline: str) -> list[str]:
    """The arguments of `wanted` whose name is absent from `cmdline` or whose value there (the last one) differs."""
    last: dict[str, str | None] = {}
    for name, value in _kernel_args(cmdline):
        last[name] = value
    missing = []
    for arg in wanted:
        name, eq, value_ = arg.partition("=")
        name, value = name.replace("-", "_"), value_.replace('"', "") if eq else None
        if name not in last or (value is not None and last[name] != value):
            missing.append(arg)
    return missing


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"gridready_headers_packages": headers_packages, "gridready_cmdline_missing": cmdline_missing}
