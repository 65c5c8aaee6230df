"""One sandbox host: a `systemd-nspawn --boot` container over an overlay root, in its own netns and cgroups.

Start: the launcher joins the host's own `name=systemd` and cgroup2 groups (else every container shares
`/payload` and a graceful stop hangs), enters a private mount namespace, mounts the overlay and execs nspawn; it
is detached (`setsid -f`) and writes its own PID, so the fleet outlives the command that started it.
Stop: SIGKILL the container's init (nspawn's child), never nspawn itself (that orphans the container).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from gridready.errors import GridreadyError
from sandbox import proc

CGROUP_BASE = "gridready-sandbox"


def cgroup_roots() -> list[Path]:
    """Hybrid host (this one): name=systemd (v1) and cgroup2 at unified/; a pure cgroup2 host: /sys/fs/cgroup."""
    top = Path("/sys/fs/cgroup")
    if (top / "unified").is_dir():
        return [top / "systemd", top / "unified"]
    return [top]


@dataclass
class HostPlan:
    """What one host needs to start."""

    fleet: str
    name: str
    address: str
    netns: str
    veth: str
    machine: str
    dir: Path  # <fleet dir>/hosts/<name>: upper/, work/, root/

    @property
    def console_log(self) -> Path:
        """nspawn's output (the boot log); outside hosts/ so it survives a failed bring-up's cleanup."""
        return self.dir.parent.parent / "logs" / f"{self.name}.console.log"

    def cgroups(self) -> list[Path]:
        return [root / CGROUP_BASE / self.fleet / self.name for root in cgroup_roots()]


def fleet_cgroups(fleet: str) -> list[Path]:
    return [root / CGROUP_BASE / fleet for root in cgroup_roots()]


def prepare(plan: HostPlan, all_hosts: dict[str, str], pubkey: str, profile_json: str) -> None:
    """Fresh upper dir with hostname, hosts, machine-id, host key, authorized key and the hardware profile."""
    shutil.rmtree(plan.dir, ignore_errors=True)
    upper = plan.dir / "upper"
    for sub in ("upper/etc/ssh", "upper/etc/gridready-sim", "work", "root"):
        (plan.dir / sub).mkdir(parents=True, mode=0o755)
    (upper / "etc/hostname").write_text(plan.name + "\n")
    hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    hosts += "".join(f"{addr}\t{name}\n" for name, addr in all_hosts.items())
    (upper / "etc/hosts").write_text(hosts)
    (upper / "etc/machine-id").write_text(uuid.uuid4().hex + "\n")
    proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{plan.name}",
              "-f", str(upper / "etc/ssh/ssh_host_ed25519_key")], what="ssh-keygen (host key)")
    ssh_dir = upper / "root/.ssh"
    ssh_dir.mkdir(parents=True, mode=0o700)
    (upper / "root").chmod(0o700)
    (ssh_dir / "authorized_keys").write_text(pubkey.strip() + "\n")
    (ssh_dir / "authorized_keys").chmod(0o600)
    (upper / "etc/gridready-sim/profile.json").write_text(profile_json)


def start(plan: HostPlan, lower: Path) -> tuple[int, int]:
    """Launch the container detached; returns (launcher PID, its start time). The launcher execs into nspawn."""
    for cg in plan.cgroups():
        cg.mkdir(parents=True, exist_ok=True)
    pidfile = plan.dir / "nspawn.pid"
    pidfile.unlink(missing_ok=True)
    root = plan.dir / "root"
    overlay = f"lowerdir={lower},upperdir={plan.dir / 'upper'},workdir={plan.dir / 'work'}"
    nspawn = [
        "systemd-nspawn", "--quiet", "--boot", f"--directory={root}", f"--machine={plan.machine}",
        f"--hostname={plan.name}", f"--network-namespace-path=/run/netns/{plan.netns}", "--register=no",
        "--keep-unit", "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--console=read-only",
    ]
    joins = " && ".join(f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))}" for cg in plan.cgroups())
    script = (
        f"echo $$ > {shlex.quote(str(pidfile))} && {joins} && "
        f"mount -t overlay overlay -o {shlex.quote(overlay)} {shlex.quote(str(root))} && "
        f"exec {shlex.join(nspawn)}"
    )
    plan.console_log.parent.mkdir(parents=True, exist_ok=True)
    with open(plan.console_log, "wb") as log:
        subprocess.run(
            ["setsid", "-f", "unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True,
        )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text:
            pid = int(text)
            started = proc.start_time(pid)
            if started is None:
                break
            return pid, started
        time.sleep(0.01)
    raise GridreadyError(f"sandbox: {plan.name} did not start; see {plan.console_log}")


def container_init(nspawn_pid: int) -> tuple[int, int] | None:
    """The container's PID 1 (nspawn's child) with its start time, once nspawn has forked it."""
    for child in proc.children(nspawn_pid):
        started = proc.start_time(child)
        if started is not None:
            return child, started
    return None


def ssh_ready(address: str, timeout: float = 0.5) -> bool:
    """sshd answers with its banner (a TCP accept alone can precede sshd during boot)."""
    try:
        with socket.create_connection((address, 22), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def stop(rec: dict[str, int | None]) -> None:
    """SIGKILL the container init of a saved record, then wait for nspawn to exit by itself."""
    npid, nstart = rec.get("nspawn_pid"), rec.get("nspawn_start")
    ipid, istart = rec.get("init_pid"), rec.get("init_start")
    if not proc.alive(ipid, istart) and proc.alive(npid, nstart):
        found = container_init(npid)  # type: ignore[arg-type]
        ipid, istart = found if found else (None, None)
    proc.kill_saved(ipid, istart)
    if not proc.wait_gone(npid, nstart, timeout=10):
        proc.kill_saved(npid, nstart)  # init is gone: nothing left to orphan
        proc.wait_gone(npid, nstart, timeout=5)


def remove_cgroups(fleet: str) -> list[Path]:
    """rmdir the fleet's cgroups depth-first; SIGKILL what is left inside them (only our containers run there).

    Returns the groups that could not be removed.
    """
    left: list[Path] = []
    for top in fleet_cgroups(fleet):
        if not top.exists():
            continue
        for _attempt in range(100):
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            for d in [*dirs, top]:
                try:
                    d.rmdir()
                except OSError:
                    _kill_members(d)
            if not top.exists():
                break
            time.sleep(0.05)
        if top.exists():
            left.append(top)
    for parent in {top.parent for top in fleet_cgroups(fleet)}:
        with contextlib.suppress(OSError):
            parent.rmdir()  # gridready-sandbox/ itself, when no fleet uses it
    return left


def _kill_members(cgroup: Path) -> None:
    try:
        pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def cgroup_members(fleet: str) -> list[int]:
    out: set[int] = set()
    for top in fleet_cgroups(fleet):
        if top.exists():
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    out.update(int(p) for p in procs.read_text().split())
    return sorted(out)
