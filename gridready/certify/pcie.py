"""PCIe endpoint links: every GPU at the catalog's generation and width, every ConnectX/BlueField NIC at its own
capability (management NICs are not judged). A kernel "limited by"
line (every form kernel_log reads: pre-5.3 `8 GT/s x8`, journald and syslog prefixes) counts when the NIC driver
printed it or it names an address lspci lists as a ConnectX/BlueField NIC; other devices' lines are not NIC faults.

Only endpoints are judged, never switch or root ports: a switch port feeding a Gen4 NIC reads "downgraded" and is
fine (ANCH 3.5). Generation drops at idle for power saving, so the current generation is judged from the reading
taken UNDER LOAD (the probe samples NVML and sysfs while host<->device copies run). Without such a reading an idle
generation below the target is a warning, not a pass and not a failure; width never drops at idle, so a narrow
width always fails.
"""

from __future__ import annotations

from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import after_load, by_bus, gpu_label, gpus
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, W = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN


def _first(*vals: Any) -> Any:
    return next((v for v in vals if isinstance(v, int)), None)


def _gpu_link(g: dict[str, Any]) -> dict[str, Any]:
    q, nv, sf, qp = g["query"], g["nvml"].get("pcie") or {}, g["sysfs"] or {}, g["q"].get("pcie") or {}
    load = g["torch"].get("pcie_under_load") or {}
    lnv, lsf = load.get("nvml") or {}, load.get("sysfs") or {}
    return {
        "gen_max": _first(nv.get("gen_device_max"), qp.get("gen_device_max"), sf.get("gen_max"), nv.get("gen_max"),
                          qp.get("gen_max"), q.get("pcie.link.gen.max")),
        "width_max": _first(nv.get("width_max"), sf.get("width_max"), qp.get("width_max"),
                            q.get("pcie.link.width.max")),
        "gen_idle": _first(q.get("pcie.link.gen.current"), qp.get("gen_current"), sf.get("gen_current"),
                           nv.get("gen_current")),
        "width_idle": _first(q.get("pcie.link.width.current"), qp.get("width_current"), sf.get("width_current"),
                             nv.get("width_current")),
        "gen_load": _first(lnv.get("gen_current"), lsf.get("gen_current")),
        "width_load": _first(lnv.get("width_current"), lsf.get("width_current")),
        "replays": qp.get("replays"),
    }


