"""The sandbox fleet for real: bring-up, Ansible + testinfra over SSH, a Ray cluster, and a clean teardown.

Needs root, network namespaces, overlayfs and systemd-nspawn (skips otherwise); about a minute on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import alloc, container, geninv, network, paths, proc
from sandbox import fleet as fleet_api
from sandbox.pytest_plugin import Fleet

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
DATA = Path(__file__).parent / "data"
RAY = "/opt/ray/venv/bin/ray"
MARKER = "/etc/gridready-sandbox-marker"


def test_status_lists_the_running_hosts(fleet: Fleet) -> None:
    st = fleet.status()
    assert st.state == "running"
    assert [h.name for h in st.hosts] == ["node1", "node2", "node3"]
    for h in st.hosts:
        assert h.state == "running" and h.address and h.address.startswith("10.77.0.")
        assert h.profile.startswith("H200-SXM-141GB x8, 8 HCA")
    assert "pcie_downtrained(gpu 3)" in st.hosts[2].profile
    text = fleet_api.format_status(st)
    assert "node3" in text and "SIMULATED" in text


def test_hosts_are_isolated_systemd_hosts(fleet: Fleet) -> None:
    seen_ids, seen_keys = set(), set()
    for name, addr in fleet.addresses.items():
        out = fleet.ssh(name, "hostname; cat /etc/machine-id; cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub; "
                              "systemctl is-system-running; ip -4 route show default; "
                              "grep -c nameserver /etc/resolv.conf || true; "
                              "python3 -c 'import json;print(json.load(open(\"/etc/gridready-sim/profile.json\"))"
                              "[\"address\"])'").stdout.split()
        hostname, machine_id, hostkey, system, *route = out[:-2]
        nameservers, profile_addr = out[-2:]
        assert hostname == name and profile_addr == addr
        assert system in ("running", "degraded"), system
        assert route[:3] == ["default", "via", paths.BRIDGE_ADDR]
        assert nameservers == "0"
        seen_ids.add(machine_id)
        seen_keys.add(hostkey)
    assert len(seen_ids) == len(seen_keys) == len(fleet.addresses)
    # the controller side: no forwarding, 10.77/16 blackholed, the bridge holds only 10.77.0.1
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "0"
    assert "blackhole 10.77.0.0/16" in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    addrs = subprocess.run(["ip", "-o", "addr", "show", "dev", paths.BRIDGE], capture_output=True, text=True).stdout
    assert re.findall(r"inet6? (\S+)", addrs)[0] == "10.77.0.1/24"


def test_fleets_side_by_side_never_collide(fleet: Fleet, make_fleet) -> None:
    other = make_fleet(1, healthy=True)
    assert not set(other.addresses.values()) & set(fleet.addresses.values())
    ids = {f.ssh("node1", "cat /etc/machine-id").stdout for f in (fleet, other)}
    assert len(ids) == 2  # same host name, two different hosts
    t0 = time.monotonic()
    again = fleet_api.up(other.inventory)  # up on a running fleet leaves it as it is
    assert again.state == "running" and time.monotonic() - t0 < 5
    assert other.ssh("node1", "cat /etc/machine-id").stdout in ids


def _recap(output: str) -> dict[str, dict[str, int]]:
    out = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        out[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return out


def test_ansible_play_and_testinfra_on_every_host(fleet: Fleet) -> None:
    first = fleet.ansible_playbook(DATA / "fleet_play.yml", check=False)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    recap = _recap(first.stdout)
    assert set(recap) == set(fleet.names) and all(r["failed"] == r["unreachable"] == 0 for r in recap.values())
    second = fleet.ansible_playbook(DATA / "fleet_play.yml", check=False)
    assert second.returncode == 0 and all(r["changed"] == 0 for r in _recap(second.stdout).values())
    for name, addr in fleet.addresses.items():  # testinfra, ssh backend with the fleet's ssh_config
        host = fleet.host(name)
        assert host.package("hello").is_installed
        assert host.run("hello").stdout.strip() == "Hello, world!"
        marker = host.file(MARKER)
        assert marker.content_string == f"{name} {addr} systemd\n"
        assert marker.mode == 0o640 and marker.user == "root"
        assert host.check_output("hostname") == name
        assert host.process.get(pid=1).comm == "systemd"
        assert host.socket("tcp://0.0.0.0:22").is_listening
        assert host.service("ssh").is_running
    # ... while this machine is unchanged
    assert not Path(MARKER).exists()
    assert subprocess.run(["dpkg", "-s", "hello"], capture_output=True).returncode != 0


def test_ray_cluster_runs_a_task_on_every_host_of_one_python(fleet: Fleet) -> None:
    """A Ray cluster spans hosts of one Python minor (Ray refuses a node whose Python differs from the head's:
    ray/_private/utils.py check_version_info, "Version mismatch"): the fleet mixes Debian 12 (3.11) and Debian 13
    (3.13) hosts, so the cluster takes the head's release and a host of the other one is refused."""
    fleet.install_ray(fleet.names)  # a fresh host has none: from the sandbox's package index, as the role does
    python = {h: fleet.ssh(h, "python3 -c 'import sys; print(*sys.version_info[:2])'").stdout.split()
              for h in fleet.names}
    head = fleet.names[0]
    workers = [h for h in fleet.names[1:] if python[h] == python[head]]
    others = [h for h in fleet.names if python[h] != python[head]]
    assert workers and others, python  # the default fleet holds both releases
    members = [head, *workers]
    head_ip = fleet.addresses[head]
    common = ("RAY_USAGE_STATS_ENABLED=0 {ray} start --num-cpus=1 --memory=1000000000 "
              "--object-store-memory=100000000 --disable-usage-stats --node-ip-address={ip} {extra}")
    fleet.ssh(head, common.format(ray=RAY, ip=head_ip,
                                  extra="--head --port=6379 --include-dashboard=false"), timeout=180)
    try:
        with ThreadPoolExecutor(len(workers)) as pool:
            list(pool.map(lambda w: fleet.ssh(w, common.format(
                ray=RAY, ip=fleet.addresses[w], extra=f"--address={head_ip}:6379"), timeout=180), workers))
        for other in others:
            refused = fleet.ssh(other, common.format(ray=RAY, ip=fleet.addresses[other],
                                                     extra=f"--address={head_ip}:6379"), timeout=180, check=False)
            assert refused.returncode != 0, refused.stdout[-2000:]
        res = fleet.ssh(head, "RAY_USAGE_STATS_ENABLED=0 /opt/ray/venv/bin/python -", timeout=300,
                        input=(DATA / "ray_driver.py").read_text())
        placed = json.loads(res.stdout.strip().splitlines()[-1])
        assert placed == sorted([n, fleet.addresses[n]] for n in members)
    finally:
        with ThreadPoolExecutor(len(fleet.names)) as pool:
            list(pool.map(lambda h: fleet.ssh(h, f"{RAY} stop --force", check=False), fleet.names))


