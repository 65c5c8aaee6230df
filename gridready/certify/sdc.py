"""Silent data corruption: seeded GEMM digests (gridready/probe/sdc.py) must repeat on each GPU and agree with the
fleet's majority.

Node gate `sdc`: every GPU the node should have ran every workload of the probe's list, and each workload's digests
repeated bit-identically; a GPU that does not repeat fails with the workload and its digests named. No digests
(torch absent, the step failed, a probe from before issue 30) is an error, never a pass.

Fleet gate `sdc_consensus` (judge_fleet): GPUs are grouped by consensus key (SKU, driver, CUDA, torch; the same
seeded GEMM on the same part and software computes the same bytes, which the one-GPU repeat check and the lent H200
confirm: docs/examples/h200x1/issue30), and per workload each repeating GPU votes its digest. A GPU whose digest is
not the strict majority's fails with the workload, its digest and the majority's. No strict majority (a tie) is an
error for every GPU of that key and workload: nothing says which side is corrupt. A key with one voting GPU cannot
be compared: reported skipped (not required) with its digests, which a later run or another fleet with the same key
can compare. GPUs that did not repeat do not vote (the node gate already fails them); a node without digests gets
no consensus result (its `sdc` gate is already an error).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from gridready.certify.expectations import Expectations
from gridready.certify.measurements import left_out
from gridready.certify.result import Expected, GateResult, GateStatus

P, F, E, S = GateStatus.PASS, GateStatus.FAIL, GateStatus.ERROR, GateStatus.SKIPPED
GATE, FLEET_GATE = "sdc", "sdc_consensus"


def _short(d: str) -> str:
    return d[:12]


def sdc(doc: dict[str, Any], exp: Expectations) -> list[GateResult]:
    s = doc.get("sdc")
    if not s or not s.get("present"):
        why = (s or {}).get("reason") or "no SDC section in the probe document (probe without the sdc step)"
        return [exp.result(GATE, E, f"no SDC digests: {why}", evidence="sdc")]
    wanted = list(s.get("workloads") or [])
    rows = {g["index"]: g for g in s.get("gpus") or []}
    out: list[GateResult] = []
    missing = [i for i, _ in left_out(doc, set(rows), exp.gpus)]  # nvidia-smi's list and the inventory's count
    if missing or not wanted:
        out.append(exp.result(GATE, E, f"no SDC digests for GPU {', '.join(map(str, missing))} of {exp.gpus}"
                              if missing else "the SDC step ran no workload", evidence="raw.sdc"))
    for i, g in sorted(rows.items()):
        work = g.get("workloads") or {}
        digests = {n: w.get("digest") for n, w in work.items()}
        absent = [n for n in wanted if n not in work]
        bad = {n: w for n, w in work.items() if not w.get("repeat_ok")}
        kw: dict[str, Any] = {"gpu": i, "measured": {"digests": digests, "repeats": {n: w.get("repeats")
                              for n, w in work.items()}}, "evidence": "raw.sdc",
                              "expected": Expected(equals="every repeat bit-identical", source="a GPU repeats the "
                                                   "same seeded GEMM bit-identically (docs/certification.md, sdc)")}
        if bad:
            what = "; ".join(f"{n} gave {len(set(w['digests']))} different digests in {len(w['digests'])} runs ("
                             + ", ".join(f"{_short(d)} x{c}" for d, c in Counter(w["digests"]).most_common())
                             + ")" for n, w in bad.items())
            out.append(exp.result(GATE, F, f"GPU {i}: does not repeat: {what}", **kw))
        elif absent:
            out.append(exp.result(GATE, E, f"GPU {i}: workload(s) {', '.join(absent)} did not run", **kw))
        else:
            out.append(exp.result(GATE, P, f"GPU {i}: {len(work)} seeded workloads repeated bit-identically ("
                                  + ", ".join(f"{n} x{w.get('repeats')}" for n, w in work.items()) + ")", **kw))
    return out


def figures(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What the fleet gate needs from one node: the consensus key and every GPU's digests (in the verdict)."""
    s = doc.get("sdc")
    if not s or not s.get("present"):
        return None
    smi = doc.get("nvidia_smi") or {}
    driver = (smi.get("q") or {}).get("driver_version") or next(
        (r.get("driver_version") for r in smi.get("query") or [] if r.get("driver_version")), None)
    return {"key": {"driver": driver, "cuda": s.get("cuda"), "torch": s.get("torch")},
            "gpus": [{"gpu": g["index"], "name": g.get("name"),
                      "digests": {n: w.get("digest") for n, w in (g.get("workloads") or {}).items()},
                      "repeat_ok": {n: bool(w.get("repeat_ok")) for n, w in (g.get("workloads") or {}).items()}}
                     for g in s.get("gpus") or []]}


