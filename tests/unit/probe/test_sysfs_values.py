"""sysfs / procfs collectors read value by value: the h200x2 machine's link dump (tests/fixtures/h200x2/sysfs-pci-links
.txt), a fake tree holding the files that machine's probe read (its probe document, probe_quick.json, records what it
made of them), /proc/cmdline of the lent H200 VMs, /proc/cpuinfo, /proc/modules, DMI identity, IOMMU groups and the
simulated-tree marker; absent and malformed files included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gridready.probe import sysfs
from tests.unit.certify.fixtures_io import H200, probe_quick

GPU = {"vendor": "0x10de", "device": "0x2335", "class": "0x030200"}
LINK5 = {"current_link_speed": "32.0 GT/s PCIe", "current_link_width": "16", "max_link_speed": "32.0 GT/s PCIe",
         "max_link_width": "16"}
# /proc/cpuinfo as a KVM guest's kernel prints it (AMD EPYC; flags shortened), two logical CPUs
CPUINFO = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\nfpu\t\t: yes\n"
           "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr{hv} lahf_lm cmp_legacy\n"
           "bugs\t\t: sysret_ss_attrs null_seg spectre_v1 spectre_v2\nbogomips\t: 5192.28\n")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty fake host: GRIDREADY_SYSFS_ROOT holds sys/, GRIDREADY_PROC_ROOT is proc/."""
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path))
    monkeypatch.setenv("GRIDREADY_PROC_ROOT", str(tmp_path / "proc"))
    return tmp_path


def _dev(root: Path, bdf: str, files: dict[str, str]) -> Path:
    d = root / "sys" / "bus" / "pci" / "devices" / bdf
    d.mkdir(parents=True)
    for name, val in files.items():
        (d / name).write_text(val + "\n")  # the kernel ends every attribute with a newline
    return d


def _proc(root: Path, name: str, text: str) -> None:
    (root / "proc" / name).write_text(text)


# -- the h200x2 dump -----------------------------------------------------------------------------------------------

def _dump_row(bdf: str) -> dict[str, Any]:
    return {"bdf": bdf, "kind": "gpu", "vendor": "0x10de", "device": None, "class": "0x030200",
            "current_speed": "32.0 GT/s PCIe", "max_speed": "32.0 GT/s PCIe", "gen_current": 5, "gen_max": 5,
            "width_current": 16, "width_max": 16, "source": "sysfs"}


def test_h200x2_links_dump() -> None:
    rows = sysfs.parse_sysfs_links_dump((H200 / "sysfs-pci-links.txt").read_text())
    assert rows == [_dump_row("0000:00:06.0"), _dump_row("0000:00:07.0")]


def test_links_dump_distinct_fields_and_skipped_lines() -> None:
    """Each field from its own column: a GPU trained at Gen4 x8 of Gen5 x16, an NVSwitch, the GPU's audio function
    (no endpoint kind), a GPU whose link reads Unknown; comment, blank and unreadable lines are skipped wherever they
    are. The dump lists NVIDIA functions only, so every row names vendor 0x10de."""
    text = ("# path class speed width maxspeed maxwidth\n\n"
            "/sys/bus/pci/devices/0000:1B:00.0 class=0x030200 speed=16.0 GT/s PCIe width=8 maxspeed=32.0 GT/s PCIe "
            "maxwidth=16 numa=1\n"
            "garbage\n"
            "  /sys/bus/pci/devices/0000:83:00.0 class=0x068000 speed=8.0 GT/s PCIe width=2 maxspeed=16.0 GT/s PCIe "
            "maxwidth=4 numa=0  \n"
            "/sys/bus/pci/devices/0000:9b:00.1 class=0x040300 speed=2.5 GT/s PCIe width=1 maxspeed=5.0 GT/s PCIe "
            "maxwidth=2\n"
            "/sys/bus/pci/devices/0000:db:00.0 class=0x030200 speed=Unknown width=0 maxspeed=Unknown maxwidth=16\n")
    rows = sysfs.parse_sysfs_links_dump(text)
    assert [(r["bdf"], r["kind"], r["class"]) for r in rows] == [
        ("0000:1B:00.0", "gpu", "0x030200"), ("0000:83:00.0", "nvswitch", "0x068000"),
        ("0000:9b:00.1", None, "0x040300"), ("0000:db:00.0", "gpu", "0x030200")]
    assert [(r["current_speed"], r["max_speed"], r["gen_current"], r["gen_max"], r["width_current"], r["width_max"])
            for r in rows] == [
        ("16.0 GT/s PCIe", "32.0 GT/s PCIe", 4, 5, 8, 16), ("8.0 GT/s PCIe", "16.0 GT/s PCIe", 3, 4, 2, 4),
        ("2.5 GT/s PCIe", "5.0 GT/s PCIe", 1, 2, 1, 2), ("Unknown", "Unknown", None, None, 0, 16)]
    assert all(r["vendor"] == "0x10de" and r["device"] is None and r["source"] == "sysfs" for r in rows)


