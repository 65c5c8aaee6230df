"""judge_node / judge_fleet: every single-node gate over one probe document, then fleet outliers and the policy.

Order follows DESIGN.md section 4. A gate the spec lists in `not_applicable` is reported `skipped` with
required=False and the reason (never silently passed); a gate in `waive` is reported with waived=True and does not
block. Fail closed: a missing probe document, a gate without data, or a gate that raised is `error`.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from gridready.certify import (
    compute,
    diagnostics,
    goodput,
    host_settings,
    inventory,
    memory_errors,
    nccl,
    nvlink,
    pcie,
    sdc,
    software,
    thermal,
    transfer,
    versions,
    xid,
)
from gridready.certify.expectations import Expectations, from_target
from gridready.certify.result import GateResult, GateStatus
from gridready.exitcodes import ExitCode
from gridready.spec.certification import CertificationSpec, FailurePolicy

CERT_SCHEMA = "gridready.certification/1"
FLEET_SCHEMA = "gridready.fleet-report/1"
PROBE_SCHEMA = "gridready.probe/1"

Gate = Callable[[dict[str, Any], Expectations], list[GateResult]]
GATES: tuple[tuple[str, Gate], ...] = (
    ("software_versions", software.software_versions),
    ("min_versions", versions.min_versions),
    ("services", software.services),
    ("persistence_mode", software.persistence_mode),
    ("gpu_inventory", inventory.gpu_inventory),
    ("pcie_link", pcie.pcie_link),
    ("nvlink", nvlink.nvlink),
    ("ecc", memory_errors.ecc),
    ("row_remap", memory_errors.row_remap),
    ("xid", xid.xid),
    ("clocks", thermal.clocks),
    ("throttle", thermal.throttle),
    ("power", thermal.power),
    ("temperature", thermal.temperature),
    ("iommu", host_settings.iommu),
    ("acs", host_settings.acs),
    ("peermem", host_settings.peermem),
    ("dcgm", diagnostics.dcgm),
    ("gemm_bf16", compute.gemm_bf16),
    ("gemm_fp8", compute.gemm_fp8),
    ("hbm_bandwidth", compute.hbm_bandwidth),
    ("gpu_burn", compute.gpu_burn),
    ("h2d_bandwidth", transfer.h2d_bandwidth),
    ("peer_bandwidth", transfer.peer_bandwidth),
    ("nccl_allreduce", nccl.nccl_allreduce),
    ("nccl_all_gather", nccl.nccl_all_gather),  # these four only where certification.nccl.collectives names them
    ("nccl_reduce_scatter", nccl.nccl_reduce_scatter),
    ("nccl_alltoall", nccl.nccl_alltoall),
    ("nccl_sendrecv", nccl.nccl_sendrecv),
    ("sdc", sdc.sdc),
    ("training_goodput", goodput.training_goodput),
)
GATE_NAMES = tuple(n for n, _ in GATES)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class NodeVerdict(BaseModel):
    """certification.json: one node's verdict with every gate result (versioned schema)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = CERT_SCHEMA
    node: str
    node_group: str | None = None
    sku: str
    gpus_expected: int
    profile: str
    certified: bool
    judged_at: str
    valid_until: str | None = Field(None, description="certified nodes only: judged_at + validity_hours")
    probe: dict[str, Any] = Field(default_factory=dict, description="probe host, timings, errors")
    evidence: str | None = Field(None, description="path of the probe JSON this verdict read")
    gates: list[GateResult] = Field(default_factory=list)
    blocking: list[str] = Field(default_factory=list, description="one line per blocking result")
    figures: dict[str, Any] = Field(default_factory=dict, description="headline measurements for reports")
    simulated: list[str] = Field(default_factory=list, description="raw outputs that came from simulated tools")
    # set on a slim copy only (NodeVerdict.slim): the results added since, which the full verdict still lacks
    _added: list[GateResult] | None = PrivateAttr(None)

    def add(self, results: Iterable[GateResult], spec: CertificationSpec | None = None) -> NodeVerdict:
        """Merge more results (fleet outliers, fabric gates) applying the spec's waivers, then re-decide."""
        for r in results:
            r = _apply_waiver(r, spec) if spec else r
            if self._added is not None:  # a slim copy keeps the full result for the file, a slim one in memory
                self._added.append(r)
                r = _slim_result(r)
            self.gates.append(r)
        self._decide(spec)
        return self

    @property
    def is_slim(self) -> bool:
        return self._added is not None

    @property
    def added_since_slim(self) -> list[GateResult]:
        return list(self._added or [])

    def slim(self) -> NodeVerdict:
        """What the fleet decision and the fleet reports need of this node, held in memory for every node while
        the full verdict stays in its certification.json: every result that is not a plain pass, each HCA's
        results, and one line per gate for its passing per-GPU results (their figures stay in `figures`)."""
        kept: list[GateResult] = []
        folded: dict[str, tuple[int, int]] = {}  # gate -> (index in kept, passing results folded into it)
        for r in self.gates:
            if r.status is GateStatus.PASS and not r.waived and r.hca is None and r.gpu is not None:
                if r.gate in folded:
                    i, n = folded[r.gate]
                    folded[r.gate] = (i, n + 1)
                    continue
                folded[r.gate] = (len(kept), 1)
            kept.append(r)
        for i, n in folded.values():
            if n > 1:
                kept[i] = kept[i].model_copy(update={
                    "gpu": None, "measured": None, "expected": None,
                    "reason": f"{n} GPUs passed (each GPU's result is in the node's certification.json)"})
        kept = [_slim_result(r) for r in kept]
        out = self.model_copy(update={"gates": kept, "probe": {"wall_s": self.probe.get("wall_s")}})
        out._added = []
        return out

    def merged_into(self, full: NodeVerdict) -> NodeVerdict:
        """The full verdict this slim copy was made from, with the results added since and this copy's decision."""
        full.gates += self.added_since_slim
        full.blocking, full.certified, full.valid_until = list(self.blocking), self.certified, self.valid_until
        return full

    def _decide(self, spec: CertificationSpec | None) -> None:
        self.blocking = [f"{r.gate}: {r.reason}" for r in self.gates if r.blocks_certification]
        self.certified = not self.blocking
        if self.certified and spec is not None:
            until = dt.datetime.fromisoformat(self.judged_at) + dt.timedelta(hours=spec.validity_hours)
            self.valid_until = until.isoformat(timespec="seconds")
        elif not self.certified:
            self.valid_until = None

    def worst(self, gate: str) -> GateStatus | None:
        order = [GateStatus.ERROR, GateStatus.FAIL, GateStatus.WARN, GateStatus.PASS, GateStatus.SKIPPED]
        got = {r.status for r in self.gates if r.gate == gate}
        return next((s for s in order if s in got), None)


