"""HCA gates of one node: pure functions of the probe's `hca` data (gridready/probe/hca.py) and the spec.

Gate names: hca_present, hca_port_state, hca_phys_state, hca_rate, hca_link_layer, hca_counters, hca_firmware,
hca_pcie_link, hca_gdr_bw, gpu_nic_rail, roce_gid, roce_mtu, roce_pfc, roce_ecn, ibstat.
Each failure names the port (`hca` = mlx5_N, reason says `mlx5_N port 1`). Missing data is `error`, never `pass`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.probe.hca import nearest_nics
from gridready.spec import Nic, NodeGroup
from gridready.spec.fabric import FabricSettings

S = GateStatus
LINK_LAYER = {"infiniband": "InfiniBand", "roce": "Ethernet", "ethernet": "Ethernet"}
SATURATED = {"link_downed": 255, "link_error_recovery": 255, "symbol_error": 65535}  # 8/16-bit IB counters


def _gate(gate: str, node: str, status: GateStatus, reason: str, **kw: Any) -> GateResult:
    return GateResult(gate=gate, node=node, status=status, reason=reason, **kw)


def _state_word(value: str | None) -> str | None:
    """sysfs `4: ACTIVE` / ibstat `Active` -> `ACTIVE`; `5: LinkUp` -> `LINKUP`."""
    if value is None:
        return None
    return value.split(":", 1)[-1].strip().replace(" ", "").upper() or None  # an empty file is unreadable


def _rate_gbps(value: str | None) -> float | None:
    """sysfs `400 Gb/sec (4X NDR)` / ibstat `400` -> 400.0."""
    m = re.match(r"\s*([\d.]+)", value or "")
    return float(m.group(1)) if m else None


def _port_view(data: dict[str, Any], hca: str) -> tuple[dict[str, Any] | None, str, str]:
    """(state/phys/rate/link_layer of port 1, port name, evidence key) from sysfs, else from ibstat."""
    dev = (data.get("sysfs") or {}).get(hca)
    if dev and dev.get("ports"):
        pname = "1" if "1" in dev["ports"] else sorted(dev["ports"])[0]
        p = dev["ports"][pname]
        view = {k: p.get(k) for k in ("state", "phys_state", "rate", "link_layer")}
        view.update(firmware=dev.get("fw_ver"), ca_type=dev.get("hca_type"))
        return view, pname, f"hca.sysfs.{hca}.ports.{pname}"
    ca = (((data.get("ibstat") or {}).get("parsed") or {}).get("cas") or {}).get(hca)
    if ca and ca.get("ports"):
        pname = "1" if "1" in ca["ports"] else sorted(ca["ports"])[0]
        p = ca["ports"][pname]
        view = {
            "state": p.get("state"),
            "phys_state": p.get("physical_state"),
            "rate": p.get("rate"),
            "link_layer": p.get("link_layer"),
            "firmware": ca.get("firmware"),
            "ca_type": ca.get("ca_type"),
        }
        return view, pname, f"hca.ibstat.{hca}.port{pname}"
    return None, "1", "hca"


def port_gates(node: str, nic: Nic, data: dict[str, Any]) -> list[GateResult]:
    """Presence, state, physical state, rate and link layer of one spec NIC."""
    view, port, ev = _port_view(data, nic.name)
    where = f"{nic.name} port {port}"
    kw = {"hca": nic.name, "evidence": ev}
    if view is None:
        panic = ((data.get("ibstat") or {}).get("parsed") or {}).get("errors") or []
        hint = f" (ibstat: {panic[0]})" if panic else ""
        return [_gate("hca_present", node, S.FAIL, f"{nic.name} is in the spec but not on the node{hint}", **kw)]
    out = [_gate("hca_present", node, S.PASS, f"{nic.name} present", **kw)]
    state = _state_word(view["state"])
    out.append(_gate(
        "hca_port_state", node, S.PASS if state == "ACTIVE" else (S.ERROR if state is None else S.FAIL),
        f"{where} state {view['state'] or 'unreadable'}" + ("" if state == "ACTIVE" else ", expected ACTIVE"),
        measured=view["state"], expected=Expected(equals="ACTIVE", source="spec"), **kw,
    ))
    phys = _state_word(view["phys_state"])
    out.append(_gate(
        "hca_phys_state", node, S.PASS if phys == "LINKUP" else (S.ERROR if phys is None else S.FAIL),
        f"{where} physical state {view['phys_state'] or 'unreadable'}"
        + ("" if phys == "LINKUP" else ", expected LinkUp"),
        measured=view["phys_state"], expected=Expected(equals="LinkUp", source="spec"), **kw,
    ))
    rate = _rate_gbps(view["rate"])
    rstatus = S.ERROR if rate is None else (S.PASS if rate >= nic.rate_gbps else S.FAIL)
    out.append(_gate(
        "hca_rate", node, rstatus, f"{where} rate {view['rate'] or 'unreadable'} (spec {nic.rate_gbps} Gb/s)",
        measured=rate, expected=Expected(floor=nic.rate_gbps, source="spec"), unit="Gb/s", **kw,
    ))
    want = LINK_LAYER[nic.kind]
    layer = (view["link_layer"] or "").strip() or None
    out.append(_gate(
        "hca_link_layer", node, S.ERROR if layer is None else (S.PASS if layer == want else S.FAIL),
        f"{where} link layer {layer or 'unreadable'}" + ("" if layer == want else f", spec says {want}"),
        measured=layer, expected=Expected(equals=want, source="spec"), **kw,
    ))
    return out


def counter_gate(
    node: str, hca: str, before: dict[str, Any] | None, after: dict[str, Any] | None, settings: FabricSettings
) -> GateResult:
    """Error counters of port 1 must not grow past their limits between two snapshots (nor sit saturated)."""
    kw = {"hca": hca, "evidence": f"hca.counters.{hca}"}
    b = ((before or {}).get("counters") or {}).get(hca)
    a = ((after or {}).get("counters") or {}).get(hca)
    if not a or not b:
        return _gate("hca_counters", node, S.ERROR, f"{hca}: no counter snapshots before and after the run", **kw)
    port = "1" if "1" in a else sorted(a)[0]
    pa, pb = a.get(port, {}), b.get(port, {})
    deltas = {c: pa[c] - pb[c] for c in settings.counter_limits if c in pa and c in pb}
    over = {c: d for c, d in deltas.items() if d > settings.counter_limits[c]}
    sat = sorted(c for c, top in SATURATED.items() if pa.get(c) == top)
    if not deltas:
        return _gate("hca_counters", node, S.ERROR, f"{hca} port {port}: no error counters readable", **kw)
    if over or sat:
        parts = [f"{c} +{d} (limit {settings.counter_limits[c]})" for c, d in sorted(over.items())]
        parts += [f"{c} saturated at {pa[c]} (flaps can no longer be seen; clear it after repair)" for c in sat]
        return _gate(
            "hca_counters", node, S.FAIL, f"{hca} port {port}: " + "; ".join(parts),
            measured=deltas | {f"{c}_total": pa[c] for c in sat}, expected=Expected(ceiling=0, source="spec"), **kw,
        )
    return _gate("hca_counters", node, S.PASS, f"{hca} port {port}: error counters steady over the run",
                 measured=deltas, **kw)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def firmware_gate(node: str, nics: Iterable[Nic], data: dict[str, Any], settings: FabricSettings) -> GateResult:
    """Firmware at least the spec's minimum per CA type; without one, the same firmware across a CA type."""
    seen: dict[str, dict[str, str]] = {}
    for nic in nics:
        view, _, _ = _port_view(data, nic.name)
        if view and view.get("firmware"):
            seen.setdefault(view.get("ca_type") or "?", {})[nic.name] = view["firmware"]
    if not seen:
        return _gate("hca_firmware", node, S.ERROR, "no HCA firmware version readable", evidence="hca.sysfs")
    low = [
        f"{h} {fw} < {settings.firmware[t]}"
        for t, hs in seen.items() if t in settings.firmware
        for h, fw in hs.items() if _version(fw) < _version(settings.firmware[t])
    ]
    mixed = [f"{t}: {_listed(sorted(set(hs.values())))}" for t, hs in seen.items() if len(set(hs.values())) > 1]
    measured = {h: fw for hs in seen.values() for h, fw in hs.items()}
    if low:
        return _gate("hca_firmware", node, S.FAIL, "firmware below the spec: " + ", ".join(low), measured=measured,
                     expected=Expected(floor=None, equals=settings.firmware, source="spec"))
    if mixed:
        return _gate("hca_firmware", node, S.WARN, "mixed firmware within a CA type: " + "; ".join(mixed),
                     measured=measured)
    return _gate("hca_firmware", node, S.PASS, "HCA firmware consistent"
                 + (" and at the spec's minimum" if settings.firmware else ""), measured=measured)


