"""Shared state of the simulated tools: the host's profile with its faults applied, per GPU and per HCA.

Stdlib only (Debian bookworm's python3 runs this on the sandbox hosts, where it is installed as the package
`gridready_sim` under /usr/lib/gridready-sim). The profile is the JSON written from
`sandbox.profile.HardwareProfile`; SKU facts come from the simulator's own table (hardware.py, NVIDIA's published
figures with their sources; baked into skus.json when the packages are built), never from the product's catalog.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROFILE_ENV = "GRIDREADY_SIM_PROFILE"
PROFILE_PATH = "/etc/gridready-sim/profile.json"
SYSFS_ROOT = "/var/lib/gridready-sim/sysfs"
# faults of the host, not of one GPU or HCA (Host.fault)
HOST_FAULTS = {"low_nccl_busbw", "pcie_limited_other", "nccl_crash", "kernel_log_empty", "kernel_log_wrapped"}
FABRIC_PORT = 18515
HOSTENGINE_PORT = 5555

# Same tables as sandbox/profile.py: GPU i and its rail HCA i share a PCIe switch.
GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
HCA_BUSES = (0x19, 0x2B, 0x3B, 0x5E, 0x9B, 0xAC, 0xBB, 0xDC)
SWITCH_BUSES = (0x17, 0x29, 0x39, 0x5C, 0x99, 0xAA, 0xB9, 0xDA)  # downstream switch port above each GPU

# Display facts per PCI device id (nvidia-smi `name`, memory.total in MiB as the driver reports it, VBIOS).
DISPLAY = {
    "0x2335": {"name": "NVIDIA H200", "mem_mib": 143771, "vbios": "96.00.A5.00.1A", "subsys": "0x18BF10DE"},
    "0x2330": {"name": "NVIDIA H100 80GB HBM3", "mem_mib": 81559, "vbios": "96.00.99.00.01", "subsys": "0x16C110DE"},
    "0x2321": {"name": "NVIDIA H100 NVL", "mem_mib": 95830, "vbios": "96.00.A1.00.01", "subsys": "0x183910DE"},
    "0x2331": {"name": "NVIDIA H100 PCIe", "mem_mib": 81559, "vbios": "96.00.30.00.01", "subsys": "0x162610DE"},
}
GEN_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe"}
GEN_GBPS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938}  # GB/s per lane, one direction (128b/130b)


def state_dir() -> Path:
    """The simulated tools' shared state on the host (GRIDREADY_SIM_STATE for a probe run outside a fleet)."""
    return Path(os.environ.get("GRIDREADY_SIM_STATE") or "/run/gridready-sim")


def mark_load() -> None:
    """A load tool ran (nccl-tests, dcgmi diag): faults marked `after_load` show from now on."""
    try:
        state_dir().mkdir(parents=True, exist_ok=True)
        (state_dir() / "load-seen").touch()
    except OSError:
        pass


def load_seen() -> bool:
    return (state_dir() / "load-seen").exists()


def boot_time() -> float:
    """The host's boot time (epoch seconds), fixed once per host as the kernel's is (/proc/stat `btime`): dmesg's
    wall-clock stamps of one line never move between two reads (util-linux dmesg(1) -T adds the line's monotonic
    stamp to the boot time). Kept in the state folder; a day before the first read."""
    path = state_dir() / "boot-time"
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        boot = float(int(time.time()) - 86400)
        try:
            state_dir().mkdir(parents=True, exist_ok=True)
            path.write_text(f"{boot:.0f}\n")
        except OSError:
            pass
        return boot


