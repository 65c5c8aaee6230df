"""The sandbox hosts' root images: Debian 12 (bookworm) and Debian 13 (trixie) by debootstrap, each built once and
cached by a hash of its recipe.

`ensure_image(release)` returns `<cache>/images/<key>/rootfs`, the read-only overlay lower dir every host of that
release shares. The build runs in a private mount namespace (`unshare --mount`), so its bind mounts vanish with it.
An image is a fresh Debian server reached as a customer reaches theirs: an unprivileged login user (`gridready`, the
`ansible_user` of inventories/_sample) with passwordless sudo through a drop-in, sudo otherwise at Debian's defaults
(env_reset, secure_path), and no root login over ssh. Python packages, engines and tools come from the roles,
through the sandbox's package sources (sandbox/aptserve.py, sandbox/pypi.py).
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

IMAGE_VERSION = 5  # bump when the build steps change
# the sandbox's releases (the `os` names of cluster.yml) -> Debian suite; a host picks one in sandbox.yml
RELEASES = {"debian-12": "bookworm", "debian-13": "trixie"}
DEFAULT_RELEASE = "debian-12"
# Releases whose systemd (256 and later; trixie has 257) refuses to boot on the legacy or hybrid cgroup hierarchy
# (systemd NEWS for 256, "cgroup v1 ... is now considered obsolete"; systemd PR #31442): systemd-nspawn gives their
# containers the unified hierarchy with SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 (systemd-nspawn(1), ENVIRONMENT), as a
# real Debian 13 server boots (sandbox/container.py start)
UNIFIED_CGROUP_ONLY = frozenset({"debian-13"})
MIRROR = "http://deb.debian.org/debian"
# A fresh Debian server and nothing more: debootstrap's minbase (priority required), the priority important and
# standard packages a server install has (the Packages file of each suite: Priority), and what a Debian server or
# cloud image adds for remote management: openssh-server, python3 (Ansible's interpreter) and sudo. What a stage
# needs beyond this, a role installs (tests/sandbox/test_bare_host.py holds it).
SERVER_PACKAGES = (
    "openssh-server", "python3", "sudo",  # the SSH server task, Ansible's interpreter, sudo
    "iproute2", "procps", "systemd", "systemd-sysv", "iputils-ping", "kmod", "netbase", "less",  # important
    "dbus", "libpam-systemd", "ca-certificates", "pciutils", "xz-utils",  # standard
    # Priority: important in bookworm and trixie (dists/<suite>/main/binary-amd64/Packages: nftables), so a fresh
    # Debian server has /usr/sbin/nft: the serving firewall (roles/gridready_ray_node/tasks/firewall.yml) finds
    # and uses it, as on a real host
    "nftables",
)
PACKAGES = SERVER_PACKAGES
MASKED_UNITS = ("apt-daily.timer", "apt-daily-upgrade.timer", "man-db.timer", "e2scrub_all.timer",
                "fstrim.timer", "getty@tty1.service")
OK_MARKER = ".gridready-image.json"

# The login user of every sandbox host, as inventories/_sample names it (`ansible_user: gridready`), with the
# controller's key (sandbox/container.py) and passwordless sudo from a drop-in, as Debian's cloud images give their
# default user (cloud-init's sudo: ALL=(ALL) NOPASSWD:ALL, written to /etc/sudoers.d). sudoers(5): Debian's
# /etc/sudoers reads /etc/sudoers.d with @includedir, skipping names that contain a '.' or end in '~'; the
# drop-in touches no Defaults, so env_reset and secure_path stay as Debian ships them (SSH_CLIENT and
# SSH_CONNECTION do not survive sudo).
LOGIN_USER = "gridready"
SUDOERS_DROPIN = f"/etc/sudoers.d/{LOGIN_USER}"
SUDOERS = (f"# gridready sandbox: the controller's login user, as a cloud image's default user\n"
           f"{LOGIN_USER} ALL=(ALL:ALL) NOPASSWD: ALL\n")


def suite(release: str) -> str:
    """The Debian suite of a release name; exit 2 on a release the sandbox does not build."""
    if release not in RELEASES:
        raise GridreadyError(f"sandbox: release {release!r} is not one of {', '.join(RELEASES)}", ExitCode.INVALID)
    return RELEASES[release]


def sources(release: str) -> str:
    name = suite(release)
    return (f"deb {MIRROR} {name} main\ndeb {MIRROR} {name}-updates main\n"
            f"deb http://deb.debian.org/debian-security {name}-security main\n")


# Debian packages through apt-cacher-ng on the bridge; the local NVIDIA repo on the bridge directly.
APT_PROXY = f"""Acquire::http::Proxy "http://{paths.BRIDGE_ADDR}:{paths.ACNG_PORT}";
Acquire::http::Proxy::{paths.BRIDGE_ADDR} "DIRECT";
Acquire::Retries "2";
"""
# sshd_config(5): PermitRootLogin no, so the controller comes in as LOGIN_USER and becomes root through sudo
SSHD_CONF = f"""# gridready sandbox: key-only login for the controller as {LOGIN_USER}; root is refused
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
HostKey /etc/ssh/ssh_host_ed25519_key
UseDNS no
"""


def image_key(release: str = DEFAULT_RELEASE) -> str:
    recipe = {"v": IMAGE_VERSION, "suite": suite(release), "mirror": MIRROR, "packages": sorted(PACKAGES),
              "masked": sorted(MASKED_UNITS), "proxy": APT_PROXY, "sshd": SSHD_CONF, "user": LOGIN_USER,
              "sudoers": SUDOERS, "sources": sources(release)}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def image_dir(release: str = DEFAULT_RELEASE) -> Path:
    return paths.cache_dir() / "images" / image_key(release)


def cached_image(release: str = DEFAULT_RELEASE) -> Path | None:
    root = image_dir(release)
    return root / "rootfs" if (root / OK_MARKER).exists() else None


def ensure_image(release: str = DEFAULT_RELEASE, log: Path | None = None) -> Path:
    """The cached rootfs of `release`, building it first (two to five minutes) when its recipe changed."""
    found = cached_image(release)
    if found:
        return found
    if shutil.which("debootstrap") is None:
        raise GridreadyError(
            "sandbox: debootstrap is not installed and no image is cached (apt-get install debootstrap)",
            ExitCode.INVALID,
        )
    images = image_dir(release).parent
    images.mkdir(parents=True, exist_ok=True)
    with open(images / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build of the same key waits here
        found = cached_image(release)
        if found:
            return found
        final = image_dir(release)
        tmp = images / f"{final.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        log = log or tmp / "build.log"
        env = {**os.environ, "PYTHONPATH": str(paths.repo_root())}
        started = time.monotonic()
        with open(log, "a") as out:
            res = subprocess.run(
                ["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
                 "sandbox.image", "--build", str(tmp), release],
                stdout=out, stderr=subprocess.STDOUT, env=env, check=False,
            )
        if res.returncode != 0:
            raise GridreadyError(f"sandbox: image build failed (exit {res.returncode}); see {log}")
        meta = {"key": final.name, "release": release, "suite": suite(release),
                "seconds": round(time.monotonic() - started, 1), "packages": list(PACKAGES),
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
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


def _build(tmp: Path, release: str) -> None:
    root = tmp / "rootfs"
    _sh("debootstrap", "--variant=minbase", suite(release), str(root), MIRROR)
    _sh("mount", "--make-rprivate", "/")
    _sh("mount", "-t", "proc", "proc", str(root / "proc"))
    _sh("mount", "--bind", "/dev", str(root / "dev"))
    (root / "etc/resolv.conf").unlink(missing_ok=True)
    (root / "etc/resolv.conf").touch()
    _sh("mount", "--bind", "/etc/resolv.conf", str(root / "etc/resolv.conf"))  # DNS for the build only
    _write(root, "/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)  # no daemons while building
    _write(root, "/etc/apt/sources.list", sources(release))
    _chroot(root, "apt-get", "update", "-q")
    _chroot(root, "apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES)
    _chroot(root, "apt-get", "dist-upgrade", "-y", "-q", "--no-install-recommends")
    _configure(root, release)
    _chroot(root, "systemctl", "mask", *MASKED_UNITS)
    _chroot(root, "apt-get", "clean")
    _chroot(root, "apt-cache", "gencaches")  # else every host rebuilds pkgcache.bin (76 MB)
    (root / "usr/sbin/policy-rc.d").unlink()  # left in place it stops daemons starting under systemd
    _sh("umount", str(root / "etc/resolv.conf"))
    (root / "etc/resolv.conf").write_text("")  # no DNS on the hosts
    _sh("umount", str(root / "dev"))
    _sh("umount", str(root / "proc"))


def _configure(root: Path, release: str) -> None:
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # fresh keys per host at bring-up
    _write(root, "/etc/ssh/sshd_config.d/gridready-sandbox.conf", SSHD_CONF)
    _write(root, "/etc/apt/apt.conf.d/01gridready-sandbox-proxy", APT_PROXY)
    _write(root, "/etc/hostname", "sandbox\n")
    _write(root, "/etc/machine-id", "")  # each host gets its own at bring-up
    (root / "etc/gridready-sim").mkdir(exist_ok=True)
    # the login user as the distribution's useradd makes it (home mode from its login.defs), key added at bring-up
    _chroot(root, "useradd", "--create-home", "--user-group", "--shell", "/bin/bash", LOGIN_USER)
    _write(root, SUDOERS_DROPIN, SUDOERS, 0o440)
    _chroot(root, "visudo", "--check", "--quiet")  # a broken drop-in would lock the controller out
    _write(root, "/etc/gridready-sandbox-image",
           f"gridready sandbox image {image_key(release)} (debootstrap {suite(release)}, a fresh server); "
           "SIMULATED fleet host\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--build":
        _build(Path(sys.argv[2]), sys.argv[3])
    else:
        print(ensure_image(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_RELEASE))
