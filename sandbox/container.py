"""One sandbox host: a `systemd-nspawn --boot` container over an overlay root, in its own netns and cgroups.

Start: the launcher joins the host's own `name=systemd` and cgroup2 groups (else every container shares
`/payload` and a graceful stop hangs), enters a private mount namespace, mounts the overlay and runs nspawn; it
is detached (`setsid -f`) and writes its own PID, so the fleet outlives the command that started it.
Reboot: the launcher stays the parent of nspawn and starts it again when the container's init rebooted (exit 133),
as systemd's own systemd-nspawn@.service does (`restart_loop`); a poweroff (exit 0) or any failure ends it.
Stop: write the stop marker (no restart after this), then SIGKILL the container's init (nspawn's child), never
nspawn itself (that orphans the container).
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
from typing import Any

from gridready.errors import GridreadyError
from sandbox import image, proc

CGROUP_BASE = "gridready-sandbox"
NSPAWN = "systemd-nspawn"
# systemd-nspawn(1), --boot: "If the container's init reboots, systemd-nspawn exits with status 133"; systemd's
# units/systemd-nspawn@.service.in restarts it on that status: RestartForceExitStatus=133, SuccessExitStatus=133
REBOOT_EXIT = 133
STOP_MARKER = "stop"  # in the host dir: the launcher starts no new boot once it exists


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

    @property
    def stop_marker(self) -> Path:
        return self.dir / STOP_MARKER

    def cgroups(self) -> list[Path]:
        return [root / CGROUP_BASE / self.fleet / self.name for root in cgroup_roots()]


def fleet_cgroups(fleet: str) -> list[Path]:
    return [root / CGROUP_BASE / fleet for root in cgroup_roots()]


def prepare(plan: HostPlan, all_hosts: dict[str, str], pubkey: str, profile_json: str, lower: Path) -> None:
    """Fresh upper dir with hostname, hosts, machine-id, host key, the controller's key for the image's login user
    (sandbox/image.py LOGIN_USER) and the hardware profile."""
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
    authorize(upper, lower, pubkey)
    (upper / "etc/gridready-sim/profile.json").write_text(profile_json)


def authorize(upper: Path, lower: Path, pubkey: str) -> None:
    """`pubkey` in ~/.ssh/authorized_keys of the image's login user, owned by that user: the overlay's upper copy
    of each directory on the way keeps the image's owner and mode (an upper directory's attributes are the merged
    directory's), as ssh-copy-id leaves them on a real host."""
    home_rel = Path("home") / image.LOGIN_USER
    home = lower / home_rel
    if not home.is_dir():
        raise GridreadyError(f"sandbox: the image at {lower} has no {home_rel} (rebuild it: sandbox/image.py)")
    for rel in (Path("home"), home_rel):
        st = (lower / rel).stat()
        (upper / rel).mkdir(exist_ok=True)
        os.chown(upper / rel, st.st_uid, st.st_gid)
        (upper / rel).chmod(st.st_mode & 0o7777)
    uid, gid = home.stat().st_uid, home.stat().st_gid
    ssh_dir = upper / home_rel / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    keys = ssh_dir / "authorized_keys"
    keys.write_text(pubkey.strip() + "\n")
    keys.chmod(0o600)
    for path in (ssh_dir, keys):
        os.chown(path, uid, gid)


def restart_loop(nspawn: list[str], stop_marker: Path, reset: str = "") -> str:
    """Shell that runs `nspawn` until its container stops for good, like systemd-nspawn@.service
    (RestartForceExitStatus=133, SuccessExitStatus=133): exit 133 (the container's init rebooted) runs `reset`, then
    nspawn again with the same arguments; exit 0 (poweroff) ends it with 0, any other status ends it with that
    status; once `stop_marker` exists (the sandbox's own stop) it ends before starting another boot."""
    marker = shlex.quote(str(stop_marker))
    again = f"{reset}; " if reset else ""
    return (f"while :; do test -e {marker} && exit 0; {shlex.join(nspawn)}; rc=$?; "
            f"test $rc -eq {REBOOT_EXIT} || exit $rc; test -e {marker} && exit 0; {again}done")


