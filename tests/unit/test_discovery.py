"""`invoke discover`'s pure part: a node group from what the probe read, on real captures (the one-GPU H200 VM's
`-q -x`, a public 8 x H100 NDR sysfs tree) and on a whole probe run against the simulated tools of each shape."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gridready import catalog
from gridready.discovery import DiscoveryError, node_group
from gridready.probe import hca
from gridready.probe.collect import Probe, os_release
from gridready.probe.offline import doc_from_outputs
from gridready.spec import NodeGroup
from sandbox.profile import HardwareProfile
from sandbox.sim import simcore
from sandbox.sim import sysfs as simsysfs

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NDR = FIX / "public" / "sysfs-infiniband" / "sys-class-infiniband__8xH100-ndr__FAIL-mlx5_1-link_downed-255__gpud"


def _h200x1(**extra: Any) -> dict[str, Any]:
    doc = doc_from_outputs({"nvidia_smi_q_x": (FIX / "h200x1" / "nvidia-smi-q-x.xml").read_text()})
    doc["os"] = {"id": "ubuntu", "version_id": "24.04"}  # shared/reference/h200-machine.md: Ubuntu 24.04.3
    return {**doc, **extra}


def test_the_real_one_gpu_vm_is_a_one_gpu_passthrough_h200_group() -> None:
    g = node_group(_h200x1(), "gpu_nodes")
    assert g == {"name": "gpu_nodes", "sku": "H200-SXM-141GB", "gpus_per_node": 1, "platform": "passthrough",
                 "os": "ubuntu-24.04", "nics": [], "gpudirect_rdma": False}
    NodeGroup.model_validate(g)


def test_nics_from_a_real_ndr_sysfs_tree() -> None:
    doc = _h200x1(hca={"sysfs": hca.read_ib_sysfs(NDR)})
    nics = {n["name"]: n for n in node_group(doc)["nics"]}
    rails = [f"mlx5_{i}" for i in (0, 1, 4, 5, 6, 7, 8, 9)]
    assert sorted(nics) == [*rails, "mlx5_bond_0"]
    assert {(nics[n]["kind"], nics[n]["rate_gbps"]) for n in rails} == {("infiniband", 400)}
    assert nics["mlx5_bond_0"]["rate_gbps"] == 200  # the tree's 2X NDR bond


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d["nvidia_smi"]["q"]["gpus"][0].update(device_id="0x20B010DE"), "not in the catalog"),
    (lambda d: d["nvidia_smi"]["q"]["gpus"][0]["fabric"].update(state="Completed"), "NVSwitch present"),
    (lambda d: d["nvidia_smi"]["q"]["gpus"][0].update(virtualization_mode="VGPU"), "virtualization mode VGPU"),
    (lambda d: d.update(os={"id": "centos", "version_id": "7"}), "OS centos 7 is not supported"),
    (lambda d: d["nvidia_smi"]["q"].update(gpus=[]), "no GPU read"),
])
def test_facts_gridready_cannot_support_say_why(edit: Any, needle: str) -> None:
    doc = _h200x1()
    edit(doc)
    with pytest.raises(DiscoveryError, match=needle):
        node_group(doc)


def test_os_release_reads_id_and_version(tmp_path: Path) -> None:
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n')
    assert os_release(str(tmp_path / "os-release")) == {"id": "debian", "version_id": "12"}
    assert os_release(str(tmp_path / "absent")) == {}


def _probe_sim_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, driver: bool, **profile: Any) -> dict:
    """The node probe, measurements skipped, on a simulated host; `driver=False`: no nvidia-smi on PATH, as on a
    host `invoke provision` has not reached yet (the simulated sysfs and /proc exist from boot)."""
    (tmp_path / "bin").mkdir()
    if driver:
        (tmp_path / "bin" / "nvidia-smi").write_text(
            f"#!{sys.executable}\nimport sys\nfrom sandbox.sim.nvidia_smi import main\nsys.exit(main())\n")
        (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    prof = HardwareProfile.sample("sim-a", **profile)
    path = prof.write(tmp_path / "profile.json")
    simsysfs.write_tree(simcore.load(path), tmp_path / "sysfs")
    for k, v in {"GRIDREADY_SIM_PROFILE": str(path), "GRIDREADY_SYSFS_ROOT": str(tmp_path / "sysfs"),
                 "GRIDREADY_PROC_ROOT": str(tmp_path / "sysfs" / "proc"), "PATH": str(tmp_path / "bin")}.items():
        monkeypatch.setenv(k, v)
    doc = Probe({"profile": "quick", "algo": "ring", "nccl_min_bytes": 1, "nccl_max_bytes": 1, "best_of": 1,
                 "timeout": 60.0, "out": "-", "skip": ["dcgm", "nccl_tests", "nvbandwidth", "gpu_burn", "torch",
                                                       "kernel_log"]}).run()
    doc["os"] = {"id": "debian", "version_id": "12"}  # the sandbox hosts' image (docs/sandbox.md)
    return doc


@pytest.mark.slow
@pytest.mark.parametrize("driver", [True, False], ids=["driver", "no-driver"])
@pytest.mark.parametrize(("sku", "gpus", "platform"), [("H200-SXM-141GB", 8, "baremetal"),
                                                       ("H200-SXM-141GB", 4, "baremetal"),
                                                       ("H100-SXM5-80GB", 4, "baremetal"),
                                                       ("H200-SXM-141GB", 1, "passthrough"),
                                                       ("H200-SXM-141GB", 2, "passthrough")])
def test_a_simulated_host_of_each_shape_discovers_as_that_shape(sku: str, gpus: int, platform: str, driver: bool,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _probe_sim_host(tmp_path, monkeypatch, driver=driver, sku=sku, gpus=gpus, platform=platform, hcas=gpus)
    assert bool(doc["nvidia_smi"].get("q", {}).get("gpus")) is driver
    if not driver and platform == "passthrough" and catalog.lookup(sku).shape(gpus, platform).nvswitch:
        with pytest.raises(DiscoveryError, match=r"NVSwitch absent \(NVSwitch PCI functions\)"):
            node_group(doc, "gpu_nodes")  # a VM sees no NVSwitch on PCI: only the driver's fabric state tells
        return
    g = node_group(doc, "gpu_nodes")
    assert (g["gpus_per_node"], g["platform"], g["sku"]) == (gpus, platform, sku)
    assert [n["name"] for n in g["nics"]] == [f"mlx5_{i}" for i in range(gpus)]
    assert {(n["kind"], n["rate_gbps"]) for n in g["nics"]} == {("infiniband", 400)}


def test_without_the_driver_an_unreadable_cpuinfo_leaves_the_platform_unknown() -> None:
    doc = {"os": {"id": "debian", "version_id": "12"}, "nvidia_smi": {},
           "system": {"cpu_hypervisor": None, "pcie_endpoints": [{"kind": "gpu", "device": "0x2335"}]}}
    with pytest.raises(DiscoveryError, match="bare metal or VM is unknown"):
        node_group(doc)
    doc["system"]["cpu_hypervisor"] = True
    assert node_group(doc)["platform"] == "passthrough" and node_group(doc)["gpus_per_node"] == 1


def test_cpu_hypervisor_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gridready.probe.sysfs import cpu_hypervisor

    monkeypatch.setenv("GRIDREADY_PROC_ROOT", str(tmp_path))
    assert cpu_hypervisor() is None
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vme sse2 ht\n")
    assert cpu_hypervisor() is False
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nflags\t\t: fpu vme sse2 ht hypervisor lahf_lm\n")
    assert cpu_hypervisor() is True