@pytest.mark.parametrize("text", [
    "", "\n\n", "0000:00:06.0 class=0x030200 speed=32.0 GT/s PCIe width=x16 maxspeed=32.0 GT/s PCIe maxwidth=16",
    "/sys/bus/pci/devices/0000:00:06.0 CLASS=0x030200 SPEED=32.0 GT/s PCIe WIDTH=16 MAXSPEED=32.0 GT/s PCIe "
    "MAXWIDTH=16",
    "/sys/bus/pci/devices/0000:00:06.0 class=0x030200 speed=32.0 GT/s PCIe width=16",
])
def test_links_dump_nothing_readable(text: str) -> None:
    assert sysfs.parse_sysfs_links_dump(text) == []


# -- endpoint_kind -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("vendor", "cls", "kind"), [
    (0x10DE, 0x030200, "gpu"),  # H100 / H200 SXM: 3D controller
    (0x10DE, 0x030000, "gpu"),  # a PCIe card: VGA compatible controller
    (0x10DE, 0x068000, "nvswitch"),  # NVSwitch 22a3: Bridge, other
    (0x10DE, 0x068001, "nvswitch"),
    (0x10DE, 0x040300, None),  # the GPU's HD audio function
    (0x10DE, 0x060400, None),  # an NVIDIA PCI bridge
    (0x10DE, None, None),
    (0x102B, 0x030000, None),  # the BMC's Matrox VGA
    (0x1000, 0x068000, None),  # another vendor's "other bridge"
    (0x15B3, 0x020000, "nic"),  # ConnectX Ethernet
    (0x15B3, 0x020700, "nic"),  # ConnectX InfiniBand
    (0x1AF4, 0x020000, "nic"),  # virtio-net of the H200 VMs
    (None, 0x020000, "nic"),
    (None, 0x030200, None),
    (0x8086, 0x060000, None),  # host bridge
    (0x1000, 0x060400, None),  # PEX switch port: never an endpoint
])
def test_endpoint_kind(vendor: int | None, cls: int | None, kind: str | None) -> None:
    assert sysfs.endpoint_kind(vendor, cls) == kind


# -- pci_endpoints over a tree ---------------------------------------------------------------------------------------

def test_pci_endpoints_as_the_h200x2_probe_read_them(root: Path) -> None:
    """The files of the h200x2 VM's three endpoints (virtio-net without link attributes, two H200) and a host bridge
    give exactly the rows that machine's probe recorded."""
    _dev(root, "0000:00:00.0", {"vendor": "0x8086", "device": "0x0d57", "class": "0x060000", "numa_node": "-1"})
    _dev(root, "0000:00:03.0", {"vendor": "0x1af4", "device": "0x1041", "class": "0x020000", "numa_node": "-1"})
    _dev(root, "0000:00:07.0", {**GPU, **LINK5, "numa_node": "-1"})
    _dev(root, "0000:00:06.0", {**GPU, **LINK5, "numa_node": "-1"})
    recorded = probe_quick()["system"]["pcie_endpoints"]
    assert [r["bdf"] for r in recorded] == ["0000:00:03.0", "0000:00:06.0", "0000:00:07.0"]
    assert sysfs.pci_endpoints() == recorded