def _gts(speed: str | None) -> float | None:
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed or "")
    return float(m.group(1)) if m else None


GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def pcie_gate(node: str, nic: Nic, data: dict[str, Any], settings: FabricSettings) -> GateResult:
    """The HCA's own PCIe endpoint link (not the switch port above it) at the expected speed and width."""
    pcie = ((data.get("sysfs") or {}).get(nic.name) or {}).get("pcie") or {}
    speed, width = _gts(pcie.get("current_link_speed")), pcie.get("current_link_width")
    kw = {"hca": nic.name, "evidence": f"hca.sysfs.{nic.name}.pcie"}
    if speed is None or not width:
        return _gate("hca_pcie_link", node, S.ERROR, f"{nic.name}: PCIe link speed/width not readable", **kw)
    want_gts, want_w = GEN_GTS.get(settings.hca_pcie_gen, 32.0), settings.hca_pcie_width
    ok = speed >= want_gts and int(width) >= want_w
    return _gate(
        "hca_pcie_link", node, S.PASS if ok else S.FAIL,
        f"{nic.name} PCIe {speed:g} GT/s x{width}" + ("" if ok else f", expected {want_gts:g} GT/s x{want_w}"),
        measured=f"{speed:g}GT/s x{width}", expected=Expected(equals=f"{want_gts:g}GT/s x{want_w}", source="spec"),
        **kw,
    )