def _gpu_results(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    want_gen, want_w = exp.sku.pcie_gen, exp.sku.pcie_width
    expected = Expected(equals=f"Gen{want_gen} x{want_w}", source=f"catalog: {exp.sku.name}")
    rows = gpus(doc)
    lspci_gpus = [e for e in ((doc.get("system") or {}).get("lspci") or {}).get("endpoints", []) if e["kind"] == "gpu"]
    if not rows and lspci_gpus:  # an lspci capture alone (fixtures)
        rows = [{"index": i, "bus_id": e["bdf"], "query": {}, "nvml": {}, "q": {}, "torch": {},
                 "sysfs": e} for i, e in enumerate(lspci_gpus)]
    if not rows:
        return [exp.result("pcie_link", E, "no GPU PCIe link readings (nvidia-smi, NVML, sysfs all empty)")]
    after = after_load(doc)
    later = by_bus(gpus(after)) if after else None
    out = []
    for g in rows:
        m = _gpu_link(g)
        if later is not None:  # the replay counter again after the load: the run's own count
            m["replays_after"] = ((later.get(g["bus_id"]) or {}).get("q", {}).get("pcie") or {}).get("replays")
        label = gpu_label(g)
        kw: dict[str, Any] = {"gpu": g["index"], "measured": m, "expected": expected,
                              "evidence": "torch.gpus[].pcie_under_load" if m["gen_load"] else "raw.nvidia_smi_q"}
        width_now = m["width_load"] or m["width_idle"]
        gen_now = m["gen_load"]
        if m["gen_max"] is None or width_now is None:
            out.append(exp.result("pcie_link", E, f"{label}: PCIe link generation/width not readable", **kw))
        elif m["gen_max"] < want_gen or (m["width_max"] or 0) < want_w:
            out.append(exp.result("pcie_link", F, f"{label}: endpoint capable of only Gen{m['gen_max']} "
                                  f"x{m['width_max']}, expected Gen{want_gen} x{want_w}", **kw))
        elif width_now < want_w:
            out.append(exp.result("pcie_link", F, f"{label}: link trained at x{width_now}, expected x{want_w}", **kw))
        elif gen_now is not None and gen_now < want_gen:
            out.append(exp.result("pcie_link", F, f"{label}: link at Gen{gen_now} under load, expected Gen{want_gen}",
                                  **kw))
        else:
            out.append(_replays(exp, label, m, kw) or _gen_ok(exp, label, m, want_gen, want_w, kw))
    return out


def _replays(exp: Expectations, label: str, m: dict[str, Any], kw: dict[str, Any]) -> GateResult | None:
    """PCIe replays over the certification run against the per-run limit (DCGM's pcie plugin: max_pcie_replays 80
    "while the plugin runs"); a count since reset is history and only warns. None: nothing to say."""
    limit, before = exp.spec.limits.pcie_replays, m["replays"]
    if before is None:
        return None
    if "replays_after" in m:
        after = m["replays_after"]
        if after is None:
            return exp.result("pcie_link", E, f"{label}: PCIe replay counter not readable after the load", **kw)
        delta = after - before
        if delta > limit:
            return exp.result("pcie_link", F, f"{label}: {delta} PCIe replays during the certification run "
                              f"(limit {limit}; {after} since reset)", **kw)
        if after > limit:
            return exp.result("pcie_link", W, f"{label}: {after} PCIe replays since reset, {delta} during this run "
                              f"(limit {limit} per run)", **kw)
        return None
    if before > limit:
        return exp.result("pcie_link", W, f"{label}: {before} PCIe replays since reset (limit {limit} per run; no "
                          "snapshot after the load to count this run's)", **kw)
    return None


def _gen_ok(exp: Expectations, label: str, m: dict[str, Any], want_gen: int, want_w: int,
            kw: dict[str, Any]) -> GateResult:
    if m["gen_load"] is not None:
        return exp.result("pcie_link", P, f"{label}: Gen{m['gen_load']} x{m['width_load'] or m['width_idle']} "
                          "under load", **kw)
    if m["gen_idle"] is not None and m["gen_idle"] >= want_gen:
        return exp.result("pcie_link", P, f"{label}: Gen{m['gen_idle']} x{m['width_idle']}", **kw)
    return exp.result("pcie_link", W, f"{label}: Gen{m['gen_idle']} at idle and no reading under load "
                      f"(capable of Gen{m['gen_max']}); run with torch to confirm Gen{want_gen}", **kw)


NIC_DRIVERS = ("mlx5_core",)  # ConnectX/BlueField (mlx5); the driver name leads its kernel lines


def _fabric_nic(e: dict[str, Any]) -> bool:
    """NVIDIA/Mellanox ConnectX and BlueField: the NICs GPU traffic rides on."""
    desc = str(e.get("desc") or "")
    return e.get("vendor") == "0x15b3" or any(k in desc for k in ("Mellanox", "ConnectX", "BlueField"))


def _nic_results(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    host = doc.get("system") or {}
    eps = [e for e in host.get("pcie_endpoints") or [] if e.get("kind") == "nic"]
    eps += [e for e in (host.get("lspci") or {}).get("endpoints", []) if e["kind"] == "nic"
            and e["bdf"] not in {x["bdf"] for x in eps}]
    limited = {x["pci"]: x for x in (doc.get("kernel_log") or {}).get("pcie_limited", [])}
    out, judged = [], set()
    for e in eps:
        if e.get("gen_max") is None or e.get("width_max") is None:
            continue  # a virtual NIC (virtio) has no PCIe link attributes
        if not _fabric_nic(e):
            continue  # management LOMs (a BMC's 1 GbE NIC often trains x1 of x2) carry no GPU traffic
        judged.add(e["bdf"])
        m = {k: e.get(k) for k in ("gen_current", "gen_max", "width_current", "width_max")}
        kw: dict[str, Any] = {"hca": e["bdf"], "measured": m, "unit": None, "evidence": f"system.{e['source']}",
                              "expected": Expected(equals=f"Gen{e['gen_max']} x{e['width_max']}",
                                                   source="the endpoint's own capability")}
        if (e.get("gen_current") or 0) < e["gen_max"] or (e.get("width_current") or 0) < e["width_max"]:
            out.append(exp.result("pcie_link", F, f"NIC {e['bdf']}: link at Gen{e.get('gen_current')} "
                                  f"x{e.get('width_current')}, capable of Gen{e['gen_max']} x{e['width_max']}", **kw))
        else:
            out.append(exp.result("pcie_link", P, f"NIC {e['bdf']}: Gen{e['gen_current']} x{e['width_current']}",
                                  **kw))
    for bdf, x in limited.items():
        # the NIC driver's own line (mlx5_core calls pcie_print_link_status); the kernel's enumeration lines ("pci
        # ADDR: ...") also name BMC VGA chips, NVMe drives and GPUs idling at Gen1, which are no NIC (imbue's
        # health_checks.py matches mlx5_core lines only); an endpoint with link readings is judged on them above.
        # The kernel's own enumeration line ("pci ADDR: ...") counts where lspci names that address a ConnectX NIC.
        fabric = {e["bdf"].lower() for e in eps if _fabric_nic(e)}
        if bdf not in judged and (x.get("driver") in NIC_DRIVERS or bdf in fabric):
            out.append(exp.result("pcie_link", F, f"NIC {bdf}: kernel reports bandwidth limited by {x['limited_by']} "
                                  f"at {x['at']}", hca=bdf, measured=x["limited_by"], evidence="raw.kernel_log"))
    return out


def pcie_link(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    return _gpu_results(doc, exp) + _nic_results(doc, exp)
