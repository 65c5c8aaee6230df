"""HCA collectors that run ON a node: sysfs InfiniBand tree, `ibstat`, `ib_write_bw`, `nvidia-smi topo -m`.

Standard library only: the file is also piped to a node as `python3 - snapshot|collect` (see `main`).
Collectors only measure; verdicts live in `gridready/certify/hca.py`. Every collector returns plain JSON data and
records a failure to run as data (`rc`, `error`), never as an exception.
Sysfs is read under env GRIDREADY_SYSFS_ROOT (default `/`): `<root>/sys/class/infiniband` or, when the root itself
holds `class/infiniband` (a tree mounted elsewhere), `<root>/class/infiniband`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "port_xmit_data",
    "port_rcv_data",
)
MAX_GIDS = 16  # RoCE GID tables have 255 slots; NCCL uses a low index (3 is common for RoCE v2 IPv4)
NIC_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}  # nvidia-smi topo -m, nearest first


def sysfs_root() -> Path:
    return Path(os.environ.get("GRIDREADY_SYSFS_ROOT") or "/")


def _class_dir(root: Path, name: str) -> Path:
    """`<root>/sys/class/<name>`, `<root>/class/<name>`, or `root` itself if it is that directory."""
    for cand in (root / "sys" / "class" / name, root / "class" / name):
        if cand.is_dir():
            return cand
    return root


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _pcie(dev: Path) -> dict[str, str | None]:
    pci = dev / "device"
    return {
        "address": pci.resolve().name if pci.exists() else None,
        "current_link_speed": _read(pci / "current_link_speed"),
        "current_link_width": _read(pci / "current_link_width"),
        "max_link_speed": _read(pci / "max_link_speed"),
        "max_link_width": _read(pci / "max_link_width"),
    }


def _port(port: Path) -> dict[str, Any]:
    gids: dict[str, str] = {}
    gid_types: dict[str, str] = {}
    for i in range(MAX_GIDS):
        gid = _read(port / "gids" / str(i))
        if gid is None:
            break
        if gid.replace(":", "").strip("0"):
            gids[str(i)] = gid
            gtype = _read(port / "gid_attrs" / "types" / str(i))
            if gtype:
                gid_types[str(i)] = gtype
    return {
        "state": _read(port / "state"),
        "phys_state": _read(port / "phys_state"),
        "rate": _read(port / "rate"),
        "link_layer": _read(port / "link_layer"),
        "counters": {c: v for c in COUNTERS if (v := _read_int(port / "counters" / c)) is not None},
        "gids": gids,
        "gid_types": gid_types,
    }


def read_ib_sysfs(root: Path | None = None) -> dict[str, Any]:
    """Every RDMA device under the IB class dir: firmware, type, PCIe link, netdevs and each port."""
    base = _class_dir(root or sysfs_root(), "infiniband")
    out: dict[str, Any] = {}
    if not base.is_dir():
        return out
    for dev in sorted(p for p in base.iterdir() if (p / "ports").is_dir()):
        netdir = dev / "device" / "net"
        out[dev.name] = {
            "fw_ver": _read(dev / "fw_ver"),
            "hca_type": _read(dev / "hca_type"),
            "board_id": _read(dev / "board_id"),
            "pcie": _pcie(dev),
            "netdevs": sorted(p.name for p in netdir.iterdir()) if netdir.is_dir() else [],
            "ports": {p.name: _port(p) for p in sorted((dev / "ports").iterdir()) if p.is_dir()},
        }
    return out


def read_netdev(name: str, root: Path | None = None) -> dict[str, Any]:
    """MTU and per-priority ECN of one kernel interface: roce_np (notification point, marks CNPs) and roce_rp
    (reaction point, DCQCN rate control), /sys/class/net/<if>/ecn/roce_{np,rp}/enable/<prio> (mlx5)."""
    base = _class_dir(root or sysfs_root(), "net") / name

    def ecn(kind: str) -> dict[str, int | None]:
        d = base / "ecn" / kind / "enable"
        return {p.name: _read_int(p) for p in sorted(d.iterdir())} if d.is_dir() else {}

    return {"exists": base.is_dir(), "mtu": _read_int(base / "mtu"), "ecn_roce_np": ecn("roce_np"),
            "ecn_roce_rp": ecn("roce_rp")}


def counters_snapshot(root: Path | None = None) -> dict[str, Any]:
    """{hca: {port: {counter: value}}} plus the time: diff two of these around a run."""
    data = read_ib_sysfs(root)
    return {
        "time": time.time(),
        "counters": {d: {p: v["counters"] for p, v in info["ports"].items()} for d, info in data.items()},
    }


# ---------------------------------------------------------------- ibstat

_IBSTAT_KEYS = {
    "CA type": "ca_type",
    "Firmware version": "firmware",
    "Number of ports": "ports_count",
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate",
    "Link layer": "link_layer",
    "Base lid": "base_lid",
    "SM lid": "sm_lid",
    "Port GUID": "port_guid",
}


def parse_ibstat(text: str) -> dict[str, Any]:
    """`ibstat` text -> {"cas": {ca: {ca_type, firmware, ports: {n: {...}}}}, "errors": [lines]}.

    Survives partial output (ibstat exits 255 after `ibpanic:` with what it printed so far).
    """
    cas: dict[str, Any] = {}
    errors: list[str] = []
    ca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if m := re.match(r"^CA '([^']+)'", line):
            ca = cas.setdefault(m.group(1), {"ports": {}})
            port = None
        elif m := re.match(r"^Port (\d+):$", line):
            if ca is not None:
                port = ca["ports"].setdefault(m.group(1), {})
        elif line.startswith("ibpanic") or line.startswith("ibwarn") or "failed" in line.lower():
            errors.append(line)
        elif ":" in line:
            key, _, value = line.partition(":")
            field = _IBSTAT_KEYS.get(key.strip())
            if field is None:
                continue
            target = port if port is not None and field not in ("ca_type", "firmware", "ports_count") else ca
            if target is not None:
                target[field] = value.strip()
    return {"cas": cas, "errors": errors}


def run(argv: list[str], timeout: float = 60.0, **kw: Any) -> dict[str, Any]:
    """Run a tool; missing tool, timeout and non-zero exit become data."""
    if shutil.which(argv[0]) is None:
        return {"argv": argv, "rc": None, "stdout": "", "stderr": "", "error": f"{argv[0]} not found"}
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return {"argv": argv, "rc": None, "stdout": out, "stderr": "", "error": f"timed out after {timeout}s"}
    return {"argv": argv, "rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "error": None}


def run_ibstat() -> dict[str, Any]:
    res = run(["ibstat"])
    res["parsed"] = parse_ibstat(res["stdout"] + "\n" + res["stderr"])
    return res


# ---------------------------------------------------------------- ib_write_bw

MIB_PER_S_IN_GBITS = 2**20 * 8 / 1e9  # perftest's MB/sec (2**20 bytes a second) in Gb/s
_BW_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[MG]B?b?/sec)\]", re.IGNORECASE)


def parse_ib_write_bw(text: str) -> dict[str, Any]:
    """perftest output -> {bytes, iterations, peak_gbits, avg_gbits} of the last result line (None if absent).

    Units: `BW ...[MB/sec]` or `[Gb/sec]` (--report_gbits). perftest's MB is 2**20 bytes and its Gb 10**9 bits
    (linux-rdma/perftest src/perftest_parameters.c, print_report_bw: `format_factor = report_fmt == MBS ? 0x100000
    : 125000000`); the real loopback log agrees: its MsgRate x #bytes is 24056.72 x 2**20 bytes/s, 201.8 Gb/s.
    """
    unit = None
    result: dict[str, Any] = {"bytes": None, "iterations": None, "peak_gbits": None, "avg_gbits": None}
    for line in text.splitlines():
        if m := _BW_HEADER.search(line):
            unit = m.group("unit").lower()
            continue
        parts = line.split()
        if unit and len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
            try:
                peak, avg = float(parts[2]), float(parts[3])
            except ValueError:
                continue
            scale = 1.0 if unit.startswith("gb/") else MIB_PER_S_IN_GBITS
            result.update(
                bytes=int(parts[0]),
                iterations=int(parts[1]),
                peak_gbits=round(peak * scale, 2),
                avg_gbits=round(avg * scale, 2),
            )
    return result


def run_ib_write_bw(
    hca: str, gpu: int | None, size: int = 1 << 23, seconds: int = 5, port: int = 18600
) -> dict[str, Any]:
    """GPUDirect loopback on one HCA: a server and a client on this node (`--use_cuda=<gpu>` when given)."""
    if shutil.which("ib_write_bw") is None:
        return {"hca": hca, "gpu": gpu, "rc": None, "error": "ib_write_bw not found (perftest)", "parsed": None}
    common = ["ib_write_bw", "-d", hca, "-s", str(size), "-D", str(seconds), "-p", str(port), "--report_gbits"]
    if gpu is not None:
        common.append(f"--use_cuda={gpu}")
    server = subprocess.Popen(common, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    client = run([*common, "localhost"], timeout=seconds + 30)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
    parsed = parse_ib_write_bw(client["stdout"])
    return {"hca": hca, "gpu": gpu, "rc": client["rc"], "error": client["error"], "parsed": parsed,
            "stdout": client["stdout"][-4000:]}


# ---------------------------------------------------------------- nvidia-smi topo -m

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEV = re.compile(r"^(GPU\d+|NIC\d+|mlx5_\w+)$")


def parse_topo(text: str) -> dict[str, Any]:
    """`nvidia-smi topo -m` -> {"gpus": [..], "nics": {NIC0: mlx5_0}, "links": {GPU0: {NIC0: PIX}}}.

    Reads tab-separated and space-separated (copied) matrices; GPU<->NIC links come from either side.
    """
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    header: list[str] = []
    links: dict[str, dict[str, str]] = {}
    nics: dict[str, str] = {}
    for line in lines:
        if m := re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line):
            nics[m.group(1)] = m.group(2)
            continue
        tokens = [t.strip() for t in (line.split("\t") if "\t" in line else line.split())]
        tokens = [t for t in tokens if t]
        if not tokens:
            continue
        # The header names devices from its first cell; a trimmed copy loses its leading tab, but the first row
        # (GPU0 against itself) always has " X " in its second cell, which no header cell is.
        if not header and _DEV.match(tokens[0]) and (line[:1] in (" ", "\t") or tokens[1:2] != ["X"]):
            header = [t for t in tokens if _DEV.match(t)]
            continue
        if header and _DEV.match(tokens[0]):
            row = tokens[0]
            for col, val in zip(header, tokens[1:], strict=False):
                links.setdefault(row, {})[col] = val
    gpus = sorted({d for d in [*header, *links] if d.startswith("GPU")}, key=lambda d: int(d[3:]))
    merged: dict[str, dict[str, str]] = {g: {} for g in gpus}
    for row, cols in links.items():
        for col, val in cols.items():
            if row.startswith("GPU") and not col.startswith("GPU"):
                merged[row][col] = val
            elif col.startswith("GPU") and not row.startswith("GPU"):
                merged.setdefault(col, {}).setdefault(row, val)
    return {"gpus": gpus, "nics": nics, "links": merged}


def nearest_nics(topo: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """GPU index -> {"nic": RDMA device name, "link": PIX|PXB|...} of its nearest NIC (ties: lowest NIC)."""
    out: dict[int, dict[str, Any]] = {}
    for gpu, cols in topo["links"].items():
        ranked = sorted(
            ((NIC_RANK[v], k) for k, v in cols.items() if v in NIC_RANK),
            key=lambda t: (t[0], int(re.sub(r"\D", "", t[1]) or 0)),
        )
        if ranked:
            _rank, nic = ranked[0]
            out[int(gpu[3:])] = {"nic": topo["nics"].get(nic, nic), "link": cols[nic]}
    return out


def run_topo() -> dict[str, Any]:
    res = run(["nvidia-smi", "topo", "-m"])
    res["parsed"] = parse_topo(res["stdout"]) if res["rc"] == 0 else None
    return res


# ---------------------------------------------------------------- RoCE QoS

def parse_mlnx_qos(text: str) -> dict[str, Any]:
    """`mlnx_qos -i <netdev>` -> {"trust": "dscp"|"pcp"|None, "pfc_enabled": [priorities], "dscp2prio": {dscp: prio}}.

    Format: MLNX_OFED/DOCA `mlnx_qos` ("Priority trust state: dscp", a `dscp2prio mapping:` block of
    `prio:N dscp:..,` lines, and the `enabled` row under "PFC configuration:"), as NVIDIA's RoCE configuration
    guides print it: https://docs.nvidia.com/networking/display/mlnxofedv24010331/quality+of+service"""
    pfc: list[int] = []
    trust: str | None = None
    dscp2prio: dict[int, int] = {}
    in_pfc = False
    for line in text.splitlines():
        s = line.strip()
        if s.lower().startswith("priority trust state:"):
            trust = s.split(":", 1)[1].strip().lower() or None
        elif s.startswith("prio:") and "dscp:" in s:
            prio = int(s.split()[0].split(":")[1])
            for d in s.split("dscp:", 1)[1].split(","):
                if d.strip().isdigit():
                    dscp2prio[int(d)] = prio
        elif "PFC configuration" in s:
            in_pfc = True
        elif in_pfc and s.startswith("enabled"):
            pfc = [i for i, v in enumerate(s.split()[1:]) if v == "1"]
            in_pfc = False
    return {"trust": trust, "pfc_enabled": pfc, "dscp2prio": dscp2prio}


