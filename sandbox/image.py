"""The sandbox hosts' root image: Debian bookworm by debootstrap, built once and cached by a hash of its recipe.

`ensure_image()` returns `<cache>/images/<key>/rootfs`, the read-only overlay lower dir every host shares. The
build runs in a private mount namespace (`unshare --mount`), so its bind mounts vanish with it. The image is a
fresh Debian 12 server: Python packages, engines and tools come from the roles, through the sandbox's package
sources (sandbox/aptserve.py, sandbox/pypi.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from sandbox import paths

IMAGE_VERSION = 4  # bump when the build steps change
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# A fresh Debian 12 server and nothing more: debootstrap's minbase (priority required), the priority important
# and standard packages a server install has (`apt-cache show <p>`: Priority), and what a Debian server or cloud
# image adds for remote management: openssh-server, python3 (Ansible's interpreter) and sudo. What a stage
# needs beyond this, a role installs (tests/sandbox/test_bare_host.py holds it).
SERVER_PACKAGES = (
    "openssh-server", "python3", "sudo",  # the SSH server task, Ansible's interpreter, sudo
    "iproute2", "procps", "systemd", "systemd-sysv", "iputils-ping", "kmod", "netbase", "less",  # important
    "dbus", "libpam-systemd", "ca-certificates", "pciutils", "xz-utils",  # standard
    # Priority: important in bookworm (`apt-cache show nftables`), so a fresh Debian 12 server has /usr/sbin/nft:
    # the serving firewall (roles/gridready_ray_node/tasks/firewall.yml) finds and uses it, as on a real host
    "nftables",
)
PACKAGES = SERVER_PACKAGES
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer",
                "fstrim.timer", "getty@tty1.service")
OK_MARKER = ".gridready-image.json"

SOURCES = f"""deb {MIRROR} {SUITE} main
deb {MIRROR} {SUITE}-updates main
deb http://deb.debian.org/debian-security {SUITE}-security main
"""
# Debian packages through apt-cacher-ng on the bridge; the local NVIDIA repo on the bridge directly.
APT_PROXY = f"""Acquire::http::Proxy "http://{paths.BRIDGE_ADDR}:{paths.ACNG_PORT}";
Acquire::http::Proxy::{paths.BRIDGE_ADDR} "DIRECT";
Acquire::Retries "2";
"""
SSHD_CONF = """# gridready sandbox: key-only root login for the controller
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
HostKey /etc/ssh/ssh_host_ed25519_key
UseDNS no
"""


def image_key() -> str:
    recipe = {"v": IMAGE_VERSION, "suite": SUITE, "mirror": MIRROR, "packages": sorted(PACKAGES),
              "masked": sorted(MASKED_UNITS), "proxy": APT_PROXY, "sshd": SSHD_CONF}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def image_dir() -> Path:
    return paths.cache_dir() / "images" / image_key()


def cached_image() -> Path | None:
    root = image_dir()
    return root / "rootfs" if (root / OK_MARKER).exists() else None


def ensure_image(log: Path | None = None) -> Path:
    """The cached rootfs, building it first (about a minute and a half) when the recipe changed."""
    found = cached_image()
    if found:
        return found
    if shutil.which("debootstrap") is None:
        raise GridreadyError(
            "sandbox: debootstrap is not installed and no image is cached (apt-get install debootstrap)",
            ExitCode.INVALID,
        )
    images = image_dir().parent
    images.mkdir(parents=True, exist_ok=True)
    with open(images / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build of the same key waits here
        found = cached_image()
        if found:
            return found
        final = image_dir()
        tmp = images / f"{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        log = log or tmp / "build.log"
        env = {**os.environ, "PYTHONPATH": str(paths.repo_root())}
        started = time.monotonic()
        with open(log, "a") as out:
            res = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
                 "sandbox.image", "--build", str(tmp)],
                stdout=out, stderr=subprocess.STDOUT, env=env, check=False,
            )
        if res.returncode != 0:
            raise GridreadyError(f"sandbox: image build failed (exit {res.returncode}); see {log}")
        meta = {"key": final.name, "seconds": round(time.monotonic() - started, 1),
                "packages": list(PACKAGES), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / OK_MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
    return final / "rootfs"


# ---- inside the private mount namespace -------------------------------------------------------------------


def _sh(*cmd: str, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(list(cmd), check=True, env=env)


def _chroot(root: Path, *cmd: str, extra_env: dict[str, str] | None = None) -> None:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive", **(extra_env or {})}
    _sh("chroot", str(root), *cmd, env=env)


def _write(root: Path, rel: str, text: str, mode: int = 0o644) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _build(tmp: Path) -> None:
    root = tmp / "rootfs"
    _sh("debootstrap", "--variant=minbase", SUITE, str(root), MIRROR)
    _sh("mount", "--make-rprivate", "/")
    _sh("mount", "-t", "proc", "proc", str(root / "proc"))
    _sh("mount", "--bind", "/dev", str(root / "dev"))
    (root / "etc/resolv.conf").unlink(missing_ok=True)
    (root / "etc/resolv.conf").touch()
    _sh("mount", "--bind", "/etc/resolv.conf", str(root / "etc/resolv.conf"))  # DNS for the build only
    _write(root, "/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)  # no daemons while building
    _write(root, "/etc/apt/sources.list", SOURCES)
    _chroot(root, "apt-get", "update", "-q")
    _chroot(root, "apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES)
    _chroot(root, "apt-get", "dist-upgrade", "-y", "-q", "--no-install-recommends")
    _configure(root)
    _chroot(root, "systemctl", "mask", *MASKED_UNITS)
    _chroot(root, "apt-get", "clean")
    _chroot(root, "apt-cache", "gencaches")  # else every host rebuilds pkgcache.bin (76 MB)
    (root / "usr/sbin/policy-rc.d").unlink()  # left in place it stops daemons starting under systemd
    _sh("umount", str(root / "etc/resolv.conf"))
    (root / "etc/resolv.conf").write_text("")  # no DNS on the hosts
    _sh("umount", str(root / "dev"))
    _sh("umount", str(root / "proc"))


def _configure(root: Path) -> None:
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # fresh keys per host at bring-up
    _write(root, "/etc/ssh/sshd_config.d/gridready-sandbox.conf", SSHD_CONF)
    _write(root, "/etc/apt/apt.conf.d/01gridready-sandbox-proxy", APT_PROXY)
    _write(root, "/etc/hostname", "sandbox\n")
    _write(root, "/etc/machine-id", "")  # each host gets its own at bring-up
    (root / "etc/gridready-sim").mkdir(exist_ok=True)
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    _write(root, "/etc/gridready-sandbox-image",
           f"gridready sandbox image {image_key()} (debootstrap {SUITE}, a fresh server); SIMULATED fleet host\n")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--build":
        _build(Path(sys.argv[2]))
    else:
        print(ensure_image())