def _slim_result(r: GateResult) -> GateResult:
    """A passing or n/a result keeps the scalars of its measurement (an all-reduce's maximum, not its sweep); the
    same reason on every node is one string in memory."""
    update: dict[str, Any] = {"reason": sys.intern(r.reason)}
    if r.status in (GateStatus.PASS, GateStatus.SKIPPED) and isinstance(r.measured, dict):
        update["measured"] = {k: v for k, v in r.measured.items() if isinstance(v, (int, float, str, bool))}
    elif r.status in (GateStatus.PASS, GateStatus.SKIPPED) and isinstance(r.measured, list):
        update["measured"] = None
    return r.model_copy(update=update)


def _apply_waiver(r: GateResult, spec: CertificationSpec) -> GateResult:
    if r.gate in spec.waive and r.status in (GateStatus.FAIL, GateStatus.ERROR, GateStatus.SKIPPED):
        return r.model_copy(update={"waived": True, "reason": f"{r.reason} (waived by the spec)"})
    return r


def figures(doc: dict[str, Any]) -> dict[str, Any]:
    """Per-GPU headline numbers and the all-reduce sweep, for plots, metrics and fleet outliers."""
    t = doc.get("torch") or {}
    per_gpu = []
    for g in t.get("gpus") or []:
        def best(key: str, g: dict[str, Any] = g) -> float | None:
            v = g.get(key)
            return max(v.values()) if isinstance(v, dict) and v else v if isinstance(v, (int, float)) else None
        per_gpu.append({"gpu": g["index"], "bf16_gemm_tflops": best("bf16_gemm_tflops"),
                        "fp8_gemm_tflops": best("fp8_gemm_tflops"), "hbm_copy_tbps": g.get("hbm_copy_tbps"),
                        "h2d_gbps": g.get("h2d_gbps"), "d2h_gbps": g.get("d2h_gbps")})
    source, pts = nccl.sweep_points(doc)
    return {"gpus": per_gpu, "peer": [{"src": p["src"], "dst": p["dst"], "gbps": p.get("gbps")}
                                      for p in t.get("peer") or []],
            "allreduce": {"source": source, "points": [{"bytes": p["bytes"], "busbw_gbps": p["busbw"]} for p in pts]},
            "probe_wall_s": doc.get("wall_s"), "sdc": sdc.figures(doc)}


