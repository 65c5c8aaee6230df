"""Parsers for nvidia-smi outputs: `--query-gpu` CSV, `-q -x` XML, `-q` text, `nvlink -s` and `nvlink -e`.

`-q -x` is NVIDIA's documented machine-readable form (nvidia-smi(1): "-x, --xml-format: Produce XML output",
validated by the DTD it names, `nvsmi_device_v<N>.dtd`); the probe prefers it and keeps `-q` text as the fallback.
Both parsers return the same dict, so the gates do not care which one ran.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

QUERY_FIELDS = (
    "index,name,pci.bus_id,pci.device_id,serial,uuid,driver_version,vbios_version,memory.total,persistence_mode,"
    "ecc.mode.current,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
    "power.limit,power.draw,clocks.sm,clocks.max.sm,clocks.max.mem,clocks_event_reasons.active,"
    "temperature.gpu,temperature.memory"
)
# the fields any driver since R470 knows: the fallback when the long list is refused
QUERY_FIELDS_MIN = "index,name,pci.bus_id,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max"

_NUM = re.compile(r"^-?\d+(\.\d+)?")
_SECTION = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")


def _value(text: str) -> Any:
    """'700.00 W' -> 700.0, '143771 MiB' -> 143771, '[N/A]'/'N/A' -> None, else the string."""
    t = text.strip()
    if t in ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"):
        return None
    if t.lower().startswith("0x"):
        return t
    m = _NUM.match(t)
    if m and (len(m.group(0)) == len(t) or t[len(m.group(0))] == " "):
        return float(m.group(0)) if m.group(1) else int(m.group(0))
    return t


def parse_query_csv(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi --query-gpu=... --format=csv` (header line with units) -> one dict per GPU."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    keys = [re.sub(r"\s*\[.*\]$", "", k.strip()) for k in lines[0].split(",")]
    rows = []
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.split(",")]
        if len(cells) != len(keys):
            continue
        rows.append({k: _value(c) for k, c in zip(keys, cells, strict=True)})
    return rows


def parse_tree(text: str) -> dict[str, Any]:
    """Indented `key : value` text (nvidia-smi -q) -> nested dicts; GPU sections keyed 'GPU <bus id>'."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for raw in text.splitlines():
        if not raw.strip() or raw.strip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip())
        if _SECTION.match(raw.strip()):  # "GPU 00000000:00:06.0": a section, its colons are not a separator
            key, sep, val = raw.strip(), "", ""
        else:
            key, sep, val = raw.strip().partition(":")
            key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if sep and val.strip():
            parent[key] = val.strip()
        else:
            node: dict[str, Any] = {}
            parent[key] = node
            stack.append((indent, node))
    return root


def _get(d: dict[str, Any], *path: str) -> Any:
    """The value at `path`; a key matches regardless of case where its exact spelling is absent (R410-era drivers
    print "Ecc Mode", "Replays since reset", "Virtualization mode")."""
    cur: Any = d
    for p in path:
        if not isinstance(cur, dict):
            return None
        key = p if p in cur else next((k for k in cur if k.lower() == p.lower()), None)
        if key is None:
            return None
        cur = cur[key]
    return cur


def _active(v: Any) -> bool | None:
    if not isinstance(v, str):
        return None
    return v.strip().lower() == "active"


def _yes(v: Any) -> bool | None:
    if not isinstance(v, str):
        return None
    s = v.strip().lower()
    return True if s == "yes" else False if s == "no" else None


def _text(v: Any) -> str | None:
    """A string field as printed, None where absent or N/A (the GPU Recovery Action: None, GPU Reset, Node Reboot,
    Drain P2P, Drain and Reset; NVIDIA "Error Recovery and Response Flags", R550+ drivers)."""
    return v.strip() if isinstance(v, str) and v.strip() not in ("", "N/A", "[N/A]", "[Not Supported]") else None


def _num(v: Any) -> Any:
    return _value(v) if isinstance(v, str) else None


