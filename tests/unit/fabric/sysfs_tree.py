"""Writable copies of a real /sys/class/infiniband device under a temporary root, given what the capture lacks: its
PCI function (`device` -> ../../devices/..., link attributes, net/<netdev>) and a GID table. The layout of `gids/<n>`
and `gid_attrs/types/<n>` is the kernel's (Documentation/ABI/stable/sysfs-class-infiniband)."""

from __future__ import annotations

import shutil
from pathlib import Path


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def plant_hca(root: Path, real: Path, pci: str, link: tuple[str, str, str, str], netdevs: list[str],
              gids: list[tuple[str, str]]) -> Path:
    """Copy `real` to root/sys/class/infiniband/<its name> with its PCI function at root/sys/devices/<pci> (`link`:
    current speed, current width, max speed, max width) holding `netdevs`, and port 1's GID table as
    (gid, type) pairs. Returns the device directory."""
    dev = root / "sys/class/infiniband" / real.name
    shutil.copytree(real, dev)
    for p in dev.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    function = root / "sys/devices" / pci
    for name, value in zip(("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"), link,
                           strict=True):
        write(function / name, value)
    for netdev in netdevs:
        (function / "net" / netdev).mkdir(parents=True)
    (dev / "device").symlink_to(function)
    for i, (gid, gtype) in enumerate(gids):
        write(dev / "ports/1/gids" / str(i), gid)
        write(dev / "ports/1/gid_attrs/types" / str(i), gtype)
    return dev
