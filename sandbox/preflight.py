"""What the sandbox needs from this machine; each gap is one clear line and exit code 2 (nothing was started)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from sandbox import image


def is_root() -> bool:
    return os.geteuid() == 0


def problems(need_image_build: bool | None = None) -> list[str]:
    """Everything missing for `fleet.up`; empty when it can run."""
    if not is_root():
        return ["the sandbox fleet needs root (network namespaces, overlay mounts, systemd-nspawn)"]
    out: list[str] = []
    tools = {"ip": "iproute2", "systemd-nspawn": "systemd-container", "unshare": "util-linux",
             "setsid": "util-linux", "ssh-keygen": "openssh-client", "ssh": "openssh-client"}
    if need_image_build if need_image_build is not None else image.cached_image() is None:
        tools |= {"debootstrap": "debootstrap", "dpkg-deb": "dpkg", "gpg": "gnupg"}
    for tool, pkg in tools.items():
        if shutil.which(tool) is None:
            out.append(f"{tool} is not installed (apt-get install {pkg})")
    if shutil.which("ip"):
        probe = f"gr-probe-{os.getpid()}"
        res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            out.append(f"network namespaces are unavailable: ip netns add: {res.stderr.strip()}")
        else:
            subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    if "overlay" not in Path("/proc/filesystems").read_text():
        subprocess.run(["modprobe", "overlay"], capture_output=True, check=False)
        if "overlay" not in Path("/proc/filesystems").read_text():
            out.append("overlayfs is unavailable (no 'overlay' in /proc/filesystems; modprobe overlay)")
    if not Path("/sys/fs/cgroup/unified").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        out.append("no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup")
    return out


def check() -> None:
    found = problems()
    if found:
        raise GridreadyError("sandbox: " + "; ".join(found), ExitCode.INVALID)