def gdr_gate(node: str, nic: Nic, data: dict[str, Any], settings: FabricSettings,
             floor_gbits: float | None) -> GateResult:
    """ib_write_bw (--use_cuda) average against the floor; skipped (not required) where perftest is absent."""
    kw = {"hca": nic.name, "evidence": f"hca.ib_write_bw.{nic.name}", "unit": "Gb/s"}
    floor = floor_gbits if floor_gbits is not None else round(settings.hca_bw_fraction * nic.rate_gbps, 1)
    src = "spec floors.hca_write_bw_gbits" if floor_gbits is not None else f"{settings.hca_bw_fraction:.0%} of rate"
    exp = Expected(floor=floor, source=src)
    runs = data.get("ib_write_bw")
    if runs is None:
        return _gate("hca_gdr_bw", node, S.SKIPPED, f"{nic.name}: GDR bandwidth not measured", required=False,
                     expected=exp, **kw)
    r = runs.get(nic.name)
    if r is None:
        return _gate("hca_gdr_bw", node, S.ERROR, f"{nic.name}: no ib_write_bw run", expected=exp, **kw)
    if r.get("rc") is None and "not found" in (r.get("error") or ""):
        return _gate("hca_gdr_bw", node, S.SKIPPED, f"{nic.name}: {r['error']}", required=False, expected=exp, **kw)
    bw = (r.get("parsed") or {}).get("avg_gbits")
    if bw is None:
        why = r.get("error") or f"exit {r.get('rc')}, no result line"
        return _gate("hca_gdr_bw", node, S.ERROR, f"{nic.name}: ib_write_bw failed ({why})", expected=exp, **kw)
    cuda = f" GPU{r['gpu']}" if r.get("gpu") is not None else " (host memory)"
    return _gate(
        "hca_gdr_bw", node, S.PASS if bw >= floor else S.FAIL,
        f"{nic.name}{cuda} ib_write_bw {bw:g} Gb/s vs floor {floor:g} ({bw / nic.rate_gbps:.0%} of rate)",
        measured=bw, expected=exp, **kw,
    )


def rail_gate(node: str, group: NodeGroup, data: dict[str, Any], settings: FabricSettings) -> GateResult:
    """Each GPU's nearest NIC in `nvidia-smi topo -m`: the spec's rail NIC, or at least one behind its switch."""
    topo = (data.get("topo") or {}).get("parsed")
    kw = {"evidence": "hca.topo"}
    if not settings.rail_alignment:
        return _gate("gpu_nic_rail", node, S.SKIPPED, "rail alignment not checked (spec)", required=False, **kw)
    if not topo or not topo.get("links"):
        return _gate("gpu_nic_rail", node, S.ERROR, "nvidia-smi topo -m not readable", **kw)
    near = nearest_nics(topo)
    rails = {n.rail: n.name for n in group.nics if n.rail is not None and n.kind != "ethernet"}
    bad: list[str] = []
    for gpu in range(group.gpus_per_node):
        got = near.get(gpu)
        if rails:
            want = rails.get(gpu)
            if want is not None and (got is None or got["nic"] != want):
                bad.append(f"GPU{gpu} nearest {got['nic'] + ' ' + got['link'] if got else 'none'}, rail NIC {want}")
        elif got is None or got["link"] not in ("PIX", "PXB"):
            bad.append(f"GPU{gpu} has no NIC behind its PCIe switch ({got['link'] if got else 'none'})")
    measured = {f"GPU{g}": f"{v['nic']} {v['link']}" for g, v in sorted(near.items())}
    if bad:
        return _gate("gpu_nic_rail", node, S.FAIL if rails else S.WARN, "; ".join(bad), measured=measured, **kw)
    return _gate("gpu_nic_rail", node, S.PASS, "every GPU is nearest to its rail NIC", measured=measured, **kw)