def judge_node(spec: CertificationSpec, target: Any, probe_doc: dict[str, Any] | None, *, node: str | None = None,
               node_group: str | None = None, driver_branch: str | None = None, rdma_stack: str | None = None,
               evidence: str | None = None, now: dt.datetime | None = None,
               no_probe: str = "probe failed or not fetched") -> NodeVerdict:
    """Judge one node. `target`: a NodeGroup, a catalog Sku or a SKU key (see expectations.from_target);
    `no_probe`: why there is no probe document, when there is none."""
    name = node or (probe_doc or {}).get("host") or "unknown"
    exp = from_target(name, spec, target, driver_branch=driver_branch, rdma_stack=rdma_stack)
    if node_group is None:
        node_group = getattr(target, "name", None) if not isinstance(target, str) else None
    judged = (now or _now()).replace(microsecond=0)
    v = NodeVerdict(node=name, node_group=node_group, sku=exp.sku.name, gpus_expected=exp.gpus,
                    profile=str(spec.profile), certified=False, judged_at=judged.isoformat(), valid_until=None,
                    evidence=evidence)
    if not probe_doc:
        v.add([exp.result("probe", GateStatus.ERROR, f"no probe output from this node ({no_probe})",
                          evidence=evidence)], spec)
        return v
    v.probe = {k: probe_doc.get(k) for k in ("schema", "host", "profile", "started", "finished", "wall_s",
                                              "timings_s", "errors", "tools", "kernel", "python", "options")}
    results: list[GateResult] = []
    if probe_doc.get("schema") != PROBE_SCHEMA:
        results.append(exp.result("probe", GateStatus.ERROR, f"probe schema {probe_doc.get('schema')!r}, expected "
                                  f"{PROBE_SCHEMA!r}", evidence=evidence))
    elif probe_doc.get("errors"):
        errs = probe_doc["errors"]
        results.append(exp.result("probe", GateStatus.WARN, f"{len(errs)} collector error(s): " + "; ".join(
            f"{e.get('collector')}: {str(e.get('error'))[:120]}" for e in errs[:4]), measured=errs, evidence=evidence))
    else:
        results.append(exp.result("probe", GateStatus.PASS, f"probe ran in {probe_doc.get('wall_s')} s, no collector "
                                  "errors", measured=probe_doc.get("wall_s"), unit="s", evidence=evidence))
    for gate, fn in GATES:
        if gate in spec.not_applicable:
            results.append(exp.result(gate, GateStatus.SKIPPED, "not applicable on these nodes "
                                      "(certification.not_applicable in the spec)", required=False))
            continue
        try:
            got = fn(probe_doc, exp)
        except Exception as exc:  # a gate bug on odd data is an error for this node, never a pass
            got = [exp.result(gate, GateStatus.ERROR, f"gate raised {type(exc).__name__}: {exc}")]
        results += [r.model_copy(update={"evidence": f"{evidence}#{r.evidence}" if evidence and r.evidence else
                                         r.evidence or evidence}) for r in got]
    v.figures = figures(probe_doc)
    v.simulated = simulated_outputs(probe_doc)
    v.add(results, spec)
    return v


SIM_MARKER = "gridready-sim"  # every simulated tool prints it in its output (docs/simulator.md, "Markers")


def simulated_outputs(probe_doc: Mapping[str, Any]) -> list[str]:
    """Keys of the raw tool outputs that carry the simulator's marker, plus `sysfs` for the simulated tree."""
    raw = probe_doc.get("raw") or {}
    out = sorted(k for k, text in raw.items() if isinstance(text, str) and SIM_MARKER in text)
    if (probe_doc.get("system") or {}).get("simulated_sysfs"):
        out.append("sysfs")
    return out


