"""Read a sandbox inventory: host names and 10.77.0.x addresses from hosts.yml, hardware profiles and releases from
sandbox.yml.

sandbox.yml (SIMULATED hardware; schema of a profile: sandbox/profile.py HardwareProfile):

    defaults: {sku: H200-SXM-141GB, gpus: 8, hcas: 8}       # hcas: a count (sample HCAs) or a list
    hosts:
      node3: {faults: [{kind: pcie_downtrained, gpu: 3}]}  # merged over defaults
      node2: {os: debian-13}                               # the host's OS image (sandbox/image.py RELEASES)

`os` is no hardware: it picks the host's image (default debian-12) and is taken out of the profile.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from sandbox import alloc, image
from sandbox.profile import HardwareProfile, sample_hca  # the simulator's schema

DEFAULT_PROFILE: dict[str, Any] = {"sku": "H200-SXM-141GB", "gpus": 8, "hcas": 8}
RELEASE_KEY = "os"  # a host's release in sandbox.yml, named as cluster.yml names a node group's OS


@dataclass
class HostConfig:
    name: str
    address: str | None  # None: any free address (generated inventories are written with one)
    profile: dict[str, Any] = field(default_factory=dict)
    release: str = image.DEFAULT_RELEASE  # its image: a key of sandbox/image.py RELEASES


@dataclass
class FleetConfig:
    name: str
    inventory: Path
    hosts: list[HostConfig]


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text()) if path.exists() else None
    except yaml.YAMLError as err:
        raise GridreadyError(f"{path}: not valid YAML: {err}", ExitCode.INVALID) from None


def _walk(body: Any, out: dict[str, dict[str, Any]]) -> None:
    if not isinstance(body, dict):
        return
    for host, hvars in (body.get("hosts") or {}).items():
        out.setdefault(str(host), {}).update(hvars or {})
    for child in (body.get("children") or {}).values():
        _walk(child, out)


def inventory_hosts(inv: Path) -> dict[str, dict[str, Any]]:
    """host -> its own vars, in hosts.yml order (every group)."""
    data = _yaml(inv / "hosts.yml")
    if not isinstance(data, dict):
        raise GridreadyError(f"{inv / 'hosts.yml'}: missing or not an Ansible YAML inventory", ExitCode.INVALID)
    out: dict[str, dict[str, Any]] = {}
    for body in data.values():
        _walk(body, out)
    return out


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(inv: Path, hosts: int | None = None) -> FleetConfig:
    inv = inv.resolve()
    if not (inv / "sandbox.yml").exists():
        raise GridreadyError(f"{inv}: not a sandbox inventory (no sandbox.yml); the sandbox commands only "
                             "run simulated fleets", ExitCode.INVALID)
    sandbox = _yaml(inv / "sandbox.yml") or {}
    if not isinstance(sandbox, dict):
        raise GridreadyError(f"{inv / 'sandbox.yml'}: must be a mapping", ExitCode.INVALID)
    defaults = merge(DEFAULT_PROFILE, sandbox.get("defaults") or {})
    per_host = sandbox.get("hosts") or {}
    found = inventory_hosts(inv)
    if not found:
        raise GridreadyError(f"{inv / 'hosts.yml'}: no hosts", ExitCode.INVALID)
    names = list(found)
    if isinstance(hosts, str):  # invoke passes untyped flags as text
        if not hosts.isdigit():
            raise GridreadyError(f"--hosts must be a number, not {hosts!r}", ExitCode.INVALID)
        hosts = int(hosts)
    if hosts is not None:
        if not 1 <= hosts <= len(names):
            raise GridreadyError(
                f"{inv / 'hosts.yml'}: defines {len(names)} hosts, {hosts} asked; add hosts to hosts.yml "
                "(and sandbox.yml) or use a generated fleet (sandbox.geninv)", ExitCode.INVALID)
        names = names[:hosts]
    out = []
    for name in names:
        addr = found[name].get("ansible_host")
        addr = alloc.check_address(str(addr), f"{inv / 'hosts.yml'}: {name}.ansible_host") if addr else None
        profile = merge(defaults, per_host.get(name) or {})
        release = profile.pop(RELEASE_KEY, image.DEFAULT_RELEASE)
        if release not in image.RELEASES:
            where = "hosts." + name if RELEASE_KEY in (per_host.get(name) or {}) else "defaults"
            raise GridreadyError(f"{inv / 'sandbox.yml'}: {where}.{RELEASE_KEY}: {release!r} is not one of "
                                 f"{', '.join(image.RELEASES)}", ExitCode.INVALID)
        out.append(HostConfig(name, addr, profile, release))
    unknown = sorted(set(per_host) - set(found))
    if unknown:
        raise GridreadyError(f"{inv / 'sandbox.yml'}: hosts.{unknown[0]}: not in hosts.yml", ExitCode.INVALID)
    return FleetConfig(inv.name, inv, out)


def render_profile(host: str, address: str, profile: dict[str, Any], where: str) -> str:
    """The JSON each host finds at /etc/gridready-sim/profile.json, validated by the simulator's model."""
    data = dict(profile)
    if isinstance(data.get("hcas"), int):
        kind = data.pop("link_layer", "InfiniBand")
        data["hcas"] = [sample_hca(i, kind).model_dump() for i in range(data["hcas"])]
    try:
        return HardwareProfile.model_validate({**data, "host": host, "address": address}).to_json()
    except ValueError as err:  # pydantic ValidationError is a ValueError
        first = str(err).splitlines()
        raise GridreadyError(f"{where}: hosts.{host}: invalid profile: {' '.join(first[1:3])}",
                             ExitCode.INVALID) from None


def summary(profile: dict[str, Any]) -> str:
    """'H200-SXM-141GB x8, 8 HCA, faults: pcie_downtrained(gpu 3)' for status lines."""
    hcas = profile.get("hcas")
    n_hca = hcas if isinstance(hcas, int) else len(hcas or [])
    faults = []
    for f in profile.get("faults") or []:
        target = ", ".join(f"{k} {v}" for k, v in f.items() if k != "kind")
        faults.append(f"{f.get('kind')}({target})" if target else str(f.get("kind")))
    text = f"{profile.get('sku')} x{profile.get('gpus')}, {n_hca} HCA"
    return text + (f", faults: {'; '.join(faults)}" if faults else ", healthy")


SIM_SYSFS = "var/lib/gridready-sim/sysfs"


def write_sim_hardware(upper: Path, profile_json: str) -> None:
    """The simulated hardware exists before any software (as PCI devices do): write the simulator's sysfs tree
    into the host's upper dir at bring-up, so preflight sees the GPUs and HCAs before the driver packages
    (whose gridready-sim-sysfs unit rewrites the same tree at boot). A broken simulator only warns."""
    try:
        from sandbox.sim import simcore, sysfs

        sysfs.write_tree(simcore.from_dict(json.loads(profile_json)), upper / SIM_SYSFS)
    except Exception as err:  # the fleet still comes up; the package postinst writes the tree later
        print(f"warning: sandbox: simulated sysfs not written at bring-up: {err!r}", file=sys.stderr)


def customer_of(inv: Path) -> str:
    """The `customer` of a sandbox inventory's cluster.yml (its vault id)."""
    spec = _yaml(inv / "cluster.yml") or {}
    customer = spec.get("customer") if isinstance(spec, dict) else None
    if not isinstance(customer, str) or not customer:
        raise GridreadyError(f"{inv / 'cluster.yml'}: customer: missing", ExitCode.INVALID)
    return customer