def reset_network_state(netns: str, root: Path) -> str:
    """Shell that empties the host's nftables ruleset between two boots. The host's network namespace outlives its
    container (the fleet made it, nspawn only joins it), but a real reboot starts a fresh kernel with no ruleset:
    nftables rules are kernel state that is not saved (nft(8); Debian loads /etc/nftables.conf at boot through
    nftables.service for that reason). The container image's own nft does it (no tool needed on this machine)."""
    return (f"nsenter --net={shlex.quote(f'/run/netns/{netns}')} chroot {shlex.quote(str(root))} "
            "/usr/sbin/nft flush ruleset")


def start(plan: HostPlan, lower: Path, *, unified_cgroup: bool = False) -> tuple[int, int]:
    """Launch the container detached; returns (launcher PID, its start time). The launcher is nspawn's parent for
    the host's whole life, across reboots (`restart_loop`). `unified_cgroup`: the container gets the cgroup2
    hierarchy only (sandbox/image.py UNIFIED_CGROUP_ONLY), whatever this machine's layout."""
    for cg in plan.cgroups():
        cg.mkdir(parents=True, exist_ok=True)
    pidfile = plan.dir / "nspawn.pid"
    pidfile.unlink(missing_ok=True)
    plan.stop_marker.unlink(missing_ok=True)
    root = plan.dir / "root"
    overlay = f"lowerdir={lower},upperdir={plan.dir / 'upper'},workdir={plan.dir / 'work'}"
    # CAP_NET_ADMIN: systemd-nspawn(1) retains it "if --private-network is specified", which cannot be combined
    # with --network-namespace-path; the netns is this host's own as a private network's is, so the host keeps it
    # as a private-network container (and a real server) does: nft and ip work inside (the serving firewall)
    nspawn = [
        NSPAWN, "--quiet", "--boot", f"--directory={root}", f"--machine={plan.machine}",
        f"--hostname={plan.name}", f"--network-namespace-path=/run/netns/{plan.netns}", "--register=no",
        "--keep-unit", "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--console=read-only",
        "--capability=CAP_NET_ADMIN",
    ]
    if unified_cgroup:  # `env` execs nspawn: the launcher's child is still systemd-nspawn (container_init)
        nspawn = ["env", "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1", *nspawn]
    joins = " && ".join(f"echo $$ > {shlex.quote(str(cg / 'cgroup.procs'))}" for cg in plan.cgroups())
    script = (
        f"echo $$ > {shlex.quote(str(pidfile))} && {joins} && "
        f"mount -t overlay overlay -o {shlex.quote(overlay)} {shlex.quote(str(root))} && "
        + restart_loop(nspawn, plan.stop_marker, reset_network_state(plan.netns, root))
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


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def container_init(launcher_pid: int) -> tuple[int, int] | None:
    """The container's PID 1 of the current boot (nspawn's child) with its start time, once nspawn has forked it.

    `launcher_pid` is the launcher (nspawn's parent, a new nspawn at every reboot) or nspawn itself."""
    nspawns = [launcher_pid] if _comm(launcher_pid) == NSPAWN else [
        c for c in proc.children(launcher_pid) if _comm(c) == NSPAWN]
    for nspawn in nspawns:
        for child in proc.children(nspawn):
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


def stop(rec: dict[str, Any]) -> None:
    """Stop a saved host record: the stop marker first (the launcher starts no new boot), then SIGKILL the container
    init of the current boot until the launcher exits by itself (a reboot may fork a new init meanwhile)."""
    npid, nstart = rec.get("nspawn_pid"), rec.get("nspawn_start")  # the launcher (nspawn's parent)
    ipid, istart = rec.get("init_pid"), rec.get("init_start")
    if rec.get("dir") and Path(rec["dir"]).is_dir():
        (Path(rec["dir"]) / STOP_MARKER).touch()
    proc.kill_saved(ipid, istart)
    deadline = time.monotonic() + 10
    while npid and proc.alive(npid, nstart) and time.monotonic() < deadline:
        found = container_init(npid)
        if found:
            proc.kill_saved(*found)
        time.sleep(0.05)
    if proc.alive(npid, nstart):
        proc.kill_saved(npid, nstart)  # the cgroup cleanup (remove_cgroups) takes what it leaves
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
