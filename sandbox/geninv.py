"""Generated sandbox inventories for tests and benchmarks: N hosts at free addresses, custom profiles.

`make(name, n, profiles)` writes `/var/lib/gridready-sandbox/inventories/<name>/` from `inventories/sandbox/`
(cluster.yml with `customer: <name>`, group_vars, invoke.yaml) plus hosts.yml and sandbox.yml for N hosts, with
addresses claimed from the allocator (owned by the calling process: reaped if it dies without `down`).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

import yaml

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.spec import names as spec_names
from sandbox import alloc, config, fleet, image, paths

BASE = paths.repo_root() / "inventories" / "sandbox"
SLUG = re.compile(spec_names.SLUG)


def new_name(prefix: str = "t") -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def make(name: str, n: int = 3, profiles: dict[str, dict[str, Any]] | None = None, *, healthy: bool = False,
         base: Path = BASE, owner_pid: int | None = None) -> Path:
    """Write the inventory of fleet `name` with hosts node1..nodeN and return its directory.

    Profile of host i: base sandbox.yml defaults, then (unless `healthy`) the base entry of that host (node3 of
    the default sandbox is faulted), then `profiles[host]` merged on top (`{"faults": []}` clears faults).
    """
    if not SLUG.match(name):
        raise GridreadyError(f"sandbox: fleet name {name!r} must match {SLUG.pattern}", ExitCode.INVALID)
    if not 1 <= n <= 200:
        raise GridreadyError("sandbox: a generated fleet has 1 to 200 hosts", ExitCode.INVALID)
    profiles = profiles or {}
    hosts = [f"node{i}" for i in range(1, n + 1)]
    unknown = sorted(set(profiles) - set(hosts))
    if unknown:
        raise GridreadyError(f"sandbox: profiles for unknown hosts {unknown} (hosts: node1..node{n})",
                             ExitCode.INVALID)
    base_sb = yaml.safe_load((base / "sandbox.yml").read_text()) or {}
    base_hosts = {} if healthy else (base_sb.get("hosts") or {})
    per_host = {h: config.merge(base_hosts.get(h) or {}, profiles.get(h) or {}) for h in hosts}
    inv = paths.generated_inventory_dir(name)
    with alloc.locked() as table:
        addresses = alloc.claim(table, name, inv, dict.fromkeys(hosts), owner_pid or os.getpid())
    shutil.rmtree(inv, ignore_errors=True)
    inv.mkdir(parents=True)
    defaults = base_sb.get("defaults") or {}
    releases = {h: str((per_host[h] or {}).get(config.RELEASE_KEY, defaults.get(config.RELEASE_KEY,
                                                                                  image.DEFAULT_RELEASE)))
                for h in hosts}
    cluster, groups = node_groups(yaml.safe_load((base / "cluster.yml").read_text()), releases)
    cluster["customer"] = name
    (inv / "cluster.yml").write_text(f"# generated for sandbox fleet {name} from {base / 'cluster.yml'}\n"
                                     + yaml.safe_dump(cluster, sort_keys=False))
    if (base / "group_vars").is_dir():
        # not the base's vault: it is encrypted with the base's password; this inventory gets its own
        shutil.copytree(base / "group_vars", inv / "group_vars", ignore=shutil.ignore_patterns("vault.yml"))
    (inv / "invoke.yaml").write_text(f"gridready:\n  inventory: {inv}\n")
    sandbox = {"defaults": base_sb.get("defaults") or {}, "hosts": {h: per_host[h] for h in hosts}}
    (inv / "sandbox.yml").write_text(f"# generated for sandbox fleet {name} (SIMULATED hardware)\n"
                                     + yaml.safe_dump(sandbox, sort_keys=False))
    (inv / "hosts.yml").write_text(hosts_yaml(name, addresses, groups))
    return inv


def node_groups(cluster: dict[str, Any], releases: dict[str, str]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The base cluster.yml with one node group per release the hosts run (a node group has one `os`), and the
    hosts of each group. A release's group is the base group of that `os`, else the first base group under the
    name `<first group>_<suite>` with that `os`."""
    base = list(cluster.get("node_groups") or [])
    if not base:
        raise GridreadyError("sandbox: the base cluster.yml has no node_groups", ExitCode.INVALID)
    groups: dict[str, list[str]] = {}
    chosen: dict[str, dict[str, Any]] = {}
    for host, release in releases.items():
        if release not in chosen:
            found = next((g for g in base if g.get("os") == release), None)
            chosen[release] = found or {**base[0], "name": f"{base[0]['name']}_{image.suite(release)}",
                                        "os": release}
        groups.setdefault(chosen[release]["name"], []).append(host)
    return {**cluster, "node_groups": list(chosen.values())}, groups


def hosts_yaml(name: str, addresses: dict[str, str], groups: dict[str, list[str]] | None = None) -> str:
    """An Ansible YAML inventory in the shape of inventories/_sample/hosts.yml: the node groups with their hosts
    (default: all in gpu_nodes), the login user with become (sudo), plus this fleet's key and ssh options."""
    body = {"all": {
        "children": {group: {"hosts": {h: {"ansible_host": addresses[h]} for h in members}}
                     for group, members in (groups or {"gpu_nodes": list(addresses)}).items()},
        "vars": {
            "ansible_user": image.LOGIN_USER,
            "ansible_become": True,
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_private_key_file": str(paths.fleet_dir(name) / "id_ed25519"),
            "ansible_host_key_checking": False,  # sandbox only: fresh host keys at every bring-up
            "ansible_ssh_common_args": " ".join(f"-o {o}" for o in fleet.ssh_options(name)),
        },
    }}
    return f"# generated for sandbox fleet {name} (SIMULATED GPU hosts)\n" + yaml.safe_dump(body, sort_keys=False)


def remove(name: str) -> None:
    """Tear the fleet down (if up) and delete its generated inventory and state."""
    inv = paths.generated_inventory_dir(name)
    if inv.exists():
        fleet.down(inv)
    shutil.rmtree(inv, ignore_errors=True)
    shutil.rmtree(paths.fleet_dir(name), ignore_errors=True)
    with alloc.locked() as table:
        alloc.release(table, name)