def roce_gates(node: str, nic: Nic, data: dict[str, Any], settings: FabricSettings) -> list[GateResult]:
    """GID index and type, MTU, PFC and ECN priorities for a RoCE NIC (only what the spec names)."""
    out: list[GateResult] = []
    dev = (data.get("sysfs") or {}).get(nic.name) or {}
    port = (dev.get("ports") or {}).get("1") or {}
    netdev = nic.netdev or next(iter(dev.get("netdevs") or []), None)
    nd = (data.get("netdevs") or {}).get(netdev or "", {})
    kw = {"hca": nic.name}
    if nic.gid_index is not None:
        gid = (port.get("gids") or {}).get(str(nic.gid_index))
        gtype = (port.get("gid_types") or {}).get(str(nic.gid_index))
        want = settings.roce.gid_type
        ok = gid is not None and (want is None or gtype == want)
        out.append(_gate(
            "roce_gid", node, S.PASS if ok else S.FAIL,
            f"{nic.name} GID[{nic.gid_index}] " + (f"{gid} {gtype or ''}".strip() if gid else "empty")
            + ("" if ok else f", expected a {want or ''} GID".replace("  ", " ")),
            measured={"gid": gid, "type": gtype}, expected=Expected(equals=want, source="spec"),
            evidence=f"hca.sysfs.{nic.name}.ports.1.gids", **kw,
        ))
    if nic.mtu is not None:
        mtu = nd.get("mtu")
        out.append(_gate(
            "roce_mtu", node, S.ERROR if mtu is None else (S.PASS if mtu >= nic.mtu else S.FAIL),
            f"{nic.name} ({netdev}) MTU {mtu if mtu is not None else 'unreadable'} (spec {nic.mtu})",
            measured=mtu, expected=Expected(floor=nic.mtu, source="spec"), evidence=f"hca.netdevs.{netdev}", **kw,
        ))
    if settings.roce.pfc_priorities is not None:
        parsed = ((data.get("qos") or {}).get(netdev or "") or {}).get("parsed")
        got = None if parsed is None else sorted(parsed.get("pfc_enabled") or [])
        want_p = sorted(settings.roce.pfc_priorities)
        out.append(_gate(
            "roce_pfc", node, S.ERROR if got is None else (S.PASS if got == want_p else S.FAIL),
            f"{nic.name} ({netdev}) PFC priorities {_listed(got) if got is not None else 'unreadable (mlnx_qos)'} "
            f"(spec {_listed(want_p)})",
            measured=got, expected=Expected(equals=want_p, source="spec"), evidence=f"hca.qos.{netdev}", **kw,
        ))
    if settings.roce.ecn_priorities is not None:
        out.append(_ecn_gate(node, nic, netdev, nd, sorted(settings.roce.ecn_priorities)))
    if settings.roce.trust is not None:
        parsed = ((data.get("qos") or {}).get(netdev or "") or {}).get("parsed")
        got_t = None if parsed is None else parsed.get("trust")
        out.append(_gate(
            "roce_trust", node, S.ERROR if got_t is None else (S.PASS if got_t == settings.roce.trust else S.FAIL),
            f"{nic.name} ({netdev}) QoS trust {got_t or 'unreadable (mlnx_qos)'} (spec {settings.roce.trust})",
            measured=got_t, expected=Expected(equals=settings.roce.trust, source="spec"),
            evidence=f"hca.qos.{netdev}", **kw,
        ))
    return out


def _listed(values: list[Any]) -> str:
    """Priorities or versions in a reason: `3, 4`, `none` when empty (never a Python list)."""
    return ", ".join(map(str, values)) or "none"