def parse_q(text: str) -> dict[str, Any]:
    """`nvidia-smi -q` -> {driver_version, cuda_version, gpus: [{bus_id, ...}]} with the fields the gates use."""
    tree = parse_tree(text)
    out: dict[str, Any] = {
        "driver_version": tree.get("Driver Version"),
        "cuda_version": tree.get("CUDA Version"),
        "attached_gpus": _num(tree.get("Attached GPUs")),
        "gpus": [],
    }
    sections = [(k, v) for k, v in tree.items() if _SECTION.match(k) and isinstance(v, dict)]
    if not sections and ("ECC Errors" in tree or "Remapped Rows" in tree):
        sections = [("GPU unknown", tree)]  # an excerpt of one GPU's section without its header
    for key, sec in sections:
        ecc = sec.get("ECC Errors") or {}
        vol, agg = ecc.get("Volatile") or {}, ecc.get("Aggregate") or {}

        def _ecc(part: dict[str, Any], *names: str) -> int | None:
            # R410-era drivers nest the counters: "Single Bit" / "Double Bit" sections, each with a "Total"
            # (tests/fixtures/public/nvidia-smi, the V100 drv410.48 capture); read that Total as the -q -x parser does
            vals = [_num(_get(part, n, "Total") if isinstance(part.get(n), dict) else part.get(n))
                    for n in names if n in part]
            vals = [v for v in vals if isinstance(v, int)]
            return sum(vals) if vals else None

        sram_ue = ("SRAM Uncorrectable Parity", "SRAM Uncorrectable SEC-DED", "SRAM Uncorrectable")
        remap = sec.get("Remapped Rows") or {}
        reasons = sec.get("Clocks Event Reasons") or sec.get("Clocks Throttle Reasons") or {}
        flat_reasons: dict[str, bool | None] = {}
        for rk, rv in reasons.items():
            if isinstance(rv, dict):  # "HW Slowdown : Active" with children on newer drivers
                for ck, cv in rv.items():
                    flat_reasons[ck] = _active(cv)
            else:
                flat_reasons[rk] = _active(rv)
        temp = sec.get("Temperature") or {}
        power = sec.get("GPU Power Readings") or sec.get("Power Readings") or {}
        link = _get(sec, "PCI", "GPU Link Info") or {}
        retired = sec.get("Retired Pages") or {}
        gpu = {
            "bus_id": key[4:].strip(),
            "name": sec.get("Product Name"),
            "serial": sec.get("Serial Number"),
            "uuid": sec.get("GPU UUID"),
            "vbios": sec.get("VBIOS Version"),
            "persistence_mode": sec.get("Persistence Mode"),
            "device_id": _get(sec, "PCI", "Device Id"),
            "pcie": {
                "gen_max": _num(_get(link, "PCIe Generation", "Max")),
                "gen_current": _num(_get(link, "PCIe Generation", "Current")),
                "gen_device_max": _num(_get(link, "PCIe Generation", "Device Max")),
                "width_max": _num(str(_get(link, "Link Width", "Max") or "").rstrip("x")),
                "width_current": _num(str(_get(link, "Link Width", "Current") or "").rstrip("x")),
                "replays": _num(_get(sec, "PCI", "Replays Since Reset")),
            },
            "ecc_mode": _get(sec, "ECC Mode", "Current"),
            "ecc": {
                "volatile_sram_ce": _ecc(vol, "SRAM Correctable", "Single Bit"),
                "volatile_sram_ue": _ecc(vol, *sram_ue),
                "volatile_dram_ce": _ecc(vol, "DRAM Correctable"),
                "volatile_dram_ue": _ecc(vol, "DRAM Uncorrectable", "Double Bit"),
                "aggregate_sram_ce": _ecc(agg, "SRAM Correctable"),
                "aggregate_sram_ue": _ecc(agg, *sram_ue),
                "aggregate_dram_ce": _ecc(agg, "DRAM Correctable"),
                "aggregate_dram_ue": _ecc(agg, "DRAM Uncorrectable"),
                "sram_threshold_exceeded": _yes(agg.get("SRAM Threshold Exceeded")),
            },
            "retired_pages": {
                "pending": _yes(retired.get("Pending Page Blacklist") or retired.get("Pending")),
                "single_bit": _num(retired.get("Single Bit ECC")),
                "double_bit": _num(retired.get("Double Bit ECC")),
            },
            "remap": {
                "correctable": _num(remap.get("Correctable Error")),
                "uncorrectable": _num(remap.get("Uncorrectable Error")),
                "pending": _yes(remap.get("Pending")),
                "failure": _yes(remap.get("Remapping Failure Occurred")),
            },
            "clock_event_reasons": flat_reasons,
            "temperature_c": _num(temp.get("GPU Current Temp")),
            "memory_temperature_c": _num(temp.get("Memory Current Temp")),
            "power_limit_w": _num(power.get("Current Power Limit") or power.get("Power Limit")),
            "power_draw_w": _num(power.get("Average Power Draw") or power.get("Power Draw")),
            "max_clocks_mhz": {
                "sm": _num(_get(sec, "Max Clocks", "SM")),
                "memory": _num(_get(sec, "Max Clocks", "Memory")),
            },
            "fabric": {"state": _get(sec, "Fabric", "State"), "status": _get(sec, "Fabric", "Status")},
            "virtualization_mode": _get(sec, "GPU Virtualization Mode", "Virtualization Mode"),
            "recovery_action": _text(_get(sec, "GPU Recovery Action")),
            "repair": {"channel_pending": _yes(ecc.get("Channel Repair Pending")),
                       "tpc_pending": _yes(ecc.get("TPC Repair Pending")),
                       "unrepairable": _yes(ecc.get("Unrepairable Memory"))},
        }
        out["gpus"].append(gpu)
    return out


