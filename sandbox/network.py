"""Links and namespaces: the shared bridge `fleetbr0` (10.77.0.1/24) with its blackhole route, and one netns + veth
per host. Forwarding is never enabled and no other address is ever configured, so nothing leaves the machine.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from sandbox import paths
from sandbox.proc import run


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["ip", *args], check=check, what="ip " + " ".join(args[:2]))


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def ensure_bridge() -> None:
    if not link_exists(paths.BRIDGE):
        _ip("link", "add", paths.BRIDGE, "type", "bridge")
    addrs = _ip("-o", "-4", "addr", "show", "dev", paths.BRIDGE).stdout
    if f"{paths.BRIDGE_ADDR}/{paths.PREFIX_LEN}" not in addrs:
        _ip("addr", "add", f"{paths.BRIDGE_ADDR}/{paths.PREFIX_LEN}", "dev", paths.BRIDGE)
    _ip("link", "set", paths.BRIDGE, "up")
    # anything in 10.77/16 not on the bridge is dropped instead of following the default route
    _ip("route", "replace", "blackhole", paths.BLACKHOLE)


def remove_bridge() -> None:
    if link_exists(paths.BRIDGE):
        _ip("link", "del", paths.BRIDGE, check=False)
    _ip("route", "del", "blackhole", paths.BLACKHOLE, check=False)


def netns_list() -> list[str]:
    return [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]


def links_with_prefix(prefix: str) -> list[str]:
    return sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix))


def add_host(netns: str, veth: str, address: str) -> None:
    """netns + veth pair: `veth` on the bridge, `eth0` with `address`/24 and a default route via the bridge."""
    _ip("netns", "add", netns)
    # the MAC follows the address: a later fleet reusing the address finds the controller's ARP entry valid
    _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "address", host_mac(address), "netns", netns)
    flush_neighbor(address)
    _ip("link", "set", veth, "master", paths.BRIDGE, "up")
    _ip("-n", netns, "link", "set", "lo", "up")
    _ip("-n", netns, "addr", "add", f"{address}/{paths.PREFIX_LEN}", "dev", "eth0")
    _ip("-n", netns, "link", "set", "eth0", "up")
    # roles and Ray need ansible_default_ipv4; safe since ip_forward stays 0 and 10.77/16 is blackholed
    _ip("-n", netns, "route", "add", "default", "via", paths.BRIDGE_ADDR)


def host_mac(address: str) -> str:
    """Locally administered MAC from the address: 10.77.0.36 -> 02:00:0a:4d:00:24."""
    return "02:00:" + ":".join(f"{int(o):02x}" for o in address.split("."))


def flush_neighbor(address: str) -> None:
    if link_exists(paths.BRIDGE):
        _ip("neigh", "flush", "to", address, "dev", paths.BRIDGE, check=False)


def remove_link(veth: str) -> None:
    if veth and link_exists(veth):
        _ip("link", "del", veth, check=False)


def remove_netns(netns: str) -> None:
    if netns and netns in netns_list():
        _ip("netns", "del", netns, check=False)
