"""A cluster.yml node group from what the node probe read on a host (`invoke discover`): SKU from the PCI device id,
GPU count, platform (NVIDIA's own `gpu_virtualization_mode`: Pass-Through in a VM), NVSwitch presence (a fabric
state other than N/A), NICs with kind, rate and netdev from the RDMA sysfs class, OS from /etc/os-release.
A host without the NVIDIA driver (the state `invoke provision` starts from) has no nvidia-smi: then the GPUs are
the NVIDIA display-class functions of PCI sysfs (device id, count), NVSwitches its NVIDIA bridge functions, and the
platform the CPU's hypervisor flag (a VM reads `hypervisor` in /proc/cpuinfo).
Pure: probe document in, node group (validated by the spec's NodeGroup) out; DiscoveryError says what is missing."""

from __future__ import annotations

from typing import Any

from gridready import catalog
from gridready.spec import NodeGroup

OS_NAMES = {("ubuntu", "22.04"): "ubuntu-22.04", ("ubuntu", "24.04"): "ubuntu-24.04", ("debian", "12"): "debian-12",
            ("debian", "13"): "debian-13"}


class DiscoveryError(ValueError):
    """The host's facts do not make a node group gridready supports (the message says why)."""


def _nics(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """RDMA devices: port 1 rate (`400 Gb/sec (4X NDR)` -> 400), link layer (InfiniBand or Ethernet = RoCE)."""
    nics = []
    for name, dev in sorted(((doc.get("hca") or {}).get("sysfs") or {}).items()):
        port = (dev.get("ports") or {}).get("1") or next(iter((dev.get("ports") or {}).values()), {})
        rate = str(port.get("rate") or "").split()
        if not rate or not rate[0].replace(".", "", 1).isdigit():
            raise DiscoveryError(f"{name}: port rate not readable ({port.get('rate')!r})")
        kind = "infiniband" if port.get("link_layer") == "InfiniBand" else "roce"
        nic: dict[str, Any] = {"name": name, "kind": kind, "rate_gbps": int(float(rate[0]))}
        if dev.get("netdevs"):
            nic["netdev"] = dev["netdevs"][0]
        nics.append(nic)
    return nics


def _from_driver(gpus: list[dict[str, Any]]) -> tuple[list[str], str | None, bool, str]:
    """(device ids, platform, NVSwitch present, evidence) from nvidia-smi's view of the GPUs."""
    modes = {str(g.get("virtualization_mode") or "None") for g in gpus}
    platform = "passthrough" if modes == {"Pass-Through"} else "baremetal" if modes <= {"None"} else None
    if platform is None:
        raise DiscoveryError(f"GPU virtualization mode {', '.join(sorted(modes))}: only bare metal and passthrough")
    nvswitch = any((g.get("fabric") or {}).get("state") not in (None, "N/A") for g in gpus)
    return [str(g.get("device_id")) for g in gpus], platform, nvswitch, "fabric state"


def _from_pci(system: dict[str, Any]) -> tuple[list[str], str | None, bool, str]:
    """(device ids, platform, NVSwitch present, evidence) from PCI sysfs and the CPU flags: no driver needed."""
    eps = system.get("pcie_endpoints") or []
    ids = [str(e.get("device")) for e in eps if e.get("kind") == "gpu"]
    if not ids:
        raise DiscoveryError("no GPU read (no nvidia-smi, no NVIDIA GPU function in PCI sysfs)")
    hyper = system.get("cpu_hypervisor")
    if hyper is None:
        raise DiscoveryError("no NVIDIA driver to read gpu_virtualization_mode and /proc/cpuinfo unreadable: bare "
                             "metal or VM is unknown (install the driver, or write platform: by hand)")
    nvswitch = any(e.get("kind") == "nvswitch" for e in eps)
    return ids, "passthrough" if hyper else "baremetal", nvswitch, "NVSwitch PCI functions"


def node_group(doc: dict[str, Any], name: str = "discovered") -> dict[str, Any]:
    gpus = ((doc.get("nvidia_smi") or {}).get("q") or {}).get("gpus") or []
    ids, platform, nvswitch, evidence = _from_driver(gpus) if gpus else _from_pci(doc.get("system") or {})
    distinct = sorted(set(ids))
    if len(distinct) != 1:
        raise DiscoveryError(f"GPUs of different PCI device ids on one host: {', '.join(distinct)}")
    sku = catalog.lookup(distinct[0])
    if sku is None:
        raise DiscoveryError(f"PCI device id {distinct[0]} is not in the catalog (known: "
                             f"{', '.join(catalog.known_keys())})")
    if platform == "baremetal" and nvswitch and sku.nvswitch and len(ids) in (2, 4):
        platform = "slice"  # some GPUs of an 8-GPU NVSwitch board (a Slurm allocation): the board's NVLink per GPU
    shape = sku.shape(len(ids), platform)
    if shape is None:
        raise DiscoveryError(f"{len(ids)} x {sku.name} {platform} is not a catalog shape ({sku.shape_names()})")
    if shape.nvswitch != nvswitch:
        raise DiscoveryError(f"NVSwitch {'present' if nvswitch else 'absent'} ({evidence}), but a {shape.label} "
                             f"{sku.name} node has {'one' if shape.nvswitch else 'none'}: check the fabric manager")
    osr = doc.get("os") or {}
    os_name = OS_NAMES.get((osr.get("id", ""), osr.get("version_id", "")))
    if os_name is None:
        raise DiscoveryError(f"OS {osr.get('id')} {osr.get('version_id')} is not supported "
                             f"({', '.join(OS_NAMES.values())})")
    nics = _nics(doc)
    group = {"name": name, "sku": sku.name, "gpus_per_node": len(ids), "platform": platform, "os": os_name,
             "nics": nics, "gpudirect_rdma": bool(nics)}
    NodeGroup.model_validate(group)
    return group