_GPU_HDR = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")
_LINK = re.compile(r"^\s*Link (\d+): (.*)$")


def parse_nvlink_status(text: str) -> dict[str, Any]:
    """`nvidia-smi nvlink -s` -> {gpus: {idx: {links: {n: GB/s or None(inactive)}, all_inactive}}}."""
    gpus: dict[str, Any] = {}
    cur: dict[str, Any] | None = None
    for ln in text.splitlines():
        m = _GPU_HDR.match(ln.strip())
        if m:
            cur = gpus.setdefault(m.group(1), {"name": m.group(2), "uuid": m.group(3), "links": {},
                                               "all_inactive": False})
            continue
        if cur is None:
            continue
        if "all links are inactive" in ln.lower():
            cur["all_inactive"] = True
            continue
        lm = _LINK.match(ln)
        if lm and "," not in lm.group(2):  # `nvlink -c` capability lines carry a comma
            val = lm.group(2).strip()
            speed = re.match(r"([\d.]+)\s*GB/s", val)
            cur["links"][lm.group(1)] = float(speed.group(1)) if speed else None
    return {"gpus": gpus}


def parse_nvlink_errors(text: str) -> dict[str, Any]:
    """`nvidia-smi nvlink -e` -> {idx: {link: {counter: value}}}."""
    gpus: dict[str, Any] = {}
    cur: dict[str, Any] | None = None
    link: dict[str, Any] | None = None
    for ln in text.splitlines():
        m = _GPU_HDR.match(ln.strip())
        if m:
            cur = gpus.setdefault(m.group(1), {})
            continue
        if cur is None:
            continue
        lm = re.match(r"^\s*Link (\d+):\s*(.*)$", ln)
        if lm:
            link = cur.setdefault(lm.group(1), {})
            rest = lm.group(2)
            if ":" in rest:  # single-line form "Link 0: Replay Errors: 0"
                k, _, v = rest.partition(":")
                link[k.strip()] = _value(v)
            continue
        if link is not None and ":" in ln:
            k, _, v = ln.partition(":")
            link[k.strip()] = _value(v)
    return gpus


# `<clocks_event_reason_X>` (R535+; `<clocks_throttle_reason_X>` before) -> the `-q` text key of the same reason
_XML_REASONS = {"gpu_idle": "Idle", "applications_clocks_setting": "Applications Clocks Setting",
                "sw_power_cap": "SW Power Cap", "hw_slowdown": "HW Slowdown",
                "hw_thermal_slowdown": "HW Thermal Slowdown", "hw_power_brake_slowdown": "HW Power Brake Slowdown",
                "sync_boost": "Sync Boost", "sw_thermal_slowdown": "SW Thermal Slowdown",
                "display_clocks_setting": "Display Clock Setting"}


def _x(el: ET.Element | None, path: str) -> str | None:
    """Text at `path` below `el` (None when absent or a container)."""
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None or not found.text.strip():
        return None
    return found.text.strip()


def _xnum(el: ET.Element | None, path: str) -> Any:
    v = _x(el, path)
    return _value(v) if v is not None else None


def _xsum(el: ET.Element | None, *paths: str) -> int | None:
    vals = [_xnum(el, p) for p in paths]
    ints = [v for v in vals if isinstance(v, int)]
    return sum(ints) if ints else None


def _pending(g: ET.Element) -> bool | None:
    """`<pending_blacklist>` and `<pending_retirement>` stand side by side (nvsmi_device_v13.dtd, the h200x1 capture),
    either may read N/A: a Yes in one is not hidden by the other."""
    flags = [_yes(_x(g, f"retired_pages/{tag}")) for tag in ("pending_blacklist", "pending_retirement")]
    return True if True in flags else False if False in flags else None