def _ecn_gate(node: str, nic: Nic, netdev: str | None, nd: dict[str, Any], want: list[int]) -> GateResult:
    """DCQCN needs ECN at both ends: roce_np (marks CNPs) and roce_rp (slows the sender) on the RoCE priorities.
    A kernel without roce_rp files (older mlx5) is judged on roce_np alone."""
    np_ = nd.get("ecn_roce_np") or {}
    rp = nd.get("ecn_roce_rp") or {}
    got_np = sorted(int(p) for p, v in np_.items() if v == 1) if np_ else None
    got_rp = sorted(int(p) for p, v in rp.items() if v == 1) if rp else None
    missing = sorted((set(want) - set(got_np or [])) | (set(want) - set(got_rp) if got_rp is not None else set()))
    status = S.ERROR if got_np is None else (S.PASS if not missing else S.FAIL)
    reason = (f"{nic.name} ({netdev}) ECN roce_np {_listed(got_np) if got_np is not None else 'unreadable'}, "
              f"roce_rp {_listed(got_rp) if got_rp is not None else 'not exposed'} (spec {_listed(want)})")
    return _gate("roce_ecn", node, status, reason, measured={"roce_np": got_np, "roce_rp": got_rp},
                 expected=Expected(equals=want, source="spec"), evidence=f"hca.netdevs.{netdev}", hca=nic.name)


def ibstat_gate(node: str, data: dict[str, Any]) -> GateResult | None:
    """`ibstat` itself failing (ibpanic, exit 255) fails the node even with partial output; one that did not complete
    (a timeout) is an error; absent: no gate."""
    ib = data.get("ibstat")
    if not ib or (ib.get("rc") is None and "not found" in (ib.get("error") or "")):
        return None
    errs = (ib.get("parsed") or {}).get("errors") or []
    if ib.get("rc") not in (0, None) or errs:
        return _gate("ibstat", node, S.FAIL, f"ibstat exit {ib.get('rc')}: {errs[0] if errs else ib.get('error')}",
                     evidence="hca.ibstat")
    if ib.get("rc") is None and ib.get("error"):  # timed out or could not start: nothing known, not a pass
        return _gate("ibstat", node, S.ERROR, f"ibstat did not complete: {ib['error']}", evidence="hca.ibstat")
    return None


def judge_hcas(
    node: str,
    group: NodeGroup,
    data: dict[str, Any] | None,
    settings: FabricSettings | None = None,
    floor_gbits: float | None = None,
    counters_before: dict[str, Any] | None = None,
    counters_after: dict[str, Any] | None = None,
) -> list[GateResult]:
    """All HCA gates of one node. `data` is the probe's `hca` dict; counter snapshots default to the probe's."""
    settings = settings or FabricSettings()
    rdma = [n for n in group.nics if n.kind != "ethernet"]
    if not group.nics:
        return []
    if not data:
        return [_gate("hca_present", node, S.ERROR, "no HCA measurements from the probe", evidence="hca")]
    out: list[GateResult] = []
    if (g := ibstat_gate(node, data)) is not None:
        out.append(g)
    before = counters_before or data.get("counters_before")
    after = counters_after or data.get("counters_after")
    for nic in group.nics:
        ports = port_gates(node, nic, data)
        out += ports
        if nic.kind == "ethernet" or ports[0].status is not S.PASS:
            continue
        out.append(counter_gate(node, nic.name, before, after, settings))
        out.append(pcie_gate(node, nic, data, settings))
        out.append(gdr_gate(node, nic, data, settings, floor_gbits))
        if nic.kind == "roce":
            out += roce_gates(node, nic, data, settings)
    if rdma:
        out.append(firmware_gate(node, rdma, data, settings))
        if group.gpudirect_rdma:
            out.append(rail_gate(node, group, data, settings))
    return out


def _takes_hca_out(r: GateResult) -> bool:
    """A result that takes its HCA out of service: blocking, or failed/errored but waived (a waiver keeps the node
    certified, it does not put a bad port back into NCCL's list); unread counters do not count."""
    if r.gate == "hca_counters" and r.status is S.ERROR:
        return False
    return r.blocks_certification or (r.waived and r.status in (S.FAIL, S.ERROR))


def hca_verdicts(results: Iterable[GateResult], node: str) -> tuple[list[str] | None, list[str]]:
    """(HCAs of `node` that passed, HCAs that failed), in the order the gates saw them. Passed is None only when
    no HCA gate ran on the node at all; an HCA counts as passed only when its presence gate passed."""
    mine = [r for r in results if r.node == node and r.hca]
    if not mine:
        return None, []
    failed = [h for h in dict.fromkeys(r.hca for r in mine if _takes_hca_out(r)) if h]
    seen = [r.hca for r in mine if r.gate == "hca_present" and r.status is S.PASS]
    return [h for h in dict.fromkeys(seen) if h and h not in failed], failed


def passing_hcas(results: Iterable[GateResult], node: str) -> list[str]:
    """HCAs of `node` none of whose gates failed (for NCCL_IB_HCA)."""
    return hca_verdicts(results, node)[0] or []
