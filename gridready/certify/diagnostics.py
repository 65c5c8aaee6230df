"""DCGM diagnostics (`dcgmi diag -r N -j`, 3.x and 4.x JSON): the exit code AND every plugin's status.

A required plugin that SKIPs fails (DCGM#284/#55: tests skip when the SKU is not allowed); a known-flaky plugin
(nvbandwidth, DCGM#272) that failed in the run but passed when retried alone warns instead of failing.

Level 4 as DCGM 4.5/4.6 runs it (nvvs/diag-skus.yaml.in): `memtest` on every SKU and `pulse_test` where the SKU
enables it (0x2330 H100 SXM, 0x2335 H200); a level-4 run whose JSON lacks one of them did not run it: an error, never
a pass. Every result says which plugins ran (`measured.ran`) and with which `-p` parameters (the diagnostic plugin's
precision and, when the spec sets `dcgm_outlier_tolerance_pcnt`, its cross-GPU clocks/power tolerances, DCGM 4.5+).
"""

from __future__ import annotations

import re
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN

# plugin (normalised name) -> lowest level that runs it; EUD/nccl_tests/rist are optional and never required
REQUIRED_AT = {"software": 1, "memory": 2, "pcie": 2, "diagnostic": 3, "targeted_stress": 3, "targeted_power": 3,
               "memory_bandwidth": 3, "memtest": 4, "pulse_test": 4}
_ALIASES = {"gpu_memory": "memory", "sm_stress": "targeted_stress", "memory_test": "memtest", "pulse": "pulse_test"}
# level-4 plugins that must appear in the JSON, and the SKUs (PCI device ids) they run on (None: every SKU)
LEVEL4_PLUGINS = {"memtest": None, "pulse_test": {"0x2330", "0x2335"}}
_SOFTWARE_3X = {"denylist", "nvml_library", "cuda_main_library", "permissions_and_os_blocks", "persistence_mode",
                "environment_variables", "page_retirement/row_remap", "graphics_processes", "inforom",
                "fabric_manager", "cuda_toolkit_libraries", "permissions_and_os-related_blocks", "deployment"}


def plugin_name(name: str) -> str:
    n = re.sub(r"\s+", "_", (name or "").strip().lower())
    if n in _SOFTWARE_3X:
        return "software"
    return _ALIASES.get(n, n)


def _where(res: list[dict[str, Any]]) -> str:
    gpus = sorted({g for r in res for g in r["gpus"]})
    return f" on GPU {', '.join(map(str, gpus))}" if gpus else ""


def dcgm(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    d = doc.get("dcgm") or {}
    level = exp.spec.effective_dcgm_level()
    expected = Expected(equals=f"level {level}: every plugin pass", source="spec")
    if not d.get("present"):
        return [exp.result("dcgm", E, "dcgmi is not installed on this node", expected=expected,
                           evidence="tools.dcgmi")]
    if d.get("timed_out"):
        return [exp.result("dcgm", E, f"dcgmi diag -r {d.get('level')} timed out", expected=expected,
                           evidence="raw.dcgmi_diag")]
    if d.get("parse_error") or not d.get("parsed"):
        return [exp.result("dcgm", E, f"dcgmi diag output not parseable: {d.get('parse_error')} (rc={d.get('rc')})",
                           expected=expected, evidence="raw.dcgmi_diag")]
    parsed = d["parsed"]
    retried_ok = {plugin_name(r["plugin"]) for r in d.get("retries", []) if r.get("rc") == 0 and r.get("parsed")
                  and not any(res["status"] == "fail" for t in r["parsed"]["tests"] for res in t["results"])}
    fails: list[str] = []
    skips: list[str] = []
    warns: list[str] = []
    flaky: list[str] = []
    for t in parsed["tests"]:
        name, res = plugin_name(t["name"]), t["results"]
        if any(r["status"] == "fail" for r in res) or t.get("summary") == "fail":
            bad = [r for r in res if r["status"] == "fail"]
            msg = f"{t['name']} failed{_where(bad)}" + (f": {bad[0]['warnings'][0][:200]}"
                                                        if bad and bad[0]["warnings"] else "")
            (flaky if name in retried_ok else fails).append(msg)
        elif res and all(r["status"] == "skip" for r in res) and REQUIRED_AT.get(name, 99) <= (d.get("level") or level):
            skips.append(f"required plugin {t['name']} skipped")
        elif any(r["status"] == "warn" for r in res):
            warns.append(f"{t['name']} warned{_where([r for r in res if r['status'] == 'warn'])}")
    ran = sorted({plugin_name(t["name"]) for t in parsed["tests"]})
    if (d.get("level") or 0) >= 4:
        for plugin, skus in LEVEL4_PLUGINS.items():
            if plugin not in ran and (skus is None or exp.sku.device_id in skus):
                skips.append(f"level-4 plugin {plugin} did not run (not in the JSON)")
    prec = (d.get("parameters") or {}).get("diagnostic.precision")
    m = {"level": d.get("level"), "rc": d.get("rc"), "schema": parsed.get("schema"), "version": parsed.get("version"),
         "diagnostic_precision": _precision_names(prec) if prec else "DCGM default (FP16+FP32, FP64 where fast)",
         "tests": len(parsed["tests"]), "failed": fails, "skipped_required": skips, "flaky_passed_alone": flaky,
         "ran": ran, "parameters": d.get("parameters") or {}}
    kw: dict[str, Any] = {"measured": m, "expected": expected, "evidence": "raw.dcgmi_diag"}
    if fails or skips:
        return [exp.result("dcgm", F, f"DCGM level {d.get('level')}: " + "; ".join(fails + skips), **kw)]
    if d.get("rc") not in (0, None) and not flaky:
        code = " (DCGM_ST_NVVS_ERROR)" if d.get("rc") == 226 else ""
        return [exp.result("dcgm", F, f"dcgmi diag exited {d.get('rc')}{code} with no failed plugin listed", **kw)]
    if (d.get("level") or 0) < level:
        return [exp.result("dcgm", E, f"DCGM ran at level {d.get('level')}, the spec asks for {level}", **kw)]
    if flaky or warns:
        return [exp.result("dcgm", W, f"DCGM level {d.get('level')} passed; " + "; ".join(
            [f"{x} (passed when retried alone)" for x in flaky] + warns), **kw)]
    how = f"; diagnostic plugin at {m['diagnostic_precision']}" if (d.get("level") or 0) >= 3 else ""
    tol = (d.get("parameters") or {}).get("diagnostic.clocks_tolerance_pcnt")
    how += f", cross-GPU clocks/power tolerance {tol}%" if tol else ""
    listed = f"; ran {', '.join(ran)}" if (d.get("level") or 0) >= 3 else ""
    return [exp.result("dcgm", P, f"DCGM level {d.get('level')}: {len(parsed['tests'])} tests pass"
                       f" ({parsed.get('schema')} schema){how}{listed}", **kw)]


def _precision_names(letters: str) -> str:
    names = {"h": "FP16 (tensor cores)", "s": "FP32", "d": "FP64"}
    return " + ".join(names[c] for c in letters.lower() if c in names)
