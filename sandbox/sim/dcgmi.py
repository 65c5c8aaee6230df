"""Simulated `dcgmi` (DCGM 4.x): `diag -r 1..4 [-j]`, `discovery -l`, `health -s <systems> | -c`,
`--version`.

JSON layout as DCGM 4.x (`"DCGM Diagnostic"` root, test_categories / tests / results per entity, entity_groups,
metadata) plus `"gridready_simulated": true`; exit code 226 when a test fails, as dcgmi does. On a sandbox host
(no GRIDREADY_SIM_PROFILE override) dcgmi needs the host engine (nvidia-dcgm.service) listening on 127.0.0.1:5555.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from . import simcore
from .simcore import Gpu, Host

EXIT_DIAG_FAILED = 226
EXIT_NO_HOSTENGINE = 255  # dcgmi's exit when it cannot connect to nv-hostengine
EXIT_GENERIC_ERROR = 253  # DCGM_ST_GENERIC_ERROR (-3), which Health::CheckWatches returns, as an exit status
# DCGM 4 splits the packages: -core brings dcgmi and nv-hostengine, the diagnostic plugins come in the CUDA-specific
# packages (-cuda<N> and its Recommends, -proprietary-cuda<N>), so a host with -core alone cannot run `dcgmi diag`.
# DCGM User Guide, "Installation" (datacenter-gpu-manager-4-cuda<N> installed with --install-recommends),
# https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html. The marker files are written by
# the simulated packages (sandbox/packages.py); the message is the simulator's own.
DCGM4_CORE = Path("/usr/share/doc/datacenter-gpu-manager-4-core")
DIAG_PLUGINS = Path("/usr/share/gridready-sim/dcgm-diag-plugins")

# tests per level and their category (DCGM 4.x names; see fixtures/public/dcgmi/*DCGM4*)
LEVELS: dict[int, list[tuple[str, str]]] = {
    1: [("Deployment", "software")],
    2: [("Deployment", "software"), ("Hardware", "memory"), ("Integration", "pcie")],
    3: [
        ("Deployment", "software"),
        ("Hardware", "memory"),
        ("Hardware", "diagnostic"),
        ("Integration", "pcie"),
        ("Stress", "memory_bandwidth"),
        ("Stress", "targeted_stress"),
        ("Stress", "targeted_power"),
    ],
}
LEVELS[4] = [*LEVELS[3], ("Hardware", "memtest"), ("Hardware", "pulse_test")]


def verdict(g: Gpu, test: str, level: int) -> tuple[str, list[dict[str, Any]]]:
    """(status, warnings) of one test on one GPU under the profile's faults."""

    def warn(msg: str, error_id: int, category: int = 3) -> list[dict[str, Any]]:
        return [{"error_category": category, "error_id": error_id, "error_severity": 2, "warning": msg}]

    if test == "software" and g.row_remap_pending:
        msg = f"GPU {g.index} has uncorrectable memory errors and row remappings are pending"
        return "Fail", warn(msg, 83)
    if test == "memory" and g.ecc_uncorrectable:
        msg = f"GPU {g.index} has {g.ecc_uncorrectable} uncorrectable DBE ECC errors (memory test)"
        return "Fail", warn(msg, 27)
    if test == "pcie" and g.has("pcie_downtrained"):
        gen, width = g.pcie
        msg = f"GPU {g.index} PCIe link is Gen{gen} x{width}, expected Gen{g.sku['pcie_gen']} x{g.sku['pcie_width']}"
        return "Fail", warn(msg, 62)
    if test == "pcie" and g.nvlinks_active < int(g.sku["nvlink_links"]):
        msg = f"GPU {g.index} has {g.nvlinks_active} of {g.sku['nvlink_links']} NVLinks up"
        return "Fail", warn(msg, 34)
    if level >= 3 and g.has("dcgm_level3_failure") and test == "targeted_stress":
        msg = (
            f"Detected 1 CRC errors and 0 hardware errors while running the targeted stress test on GPU {g.index}; "
            "the test failed"
        )
        return "Fail", warn(msg, 49)
    if test in {"targeted_power", "diagnostic"} and (g.has("power_brake") or g.has("hw_slowdown")):
        msg = f"Clocks are being throttled for GPU {g.index} because of hardware slowdown (HW power brake)"
        return "Fail", warn(msg, 75)
    if test in {"targeted_power", "targeted_stress"} and g.has("thermal_throttle"):
        msg = f"Thermal violations totaling 12.3 seconds found for GPU {g.index}"
        return "Fail", warn(msg, 6)
    return "Pass", []