def consensus(nodes: Mapping[str, tuple[str, dict[str, Any] | None]]) -> dict[str, list[GateResult]]:
    """nodes: node -> (SKU, figures(doc) or None). Returns the `sdc_consensus` results per node (pure)."""
    votes: dict[tuple[Any, ...], dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for sku, fig in nodes.values():
        if not fig:
            continue
        key = (sku, fig["key"].get("driver"), fig["key"].get("cuda"), fig["key"].get("torch"))
        for g in fig["gpus"]:
            for w, d in g["digests"].items():
                if g["repeat_ok"].get(w) and d:
                    votes[key][w][d] += 1
    out: dict[str, list[GateResult]] = {}
    for node, (sku, fig) in nodes.items():
        res: list[GateResult] = []
        if not fig:
            continue  # no digests: the node gate `sdc` already errors, nothing to add
        key = (sku, fig["key"].get("driver"), fig["key"].get("cuda"), fig["key"].get("torch"))
        label = f"{sku}, driver {key[1]}, CUDA {key[2]}, torch {key[3]}"
        for g in fig["gpus"]:
            minority, ties, alone, agreed = [], [], [], []
            for w, d in sorted(g["digests"].items()):
                if not g["repeat_ok"].get(w):
                    continue  # the node gate fails it; a non-repeating digest has no vote
                tally = votes[key][w]
                voters = sum(tally.values())
                top, n_top = tally.most_common(1)[0]
                if voters < 2:
                    alone.append(w)
                elif 2 * n_top <= voters:
                    ties.append(f"{w}: no majority among {voters} GPUs ("
                                + ", ".join(f"{_short(x)} x{c}" for x, c in tally.most_common()) + ")")
                elif d != top:
                    minority.append(f"{w}: digest {d} differs from the majority's {top} ({n_top} of {voters} GPUs)")
                else:
                    agreed.append(w)
            measured = {"key": fig["key"], "digests": g["digests"],
                        "majority": {w: votes[key][w].most_common(1)[0][0] for w in g["digests"] if votes[key][w]}}
            kw: dict[str, Any] = {"gate": FLEET_GATE, "node": node, "gpu": g["gpu"], "measured": measured,
                                  "evidence": "raw.sdc", "expected": Expected(
                                      equals="the majority digest of the GPUs with the same key",
                                      source=f"fleet: {label}")}
            if minority:
                res.append(GateResult(status=F, reason=f"GPU {g['gpu']}: silent data corruption suspected: "
                                      + "; ".join(minority), **kw))
            elif ties:
                res.append(GateResult(status=E, reason=f"GPU {g['gpu']}: " + "; ".join(ties), **kw))
            elif agreed:
                res.append(GateResult(status=P, reason=f"GPU {g['gpu']}: {len(agreed)} workload digests equal the "
                                      f"majority of the GPUs with key {label}", **kw))
            elif alone:
                res.append(GateResult(status=S, required=False, reason=f"GPU {g['gpu']}: the only GPU with key "
                                      f"{label}: nothing to compare (digests recorded for later runs)", **kw))
        out[node] = res
    return out
