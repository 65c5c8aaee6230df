"""`dcgmi diag -r N -j`: run with a timeout, parse the DCGM 3.x and 4.x JSON schemas and the text table.

3.x: {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results": [{"gpu_ids",
"status"}]}]}]}}.  4.x: {"DCGM Diagnostic": {"test_categories" | "tests": [... {"entity_group", "entity_id",
"status", "warnings": [{"error_id", "warning"}]} ...], "test_summary": {"status"}}, "metadata": {"version"}}.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .tools import run

# plugins with a known false positive that pass when run again alone (DCGM#272: nvbandwidth MCUTIL > 10%)
FLAKY_PLUGINS = ("nvbandwidth",)
# DCGM_ST_NVVS_ERROR (-226) printed as unsigned by the shell
EXIT_NVVS_ERROR = 226


def _status(s: Any) -> str:
    t = str(s or "").strip().lower()
    return {"pass": "pass", "fail": "fail", "skip": "skip", "warn": "warn", "warning": "warn",
            "not run": "notrun", "notrun": "notrun"}.get(t, t or "unknown")


def _warnings(r: dict[str, Any]) -> list[str]:
    w = r.get("warnings")
    if isinstance(w, str):
        return [w]
    if isinstance(w, list):
        return [str(x.get("warning", x)) if isinstance(x, dict) else str(x) for x in w]
    return []


def _gpus(r: dict[str, Any]) -> list[int]:
    if "entity_id" in r and str(r.get("entity_group", "GPU")).upper() == "GPU":
        return [int(r["entity_id"])]
    ids = r.get("gpu_ids")
    if isinstance(ids, str) and ids.strip():
        return [int(x) for x in re.findall(r"\d+", ids)]
    if isinstance(ids, list):
        return [int(x) for x in ids]
    return []


def parse_json(text: str) -> dict[str, Any]:
    """-> {schema: '3.x'|'4.x', version, tests: [{name, category, results: [{gpus, status, warnings}],
    summary}]}. Raises ValueError on a document of neither shape (the gate reports it as error)."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("dcgmi JSON root is not an object")
    if "DCGM Diagnostic" in doc:
        schema, body = "4.x", doc["DCGM Diagnostic"]
    elif "DCGM GPU Diagnostic" in doc:
        schema, body = "3.x", doc["DCGM GPU Diagnostic"]
    else:
        raise ValueError("no 'DCGM Diagnostic' (4.x) or 'DCGM GPU Diagnostic' (3.x) root key")
    if not isinstance(body, dict):
        raise ValueError(f"malformed {schema} document: the root's value is a {type(body).__name__}, not an object")
    cats = body.get("test_categories")
    flat: list[tuple[str | None, dict[str, Any]]] = []
    if isinstance(cats, list):
        for c in cats:
            flat += [(c.get("category"), t) for t in c.get("tests", []) if isinstance(t, dict)]
    elif isinstance(body.get("tests"), list):
        flat = [(t.get("category"), t) for t in body["tests"] if isinstance(t, dict)]
    else:
        raise ValueError(f"malformed {schema} document: neither test_categories nor tests")
    tests = []
    for cat, t in flat:
        results = [{"gpus": _gpus(r), "status": _status(r.get("status")), "warnings": _warnings(r),
                    "info": r.get("info")} for r in t.get("results", []) if isinstance(r, dict)]
        summ = t.get("test_summary") or {}
        tests.append({"name": t.get("name"), "category": cat, "results": results,
                      "summary": _status(summ.get("status")) if summ else None})
    meta = doc.get("metadata") or body.get("metadata") or {}
    return {"schema": schema, "version": meta.get("version") or doc.get("version"), "tests": tests}


_ROW = re.compile(r"^\|\s*(.*?)\s*\| ?(.*?)\s*\|\s*$")  # the value keeps its own leading spaces
# dcgmi/Diag.cpp (NVIDIA/DCGM): DisplayVerboseInfo cuts a message into DATA_INFO_TAG_LEN = 45 character pieces, one
# row each, so a space at a cut opens the next row; DCGM 4.x prints a row per entity under each test ("GPU0: Pass",
# HelperDisplayEntityResults) and names an entity's warning "Warning: GPU0".
_PIECE = 45
_ENTITY = re.compile(r"^([A-Za-z][A-Za-z ]*?)(\d+): (Pass|Fail|Skip|Warn|Not Run)$")
_NOTE = re.compile(r"^(Warning|Error|Info)(?::\s*([A-Za-z][A-Za-z ]*?)(\d+))?$")