def diag(host: Host, level: int, gpus: list[Gpu]) -> tuple[bool, dict[str, Any]]:
    cats: dict[str, list[dict[str, Any]]] = {}
    ok = True
    for cat, test in LEVELS[level]:
        results, worst = [], "Pass"
        for g in gpus:
            status, warnings = verdict(g, test, level)
            r: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": g.index, "status": status}
            if warnings:
                r["warnings"] = warnings
                worst = "Fail"
            results.append(r)
        ok = ok and worst == "Pass"
        cats.setdefault(cat, []).append({"name": test, "results": results, "test_summary": {"status": worst}})
    v = simcore.versions()
    body = {
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in cats.items()]},
        "entity_groups": [
            {
                "entities": [
                    {"device_id": g.sku["device_id"][2:], "entity_id": g.index, "serial_num": g.serial} for g in gpus
                ],
                "entity_group": "GPU",
                "entity_group_id": 1,
            }
        ],
        "metadata": {"Driver Version Detected": v["driver"], "version": v["dcgm"]},
        "gridready_simulated": True,
    }
    return ok, body


def diag_table(host: Host, body: dict[str, Any]) -> str:
    """The plain-text table (DCGM 4.x layout: a Metadata block, then categories with per-GPU rows)."""
    line = "+---------------------------+------------------------------------------------+"

    def row(a: str, b: str) -> str:
        return f"| {a:<25} | {b:<46} |"

    meta = body["metadata"]
    ids = ", ".join(e["device_id"] for e in body["entity_groups"][0]["entities"])
    out = [
        simcore.marker(host.name),
        "Successfully ran diagnostic for group.",
        line,
        row("Diagnostic", "Result"),
        "+===========================+================================================+",
        "|-----  Metadata  ----------+------------------------------------------------|",
        row("DCGM Version", meta["version"]),
        row("Driver Version Detected", meta["Driver Version Detected"]),
        row("GPU Device IDs Detected", ids[:46]),
    ]
    for cat in body["DCGM Diagnostic"]["test_categories"]:
        out.append(f"+-----  {cat['category']}  ".ljust(28, "-") + "+------------------------------------------------+")
        for t in cat["tests"]:
            out.append(row(t["name"], t["test_summary"]["status"]))
            for r in t["results"]:
                out.append(row("", f"GPU{r['entity_id']}: {r['status']}"))
                for w in r.get("warnings", []):
                    text = w["warning"]
                    while text:
                        out.append(row("", " " + text[:45]))
                        text = text[45:]
    out.append(line)
    return "\n".join(out) + "\n"