class FleetVerdict(BaseModel):
    """report.json: every node's outcome and the policy's decision."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str = FLEET_SCHEMA
    customer: str | None = None
    run_id: str | None = None
    judged_at: str
    profile: str
    failure_policy: str
    min_certified_nodes: int
    certified: list[str] = Field(default_factory=list)
    quarantined: dict[str, str] = Field(default_factory=dict, description="node -> first blocking reason")
    reused: list[str] = Field(default_factory=list, description="nodes skipped: certification still valid")
    exit_code: int
    status: Literal["certified", "degraded", "not-certified"]
    messages: list[str] = Field(default_factory=list)
    simulated: list[str] = Field(default_factory=list, description="nodes judged on simulated evidence")
    nodes: dict[str, NodeVerdict] = Field(default_factory=dict)


def judge_fleet(spec: CertificationSpec, verdicts: Iterable[NodeVerdict], *, reused: Iterable[str] = (),
                customer: str | None = None, run_id: str | None = None, outliers: bool = True,
                sdc_consensus: bool = True,
                extra: Mapping[str, Iterable[GateResult]] | None = None,
                now: dt.datetime | None = None) -> FleetVerdict:
    """Add fleet outliers (median + MAD per SKU group) and any extra results (fabric gates) to the node verdicts,
    then apply the failure policy: stop -> exit 5 on any uncertified node; quarantine -> exit 0 while at least
    min_certified_nodes are certified (counting nodes still valid from an earlier run), else 5. The SDC consensus
    (certify/sdc.py) compares every GPU's digests with the majority of the fleet's GPUs of the same key."""
    nodes = {v.node: v for v in verdicts}
    if outliers and len(nodes) >= 3:
        from gridready.certify.outliers import judge_fleet_outliers

        group_of = {n: v.node_group or v.sku for n, v in nodes.items()}
        figs: dict[str, dict[str, float | None]] = {"bf16_gemm_tflops": {}, "hbm_copy_tbps": {},
                                                    "nccl_busbw_gbps": {}}
        for n, v in nodes.items():
            gp = v.figures.get("gpus") or []
            for key in ("bf16_gemm_tflops", "hbm_copy_tbps"):
                vals = [g[key] for g in gp if g.get(key) is not None]
                figs[key][n] = min(vals) if vals else None
            nr = next((r for r in v.gates if r.gate == "nccl_allreduce" and isinstance(r.measured, dict)), None)
            figs["nccl_busbw_gbps"][n] = (nr.measured or {}).get("max_busbw_gbps") if nr else None
        for r in judge_fleet_outliers(figs, group_of, spec):
            if r.node in nodes:
                nodes[r.node].add([r], spec)
    if sdc_consensus and nodes and "sdc" not in spec.not_applicable:
        for n, results in sdc.consensus({n: (v.sku, v.figures.get("sdc")) for n, v in nodes.items()}).items():
            nodes[n].add(results, spec)
    for n, results in (extra or {}).items():
        if n in nodes:
            nodes[n].add(results, spec)
    reused = sorted(set(reused) - set(nodes))
    certified = sorted([n for n, v in nodes.items() if v.certified] + reused)
    quarantined = {n: v.blocking[0] if v.blocking else "not certified" for n, v in nodes.items() if not v.certified}
    msgs: list[str] = []
    if spec.failure_policy is FailurePolicy.STOP:
        code = ExitCode.NOT_CERTIFIED if quarantined or not certified else ExitCode.OK
    else:
        code = ExitCode.OK if len(certified) >= spec.min_certified_nodes else ExitCode.NOT_CERTIFIED
        if quarantined and code is ExitCode.OK:
            msgs.append(f"warning: {len(quarantined)} node(s) quarantined, {len(certified)} certified "
                        f"(minimum {spec.min_certified_nodes}): {_named(sorted(quarantined))}")
        elif code is ExitCode.NOT_CERTIFIED:
            msgs.append(f"only {len(certified)} node(s) certified, the spec requires {spec.min_certified_nodes}")
    status: Literal["certified", "degraded", "not-certified"] = (
        "not-certified" if code else "degraded" if quarantined else "certified")
    return FleetVerdict(customer=customer, run_id=run_id, judged_at=(now or _now()).isoformat(timespec="seconds"),
                        profile=str(spec.profile), failure_policy=str(spec.failure_policy),
                        min_certified_nodes=spec.min_certified_nodes, certified=certified, quarantined=quarantined,
                        reused=reused, exit_code=int(code), status=status, messages=msgs, nodes=nodes,
                        simulated=sorted(n for n, v in nodes.items() if v.simulated))


NAMED_IN_A_MESSAGE = 20  # nodes; a message about more names these and counts the rest (the reports list each)


def _named(nodes: list[str]) -> str:
    more = len(nodes) - NAMED_IN_A_MESSAGE
    return ", ".join(nodes[:NAMED_IN_A_MESSAGE]) + (f" and {more} more (report.json lists each)" if more > 0 else "")


def still_valid(cert: Mapping[str, Any], spec: CertificationSpec, now: dt.datetime | None = None) -> bool:
    """An earlier certification.json still counts: certified, same profile, inside its validity window."""
    if not cert.get("certified") or cert.get("profile") != str(spec.profile) or not cert.get("valid_until"):
        return False
    return dt.datetime.fromisoformat(cert["valid_until"]) > (now or _now())