def test_pci_endpoint_every_field(root: Path) -> None:
    d = _dev(root, "0000:1b:00.0", {"vendor": "0x15b3", "device": "0x101d", "class": "0x020000",
                                     "current_link_speed": "16.0 GT/s PCIe", "current_link_width": "8",
                                     "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16", "numa_node": "1"})
    group = root / "sys" / "kernel" / "iommu_groups" / "42"
    (group / "devices").mkdir(parents=True)
    (d / "iommu_group").symlink_to(group)
    _dev(root, "0000:83:00.0", {"vendor": "0x10de", "device": "0x22a3", "class": "0x068000"})
    assert sysfs.pci_endpoints() == [
        {"bdf": "0000:1b:00.0", "kind": "nic", "vendor": "0x15b3", "device": "0x101d", "class": "0x020000",
         "current_speed": "16.0 GT/s PCIe", "max_speed": "32.0 GT/s PCIe", "gen_current": 4, "gen_max": 5,
         "width_current": 8, "width_max": 16, "numa_node": 1, "iommu_group": "42", "source": "sysfs"},
        {"bdf": "0000:83:00.0", "kind": "nvswitch", "vendor": "0x10de", "device": "0x22a3", "class": "0x068000",
         "current_speed": None, "max_speed": None, "gen_current": None, "gen_max": None, "width_current": None,
         "width_max": None, "numa_node": None, "iommu_group": None, "source": "sysfs"},
    ]


def test_pci_endpoint_vendor_unreadable(root: Path) -> None:
    """No vendor file (or an unreadable one): a network-class function is still a NIC, vendor None."""
    _dev(root, "0000:9c:00.0", {"vendor": "0xzz", "class": "0x020000", "current_link_width": "x16",
                                "numa_node": "-1"})
    _dev(root, "0000:9d:00.0", {"class": "0x020000"})
    rows = sysfs.pci_endpoints()
    assert [(r["bdf"], r["vendor"], r["class"], r["device"], r["width_current"], r["numa_node"]) for r in rows] == [
        ("0000:9c:00.0", None, "0x020000", None, None, -1), ("0000:9d:00.0", None, "0x020000", None, None, None)]


def test_pci_endpoints_without_class_are_skipped(root: Path) -> None:
    _dev(root, "0000:19:00.0", {"vendor": "0x10de", "device": "0x2330"})
    _dev(root, "0000:1a:00.0", {"vendor": "0x10de", "class": "garbage"})
    assert sysfs.pci_endpoints() == []


def test_pci_endpoints_without_a_pci_tree(root: Path) -> None:
    assert sysfs.pci_endpoints() == []


# -- iommu, cmdline, modules, cpuinfo, dmi, simulated --------------------------------------------------------------

@pytest.mark.parametrize(("groups", "expected"), [
    (None, {"groups": 0, "enabled": False}), (0, {"groups": 0, "enabled": False}),
    (1, {"groups": 1, "enabled": True}), (3, {"groups": 3, "enabled": True}),
])
def test_iommu_groups(root: Path, groups: int | None, expected: dict[str, Any]) -> None:
    if groups is not None:
        base = root / "sys" / "kernel" / "iommu_groups"
        base.mkdir(parents=True)
        for n in range(groups):
            (base / str(n)).mkdir()
        (root / "sys" / "kernel" / "mm").mkdir()  # another kernel/ entry, not a group
    assert sysfs.iommu() == expected


def test_cmdline_of_the_h200x2_vm(root: Path) -> None:
    recorded = probe_quick()["system"]["cmdline"]
    _proc(root, "cmdline", recorded + "\n")
    assert sysfs.cmdline() == recorded
    assert sysfs.cmdline().startswith("mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet")
    assert sysfs.iommu_mode(sysfs.cmdline(), 0) == "off"  # as that probe recorded
    assert sysfs.iommu_mode(sysfs.cmdline(), 2) == "translated"


def test_cmdline_absent(root: Path) -> None:
    assert sysfs.cmdline() is None


def test_modules(root: Path) -> None:
    _proc(root, "modules", "nvidia_uvm 1789952 0 - Live 0x0000000000000000 (OE)\n"
                           "nvidia 11681792 1 nvidia_uvm, Live 0x0000000000000000 (OE)\n\n"
                           "ib_core 454656 1 mlx5_ib, Live 0x0000000000000000\n"
                           "nvidia 11681792 1 nvidia_uvm, Live 0x0000000000000000 (OE)\n")
    assert sysfs.modules() == ["ib_core", "nvidia", "nvidia_uvm"]