def collect(gdr: bool = False, hcas: list[str] | None = None, qos: bool = False) -> dict[str, Any]:
    """Everything the HCA gates read, for the node probe's JSON (key `hca`)."""
    data: dict[str, Any] = {"sysfs_root": str(sysfs_root()), "started": time.time()}
    data["sysfs"] = read_ib_sysfs()
    data["counters_before"] = counters_snapshot()
    data["ibstat"] = run_ibstat()
    data["topo"] = run_topo()
    netdevs = {n for info in data["sysfs"].values() for n in info["netdevs"]}
    data["netdevs"] = {n: read_netdev(n) for n in sorted(netdevs)}
    if qos:
        data["qos"] = {n: {**run(["mlnx_qos", "-i", n]), "parsed": None} for n in sorted(netdevs)}
        for q in data["qos"].values():
            q["parsed"] = parse_mlnx_qos(q["stdout"]) if q["rc"] == 0 else None
    if gdr:
        near = nearest_nics(data["topo"]["parsed"]) if data["topo"].get("parsed") else {}
        gpu_of = {v["nic"]: g for g, v in near.items()}
        data["ib_write_bw"] = {
            h: run_ib_write_bw(h, gpu_of.get(h)) for h in (hcas or sorted(data["sysfs"]))
        }
    data["counters_after"] = counters_snapshot()
    return data


def gdr_only(hcas: list[str]) -> dict[str, Any]:
    """ib_write_bw on the named HCAs, each with its nearest GPU (for a probe document that skipped it)."""
    topo = run_topo()
    near = nearest_nics(topo["parsed"]) if topo.get("parsed") else {}
    gpu_of = {v["nic"]: g for g, v in near.items()}
    return {"ib_write_bw": {h: run_ib_write_bw(h, gpu_of.get(h)) for h in hcas}}


def main(argv: list[str]) -> int:
    """`python3 hca.py snapshot` prints counters; `collect [--gdr] [--qos]` everything; `gdr HCA...` bandwidth."""
    cmd = argv[0] if argv else "collect"
    if cmd == "snapshot":
        json.dump(counters_snapshot(), sys.stdout)
    elif cmd == "gdr":
        json.dump(gdr_only(argv[1:]), sys.stdout)
    else:
        json.dump(collect(gdr="--gdr" in argv, qos="--qos" in argv), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