def active(faults: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The first fault of `kind` that shows now: one marked `after_load` only once a load tool ran (a GPU that
    throttles, logs an Xid or counts PCIe replays under the certification's own stress, issue 34 finding 8)."""
    return next((f for f in faults if f["kind"] == kind and (not f.get("after_load") or load_seen())), None)


def marker(host: str) -> str:
    """The marker line of every text output that allows a comment line."""
    return f"# gridready-sim: simulated output (profile {host})"


PERSISTENCE_STATE = Path("/run/gridready-sim/persistence-mode")  # written by the simulated nvidia-persistenced
PEERMEM_STATE = Path("/run/gridready-sim/nvidia_peermem-loaded")  # written by the simulated modprobe
MODULES_LOAD_DIRS = (Path("/etc/modules-load.d"), Path("/usr/lib/modules-load.d"))  # modules-load.d(5)


def persistence_mode() -> str:
    """Enabled while nvidia-persistenced runs with persistence mode; a host without the daemon (tests, fixtures)
    keeps the fixtures' Enabled."""
    try:
        return PERSISTENCE_STATE.read_text().strip() or "Enabled"
    except OSError:
        return "Enabled"


# Written by the installed kernel module package (sandbox/packages.py): the repository serves more than one release
# of the branch, so the user-space driver is the one installed, not the newest one built.
INSTALLED_DRIVER = Path("/usr/share/gridready-sim/driver-version")


def versions() -> dict[str, str]:
    v = json.loads((HERE / "versions.json").read_text())
    if INSTALLED_DRIVER.is_file():
        v["driver"] = INSTALLED_DRIVER.read_text().strip() or v["driver"]
    return v


def skus() -> dict[str, dict[str, Any]]:
    """SKU facts by name: the simulator's own table (hardware.py), as baked into skus.json on the hosts."""
    baked = HERE / "skus.json"
    if baked.exists():
        return json.loads(baked.read_text())
    # loaded by path: this module is also loaded on its own, outside its package (sandbox/torch_sim.py)
    spec = importlib.util.spec_from_file_location("_gridready_sim_hardware", HERE / "hardware.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.skus()


def h(text: str, n: int = 8) -> int:
    """A stable pseudo-random integer from text (uuids, serials, jitter)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[: 2 * n], 16)


def jitter(key: str, spread: float) -> float:
    """A stable factor in [1 - spread, 1 + spread]."""
    return 1.0 + spread * ((h(key, 4) / 0xFFFFFFFF) * 2.0 - 1.0)


@dataclass
class Gpu:
    index: int
    host: str
    sku: dict[str, Any]
    faults: list[dict[str, Any]] = field(default_factory=list)

    def has(self, kind: str) -> dict[str, Any] | None:
        return active(self.faults, kind)

    @property
    def bus(self) -> int:
        return GPU_BUSES[self.index % len(GPU_BUSES)]

    @property
    def bdf(self) -> str:  # sysfs form
        return f"0000:{self.bus:02x}:00.0"

    @property
    def bus_id(self) -> str:  # nvidia-smi form
        return f"00000000:{self.bus:02X}:00.0"

    @property
    def display(self) -> dict[str, Any]:
        return DISPLAY.get(self.sku["device_id"], DISPLAY["0x2335"])

    @property
    def uuid(self) -> str:
        x = hashlib.sha256(f"{self.host}/gpu{self.index}".encode()).hexdigest()
        return f"GPU-{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:32]}"

    @property
    def serial(self) -> str:
        return f"16537{h(self.host + str(self.index)) % 10**8:08d}"

    @property
    def pcie(self) -> tuple[int, int]:
        """(current gen, current width)."""
        if self.has("pcie_downtrained"):
            return 4, 8
        return self.sku["pcie_gen"], self.sku["pcie_width"]

    @property
    def nvlinks_active(self) -> int:
        links = int(self.sku["nvlink_links"])
        f = self.has("nvlink_inactive")
        if f is None:
            return links
        return max(0, links - int(f.get("count") or links))

    @property
    def ecc_uncorrectable(self) -> int:
        f = self.has("ecc_uncorrectable")
        return int(f.get("count") or 1) if f else 0

    @property
    def row_remap_pending(self) -> bool:
        return self.has("row_remap_pending") is not None

    def event_reasons(self) -> dict[str, bool]:
        """clocks_event_reasons.* (idle is Active on an idle healthy GPU, as on the real machine)."""
        thermal = self.has("thermal_throttle") is not None
        brake = self.has("power_brake") is not None
        slowdown = self.has("hw_slowdown") is not None or thermal or brake
        return {
            "gpu_idle": not (slowdown or thermal),
            "applications_clocks_setting": False,
            "sw_power_cap": False,
            "hw_slowdown": slowdown,
            "sync_boost": False,
            "sw_thermal_slowdown": thermal,
            "hw_thermal_slowdown": thermal,
            "hw_power_brake_slowdown": brake,
            "display_clock_setting": False,
        }

    def event_mask(self) -> int:
        bits = {
            "gpu_idle": 0x1,
            "applications_clocks_setting": 0x2,
            "sw_power_cap": 0x4,
            "hw_slowdown": 0x8,
            "sync_boost": 0x10,
            "sw_thermal_slowdown": 0x20,
            "hw_thermal_slowdown": 0x40,
            "hw_power_brake_slowdown": 0x80,
            "display_clock_setting": 0x100,
        }
        return sum(bit for k, bit in bits.items() if self.event_reasons()[k])

    @property
    def temp(self) -> int:
        return 88 if self.has("thermal_throttle") else 35  # idle H200 on the fixture machine: 35 C

    @property
    def sm_clock(self) -> int:
        """Current SM clock: idle 345 MHz; throttled GPUs report a reduced clock."""
        if self.has("power_brake") or self.has("hw_slowdown"):
            return 210
        if self.has("thermal_throttle"):
            return 1185
        return 345

    @property
    def power_draw(self) -> float:
        return round(68.0 + 4.3 * self.index + (h(self.uuid) % 400) / 100.0, 2)


@dataclass
class Hca:
    index: int
    name: str
    rate_gbps: int
    link_layer: str
    netdev: str
    host: str
    faults: list[dict[str, Any]] = field(default_factory=list)

    def has(self, kind: str) -> dict[str, Any] | None:
        return active(self.faults, kind)

    @property
    def up(self) -> bool:
        return self.has("hca_down") is None

    @property
    def rate(self) -> int:
        """Current port rate in Gb/s (ibstat `Rate`)."""
        if not self.up:
            return 10 if self.link_layer == "InfiniBand" else 40
        return self.rate_gbps // 2 if self.has("hca_half_rate") else self.rate_gbps

    @property
    def bus(self) -> int:
        return HCA_BUSES[self.index % len(HCA_BUSES)]

    @property
    def bdf(self) -> str:
        return f"0000:{self.bus:02x}:00.0"

    @property
    def pcie(self) -> tuple[int, int]:
        return (4, 8) if self.has("pcie_downtrained") else (5, 16)

    @property
    def guid(self) -> str:
        return f"0x{0x946DAE0300000000 + h(self.host + self.name, 3):016x}"

    @property
    def lid(self) -> int:
        return 1 + h(self.host + self.name + "lid", 2) % 1000


@dataclass
class Host:
    name: str
    address: str | None
    sku_name: str
    sku: dict[str, Any]
    gpus: list[Gpu]
    hcas: list[Hca]
    faults: list[dict[str, Any]]
    loaded_driver: str | None = None  # kernel module loaded at boot; None: the installed driver's
    rdma_stack: str = "inbox"  # inbox (distribution ib_core) or doca (DOCA-OFED/MLNX_OFED ib_core)

    def peermem_loadable(self) -> bool:
        """nvidia-peermem registers with ib_register_peer_memory_client, which only MLNX_OFED/DOCA-OFED's ib_core
        exports; built without it, the module's init returns -EINVAL (NVIDIA open-gpu-kernel-modules,
        kernel-open/nvidia-peermem/nvidia-peermem.c, nv_mem_client_init;
        https://github.com/NVIDIA/open-gpu-kernel-modules)."""
        return self.rdma_stack == "doca"

    def peermem_loaded(self) -> bool:
        """Loaded by modprobe since boot, or at boot by systemd-modules-load from a modules-load.d entry; only
        where it can load at all."""
        if not self.peermem_loadable():
            return False
        if PEERMEM_STATE.exists():
            return True
        for d in MODULES_LOAD_DIRS:
            for conf in sorted(d.glob("*.conf")) if d.is_dir() else []:
                names = {ln.split("#")[0].strip().replace("-", "_") for ln in conf.read_text().splitlines()}
                if "nvidia_peermem" in names:
                    return True
        return False

    def running_driver(self) -> str:
        """Version of the loaded kernel module: the profile's loaded_driver (a driver upgraded without a reboot),
        else the installed user-space driver's."""
        return self.loaded_driver or versions()["driver"]

    def nvml_mismatch(self) -> bool:
        """NVML (user space) and the loaded kernel module differ: every NVML client fails until a reboot."""
        return self.running_driver() != versions()["driver"]

    def fault(self, kind: str) -> dict[str, Any] | None:
        return active(self.faults, kind)

    def gpu_selected(self, ids: str | None) -> list[Gpu]:
        """GPUs named by `-i 0,1` (index, bus id or UUID), all when None."""
        if not ids:
            return self.gpus
        keys = [k.strip().lower() for k in ids.split(",")]
        return [g for g in self.gpus if {str(g.index), g.bus_id.lower(), g.uuid.lower()} & set(keys)]


def resolve_sku(key: str, table: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    k = key.strip().lower()
    for name, facts in table.items():
        if k in {name.lower(), *(a.lower() for a in facts["aliases"])} or k.startswith(facts["device_id"]):
            return name, facts
    raise SystemExit(f"gridready-sim: unknown SKU {key!r} in the profile")


def profile_path() -> Path:
    return Path(os.environ.get(PROFILE_ENV) or PROFILE_PATH)


def load(path: Path | None = None) -> Host:
    """The host described by the profile, faults attached to their targets."""
    p = path or profile_path()
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        sys.stderr.write(f"gridready-sim: no hardware profile at {p} (set {PROFILE_ENV})\n")
        raise SystemExit(9) from None
    return from_dict(data)


def with_shape(sku: dict[str, Any], gpus: int, platform: str) -> dict[str, Any]:
    """What the node's shape exposes: a one-GPU VM slice reads fabric state N/A and prints no NVLinks
    (shared/fixtures/h200x1: real `nvidia-smi -q -x` <fabric><state>N/A, `nvidia-smi nvlink -s` empty, exit 0);
    a 4-GPU HGX board has NVLink but no NVSwitch (hardware.py shapes, with their sources)."""
    shape = next((s for s in sku.get("shapes", []) if s["gpus"] == gpus and s["platform"] == platform), None)
    if shape is None:
        return {**sku, "platform": platform}
    return {**sku, "nvswitch": shape["nvswitch"], "nvlink_links": shape["nvlink_links"], "platform": platform}


def from_dict(data: dict[str, Any]) -> Host:
    name, sku = resolve_sku(data.get("sku", "H200-SXM-141GB"), skus())
    sku = with_shape(sku, int(data.get("gpus", 8)), data.get("platform", "baremetal"))
    host = data.get("host", "sim-host")
    faults = list(data.get("faults", []))
    hca_specs = data.get("hcas", [])
    first_hca = hca_specs[0]["name"] if hca_specs else None
    gpus = []
    for i in range(int(data.get("gpus", 8))):
        mine = [
            f
            for f in faults
            if f.get("hca") is None
            and f["kind"] not in {"hca_down", "hca_half_rate", *HOST_FAULTS}
            and int(f.get("gpu") or 0) == i
        ]
        gpus.append(Gpu(index=i, host=host, sku=sku, faults=mine))
    hcas = []
    for i, spec in enumerate(hca_specs):
        mine = [
            f
            for f in faults
            if (f["kind"] in {"hca_down", "hca_half_rate"} and (f.get("hca") or first_hca) == spec["name"])
            or (f["kind"] == "pcie_downtrained" and f.get("hca") == spec["name"])
        ]
        hcas.append(
            Hca(
                index=i,
                name=spec["name"],
                rate_gbps=int(spec.get("rate_gbps", 400)),
                link_layer=spec.get("link_layer", "InfiniBand"),
                netdev=spec.get("netdev", f"ibp{HCA_BUSES[i % 8]}s0"),
                host=host,
                faults=mine,
            )
        )
    return Host(name=host, address=data.get("address"), sku_name=name, sku=sku, gpus=gpus, hcas=hcas, faults=faults,
                loaded_driver=data.get("loaded_driver"), rdma_stack=data.get("rdma_stack", "inbox"))


def option(argv: list[str], *names: str) -> str | None:
    """The value of `-x V`, `--x V` or `--x=V` in argv (last one wins), else None."""
    value = None
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                value = argv[i + 1]
            elif a.startswith(n + "=") and n.startswith("--"):
                value = a.split("=", 1)[1]
    return value