def parse_text(text: str) -> dict[str, Any]:
    """The `dcgmi diag` text table (3.x and 4.x) -> same shape as parse_json, schema 'text'."""
    tests: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    note: list[str] | None = None  # the message a row without a name continues
    for ln in text.splitlines():
        m = _ROW.match(ln.strip())
        if not m:
            continue
        name, cell = m.group(1), m.group(2)
        val = cell.strip()
        if name in ("Diagnostic", "Metadata") or (set(name) <= {"-", " "} and "---" in name):
            continue
        entity = _ENTITY.match(val)
        if not name and note is not None and not entity:
            # whole pieces before this one: pad back the trailing spaces the table's padding hid
            note[-1] = note[-1].ljust(-(-len(note[-1]) // _PIECE) * _PIECE) + cell.rstrip()
            continue
        note = None
        kind = _NOTE.match(name)
        if name and not kind and not name.startswith("-"):
            cur = {"name": name, "category": None, "results": [], "summary": None}
            tests.append(cur)
        if cur is None:
            cur = {"name": "Deployment", "category": "Deployment", "results": [], "summary": None}
            tests.append(cur)
        if kind and kind.group(1) == "Info":
            note = [val]  # verbose info: its pieces are read and dropped
        elif kind:
            if kind.group(2):  # "Warning: GPU0" (4.x) names its entity
                gpus = [int(kind.group(3))] if kind.group(2) == "GPU" else []
            else:
                gpus = [int(g) for g in re.findall(r"GPU (\d+)", val)]
            cur["results"].append({"gpus": gpus, "status": "fail" if kind.group(1) == "Error" else "warn",
                                   "warnings": [val], "info": None})
            note = cur["results"][-1]["warnings"]
        elif entity and not name:
            cur["results"].append({"gpus": [int(entity.group(2))] if entity.group(1) == "GPU" else [],
                                   "status": _status(entity.group(3)), "warnings": [], "info": None})
        else:
            sm = re.match(r"(Pass|Fail|Skip|Warn)\w*\s*(?:-\s*GPUs?:\s*([\d,\s]+))?", val)
            if sm:
                gpus = [int(x) for x in re.findall(r"\d+", sm.group(2) or "")]
                cur["results"].append({"gpus": gpus, "status": _status(sm.group(1)), "warnings": [], "info": None})
    return {"schema": "text", "version": None, "tests": [t for t in tests if t["results"]]}


def failed_tests(parsed: dict[str, Any]) -> list[str]:
    return sorted({t["name"] for t in parsed["tests"] if t.get("summary") == "fail"
                   or any(r["status"] == "fail" for r in t["results"])})


def diag_parameters(level: int, precision: str | None, outlier_pcnt: float = 0.0) -> dict[str, str]:
    """`-p` test parameters. Level 3+ runs the diagnostic plugin, whose `precision` takes the letters h (FP16,
    cublasHgemm: tensor cores), s (FP32) and d (FP64); without it the plugin alternates h+s (+d where FP64 is fast).
    DCGM has no BF16/FP8 precision. Sources: NVIDIA DCGM "Diagnostic Plugin" (docs.nvidia.com/datacenter/dcgm/latest/
    user-guide/diag-diagnostic-plugin.html) and NVIDIA/DCGM nvvs/plugin_src/diagnostic/DiagnosticPlugin.cpp
    (SetPrecisionFromString). `outlier_pcnt` > 0 (DCGM 4.5+) sets the plugin's cross-GPU outlier tolerances,
    `clocks_tolerance_pcnt` and `power_tolerance_pcnt` (DCGM "Diagnostic Plugin" docs, 4.5)."""
    if level < 3:
        return {}
    out = {"diagnostic.precision": precision} if precision else {}
    if outlier_pcnt and outlier_pcnt > 0:
        out["diagnostic.clocks_tolerance_pcnt"] = f"{outlier_pcnt:g}"
        out["diagnostic.power_tolerance_pcnt"] = f"{outlier_pcnt:g}"
    return out


def collect(level: int, timeout_s: float, precision: str | None = None, outlier_pcnt: float = 0.0) -> dict[str, Any]:
    """Run `dcgmi diag -r level -j [-p diagnostic.precision=..]`; retry each failed flaky plugin once alone."""
    params = diag_parameters(level, precision, outlier_pcnt)
    extra = ["-p", ";".join(f"{k}={v}" for k, v in params.items())] if params else []
    res = run(["dcgmi", "diag", "-r", str(level), "-j", *extra], timeout_s=timeout_s)
    out: dict[str, Any] = {"level": level, "run": res, "parsed": None, "parse_error": None, "retries": [],
                           "parameters": params}
    if res["absent"] or res["timed_out"]:
        return out
    try:
        out["parsed"] = parse_json(res["stdout"])
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        out["parse_error"] = str(exc)
        return out
    for name in failed_tests(out["parsed"]):
        if name.lower() in FLAKY_PLUGINS:
            again = run(["dcgmi", "diag", "-r", name.lower(), "-j"], timeout_s=timeout_s)
            entry: dict[str, Any] = {"plugin": name, "run": again, "parsed": None}
            try:
                entry["parsed"] = parse_json(again["stdout"])
            except ValueError as exc:
                entry["parse_error"] = str(exc)
            out["retries"].append(entry)
    return out
