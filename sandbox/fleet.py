"""The sandbox fleet: N simulated GPU hosts on this machine (public API: up, down, status, ensure_up).

A fleet is named after its inventory directory (`inventories/sandbox` -> `sandbox`). Its state lives in
`/var/lib/gridready-sandbox/fleets/<name>/` (controller key, ssh_config, state.json, per-host overlay dirs), so
the committed hosts.yml can point at fixed paths. Addresses come from the machine-wide allocator (`alloc`), so
fleets of several users and test sessions never collide. Hardware is SIMULATED; everything else is real.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import string
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import SITE_PINS_FILE
from gridready.serving.triton import versions as triton_versions
from sandbox import aptserve, config, container, image, images, network, paths, preflight, proc
from sandbox.alloc import claim, dead_owned, locked, release, short_id

HostState = Literal["running", "booting", "stopped"]
FleetState = Literal["running", "degraded", "stopped"]


class HostStatus(BaseModel):
    name: str
    address: str | None
    state: HostState
    profile: str  # one-line summary of the SIMULATED hardware profile
    release: str = image.DEFAULT_RELEASE  # the host's OS image (sandbox/image.py RELEASES)


class FleetStatus(BaseModel):
    name: str
    inventory: str
    state: FleetState
    hosts: list[HostStatus]
    ssh_config: str
    identity_file: str
    repo_url: str = paths.REPO_URL
    apt_proxy: str = f"http://{paths.BRIDGE_ADDR}:{paths.ACNG_PORT}"
    simulated: str = "GPU/HCA hardware is simulated (sandbox); OS, systemd, sshd, apt, Ray are real"


# ---- naming and files --------------------------------------------------------------------------------------


def fleet_name(inventory_dir: Path) -> str:
    return Path(inventory_dir).resolve().name


def _plan(name: str, index: int, host: str, address: str) -> container.HostPlan:
    sid = short_id(name)
    return container.HostPlan(fleet=name, name=host, address=address, netns=f"gr-{sid}-{host}",
                              veth=f"gr{sid}{index}", machine=f"{name}-{host}",
                              dir=paths.fleet_dir(name) / "hosts" / host)


def _state_path(name: str) -> Path:
    return paths.fleet_dir(name) / "state.json"


def _read_state(name: str) -> dict | None:
    try:
        return json.loads(_state_path(name).read_text())
    except (OSError, ValueError):
        return None


def _console(name: str, host: str) -> Path:
    return paths.fleet_dir(name) / "logs" / f"{host}.console.log"


@contextlib.contextmanager
def _fleet_lock(name: str, *, wait: bool = True) -> Iterator[bool]:
    """One up/down at a time per fleet (two `invoke provision` may both try to bring it up).

    Yields False (lock not taken) when `wait` is False and another process holds it."""
    fdir = paths.fleet_dir(name)
    fdir.mkdir(parents=True, exist_ok=True)
    with open(fdir / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def _write_state(name: str, state: dict) -> None:
    tmp = _state_path(name).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(_state_path(name))


def _controller_key(name: str) -> Path:
    key = paths.fleet_dir(name) / "id_ed25519"
    if not key.exists() or not key.with_suffix(".pub").exists():
        key.unlink(missing_ok=True)
        proc.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gridready-sandbox-{name}",
                  "-f", str(key)], what="ssh-keygen (controller key)")
    return key


def ssh_options(name: str) -> list[str]:
    """ssh -o options of this fleet. Host key checking is off ONLY for the sandbox: every bring-up makes fresh
    host keys at addresses that other fleets reuse. The ControlPath is per fleet and wiped at every up/down."""
    return ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR",
            f"ControlPath={paths.control_dir(name)}/%C"]


def _write_ssh_config(name: str, addresses: dict[str, str], key: Path) -> Path:
    lines = [f"# gridready sandbox fleet {name!r} (generated at bring-up)"]
    for host, addr in addresses.items():
        lines += [f"Host {host} {addr}", f"  HostName {addr}", f"  User {image.LOGIN_USER}", f"  IdentityFile {key}",
                  "  IdentitiesOnly yes", *(f"  {o.replace('=', ' ', 1)}" for o in ssh_options(name)), ""]
    path = paths.fleet_dir(name) / "ssh_config"
    path.write_text("\n".join(lines))
    return path


def _close_masters(name: str) -> None:
    """Stop ssh ControlMasters left by Ansible/testinfra for this fleet, then drop the socket dir."""
    cdir = paths.control_dir(name)
    if cdir.is_dir():
        for sock in cdir.iterdir():
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "sandbox-host"],
                           capture_output=True, timeout=5, check=False)
    shutil.rmtree(cdir, ignore_errors=True)


# ---- public API --------------------------------------------------------------------------------------------


def up(inventory_dir: Path, hosts: int | None = None, *, owner_pid: int | None = None) -> FleetStatus:
    """Bring the fleet of `inventory_dir` up (first `hosts` hosts of hosts.yml); a running one is left as is.

    `owner_pid`: tie the fleet to a process (tests); if it dies without `down`, the next claim reaps the fleet.
    """
    preflight.check()
    cfg = config.load(Path(inventory_dir), hosts)
    prepare_inventory(cfg.inventory)
    with _fleet_lock(cfg.name):
        return _up(cfg, hosts, owner_pid)


def prepare_inventory(inventory_dir: Path) -> None:
    """What a customer does by hand before the first run, done for a sandbox inventory: a vault password file
    (`.vault-pass`, git-ignored, which gridready.vault reads like any inventory's) and a Hugging Face token in the
    vault for the simulated Hub (sandbox/engine/hub.py opens its gated repositories to any token, so the vault ->
    hosts path of the token runs as on a real fleet)."""
    from gridready import vault  # ansible-core's vault: imported here, after preflight (it writes under $HOME)

    pw = inventory_dir / vault.INVENTORY_PASSWORD_FILE
    if not pw.exists():
        fd = os.open(pw, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    _write_image_pins(inventory_dir)
    customer = config.customer_of(inventory_dir)
    data = vault.read(customer, inventory_dir)
    if not data.get(vault.HF_TOKEN_VAR):
        alphabet = string.ascii_letters + string.digits
        data[vault.HF_TOKEN_VAR] = "hf_" + "".join(secrets.choice(alphabet) for _ in range(34))
        vault.write(customer, inventory_dir, data)


def _write_image_pins(inventory_dir: Path) -> None:
    """The digests of the sandbox registry's images in the inventory's pins file (`triton_versions.yml`,
    gridready.inventory.site_pins), as a customer records the digests of the images they verified or
    mirrored: the pins of the product name no digest until one is confirmed, and the product refuses to deploy an
    image without one. Rewritten when the images changed (their digests follow the simulator's content)."""
    by_ref = images.digests()
    pins = triton_versions.pins()
    lines = {mode: {"image_digest": by_ref[line["image"]]} for mode, line in sorted(pins["lines"].items())}
    data = {"lines": lines, "fixed_cost": {"image_digest": by_ref[pins["fixed_cost"]["image"]]}}
    text = ("# generated by the sandbox (sandbox/fleet.py) at bring-up: digests of the SIMULATED images of its\n"
            "# registry (sandbox/images.py); git-ignored, rewritten when the images change\n"
            + yaml.safe_dump(data, sort_keys=True))
    path = inventory_dir / SITE_PINS_FILE
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _up(cfg: config.FleetConfig, hosts: int | None, owner_pid: int | None) -> FleetStatus:
    name = cfg.name
    for h in cfg.hosts:  # validate every profile before anything starts (exit 2, nothing run)
        config.render_profile(h.name, h.address or "10.77.0.2", h.profile, str(cfg.inventory / "sandbox.yml"))
    aptserve.refresh_repo()  # outside the allocator lock; rebuilds only when the simulator changed
    current = status(cfg.inventory, hosts)
    if current.state == "running":
        with locked() as table:
            _ensure_shared(table)
        return current
    lowers = {release: image.ensure_image(release) for release in sorted({h.release for h in cfg.hosts})}
    _reap_dead_owners(name)
    _teardown(cfg.inventory, release_claim=False)  # stale or partial leftovers (a crash); keep the claim
    with locked() as table:
        addresses = claim(table, name, cfg.inventory, {h.name: h.address for h in cfg.hosts}, owner_pid)
        _ensure_shared(table)
    try:
        _start_hosts(cfg, addresses, lowers)
    except BaseException:
        with contextlib.suppress(Exception):
            _teardown(cfg.inventory, release_claim=True)
        raise
    return status(cfg.inventory, hosts)


# every booted container's systemd takes inotify instances; the kernel default of 128 per user runs out at about
# 14 hosts ("Too many open files" at boot), and test sessions keep several fleets up at once
INOTIFY_MIN = {"max_user_instances": 1024, "max_user_watches": 524288}


def _raise_inotify_limits() -> None:
    for name, want in INOTIFY_MIN.items():
        path = Path("/proc/sys/fs/inotify") / name
        with contextlib.suppress(OSError, ValueError):
            if int(path.read_text()) < want:
                path.write_text(f"{want}\n")


def _ensure_shared(table: dict) -> None:
    _raise_inotify_limits()
    network.ensure_bridge()
    aptserve.start(table["services"])


def _reap_dead_owners(me: str) -> None:
    """Tear down fleets whose owning process died; skip any whose lock is busy (never wait: no deadlock)."""
    with locked() as table:
        dead = {n: table["fleets"][n]["inventory"] for n in dead_owned(table) if n != me}
    for name, inv in dead.items():
        with _fleet_lock(name, wait=False) as mine, contextlib.suppress(GridreadyError):
            if mine:
                _teardown(Path(inv), release_claim=True)
                if Path(inv).parent == paths.generated_inventory_dir(name).parent:  # a test's: drop it all
                    shutil.rmtree(inv, ignore_errors=True)
                    shutil.rmtree(paths.fleet_dir(name), ignore_errors=True)


def _start_hosts(cfg: config.FleetConfig, addresses: dict[str, str], lowers: dict[str, Path]) -> None:
    name = cfg.name
    fdir = paths.fleet_dir(name)
    (fdir / "hosts").mkdir(parents=True, exist_ok=True)
    key = _controller_key(name)
    pubkey = key.with_suffix(".pub").read_text()
    _write_ssh_config(name, addresses, key)
    _close_masters(name)
    paths.control_dir(name).mkdir(parents=True, mode=0o700)
    state: dict = {"name": name, "inventory": str(cfg.inventory), "hosts": {},
                   "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for index, h in enumerate(cfg.hosts, start=1):
        plan = _plan(name, index, h.name, addresses[h.name])
        profile = config.render_profile(h.name, plan.address, h.profile, str(cfg.inventory / "sandbox.yml"))
        container.prepare(plan, addresses, pubkey, profile, lowers[h.release])
        config.write_sim_hardware(plan.dir / "upper", profile)
        rec: dict[str, Any] = {"address": plan.address, "netns": plan.netns, "veth": plan.veth,
                               "machine": plan.machine, "dir": str(plan.dir), "profile": config.summary(h.profile),
                               "release": h.release, "image": str(lowers[h.release])}
        state["hosts"][h.name] = rec
        _write_state(name, state)  # saved before each start: a crash leaves a record for down()
        network.add_host(plan.netns, plan.veth, plan.address)
        # "nspawn_pid": the launcher, nspawn's parent for the host's whole life (a new nspawn at every reboot)
        rec["nspawn_pid"], rec["nspawn_start"] = container.start(
            plan, lowers[h.release], unified_cgroup=h.release in image.UNIFIED_CGROUP_ONLY)
        _write_state(name, state)
    _wait_ready(name, state, timeout=60 + 5 * len(cfg.hosts))
    _write_state(name, state)


def _wait_ready(name: str, state: dict, timeout: float) -> None:
    pending = dict(state["hosts"])
    deadline = time.monotonic() + timeout
    while pending:
        for host, rec in list(pending.items()):
            if not proc.alive(rec["nspawn_pid"], rec["nspawn_start"]):
                raise GridreadyError(f"sandbox: {host} exited during boot; see {_console(name, host)}")
            if container.ssh_ready(rec["address"], timeout=0.2):
                found = container.container_init(rec["nspawn_pid"])
                rec["init_pid"], rec["init_start"] = found if found else (None, None)
                del pending[host]
        if pending and time.monotonic() > deadline:
            raise GridreadyError(f"sandbox: sshd did not answer on {', '.join(sorted(pending))} within "
                                 f"{timeout:.0f} s; see {_console(name, sorted(pending)[0])}")
        if pending:
            time.sleep(0.05)


def reboot(inventory_dir: Path, host: str, timeout: float = 180,
           poll: Callable[[], object] | None = None) -> None:
    """`systemctl reboot` on `host` over its ssh (as an operator reboots a node), then wait until a new boot's
    sshd answers; the launcher starts nspawn again (container.restart_loop). `poll` is called while waiting (a test
    probes the host as it comes back). The record's container init becomes the new boot's."""
    name = fleet_name(Path(inventory_dir))
    rec = (_read_state(name) or {"hosts": {}})["hosts"].get(host)
    if not rec or not proc.alive(rec.get("nspawn_pid"), rec.get("nspawn_start")):
        raise GridreadyError(f"sandbox: {host} of fleet {name!r} is not running", ExitCode.INVALID)
    launcher, before = rec["nspawn_pid"], container.container_init(rec["nspawn_pid"])
    # the session may end before systemctl returns (ssh exit 255): the new boot is what counts
    subprocess.run(["ssh", "-F", str(paths.fleet_dir(name) / "ssh_config"), host, "sudo -n systemctl reboot"],
                   capture_output=True, timeout=60, check=False)
    deadline = time.monotonic() + timeout
    while True:
        if poll is not None:
            poll()
        if not proc.alive(launcher, rec["nspawn_start"]):
            raise GridreadyError(f"sandbox: {host} did not come back from its reboot; see {_console(name, host)}")
        now = container.container_init(launcher)
        if now is not None and now != before and container.ssh_ready(rec["address"], timeout=0.2):
            break
        if time.monotonic() > deadline:
            raise GridreadyError(f"sandbox: sshd of {host} did not answer within {timeout:.0f} s of its reboot; "
                                 f"see {_console(name, host)}")
        time.sleep(0.1)
    with _fleet_lock(name):
        state = _read_state(name)
        if state and host in state["hosts"]:
            state["hosts"][host]["init_pid"], state["hosts"][host]["init_start"] = now
            _write_state(name, state)


def down(inventory_dir: Path) -> None:
    """Stop the fleet and remove all it made: processes (saved PIDs), netns, veths, cgroups, mounts, control
    sockets, overlay dirs; the last fleet also stops the shared services and removes the bridge. Idempotent."""
    if not preflight.is_root():
        raise GridreadyError("sandbox: the sandbox fleet needs root", ExitCode.INVALID)
    with _fleet_lock(fleet_name(Path(inventory_dir))):
        _teardown(Path(inventory_dir), release_claim=True)


def _teardown(inventory_dir: Path, *, release_claim: bool) -> None:
    """down(); with release_claim=False (a restart) the addresses stay claimed and shared services stay up."""
    inv = inventory_dir.resolve()
    name = fleet_name(inv)
    held = locked_read().get(name)
    if held and held["inventory"] != str(inv):
        raise GridreadyError(f"sandbox: fleet {name!r} belongs to {held['inventory']}, not {inv}", ExitCode.INVALID)
    state = _read_state(name) or {"hosts": {}}
    for rec in state["hosts"].values():
        container.stop(rec)
        network.flush_neighbor(rec["address"])
    stuck = container.remove_cgroups(name)  # also SIGKILLs what is left in the fleet's own cgroups
    _close_masters(name)
    sid = short_id(name)
    for veth in network.links_with_prefix(f"gr{sid}"):
        network.remove_link(veth)
    for netns in network.netns_list():
        if netns.startswith(f"gr-{sid}-"):
            network.remove_netns(netns)
    _unmount_under(paths.fleet_dir(name))
    shutil.rmtree(paths.fleet_dir(name) / "hosts", ignore_errors=True)
    _state_path(name).unlink(missing_ok=True)
    if release_claim:
        with locked() as table:
            release(table, name)
            if not table["fleets"]:
                aptserve.stop(table["services"])
                network.remove_bridge()
    if stuck:
        raise GridreadyError(f"sandbox: cgroups still busy after teardown: {', '.join(map(str, stuck))}")


def locked_read() -> dict:
    with locked() as table:
        return dict(table["fleets"])


def _unmount_under(root: Path) -> None:
    """Mounts under the fleet dir should only exist in the hosts' private namespaces; drop any that leaked."""
    prefix = str(root) + "/"
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mnt in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], capture_output=True, check=False)


def status(inventory_dir: Path, hosts: int | None = None) -> FleetStatus:
    """Hosts with address, SIMULATED profile summary and state (running = sshd answers)."""
    cfg = config.load(Path(inventory_dir), hosts)
    state = _read_state(cfg.name) or {"hosts": {}}
    out = []
    for h in cfg.hosts:
        rec = state["hosts"].get(h.name)
        st: HostState = "stopped"
        if rec and proc.alive(rec.get("nspawn_pid"), rec.get("nspawn_start")):
            st = "running" if container.ssh_ready(rec["address"]) else "booting"
        out.append(HostStatus(name=h.name, address=rec["address"] if rec else h.address, state=st,
                              profile=config.summary(h.profile), release=h.release))
    states = {h.state for h in out}
    overall: FleetState = "running" if states == {"running"} else "stopped" if states == {"stopped"} else "degraded"
    fdir = paths.fleet_dir(cfg.name)
    return FleetStatus(name=cfg.name, inventory=str(cfg.inventory), state=overall, hosts=out,
                       ssh_config=str(fdir / "ssh_config"), identity_file=str(fdir / "id_ed25519"))


def ensure_up(inventory_dir: Path) -> FleetStatus:
    """The running fleet, brought up first when it is not (what `invoke provision` does on a sandbox)."""
    return up(inventory_dir)


def ensure_for(inventory_dir: Path) -> None:
    """tasks.py's hook before a stage: a sandbox inventory (it has sandbox.yml) gets its fleet up; any other
    inventory is left alone."""
    if (inventory_dir / "sandbox.yml").exists():
        ensure_up(inventory_dir)


def format_status(st: FleetStatus) -> str:
    lines = [f"sandbox fleet {st.name!r} ({st.inventory}): {st.state}, {len(st.hosts)} hosts "
             "[SIMULATED GPU hardware]"]
    width = max((len(h.name) for h in st.hosts), default=4)
    for h in st.hosts:
        lines.append(f"  {h.name:<{width}}  {h.address or '-':<12}  {h.state:<8}  {h.release:<9}  {h.profile}")
    if st.state != "stopped":
        first = st.hosts[0].name if st.hosts else "node1"
        lines.append(f"  ssh: ssh -F {st.ssh_config} {first} (as {image.LOGIN_USER}, sudo for root)   "
                     f"apt proxy {st.apt_proxy}   repo {st.repo_url}")
    return "\n".join(lines)