def test_modules_empty_and_absent(root: Path) -> None:
    assert sysfs.modules() is None
    _proc(root, "modules", "")
    assert sysfs.modules() == []


@pytest.mark.parametrize(("text", "hypervisor"), [
    (CPUINFO.format(n=0, hv=" hypervisor") + "\n" + CPUINFO.format(n=1, hv=" hypervisor"), True),
    (CPUINFO.format(n=0, hv="") + "\n" + CPUINFO.format(n=1, hv=""), False),
    (CPUINFO.format(n=0, hv="") + "\n" + CPUINFO.format(n=1, hv=" hypervisor"), False),  # the first CPU's flags
    (CPUINFO.format(n=0, hv=" hypervisor_x"), False),  # a whole flag, not a substring
    ("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n", None),
    ("", None),
])
def test_cpu_hypervisor(root: Path, text: str, hypervisor: bool | None) -> None:
    _proc(root, "cpuinfo", text)
    assert sysfs.cpu_hypervisor() is hypervisor


def test_cpu_hypervisor_unreadable(root: Path) -> None:
    assert sysfs.cpu_hypervisor() is None


def test_dmi(root: Path) -> None:
    base = root / "sys" / "class" / "dmi" / "id"
    base.mkdir(parents=True)
    for key, val in {"sys_vendor": "Dell Inc.\n", "product_name": "PowerEdge XE9680\n", "product_serial": "  \n",
                     "board_serial": ".7XK4TZ3.CNFCP0038500M8.\n", "board_name": "0V1J6X\n"}.items():
        (base / key).write_text(val)
    assert sysfs.dmi() == {"sys_vendor": "Dell Inc.", "product_name": "PowerEdge XE9680", "product_serial": None,
                           "product_uuid": None, "board_serial": ".7XK4TZ3.CNFCP0038500M8.", "board_name": "0V1J6X"}
    assert list(sysfs.dmi()) == list(sysfs.DMI_KEYS)


def test_dmi_absent(root: Path) -> None:
    assert sysfs.dmi() == dict.fromkeys(sysfs.DMI_KEYS)


@pytest.mark.parametrize(("where", "simulated"), [(None, False), ("sys", True), (".", True), ("sys/bus", False)])
def test_simulated_marker(root: Path, where: str | None, simulated: bool) -> None:
    (root / "sys" / "bus").mkdir()
    if where is not None:
        (root / where / "GRIDREADY_SIMULATED").write_text("gridready-sim: simulated sysfs (profile h200x2)\n")
    assert sysfs.simulated() is simulated


# -- iommu_mode -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("cmd", "groups", "mode"), [
    ("BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=/dev/nvme0n1p2 ro iommu=pt quiet", 0, "passthrough"),
    ("ro iommu.passthrough=1", 12, "passthrough"),
    ("ro iommu.passthrough=0", 12, "translated"),
    ("intel_iommu=on iommu=pt", 12, "passthrough"),
    ("intel_iommu=off", 12, "off"),
    ("amd_iommu=off", 12, "off"),
    ("iommu=off", 12, "off"),
    ("INTEL_IOMMU=OFF", 12, "translated"),  # the kernel's parameters are lower case
    ("intel_iommu=on", 12, "translated"),
    ("intel_iommu=on", 0, "off"),
    ("", 0, "off"),
    ("", 3, "translated"),
    (None, 0, "off"),
    (None, 3, "translated"),
])
def test_iommu_mode(cmd: str | None, groups: int, mode: str) -> None:
    assert sysfs.iommu_mode(cmd, groups) == mode


def test_iommu_mode_h200x1_vm() -> None:
    """The one-GPU H200 VM: no iommu= parameter and no groups, as its probe recorded."""
    doc = json.loads((H200.parent / "h200x1" / "probe_quick_after.json").read_text())
    system = doc["system"]
    assert (system["iommu_groups"], system["iommu_mode"]) == (0, "off")
    assert sysfs.iommu_mode(system["cmdline"], system["iommu_groups"]) == "off"