def _traces(name: str, sid: str, pids: list[int]) -> dict[str, object]:
    """Everything a fleet could leave behind on this machine."""
    mounts = Path("/proc/self/mountinfo").read_text()
    live = [p for p in pids if proc.start_time(p) is not None]
    cmdlines = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if f"--machine={name}-" in cmd or f"gr-{sid}-" in cmd:
                cmdlines.append(cmd)
    return {
        "netns": [n for n in network.netns_list() if n.startswith(f"gr-{sid}-")],
        "links": network.links_with_prefix(f"gr{sid}"),
        "cgroups": [str(c) for c in container.fleet_cgroups(name) if c.exists()],
        "mounts": [m for m in mounts.splitlines() if str(paths.fleet_dir(name)) in m],
        "processes": live + cmdlines,
        "control_sockets": paths.control_dir(name).exists(),
        "allocation": name in alloc.read()["fleets"],
        "host_dirs": (paths.fleet_dir(name) / "hosts").exists(),
    }


def _saved_pids(name: str) -> list[int]:
    state = json.loads((paths.fleet_dir(name) / "state.json").read_text())
    return [r[k] for r in state["hosts"].values() for k in ("nspawn_pid", "init_pid") if r.get(k)]


def test_teardown_leaves_nothing_behind_even_after_a_crash() -> None:
    empty = {"netns": [], "links": [], "cgroups": [], "mounts": [], "processes": [], "control_sockets": False,
             "allocation": False, "host_dirs": False}
    name = geninv.new_name("td")
    inv = geninv.make(name, 2, healthy=True)
    try:
        fleet_api.up(inv, owner_pid=os.getpid())
        sid, pids = alloc.short_id(name), _saved_pids(name)
        assert _traces(name, sid, pids)["processes"]
        fleet_api.down(inv)
        assert _traces(name, sid, pids) == empty
        fleet_api.down(inv)  # twice is fine
        # a crash between start and saving the state: down still finds and removes everything
        fleet_api.up(inv, owner_pid=os.getpid())
        pids = _saved_pids(name)
        (paths.fleet_dir(name) / "state.json").unlink()
        fleet_api.down(inv)
        assert _traces(name, sid, pids) == empty
    finally:
        geninv.remove(name)


def test_a_fleet_whose_test_process_died_is_reaped(make_fleet) -> None:
    orphan = subprocess.run(
        [sys.executable, "-c", "import os; from sandbox.testfleet import start_fleet; "
         "f = start_fleet(1, prefix='orph'); print(f.name, flush=True); os._exit(0)"],
        capture_output=True, text=True, check=True, cwd=paths.repo_root(),
        env={**os.environ, "PYTHONPATH": str(paths.repo_root())}).stdout.split()[-1]
    sid, pids = alloc.short_id(orphan), _saved_pids(orphan)
    assert _traces(orphan, sid, pids)["processes"]  # still running: its owner died without teardown
    make_fleet(1, healthy=True)  # the next bring-up reaps it
    traces = _traces(orphan, sid, pids)
    assert not any(traces[k] for k in ("netns", "links", "cgroups", "mounts", "processes", "allocation"))
    assert not paths.generated_inventory_dir(orphan).exists()


def test_not_root_is_a_clear_invalid_input(tmp_path: Path) -> None:
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                          "sandbox", "up", str(paths.repo_root() / "inventories" / "sandbox")],
                         capture_output=True, text=True, cwd=paths.repo_root(),
                         env={**os.environ, "PYTHONPATH": str(paths.repo_root()), "HOME": str(tmp_path)})
    assert res.returncode == 2, res.stderr
    assert "needs root" in res.stderr and len(res.stderr.strip().splitlines()) == 1