def parse_q_xml(text: str) -> dict[str, Any]:
    """`nvidia-smi -q -x` -> the same dict as parse_q. Raises ValueError on a document that is not nvidia_smi_log."""
    try:
        root = ET.fromstring(text.encode() if isinstance(text, str) else text)  # the DOCTYPE names a DTD: not fetched
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi -q -x: root element <{root.tag}>, expected <nvidia_smi_log>")
    out: dict[str, Any] = {"driver_version": _x(root, "driver_version"), "cuda_version": _x(root, "cuda_version"),
                           "attached_gpus": _xnum(root, "attached_gpus"), "gpus": [], "format": "xml"}
    for g in root.findall("gpu"):
        vol, agg = g.find("ecc_errors/volatile"), g.find("ecc_errors/aggregate")
        legacy = vol is not None and vol.find("single_bit") is not None  # pre-Hopper layout: single/double bit
        reasons_el = g.find("clocks_event_reasons")
        prefix = "clocks_event_reason_"
        if reasons_el is None:
            reasons_el, prefix = g.find("clocks_throttle_reasons"), "clocks_throttle_reason_"
        reasons: dict[str, bool | None] = {}
        for child in list(reasons_el) if reasons_el is not None else []:
            name = child.tag.removeprefix(prefix)
            reasons[_XML_REASONS.get(name, name)] = _active(child.text)
        dev = _x(g, "pci/pci_device_id")
        remap = g.find("remapped_rows")
        remap = remap if remap is not None and len(remap) else None  # `<remapped_rows>N/A</remapped_rows>` pre-Ampere
        sram_ue = ("sram_uncorrectable_parity", "sram_uncorrectable_secded", "sram_uncorrectable")
        out["gpus"].append({
            "bus_id": g.get("id"),
            "name": _x(g, "product_name"),
            "serial": _x(g, "serial"),
            "uuid": _x(g, "uuid"),
            "vbios": _x(g, "vbios_version"),
            "persistence_mode": _x(g, "persistence_mode"),
            "device_id": f"0x{dev}" if dev and not dev.lower().startswith("0x") else dev,
            "pcie": {
                "gen_max": _xnum(g, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
                "gen_current": _xnum(g, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
                "gen_device_max": _xnum(g, "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen"),
                "width_max": _value((_x(g, "pci/pci_gpu_link_info/link_widths/max_link_width") or "").rstrip("x")),
                "width_current": _value((_x(g, "pci/pci_gpu_link_info/link_widths/current_link_width") or "")
                                        .rstrip("x")),
                "replays": _xnum(g, "pci/replay_counter"),
            },
            "ecc_mode": _x(g, "ecc_mode/current_ecc"),
            "ecc": {
                "volatile_sram_ce": _xsum(vol, "single_bit/total") if legacy else _xsum(vol, "sram_correctable"),
                "volatile_sram_ue": None if legacy else _xsum(vol, *sram_ue),
                "volatile_dram_ce": None if legacy else _xsum(vol, "dram_correctable"),
                "volatile_dram_ue": _xsum(vol, "double_bit/total") if legacy else _xsum(vol, "dram_uncorrectable"),
                "aggregate_sram_ce": None if legacy else _xsum(agg, "sram_correctable"),
                "aggregate_sram_ue": None if legacy else _xsum(agg, *sram_ue),
                "aggregate_dram_ce": None if legacy else _xsum(agg, "dram_correctable"),
                "aggregate_dram_ue": None if legacy else _xsum(agg, "dram_uncorrectable"),
                "sram_threshold_exceeded": _yes(_x(agg, "sram_threshold_exceeded")),
            },
            "retired_pages": {
                "pending": _pending(g),
                "single_bit": _xnum(g, "retired_pages/multiple_single_bit_retirement/retired_count"),
                "double_bit": _xnum(g, "retired_pages/double_bit_retirement/retired_count"),
            },
            "remap": {
                "correctable": _xnum(remap, "remapped_row_corr"),
                "uncorrectable": _xnum(remap, "remapped_row_unc"),
                "pending": _yes(_x(remap, "remapped_row_pending")),
                "failure": _yes(_x(remap, "remapped_row_failure")),
            },
            "clock_event_reasons": reasons,
            "temperature_c": _xnum(g, "temperature/gpu_temp"),
            "memory_temperature_c": _xnum(g, "temperature/memory_temp"),
            "power_limit_w": _xnum(g, "gpu_power_readings/current_power_limit") or _xnum(
                g, "power_readings/power_limit"),
            "power_draw_w": _xnum(g, "gpu_power_readings/average_power_draw") or _xnum(
                g, "gpu_power_readings/power_draw") or _xnum(g, "power_readings/power_draw"),
            "max_clocks_mhz": {"sm": _xnum(g, "max_clocks/sm_clock"), "memory": _xnum(g, "max_clocks/mem_clock")},
            "fabric": {"state": _x(g, "fabric/state"), "status": _x(g, "fabric/status")},
            "virtualization_mode": _x(g, "gpu_virtualization_mode/virtualization_mode"),
            "recovery_action": _text(_x(g, "gpu_recovery_action")),
            "repair": {"channel_pending": _yes(_x(g, "ecc_errors/channel_repair_pending")),
                       "tpc_pending": _yes(_x(g, "ecc_errors/tpc_repair_pending")),
                       "unrepairable": _yes(_x(g, "ecc_errors/unrepairable_memory"))},
        })
    return out
