"""Host<->device (pinned, each direction) per GPU and peer copy per ordered GPU pair, against the floors.

Source: the probe's torch copies; where torch is absent, nvbandwidth's copy-engine matrices when it ran."""

from __future__ import annotations

from typing import Any

from gridready.certify.compute import not_enumerated, torch_missing
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateResult, GateStatus
from gridready.probe import nvbandwidth

P, F, E = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR


def _nvbw(doc: dict[str, Any]) -> dict[str, Any] | None:
    nb = doc.get("nvbandwidth") or {}
    return nb.get("tests") if nb.get("present") and nb.get("tests") else None


def _host_rows(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | None:
    if not torch_missing(doc):
        return doc["torch"]["gpus"], "torch.gpus"
    tests = _nvbw(doc)
    if tests is None:
        return None
    h2d = nvbandwidth.per_gpu(tests, "host_to_device_memcpy_ce")
    d2h = nvbandwidth.per_gpu(tests, "device_to_host_memcpy_ce")
    return [{"index": i, "h2d_gbps": h2d.get(i), "d2h_gbps": d2h.get(i)} for i in sorted(set(h2d) | set(d2h))], (
        "raw.nvbandwidth")


def h2d_bandwidth(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    expected = exp.floor("h2d_gbps")
    rows = _host_rows(doc)
    if rows is None:
        why = torch_missing(doc) or "no host<->device measurement"
        return [exp.result("h2d_bandwidth", E, f"{why}; nvbandwidth not run either", expected=expected,
                           unit="GB/s", evidence="torch")]
    out = []
    gpus, src = rows
    for g in gpus:
        h2d, d2h = g.get("h2d_gbps"), g.get("d2h_gbps")
        kw: dict[str, Any] = {"gpu": g["index"], "measured": {"h2d": h2d, "d2h": d2h}, "expected": expected,
                              "unit": "GB/s", "evidence": f"{src}[{g['index']}]"}
        if h2d is None or d2h is None:
            out.append(exp.result("h2d_bandwidth", E, f"GPU {g['index']}: no host<->device measurement", **kw))
        elif min(h2d, d2h) < (expected.floor or 0):
            out.append(exp.result("h2d_bandwidth", F, f"GPU {g['index']}: host->device {h2d:.1f} / device->host "
                                  f"{d2h:.1f} GB/s below {expected.floor:g} GB/s (PCIe link or NUMA placement)", **kw))
        else:
            out.append(exp.result("h2d_bandwidth", P, f"GPU {g['index']}: host->device {h2d:.1f}, device->host "
                                  f"{d2h:.1f} GB/s", **kw))
    return out + not_enumerated(doc, exp, "h2d_bandwidth", {g["index"] for g in gpus}, "host<->device",
                                expected=expected, unit="GB/s")


def peer_bandwidth(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    expected = exp.floor("peer_gbps")
    if exp.gpus < 2:
        return [exp.not_applicable("peer_bandwidth", "one GPU: no peer to copy to")]
    shape = exp.shape
    if exp.sku.nvlink_links == 0 or (shape is not None and shape.nvlink_links == 0):
        return [exp.not_applicable("peer_bandwidth", f"{exp.sku.name}"
                                   f"{' ' + shape.label if shape else ''}: no NVLink between the GPUs, no peer floor")]
    if not expected.floor:  # the board has NVLink: only the spec's 0 turns the check off, and says so
        return [exp.not_applicable("peer_bandwidth", "certification.floors.peer_gbps is 0 in the spec: no peer floor")]
    why = torch_missing(doc)
    tests = _nvbw(doc)
    if why and tests is None:
        return [exp.result("peer_bandwidth", E, f"{why}; nvbandwidth not run either", expected=expected,
                           unit="GB/s", evidence="torch")]
    if why and tests is not None:
        matrix = (tests.get("device_to_device_memcpy_write_ce") or {}).get("matrix", {})
        pairs = [{"src": int(r), "dst": int(c), "access": v is not None, "gbps": v}
                 for r, row in matrix.items() for c, v in row.items() if r != c]
        src = "raw.nvbandwidth.device_to_device_memcpy_write_ce"
    else:
        pairs, src = doc["torch"].get("peer") or [], "torch.peer"
    if exp.gpus > 1 and not pairs:
        return [exp.result("peer_bandwidth", E, "no peer copy measured", expected=expected, unit="GB/s")]
    bad, vals = [], {}
    for p in pairs:
        key = f"{p['src']}->{p['dst']}"
        vals[key] = p.get("gbps")
        if not p.get("access"):
            bad.append(f"GPU {key}: no peer access")
        elif p.get("gbps") is None:
            bad.append(f"GPU {key}: not measured")
        elif p["gbps"] < (expected.floor or 0):
            bad.append(f"GPU {key}: {p['gbps']:.0f} GB/s")
    kw: dict[str, Any] = {"measured": vals, "expected": expected, "unit": "GB/s", "evidence": src}
    if bad:
        return [exp.result("peer_bandwidth", F, f"peer copies below {expected.floor:g} GB/s: " + "; ".join(bad[:8]),
                           **kw)]
    lo = min((v for v in vals.values() if v is not None), default=None)
    return [exp.result("peer_bandwidth", P, f"{len(vals)} GPU pairs, slowest {lo:.0f} GB/s" if lo else
                       "single GPU: no pairs", **kw)]
