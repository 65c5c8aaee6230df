"""nccl-tests (`all_reduce_perf` and the other collectives): parse the text table and the `-J` JSON file.

The one nccl-tests parser of gridready: the single-node gates, the multi-node fabric phase
(certify/multinode.py) and the benchmarks read nccl-tests through it.

Text rows: `size count type redop [root] | time algbw busbw #wrong|error | time algbw busbw #wrong|error`
(older builds print a float `error` and no root; srun may prefix `0: `, mpirun --tag-output `[1,0]<stdout>:`).
`#wrong` prints `N/A` where nccl-tests did not check the result (src/util.cu prints N/A unless reportErrors):
every column with `-c 0` (header `validation: 0`), and the in-place column of sendrecv_perf always
(src/sendrecv.cu sets reportErrors = in_place ? 0 : 1), which is by design, not "validation off".
JSON (`-J file.json`, 2.19.6, tests/fixtures/h200x1/nccl-tests-J): {"args": [<binary>, ...], "config": {"devices":
[{"hostname", ...}], "validation", ...}, "results": [{"size", "count", "type", "redop", "root", "out_of_place":
{"time", "alg_bw", "bus_bw", "nwrong"}, "in_place": {...}}], "average_bus_bandwidth": {"bandwidth", "okay"},
"out_of_bounds": {"count", "okay"}, "errors": [""], "nccl_version", "env": [<the whole environment>]}.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Any

from .tools import run, which

# where the gridready_nccl role installs nccl-tests (/opt/nccl-tests/<version>/bin, `current` links the pinned one),
# then common hand-built locations
SEARCH = ("/opt/nccl-tests/current/bin", "/opt/nccl-tests/*/bin", "/opt/nccl-tests/*/build",
          "/usr/local/nccl-tests/build", "/opt/nccl-tests/build")


def find_binary(name: str = "all_reduce_perf", extra_dir: str | None = None) -> str | None:
    """PATH first, then `extra_dir`, then the usual build directories."""
    if found := which(name):
        return found
    pats = ([extra_dir] if extra_dir else []) + list(SEARCH)
    for pat in pats:
        for d in sorted(glob.glob(pat), reverse=True):
            cand = os.path.join(d, name)
            if os.access(cand, os.X_OK):
                return cand
    return None

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<\w+>:|\d+:)?\s*")  # srun -l `0: `, mpirun --tag-output `[1,0]<stdout>:`
_RANK = re.compile(r"#\s+Rank\s+(\d+).*?\bon\s+(\S+)\s+device\s+(\d+)")
_FAILURE = re.compile(r"Test (NCCL |CUDA )?failure|NCCL error|ORTE was unable|unhandled system error")
_OOB = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.]+)")
_HDR = re.compile(r"nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_DTYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64", "fp8_e4m3",
           "fp8_e5m2", "int", "char"}


def _num(tok: str) -> float | None:
    try:
        return float(tok)
    except ValueError:
        return None


def _wrong(tok: str) -> float | None:
    return None if tok.upper() == "N/A" else _num(tok)


def parse_text(text: str) -> dict[str, Any]:
    """-> {rows: [{bytes, count, type, redop, oop: {time_us, algbw, busbw, wrong}, ip: {...}}], collective,
    out_of_bounds, avg_busbw, ranks, hosts, validation (the header's flag), wrong_kind, elided, errors}."""
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"rows": rows, "wrong_kind": "count", "out_of_bounds": None, "avg_busbw": None, "ranks": 0,
                           "hosts": [], "validation": None, "elided": False, "nccl_version": None, "collective": None,
                           "errors": []}
    for raw in text.splitlines():
        ln = _PREFIX.sub("", raw, count=1).strip()
        if m := _OOB.search(ln):
            out["out_of_bounds"] = int(m.group(1))
            continue
        if m := _AVG.search(ln):
            out["avg_busbw"] = float(m.group(1))
            continue
        if m := _RANK.search(ln):
            out["ranks"] += 1
            if m.group(2) not in out["hosts"]:
                out["hosts"].append(m.group(2))
            continue
        if re.match(r"^#\s+Rank\s+\d+", ln):
            out["ranks"] += 1
            continue
        if m := re.search(r"Collective test starting: (\w+)_perf", ln):
            out["collective"] = m.group(1)
        if _FAILURE.search(ln):
            out["errors"].append(ln)
        if ln.startswith("#") and "busbw" in ln:  # column header: `#wrong` counts or an older float `error`
            out["wrong_kind"] = "count" if "#wrong" in ln else "error" if "error" in ln else out["wrong_kind"]
        if m := re.search(r"validation: (\d)", ln):
            out["validation"] = int(m.group(1))
        if m := re.search(r"nccl-library=(\d+)", ln):
            out["nccl_version"] = int(m.group(1))
        if ln.startswith("...") or ln == "[...]":
            out["elided"] = True
            continue
        if not ln or ln.startswith("#") or "NCCL" in ln:  # comments; NCCL_DEBUG lines interleaved with the table
            continue
        tok = ln.split()
        if len(tok) < 11 or not tok[0].isdigit() or not tok[1].isdigit() or tok[2] not in _DTYPES:
            continue
        has_root = len(tok) >= 13
        body = tok[5:] if has_root else tok[4:]
        if len(body) < 8:
            continue
        vals = [_num(t) for t in (body[0], body[1], body[2], body[4], body[5], body[6])]
        if any(v is None for v in vals):
            continue
        rows.append({
            "bytes": int(tok[0]), "count": int(tok[1]), "type": tok[2], "redop": tok[3],
            "oop": {"time_us": vals[0], "algbw": vals[1], "busbw": vals[2], "wrong": _wrong(body[3])},
            "ip": {"time_us": vals[3], "algbw": vals[4], "busbw": vals[5], "wrong": _wrong(body[7])},
        })
    return out


def _count(v: Any) -> Any:
    """The JSON writes `nwrong` as a float (0.0): an integral one is returned as an int."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def parse_json(text: str) -> dict[str, Any]:
    """The `-J` JSON file -> what parse_text gives for the same run (the JSON's times and rates unrounded)."""
    doc = json.loads(text)
    rows = []
    for r in doc.get("results", []):
        def part(p: Any) -> dict[str, Any] | None:
            if not isinstance(p, dict):
                return None
            return {"time_us": p.get("time", p.get("cpu_time")), "algbw": p.get("alg_bw"),
                    "busbw": p.get("bus_bw"), "wrong": _count(p.get("nwrong"))}
        rows.append({"bytes": int(str(r["size"])), "count": r.get("count"), "type": r.get("type"),
                     "redop": r.get("redop"), "oop": part(r.get("out_of_place")), "ip": part(r.get("in_place"))})
    oob = None
    for k, v in doc.items():
        if "bounds" in k and isinstance(v, (int, float)):
            oob = int(v)
        elif "bounds" in k and isinstance(v, dict):
            oob = int(v.get("count") or v.get("value") or 0)
    cfg = doc.get("config") or {}
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        avg = avg.get("bandwidth")
    devices = cfg.get("devices") or []
    hosts = list(dict.fromkeys(d["hostname"] for d in devices if d.get("hostname")))
    binary = os.path.basename(str((doc.get("args") or [""])[0]))
    return {"rows": rows, "wrong_kind": "count", "out_of_bounds": oob, "avg_busbw": avg,
            "ranks": len(devices) or cfg.get("ngpus") or 0, "hosts": hosts,
            "validation": cfg.get("validation"), "elided": False, "nccl_version": doc.get("nccl_version"),
            "collective": cfg.get("collective") or (binary.removesuffix("_perf") if binary.endswith("_perf") else None),
            "errors": [e for e in doc.get("errors") or [] if e]}  # [""] when there were none


def validated_busbw(row: dict[str, Any]) -> float | None:
    """The row's busbw from the columns nccl-tests checked (`#wrong` a number); where nothing was checked
    (validation off, old float `error` columns) the larger of both, which the gate then flags as unchecked."""
    parts = [p for p in (row.get("oop"), row.get("ip")) if p and isinstance(p.get("busbw"), (int, float))]
    checked = [p["busbw"] for p in parts if p.get("wrong") is not None]
    if checked:
        return max(checked)
    return max((p["busbw"] for p in parts), default=None)


def collect(gpus: int, min_bytes: int, max_bytes: int, env: dict[str, str], timeout_s: float,
            tmp_json: str, binary: str = "all_reduce_perf", check_iters: int = 1) -> dict[str, Any]:
    """Run `<collective>_perf -g <gpus>` (single process, all local GPUs) with `-J` and `-c check_iters` (each
    size's result checked that many times, errors counted in `#wrong`); parse both outputs."""
    argv = [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-g", str(gpus),
            "-n", "20", "-w", "5", "-c", str(max(1, check_iters)), "-J", tmp_json]
    res = run(argv, timeout_s=timeout_s, env=env)
    out: dict[str, Any] = {"run": res, "parsed": None, "json": None, "env": env}
    if res["absent"]:
        return out
    out["parsed"] = parse_text(res["stdout"])
    try:
        with open(tmp_json, encoding="utf-8") as fh:
            js = parse_json(fh.read())
        # the JSON wins only when it carries every row's busbw (other -J layouts exist: fall back to the text)
        if js["rows"] and all(isinstance((r.get("oop") or {}).get("busbw"), (int, float)) for r in js["rows"]):
            out["json"] = {**js, "errors": out["parsed"]["errors"]}  # failure lines print to stdout only
    except (OSError, ValueError, KeyError, TypeError) as exc:
        out["json_error"] = str(exc)
    return out