def discovery(host: Host) -> str:
    line = "+--------+----------------------------------------------------------------------+"
    out = [simcore.marker(host.name), f"{len(host.gpus)} GPU{'s' if len(host.gpus) != 1 else ''} found.", line]
    out += ["| GPU ID | Device Information                                                   |", line]
    for g in host.gpus:
        for i, info in enumerate((f"Name: {g.display['name']}", f"PCI Bus ID: {g.bus_id}", f"Device UUID: {g.uuid}")):
            out.append(f"| {str(g.index) if i == 0 else '':<6} | {info:<68} |")
        out.append(line)
    switches = 4 if host.sku["nvswitch"] and len(host.gpus) == 8 else 0
    out += [f"{switches} NvSwitches found.", "+-----------+", "| Switch ID |", "+-----------+"]
    out += [f"| {10 + i:<9} |" for i in range(switches)] + ["+-----------+"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- dcgmi health (passive health watches)
# NVIDIA DCGM, `dcgmi health`
# (https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-health.html): `-s
# <systems>` sets the watched systems (letters a, p, m, i, t, n, d, x; `a` alone is all), kept by the host engine
# after dcgmi exits; `-c` checks them (`-f`, `--clear` and `-j` are not simulated). The text is dcgmi's (DCGM source
# dcgmi/Health.cpp: SetWatches prints "Health monitor systems set successfully.", CheckWatches prints "Error: Health
# watches not enabled. Please enable watches." when none is set, else GenerateOutputFromResponse in a
# DcgmiOutputTree(28, 60), dcgmi/DcgmiOutput.cpp). Incident messages are DCGM's (dcgm_errors.h:
# DCGM_FR_VOLATILE_DBE_DETECTED_MSG, DCGM_FR_NVLINK_DOWN_MSG). The host engine's watch state is a file in the
# simulator's state folder (/run: gone at reboot, as nv-hostengine's watches are). Not simulated: the ~60 s of samples
# some systems need before the first meaningful check (the check reads the profile's faults at once).
HEALTH_SYSTEMS = {"p": "PCIe", "m": "Memory", "i": "InfoROM", "t": "Thermal", "n": "NVLINK", "d": "Driver",
                  "x": "ConnectX"}


def health_watches_file() -> Path:
    return simcore.state_dir() / "dcgm-health-watches"


def health_watches() -> str:
    try:
        return health_watches_file().read_text().strip()
    except OSError:
        return ""


def health_incidents(host: Host, watched: str) -> list[tuple[int, str, str, str]]:
    """(gpu, system, Warning|Failure, message) for the profile's faults the watched systems see."""
    out = []
    for g in host.gpus:
        if "m" in watched and g.ecc_uncorrectable:
            out.append((g.index, "Memory system", "Failure",
                        f"Detected {g.ecc_uncorrectable} volatile double-bit ECC error(s) in GPU {g.index}."))
        if "n" in watched and g.nvlinks_active < int(g.sku["nvlink_links"]):
            for link in range(g.nvlinks_active, int(g.sku["nvlink_links"])):
                out.append((g.index, "NVLINK system", "Failure",
                            f"GPU {g.index}'s NvLink link {link} is currently down"))
    return out


def _tree_row(level: int, label: str, value: str) -> str:
    # DcgmiOutputTree(28, 60).rowStr: "| " + left (25) + " | " + right (56) + " |", "-> " indented 3 per level
    left = (("-> ".rjust(level * 3)) if level else "") + label if label else ""
    return f"| {left:<25} | {value:<56} |"


def _wrap(msg: str, width: int = 54) -> list[str]:
    """dcgmi's AddErrorMessage: a message longer than 54 characters continues on further rows, cut at words."""
    words, rows, cur = msg.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            rows.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return [*rows, cur] if cur else rows


def health_check(host: Host, watched: str) -> str:
    hline = "+" + "-" * 27 + "+" + "-" * 58 + "+"
    rank = {"Healthy": 0, "Warning": 1, "Failure": 2}
    incidents = health_incidents(host, watched)
    overall = max((i[2] for i in incidents), key=rank.__getitem__, default="Healthy")
    out = [simcore.marker(host.name), hline, f"| {'Health Monitor Report':<85}|", hline.replace("-", "="),
           _tree_row(0, "Overall Health", overall)]
    gpus = sorted({i[0] for i in incidents})
    if gpus:
        out.append(_tree_row(0, "GPU", ""))
    for gpu in gpus:
        mine = [i for i in incidents if i[0] == gpu]
        out.append(_tree_row(1, str(gpu), max((i[2] for i in mine), key=rank.__getitem__)))
        out.append(_tree_row(2, "Errors", ""))
        for system in dict.fromkeys(i[1] for i in mine):
            of = [i for i in mine if i[1] == system]
            out.append(_tree_row(3, system, max((i[2] for i in of), key=rank.__getitem__)))
            for row in _wrap(", ".join(i[3] for i in of)):  # AppendSystemIncidents joins a system's messages
                out.append(_tree_row(3, "", row))
    out.append(hline)
    return "\n".join(out) + "\n"


def health(host: Host, args: list[str]) -> int:
    rest = args[1:]
    systems = simcore.option(rest, "-s", "--set")
    if systems is not None:
        if not systems or len(set(systems)) != len(systems) or any(c not in "a" + "".join(HEALTH_SYSTEMS)
                                                                  for c in systems) or ("a" in systems
                                                                                        and systems != "a"):
            sys.stderr.write(f"Error: invalid health systems {systems!r} (gridready-sim: letters a, p, m, i, t, n, d, "
                             "x, no duplicate, a alone)\n")
            return 2
        health_watches_file().parent.mkdir(parents=True, exist_ok=True)
        health_watches_file().write_text(("".join(HEALTH_SYSTEMS) if systems == "a" else systems) + "\n")
        sys.stdout.write("Health monitor systems set successfully.\n")
        return 0
    watched = health_watches()
    if "-c" in rest or "--check" in rest:
        if not watched:
            sys.stdout.write("Error: Health watches not enabled. Please enable watches. \n")
            return EXIT_GENERIC_ERROR
        sys.stdout.write(health_check(host, watched))
        return 0
    sys.stderr.write(f"dcgmi: unsupported command in gridready-sim: {' '.join(args)}\n")
    return 2


def hostengine_up() -> bool:
    if os.environ.get(simcore.PROFILE_ENV):  # tests and local runs: no host engine needed
        return True
    try:
        with socket.create_connection(("127.0.0.1", simcore.HOSTENGINE_PORT), timeout=2):
            return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    v = simcore.versions()
    if "--version" in args or (args and args[0] == "-v"):
        sys.stdout.write(f"dcgmi  version: {v['dcgm']}\n")
        return 0
    host = simcore.load()
    if not hostengine_up():
        sys.stderr.write("Error: unable to establish a connection to the specified host: localhost\n")
        sys.stderr.write("Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
        return EXIT_NO_HOSTENGINE
    if args[:1] == ["discovery"]:
        sys.stdout.write(discovery(host))
        return 0
    if args[:1] == ["health"]:
        return health(host, args)
    if args[:1] == ["diag"]:
        if DCGM4_CORE.exists() and not DIAG_PLUGINS.exists():
            sys.stderr.write("Error: the DCGM diagnostic plugins are not installed (gridready-sim: "
                             "datacenter-gpu-manager-4-proprietary-cuda<N> is missing); cannot run the diagnostic\n")
            return EXIT_DIAG_FAILED
        level_arg = simcore.option(args, "-r", "--run") or "1"
        level = {"short": 1, "medium": 2, "long": 3, "xlong": 4}.get(level_arg) or int(level_arg)
        if level not in LEVELS:
            sys.stderr.write(f"Error: invalid run level {level_arg}\n")
            return 2
        simcore.mark_load()
        host = simcore.load()  # faults the diagnostic's own load brings out show in its result
        gpus = host.gpu_selected(simcore.option(args, "-i"))
        ok, body = diag(host, level, gpus)
        if "-j" in args or "--json" in args:
            sys.stdout.write(json.dumps(body, indent="\t") + "\n")
        else:
            sys.stdout.write(diag_table(host, body))
        return 0 if ok else EXIT_DIAG_FAILED
    sys.stderr.write(f"dcgmi: unsupported command in gridready-sim: {' '.join(args)}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
