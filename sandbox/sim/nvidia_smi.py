"""Simulated `nvidia-smi`: the table, -L, -q, -q -x, --query-gpu, --query-remapped-rows, topo -m, nvlink -s/-e/-c.

Formats follow ../shared/fixtures/h200x2 (driver 580, 2x H200). Markers: a `# gridready-sim:` line heads the
table, topo and nvlink outputs; -q has a `Simulated` key in its header block; -q -x an XML comment (an
element would break NVIDIA's DTD); csv and -L carry none (their parsers count lines and read the first as the header).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import escape

from . import simcore
from .simcore import Gpu, Host

HERE = Path(__file__).resolve().parent
ACTIVE = {True: "Active", False: "Not Active"}
TS_FMT = "%a %b %d %H:%M:%S %Y"


def _cell(left: str, right: str, width: int) -> str:
    return left + " " * max(1, width - len(left) - len(right)) + right


def table(host: Host, v: dict[str, str], gpus: list[Gpu] | None = None) -> str:
    bar = "+-----------------------------------------+------------------------+----------------------+"
    out = [
        simcore.marker(host.name),
        time.strftime(TS_FMT) + "       ",
        "+-----------------------------------------------------------------------------------------+",
        _cell(f"| NVIDIA-SMI {v['driver']}", f"Driver Version: {v['driver']}     CUDA Version: {v['cuda']}     |", 91),
        bar,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
    ]
    for g in host.gpus if gpus is None else gpus:
        mem = g.display["mem_mib"]
        cap = int(g.sku["power_limit_w"])
        out += [
            "|"
            + _cell(f"{g.index:>4}  {g.display['name']}", "On  ", 41)
            + "|"
            + f"{g.bus_id:>19} Off |"
            + f"{g.ecc_uncorrectable:>21} |",
            "|"
            + _cell(f" N/A  {g.temp:>3}C    P0", f"{round(g.power_draw):>3}W / {cap:>4}W ", 41)
            + "|"
            + f"{'0MiB / ' + str(mem) + 'MiB':>23} |"
            + "      0%      Default |",
            "|                                         |                        |             Disabled |",
            bar,
        ]
    out += [
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
        "|  No running processes found                                                             |",
        "+-----------------------------------------------------------------------------------------+",
    ]
    return "\n".join(out) + "\n"


def listing(host: Host) -> str:
    return "".join(f"GPU {g.index}: {g.display['name']} (UUID: {g.uuid})\n" for g in host.gpus)


# ---- nvidia-smi -q ------------------------------------------------------------------------------------------


def _q_values(g: Gpu, v: dict[str, str]) -> dict[str, object]:
    r = g.event_reasons()
    gen, width = g.pcie
    ecc = g.ecc_uncorrectable
    pending = g.row_remap_pending
    mem = g.display["mem_mib"]
    return {
        "bus_id": g.bus_id,
        "name": g.display["name"],
        "persistence": "Enabled",
        "serial": g.serial,
        "uuid": g.uuid,
        "pdi": f"0x{simcore.h(g.uuid + 'pdi'):016x}",
        "minor": g.index,
        "vbios": g.display["vbios"],
        "board_id": f"0x{g.bus:x}",
        "board_part": "692-2G520-0282-000",
        "gpu_part": f"{g.sku['device_id'][2:]}-895-A1",
        "module_id": g.index + 1,
        "recovery": "Reset" if (pending or (g.has("xid") or {}).get("code") == 79) else "None",
        "driver": v["driver"],
        "pci_bus": f"0x{g.bus:02X}",
        "pci_device": "0x00",
        "device_id": g.sku["device_id"].upper().replace("0X", "0x") + "10DE",
        "subsys": g.display["subsys"],
        "gen_max": g.sku["pcie_gen"],
        "gen_cur": gen,
        "width_max": g.sku["pcie_width"],
        "width_cur": width,
        "replays": int((g.has("pcie_replays") or {}).get("count") or 0),
        "pstate": "P0",
        "cer_idle": ACTIVE[r["gpu_idle"]],
        "cer_sw_power": ACTIVE[r["sw_power_cap"]],
        "cer_hw_slowdown": ACTIVE[r["hw_slowdown"]],
        "cer_hw_thermal": ACTIVE[r["hw_thermal_slowdown"]],
        "cer_hw_power_brake": ACTIVE[r["hw_power_brake_slowdown"]],
        "cer_sw_thermal": ACTIVE[r["sw_thermal_slowdown"]],
        "cnt_sw_thermal": 1843000 if r["sw_thermal_slowdown"] else 0,
        "cnt_hw_thermal": 912000 if r["hw_thermal_slowdown"] else 0,
        "cnt_power_brake": 5230000 if r["hw_power_brake_slowdown"] else 0,
        "mem_total": mem,
        "mem_reserved": 616,
        "mem_free": mem - 615,
        "vol_sram_unc": 0,
        "agg_sram_unc": 0,
        "vol_dram_cor": 0,
        "agg_dram_cor": 0,
        "vol_dram_unc": ecc,
        "agg_dram_unc": ecc,
        "rr_cor": 0,
        "rr_unc": 1 if pending else 0,
        "rr_pending": "Yes" if pending else "No",
        "rr_failure": "No",
        "bank_max": 3071 if pending else 3072,
        "bank_high": 1 if pending else 0,
        "temp": g.temp,
        "tlimit": 87 - g.temp if g.temp < 80 else -1,
        "mem_temp": g.temp - 1,
        "power_avg": f"{g.power_draw:.2f}",
        "power_inst": f"{g.power_draw - 0.44:.2f}",
        "power_limit": f"{g.sku['power_limit_w']:.2f}",
        "clk_sm": g.sm_clock,
        "clk_mem": g.sku["max_mem_clock_mhz"],
        "clk_max_sm": g.sku["max_sm_clock_mhz"],
        "clk_max_mem": g.sku["max_mem_clock_mhz"],
        # nvidia-smi(1) "GPU Virtualization Mode": None on bare metal (apache/hadoop's real P100 capture reads None),
        # Pass-Through for a GPU passed to a VM (shared/fixtures/h200x1 and h200x2)
        "virt_mode": "Pass-Through" if g.sku.get("platform") == "passthrough" else "None",
        "fabric_state": "Completed" if g.sku["nvswitch"] else "N/A",
        "fabric_status": "Success" if g.sku["nvswitch"] else "N/A",
    }


def _pad(key: str) -> str:
    return key + " " * max(1, 55 - len(key))


def query(host: Host, v: dict[str, str], gpus: list[Gpu]) -> str:
    tmpl = (HERE / "nvsmi_q_gpu.txt").read_text()
    head = [
        "",
        "==============NVSMI LOG==============",
        "",
        _pad("Timestamp") + ": " + time.strftime(TS_FMT),
        _pad("Driver Version") + ": " + v["driver"],
        _pad("CUDA Version") + ": " + v["cuda"],
        _pad("Simulated") + f": Yes (gridready-sim, profile {host.name})",
        "",
        _pad("Attached GPUs") + f": {len(host.gpus)}",
    ]
    return "\n".join(head) + "\n" + "".join(tmpl.format(**_q_values(g, v)) + "\n" for g in gpus)


def query_xml(host: Host, v: dict[str, str], gpus: list[Gpu]) -> str:
    """-q -x: NVIDIA's XML. The <gpu> element is a real capture's (nvsmi_q_gpu.xml, from shared/fixtures/h200x1,
    driver 580.159.04, DOCTYPE nvsmi_device_v13.dtd) with this GPU's values; the simulation marker is an XML
    comment, which any XML reader skips as the DTD allows."""
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
        f"<!-- gridready-sim: simulated output (profile {host.name}) -->",
        "<nvidia_smi_log>",
        f"\t<timestamp>{time.strftime(TS_FMT)}</timestamp>",
        f"\t<driver_version>{v['driver']}</driver_version>",
        f"\t<cuda_version>{v['cuda']}</cuda_version>",
        f"\t<attached_gpus>{len(host.gpus)}</attached_gpus>",
    ]
    tmpl = (HERE / "nvsmi_q_gpu.xml").read_text().split("-->\n", 1)[1]
    for g in gpus:
        vals = {k: escape(str(x)) for k, x in _q_values(g, v).items()}
        vals.update(device_id_x=vals["device_id"].removeprefix("0x"), subsys_x=vals["subsys"].removeprefix("0x"),
                    pci_bus_x=f"{g.bus:02X}", pci_device_x="00")
        out.append(f'\t<gpu id="{g.bus_id}">')
        out.append(tmpl.format(**vals).rstrip("\n"))
        out.append("\t</gpu>")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


# ---- --query-gpu ---------------------------------------------------------------------------------------------

Field = tuple[str, Callable[[Gpu, dict[str, str]], object]]  # (unit or "", value)


def _ecc(kind: str) -> Callable[[Gpu, dict[str, str]], object]:
    return lambda g, v: g.ecc_uncorrectable if kind == "unc_dram" else 0


def _fields() -> dict[str, Field]:
    f: dict[str, Field] = {
        "index": ("", lambda g, v: g.index),
        "name": ("", lambda g, v: g.display["name"]),
        "serial": ("", lambda g, v: g.serial),
        "uuid": ("", lambda g, v: g.uuid),
        "pci.bus_id": ("", lambda g, v: g.bus_id),
        "pci.domain": ("", lambda g, v: "0x0000"),
        "pci.bus": ("", lambda g, v: f"0x{g.bus:02X}"),
        "pci.device": ("", lambda g, v: "0x00"),
        "pci.device_id": ("", lambda g, v: "0x" + g.sku["device_id"][2:].upper() + "10DE"),
        "pci.sub_device_id": ("", lambda g, v: g.display["subsys"]),
        "driver_version": ("", lambda g, v: v["driver"]),
        "vbios_version": ("", lambda g, v: g.display["vbios"]),
        "persistence_mode": ("", lambda g, v: simcore.persistence_mode()),
        "pstate": ("", lambda g, v: "P0"),
        "compute_mode": ("", lambda g, v: "Default"),
        "mig.mode.current": ("", lambda g, v: "Disabled"),
        "ecc.mode.current": ("", lambda g, v: "Enabled"),
        "ecc.mode.pending": ("", lambda g, v: "Enabled"),
        "memory.total": ("MiB", lambda g, v: g.display["mem_mib"]),
        "memory.reserved": ("MiB", lambda g, v: 616),
        "memory.used": ("MiB", lambda g, v: 0),
        "memory.free": ("MiB", lambda g, v: g.display["mem_mib"] - 615),
        "utilization.gpu": ("%", lambda g, v: 0),
        "utilization.memory": ("%", lambda g, v: 0),
        "temperature.gpu": ("", lambda g, v: g.temp),
        "temperature.memory": ("", lambda g, v: g.temp - 1),
        "power.draw": ("W", lambda g, v: f"{g.power_draw:.2f}"),
        "power.draw.average": ("W", lambda g, v: f"{g.power_draw:.2f}"),
        "power.draw.instant": ("W", lambda g, v: f"{g.power_draw - 0.44:.2f}"),
        "power.limit": ("W", lambda g, v: f"{g.sku['power_limit_w']:.2f}"),
        "enforced.power.limit": ("W", lambda g, v: f"{g.sku['power_limit_w']:.2f}"),
        "power.default_limit": ("W", lambda g, v: f"{g.sku['power_limit_w']:.2f}"),
        "power.max_limit": ("W", lambda g, v: f"{g.sku['power_limit_w']:.2f}"),
        "power.min_limit": ("W", lambda g, v: "200.00"),
        "clocks.sm": ("MHz", lambda g, v: g.sm_clock),
        "clocks.gr": ("MHz", lambda g, v: g.sm_clock),
        "clocks.mem": ("MHz", lambda g, v: g.sku["max_mem_clock_mhz"]),
        "clocks.max.sm": ("MHz", lambda g, v: g.sku["max_sm_clock_mhz"]),
        "clocks.max.gr": ("MHz", lambda g, v: g.sku["max_sm_clock_mhz"]),
        "clocks.max.mem": ("MHz", lambda g, v: g.sku["max_mem_clock_mhz"]),
        "pcie.link.gen.current": ("", lambda g, v: g.pcie[0]),
        "pcie.link.gen.gpucurrent": ("", lambda g, v: g.pcie[0]),
        "pcie.link.gen.max": ("", lambda g, v: g.sku["pcie_gen"]),
        "pcie.link.gen.gpumax": ("", lambda g, v: g.sku["pcie_gen"]),
        "pcie.link.gen.hostmax": ("", lambda g, v: "[N/A]"),
        "pcie.link.width.current": ("", lambda g, v: g.pcie[1]),
        "pcie.link.width.max": ("", lambda g, v: g.sku["pcie_width"]),
        "fabric.state": ("", lambda g, v: "Completed" if g.sku["nvswitch"] else "N/A"),
        "fabric.status": ("", lambda g, v: "Success" if g.sku["nvswitch"] else "N/A"),
        "retired_pages.pending": ("", lambda g, v: "[N/A]"),
        "remapped_rows.correctable": ("", lambda g, v: 0),
        "remapped_rows.uncorrectable": ("", lambda g, v: 1 if g.row_remap_pending else 0),
        "remapped_rows.pending": ("", lambda g, v: "Yes" if g.row_remap_pending else "No"),
        "remapped_rows.failure": ("", lambda g, v: "No"),
        "clocks_event_reasons.active": ("", lambda g, v: f"0x{g.event_mask():016X}"),
        "clocks_event_reasons.supported": ("", lambda g, v: "0x00000000000001FF"),
    }
    reasons = (
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "display_clock_setting",
    )

    def reason_of(r: str) -> Callable[[Gpu, dict[str, str]], object]:
        return lambda g, v: ACTIVE[g.event_reasons()[r]]

    for reason in reasons:
        getter: Field = ("", reason_of(reason))
        f[f"clocks_event_reasons.{reason}"] = getter
        f[f"clocks_throttle_reasons.{reason}"] = getter  # the pre-535 name, still accepted
    f["clocks_throttle_reasons.active"] = f["clocks_event_reasons.active"]
    for scope in ("volatile", "aggregate"):
        for kind in ("corrected", "uncorrected"):
            for part in ("total", "dram", "sram"):
                unc_dram = kind == "uncorrected" and part in {"total", "dram"}
                f[f"ecc.errors.{kind}.{scope}.{part}"] = ("", _ecc("unc_dram" if unc_dram else "zero"))
    f["gpu_name"] = f["name"]
    f["gpu_bus_id"] = f["pci.bus_id"]
    f["gpu_uuid"] = f["uuid"]
    f["gpu_serial"] = f["serial"]
    return f


FIELDS = _fields()


def csv(
    host: Host, v: dict[str, str], names: list[str], fmt: str, gpus: list[Gpu], fields: dict[str, Field] | None = None
) -> tuple[int, str]:
    opts = {o.strip() for o in fmt.split(",")}
    if "csv" not in opts:
        return 2, 'Invalid format: only "csv" is supported.\n'
    table = dict(FIELDS if fields is None else fields)
    table["count"] = ("", lambda g, v: len(host.gpus))
    for n in names:
        if n not in table:
            return 2, f'Field "{n}" is not a valid field to query.\n\n'
    lines = []
    if "noheader" not in opts:
        lines.append(
            ", ".join(n + (f" [{table[n][0]}]" if table[n][0] and "nounits" not in opts else "") for n in names)
        )
    for g in gpus:
        cells = []
        for n in names:
            unit, get = table[n]
            val = str(get(g, v))
            cells.append(val if not unit or "nounits" in opts else f"{val} {unit}")
        lines.append(", ".join(cells))
    return 0, "\n".join(lines) + "\n"


def remapped_rows(host: Host, v: dict[str, str], names: list[str], fmt: str, gpus: list[Gpu]) -> tuple[int, str]:
    """--query-remapped-rows: counts, pending and failure as 0/1 (the field list differs from --query-gpu)."""
    table: dict[str, Field] = {
        "gpu_bus_id": ("", lambda g, v: g.bus_id),
        "gpu_uuid": ("", lambda g, v: g.uuid),
        "gpu_serial": ("", lambda g, v: g.serial),
        "gpu_name": ("", lambda g, v: g.display["name"]),
        "remapped_rows.correctable": ("", lambda g, v: 0),
        "remapped_rows.uncorrectable": ("", lambda g, v: 1 if g.row_remap_pending else 0),
        "remapped_rows.pending": ("", lambda g, v: 1 if g.row_remap_pending else 0),
        "remapped_rows.failure": ("", lambda g, v: 0),
    }
    return csv(host, v, names, fmt, gpus, table)


# ---- topo -m, nvlink ------------------------------------------------------------------------------------------

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _numa(i: int, n: int) -> int:
    return 0 if i < max(1, n // 2) else 1


def topo(host: Host) -> str:
    n, nics = len(host.gpus), host.hcas
    cpus = ("0-55,112-167", "56-111,168-223")

    def pci(a: int, b: int) -> str:
        return "NODE" if _numa(a, n) == _numa(b, n) else "SYS"

    cols = [f"GPU{i}" for i in range(n)] + [f"NIC{j}" for j in range(len(nics))]
    out = [
        simcore.marker(host.name),
        "\t\x1b[4m" + "\t".join([*cols, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m",
    ]
    for g in host.gpus:
        row = []
        for o in host.gpus:
            links = min(g.nvlinks_active, o.nvlinks_active)
            row.append(" X " if o is g else (f"NV{links}" if links else pci(g.index, o.index)))
        row += ["PIX" if nic.index == g.index else pci(g.index, nic.index) for nic in nics]
        numa = _numa(g.index, n)
        out.append(f"GPU{g.index}\t" + "\t".join([*row, cpus[numa], str(numa), "", "N/A"]))
    for nic in nics:
        row = ["PIX" if g.index == nic.index else pci(nic.index, g.index) for g in host.gpus]
        row += [" X " if o is nic else pci(nic.index, o.index) for o in nics]
        out.append(f"NIC{nic.index}\t" + "\t".join([*row, "", "", "", ""]))
    text = "\n".join(out) + "\n" + LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join(f"  NIC{nic.index}: {nic.name}\n" for nic in nics)
    return text


def nvlink(host: Host, args: list[str], gpus: list[Gpu]) -> str:
    out = [simcore.marker(host.name)]
    for g in gpus:
        links, active = int(g.sku["nvlink_links"]), g.nvlinks_active
        if links == 0:  # a slice exposing no NVLinks prints nothing at all (shared/fixtures/h200x1/nvlink-s.txt)
            continue
        out.append(f"GPU {g.index}: {g.display['name']} (UUID: {g.uuid})")
        if "-s" in args or "--status" in args:
            if active == 0:
                out.append("NVML: Unable to retrieve NVLink information as all links are inactive")
                continue
            for i in range(links):
                speed = f"{g.sku['nvlink_link_gbps']:.3f} GB/s" if i < active else "<inactive>"
                out.append(f"\t Link {i}: {speed}")
        elif "-e" in args or "--errorcounters" in args:
            for i in range(active):
                for name in ("Replay Errors", "Recovery Errors", "CRC Errors"):
                    out.append(f"\t Link {i}: {name}: 0")
        elif "-c" in args or "--capabilities" in args:
            for i in range(active):
                for cap in (
                    "P2P is supported",
                    "Access to system memory supported",
                    "P2P atomics supported",
                    "System memory atomics supported",
                    "SLI is supported",
                    "Link is supported",
                ):
                    out.append(f"\t Link {i}, {cap}: true")
    return "\n".join(out) + "\n"


# ---- main ----------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    host = simcore.load()
    v = simcore.versions()
    if host.nvml_mismatch():
        # After a driver upgrade without a reboot NVML refuses to initialise; nvidia-smi prints this on stdout and
        # exits with NVML_ERROR_LIB_RM_VERSION_MISMATCH (18). NVML API Reference, "nvmlReturn_t",
        # https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html
        print(f"Failed to initialize NVML: Driver/library version mismatch\nNVML library version: {v['driver']}")
        return 18
    gpus = host.gpu_selected(simcore.option(args, "-i", "--id"))
    fmt = simcore.option(args, "--format") or ""
    rc, text = 0, ""
    rest = [a for i, a in enumerate(args) if a not in {"-i", "--id"} and (i == 0 or args[i - 1] not in {"-i", "--id"})]
    if not rest:
        text = table(host, v, gpus)
    elif args[0] == "topo":
        text = topo(host)
    elif args[0] == "nvlink":
        text = nvlink(host, args[1:], gpus)
    elif "-L" in args or "--list-gpus" in args:
        text = listing(host)
    elif any(a.startswith("--query-gpu") for a in args):
        names = [n.strip() for n in (simcore.option(args, "--query-gpu") or "").split(",") if n.strip()]
        rc, text = csv(host, v, names, fmt, gpus)
    elif any(a.startswith("--query-remapped-rows") for a in args):
        names = [n.strip() for n in (simcore.option(args, "--query-remapped-rows") or "").split(",") if n.strip()]
        rc, text = remapped_rows(host, v, names, fmt, gpus)
    elif "-q" in args or "--query" in args:
        text = query_xml(host, v, gpus) if ("-x" in args or "--xml-format" in args) else query(host, v, gpus)
    elif "-pm" in args or "--persistence-mode" in args:
        text = "".join(f"Persistence mode is already Enabled for GPU {g.bus_id}.\n" for g in gpus)
        text += "All done.\n"
    elif "--version" in args:
        text = (
            f"NVIDIA-SMI version  : {v['driver']}\nNVML version        : {v['driver'].split('.')[0]}.{v['driver']}\n"
            f"DRIVER version      : {v['driver']}\nCUDA Version        : {v['cuda']}\n"
        )
    else:
        rc, text = 2, f"Invalid combination of input arguments: {' '.join(args)} (gridready-sim)\n"
    (sys.stdout if rc == 0 else sys.stderr).write(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
