"""NVLink: the catalog's link count active per GPU (NOT always 18: H100 NVL/PCIe have 12, ANCH 3.4), each at the
catalog's speed, and no recovery error during the certification run; CRC+replay counts of the run above the limit
fail. The counters run since the GPU's reset, so they are judged over the probe's window (idle snapshot -> snapshot
after the load), as DCGM's pcie plugin fails on any NVLink recovery error while it runs; counts since reset (or
without a window: an older probe) only warn."""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import after_load, by_bus, gpu_label, gpus
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def _errors(doc: dict[str, Any], g: dict[str, Any]) -> dict[str, int] | None:
    """Sum of counters over links: nvidia-smi nvlink -e first, NVML second (its CRC_DATA counter is not reliable
    on Hopper: the real H200 read 8 there while nvidia-smi printed 0 CRC errors)."""
    per = ((doc.get("nvidia_smi") or {}).get("nvlink_errors") or {}).get(str(g["index"]))
    tot = {"replay": 0, "recovery": 0, "crc": 0}
    if per:
        for counters in per.values():
            for k, v in counters.items():
                if not isinstance(v, (int, float)):
                    continue
                key = "replay" if "replay" in k.lower() else "recovery" if "recovery" in k.lower() else (
                    "crc" if "crc" in k.lower() else None)
                if key:
                    tot[key] += int(v)
        return tot
    links = (g["nvml"].get("nvlink") or {}).get("links") or {}
    if not links:
        return None
    for link in links.values():
        e = link.get("errors") or {}
        tot["replay"] += int(e.get("replay") or 0)
        tot["recovery"] += int(e.get("recovery") or 0)
        tot["crc"] += int(e.get("crc_flit") or 0)
    return tot


def nvlink(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    shape = exp.shape
    if exp.sku.nvlink_links == 0:
        return [exp.not_applicable("nvlink", f"{exp.sku.name} has no NVLink")]
    if shape is None:
        return [exp.shape_error("nvlink")]
    want = shape.nvlink_links
    status = ((doc.get("nvidia_smi") or {}).get("nvlink_status") or {}).get("gpus") or {}
    if want == 0:
        exposed = {i: [n for n, sp in st["links"].items() if sp] for i, st in status.items()}
        if any(exposed.values()):  # the shape exposes none: links that are up mean the spec names the wrong shape
            return [exp.result("nvlink", F, f"a {shape.label} node exposes no NVLinks, yet GPUs "
                               f"{', '.join(i for i, v in exposed.items() if v)} show active links: wrong shape in "
                               "the spec (gpus_per_node/platform)", measured=exposed,
                               evidence="raw.nvidia_smi_nvlink_s")]
        return [exp.not_applicable("nvlink", f"a {shape.label} {exp.sku.name} node exposes no NVLinks "
                                   f"({shape.source})")]
    rows = gpus(doc) or [{"index": int(i), "bus_id": None, "nvml": {}} for i in sorted(status, key=int)]
    if not rows:
        return [exp.result("nvlink", E, "no GPUs to read NVLink state from")]
    expected = Expected(equals={"active_links": want, "gbps_per_link": exp.sku.nvlink_link_gbps},
                        source=f"catalog: {exp.sku.name} {shape.label}")
    after = after_load(doc)
    later = by_bus(gpus(after)) if after else {}
    out = []
    for g in rows:
        label = gpu_label(g)
        st = status.get(str(g["index"]))
        nv_links = (g["nvml"].get("nvlink") or {}).get("links") or {}
        if st is not None:
            speeds = st["links"]
            active = [s for s in speeds.values() if s]
            slow = [f"link {n} {s} GB/s" for n, s in speeds.items() if s and s < exp.sku.nvlink_link_gbps * 0.98]
            inactive = [n for n, s in speeds.items() if not s]
        elif nv_links:
            active = [n for n, v in nv_links.items() if v.get("active")]
            slow, inactive = [], [n for n, v in nv_links.items() if not v.get("active")]
        else:
            out.append(exp.result("nvlink", E, f"{label}: NVLink state not readable (nvidia-smi nvlink -s / NVML)",
                                  gpu=g["index"], expected=expected, evidence="raw.nvidia_smi_nvlink_s"))
            continue
        errs = _errors(doc, g)
        # the snapshot after the load holds nvidia-smi only: the idle NVML counters must not stand in for it
        errs_after = _errors(after, {**(later.get(g["bus_id"]) or g), "nvml": {}}) if after else None
        run = {k: errs_after[k] - errs[k] for k in errs} if errs and errs_after else None
        m = {"active_links": len(active), "inactive": inactive, "slow": slow, "errors": errs,
             "errors_after_load": errs_after, "errors_during_run": run}
        kw: dict[str, Any] = {"gpu": g["index"], "measured": m, "expected": expected,
                              "evidence": "raw.nvidia_smi_nvlink_s"}
        lim = exp.spec.limits.nvlink_crc_replay
        if st is not None and st.get("all_inactive"):
            out.append(exp.result("nvlink", F, f"{label}: all NVLinks inactive", **kw))
        elif len(active) < want:
            out.append(exp.result("nvlink", F, f"{label}: {len(active)} of {want} NVLinks active"
                                  + (f" (inactive: links {', '.join(inactive)})" if inactive else ""), **kw))
        elif slow:
            out.append(exp.result("nvlink", F, f"{label}: slow links " + ", ".join(slow), **kw))
        elif errs is None or (after is not None and run is None):
            out.append(exp.result("nvlink", E, f"{label}: NVLink error counters not readable"
                                  + (" after the load" if errs is not None else ""), **kw))
        elif run is not None and (run["recovery"] > 0 or run["crc"] + run["replay"] > lim):
            out.append(exp.result("nvlink", F, f"{label}: NVLink errors during the certification run "
                                  f"recovery={run['recovery']} crc={run['crc']} replay={run['replay']} (limit {lim} "
                                  "CRC+replay, 0 recovery)", **{**kw, "evidence": "raw.nvidia_smi_nvlink_e"}))
        elif (now := errs_after or errs)["recovery"] + now["crc"] + now["replay"] > 0:
            out.append(exp.result("nvlink", W, f"{label}: {len(active)} links up; since reset recovery="
                                  f"{now['recovery']} crc={now['crc']} replay={now['replay']}"
                                  + (", none during this run" if run is not None and not any(run.values()) else
                                     " (no snapshot after the load to count this run's)" if run is None else ""),
                                  **kw))
        else:
            out.append(exp.result("nvlink", P, f"{label}: {len(active)} of {want} links at "
                                  f"{exp.sku.nvlink_link_gbps:g} GB/s, no errors", **kw))
    return out
