"""certify: probe every GPU node in parallel (playbooks/certify.yml), judge the gates on the controller, run the
fabric phase on the nodes that passed, write the reports, apply the failure policy.

In check mode nothing loads the GPUs or the fabric: the probe takes its read-only snapshots only (nvidia-smi,
NVML, sysfs, kernel log, services; roles/gridready_certify/vars/main.yml), the gates that need load (DCGM
diagnostics, GEMM, HBM, PCIe and peer bandwidth, gpu_burn, NCCL, SDC, goodput) are reported as not run, and the
fabric phase does not run. The verdicts of the read-only gates are written, none is enforced: exit 0 unless no node
was reachable, nothing is signed or recorded in the ledger, and later stages ignore the summary.

Exit codes: 0 certified (or, with failure_policy quarantine, at least min_certified_nodes certified: the rest are
quarantined with a warning); 5 not certified; 4 when no node could be reached at all. Nodes whose certification
from an earlier run is still inside the validity window are not probed again unless --force.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gridready import ansible, contracts, evidence, ledger
from gridready.artifacts import RunContext, read_json, write_atomic
from gridready.certify.fabric import FabricResult
from gridready.certify.hca import hca_verdicts
from gridready.certify.judge import FleetVerdict, NodeVerdict, judge_fleet, judge_node, still_valid
from gridready.certify.result import GateResult, GateStatus
from gridready.contracts import CertifySummary, NodeCertification
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, display_path
from gridready.report import write_all
from gridready.report.writer import Spill
from gridready.spec.certification import CertificationSpec
from gridready.spec.gates import FABRIC_GATE_NAMES, FLEET_GATE_NAMES, NODE_GATE_NAMES, is_known_gate
from gridready.stages import attest, certify_jobs, fanout
from gridready.stages.common import Timer, base_extravars
from gridready.stages.fabric import run_fabric_phase

STAGE = "certify"
PROBES = "probes"


def probe_archive(dest: Path) -> Path:
    """The node probe (gridready/probe) packed as `gridready_probe/...` in one tar.gz, which the role sends and
    unpacks in one step (file by file the copy took 15 s of a 31 s quick certification on the lent H200, issue 30).
    Files keep their mtimes, so unpacking the same probe again changes nothing."""
    import tarfile

    from gridready import probe

    src = Path(probe.__file__).parent

    def _clean(ti: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in ti.name or ti.name.endswith(".pyc"):
            return None
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        ti.mode = 0o755 if ti.isdir() else 0o644
        return ti

    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        tar.add(src, arcname="gridready_probe", filter=_clean)
    return write_atomic(dest, packed.getvalue(), mode=0o644)


NA_COLLECTORS = {"dcgm": "dcgm", "sdc": "sdc", "training_goodput": "goodput"}  # gate -> probe step (collect.py)


def extravars(inv: Inventory, fetch_dir: Path) -> dict[str, Any]:
    """Role variables from the spec's certification section."""
    c: CertificationSpec = inv.spec.certification
    return {
        "gridready_certify_probe_archive": str(probe_archive(fetch_dir.parent / "gridready_probe.tar.gz")),
        **base_extravars(inv),
        "gridready_certify_fetch_dir": str(fetch_dir),
        "gridready_certify_profile": str(c.profile),
        "gridready_certify_dcgm_level": c.effective_dcgm_level() if "dcgm" not in c.not_applicable else 0,
        # a collector whose gate is not applicable is not run (its time is not spent)
        "gridready_certify_skip": [step for gate, step in NA_COLLECTORS.items() if gate in c.not_applicable],
        "gridready_certify_algo": c.nccl.algo,
        "gridready_certify_nccl_min_bytes": c.nccl.min_bytes,
        "gridready_certify_nccl_max_bytes": c.nccl.max_bytes,
        "gridready_certify_best_of": c.nccl.best_of,
        "gridready_certify_nccl_check_iters": c.nccl.check_iters,
        # Ansible checks an async task first after `poll` seconds: at 10 a 3 s quick probe cost 10 s (issue 30)
        "gridready_certify_poll_s": 1 if str(c.profile) == "quick" else 5,
        "gridready_certify_collectives": list(c.nccl.collectives),
        "gridready_certify_dcgm_precision": c.dcgm_precision,
        "gridready_certify_dcgm_outlier_pcnt": c.dcgm_outlier_tolerance_pcnt or 0,
        "gridready_certify_gate_timeout_s": c.gate_timeout_s,
        "gridready_certify_timeout_s": c.probe_timeout_s,
    }


def _in_limit(inv: Inventory, host: str, limit: str | None) -> bool:
    """A plain host/group list (`a,b` or `a:b`); patterns beyond that are left to Ansible (host kept)."""
    if not limit:
        return True
    tokens = [t for t in limit.replace(":", ",").split(",") if t]
    if _limit_pattern(limit):
        return True
    return any(host == t or host in inv.groups.get(t, []) for t in tokens)


def _limit_pattern(limit: str | None) -> bool:
    """Whether --limit holds an Ansible pattern beyond plain names (an exclusion, a wildcard, a regex)."""
    return any(t.startswith("!") or "*" in t or "~" in t for t in (limit or "").replace(":", ",").split(","))


def reusable(ctx: RunContext, spec: CertificationSpec, hosts: list[str]) -> dict[str, tuple[str, NodeVerdict]]:
    """Hosts whose ledger entry is still valid (certified, not drained, same profile, inside the window), whichever
    run certified them: the path of their certification.json and its verdict."""
    if ctx.force:
        return {}
    _, book = ledger.read(ctx.root, ctx.customer)
    out = {}
    for host in hosts:
        entry = book.nodes.get(host)
        if not ledger.usable(entry, spec.validity_hours)[0] or entry is None or not entry.certification:
            continue
        try:
            cert = read_json(Path(entry.certification), ctx.root)
        except InvalidInput as err:
            if "not JSON" not in str(err):  # a link or a FIFO where a certification was: refused, never followed
                raise
            continue
        if not isinstance(cert, dict):
            continue
        if still_valid(cert, spec):
            try:
                verdict = NodeVerdict.model_validate(cert)
            except ValidationError:
                continue  # an older certification.json: probe the node again
            out[host] = (entry.certification, verdict)
    return out


def certified_elsewhere(ctx: RunContext, spec: CertificationSpec, fleet: list[str], hosts: list[str]) -> list[str]:
    """GPU nodes outside this run's --limit that the ledger holds as certified now: a limited run counts them for
    min_certified_nodes and pairs its nodes with them in the fabric phase, as it does with reused nodes (a
    `certify --limit node3 --force` on a certified fleet must not fail for want of the nodes it was told to skip)."""
    _, book = ledger.read(ctx.root, ctx.customer)
    return [h for h in fleet if h not in hosts and ledger.usable(book.nodes.get(h), spec.validity_hours)[0]]


# The node gates whose evidence comes from load on the GPUs (the probe collectors check mode skips)
LOAD_GATES = frozenset({"dcgm", "gemm_bf16", "gemm_fp8", "hbm_bandwidth", "gpu_burn", "h2d_bandwidth",
                        "peer_bandwidth", "nccl_allreduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall",
                        "nccl_sendrecv", "sdc", "training_goodput"})
CHECK_NOT_RUN = "check mode: not run (it loads the GPUs); run without --check to judge it"


# The probe collectors each load gate needs (gridready/probe/collect.py steps); the read-only snapshots always run
GATE_COLLECTORS = {"dcgm": "dcgm", "gemm_bf16": "torch", "gemm_fp8": "torch", "hbm_bandwidth": "torch",
                   "h2d_bandwidth": "torch", "peer_bandwidth": "torch", "gpu_burn": "gpu_burn", "sdc": "sdc",
                   "training_goodput": "goodput", **{g: "nccl_tests" for g in NODE_GATE_NAMES if g.startswith("nccl_")}}
LOAD_COLLECTORS = ("dcgm", "nccl_tests", "nvbandwidth", "hca", "gpu_burn", "torch", "sdc", "goodput")


def selected_gates(ctx: RunContext) -> frozenset[str] | None:
    """The gates of `--gates`/`--skip-gates` (None: every gate); an unknown name is a usage error (exit 2)."""
    if not ctx.gates and not ctx.skip_gates:
        return None
    if ctx.gates and ctx.skip_gates:
        raise InvalidInput("--gates, --skip-gates: (command line): choose the gates one way, not both")
    every = [*NODE_GATE_NAMES, *FLEET_GATE_NAMES, *FABRIC_GATE_NAMES]
    for flag, names in (("--gates", ctx.gates), ("--skip-gates", ctx.skip_gates)):
        unknown = [g for g in names if not is_known_gate(g)]
        if unknown:
            raise InvalidInput(f"{flag}: (command line): unknown gate {', '.join(unknown)} "
                               f"(gates: {', '.join(every)})")
    return frozenset(ctx.gates) if ctx.gates else frozenset(every) - frozenset(ctx.skip_gates)


def check_usage(ctx: RunContext) -> None:
    """The flags alone, before the run claims its folder: an unknown gate is exit 2 with nothing written."""
    selected_gates(ctx)


def selection_skip(selection: frozenset[str]) -> list[str]:
    """The load collectors no selected gate needs (the probe skips them); hca feeds the fabric gates."""
    needed = {GATE_COLLECTORS[g] for g in selection if g in GATE_COLLECTORS}
    if selection & set(FABRIC_GATE_NAMES):
        needed.add("hca")
    return [c for c in LOAD_COLLECTORS if c not in needed]


def selected_verdict(verdict: NodeVerdict, spec: CertificationSpec, selection: frozenset[str]) -> NodeVerdict:
    """A diagnostic run's verdict: the selected gates as judged, one non-blocking `not selected` line per other."""
    others = sorted({r.gate for r in verdict.gates if r.gate not in selection},
                    key=lambda g: NODE_GATE_NAMES.index(g) if g in NODE_GATE_NAMES else len(NODE_GATE_NAMES))
    verdict.gates = [r for r in verdict.gates if r.gate in selection] + [
        GateResult(gate=g, node=verdict.node, status=GateStatus.SKIPPED, reason=NOT_SELECTED, required=False)
        for g in others]
    verdict.add([], spec)
    return verdict


NOT_SELECTED = "not selected for this run (--gates/--skip-gates)"


def finished_verdict(verdict: NodeVerdict, spec: CertificationSpec, *, check: bool,
                     selection: frozenset[str] | None) -> NodeVerdict:
    """A verdict as this run records it: check mode's, then a gate selection's."""
    verdict = dry_verdict(verdict, spec) if check else verdict
    return selected_verdict(verdict, spec, selection) if selection is not None else verdict


def dry_verdict(verdict: NodeVerdict, spec: CertificationSpec) -> NodeVerdict:
    """A check-mode verdict: one `not run` line per load gate in place of its results, which check mode never
    collected; the read-only gates decide."""
    load = sorted({r.gate for r in verdict.gates if r.gate in LOAD_GATES}, key=NODE_GATE_NAMES.index)
    verdict.gates = [r for r in verdict.gates if r.gate not in LOAD_GATES] + [
        GateResult(gate=g, node=verdict.node, status=GateStatus.SKIPPED, reason=CHECK_NOT_RUN, required=False)
        for g in load]
    verdict.add([], spec)
    return verdict


def judge_probes(inv: Inventory, hosts: list[str], fetch_dir: Path, spill: Spill | None = None,
                 finish: Callable[[NodeVerdict], NodeVerdict] | None = None,
                 no_probe: dict[str, str] | None = None) -> list[NodeVerdict]:
    """Judge each host's fetched probe.json, one document in memory at a time; `finish` adjusts each verdict (check
    mode, a gate selection). With a `spill` each full verdict goes there as soon as it is judged and its slim copy
    is kept (gridready.report.writer.Spill): memory stays bounded at any fleet size. `no_probe`: why a host has no
    document, where the runner knows (a probe Job's last condition)."""
    spec = inv.spec.certification
    verdicts = []
    for host in hosts:
        path = fetch_dir / host / "probe.json"
        try:  # what a node sent back: read beneath the run's folder, never through a link, bounded
            doc = read_json(path, fetch_dir)
        except InvalidInput:
            doc = None
        group = inv.spec.group(inv.node_group_of(host) or "")
        v = judge_node(spec, group, doc if isinstance(doc, dict) else None, node=host,
                       node_group=group.name if group else None, driver_branch=inv.spec.software.driver_branch,
                       rdma_stack=inv.spec.software.rdma_stack, evidence=f"{PROBES}/{host}/probe.json",
                       **({"no_probe": no_probe[host]} if no_probe and host in no_probe else {}))
        del doc
        v = finish(v) if finish else v
        verdicts.append(spill.keep(v) if spill is not None else v)
    return verdicts


def fabric_results(inv: Inventory, ctx: RunContext, verdicts: list[NodeVerdict],
                   peers: list[str] | tuple[str, ...] = ()) -> FabricResult | None:
    """The multi-node phase (gridready.stages.fabric) over the nodes that passed single-node, joined by `peers`
    (nodes still certified from an earlier run) as known-good partners: a node re-certified alone, or the one
    survivor of a pair, still gets its HCA gates and is paired; with no partner at all in a fleet of several GPU
    nodes its multi-node gate is recorded as not run and blocks. Its FabricResult (results of the nodes judged in
    this run only), or None when the spec turns the phase off or no node passed."""
    passed = [v.node for v in verdicts if v.certified]
    if not inv.spec.certification.fabric.enabled or not passed:
        return None
    members = passed + [p for p in peers if p not in passed]
    probe_hca = {}
    for v in verdicts:
        stage = ctx.stage_dir(STAGE)
        try:
            doc = read_json(stage / PROBES / v.node / "probe.json", stage)
        except InvalidInput:
            doc = None
        probe_hca[v.node] = doc.get("hca") if isinstance(doc, dict) else None
    res = run_fabric_phase(inv, ctx, members, probe_hca=probe_hca, alone_blocks=len(inv.gpu_hosts()) > 1)
    res.node_results = {n: r for n, r in res.node_results.items() if n in passed}  # peers keep their verdicts
    return res


def run(inv: Inventory, ctx: RunContext) -> CertifySummary:
    timer = Timer()
    stage_dir = ctx.stage_dir(STAGE)
    spec = inv.spec.certification
    key = evidence.load_private_key()  # a bad key stops the run before any probe (exit 2)
    jobs = spec.runner == "kubernetes-job"
    # a fan-out the controller cannot hold stops it too; too little memory now is a warning
    fanout_notes = [] if jobs else \
        fanout.check(spec.parallel, f"{display_path(inv.path / 'cluster.yml')}: certification.parallel")
    if jobs and _limit_pattern(ctx.limit):
        raise InvalidInput(f"--limit: (command line): {ctx.limit}: certification.runner kubernetes-job takes host "
                           "and group names only (a,b or a:b)")
    api = certify_jobs.KubeApi.from_inventory(inv) if jobs else None  # an unusable kubeconfig: exit 2, nothing run
    selection = selected_gates(ctx)  # a diagnostic run of some gates: probes every host asked for, records nothing
    hosts = [h for h in inv.gpu_hosts() if _in_limit(inv, h, ctx.limit)]
    reused = {} if selection is not None else reusable(ctx, spec, hosts)
    todo = [h for h in hosts if h not in reused]
    outside = certified_elsewhere(ctx, spec, inv.gpu_hosts(), hosts)
    fetch_dir = stage_dir / PROBES
    messages: list[str] = [*fanout_notes]
    unreachable: list[str] = []
    playbook: dict[str, Any] = {}
    no_probe: dict[str, str] = {}
    if todo:
        limit = ",".join([ctx.limit or "all", *(f"!{h}" for h in reused)]) if reused or ctx.limit else None
        variables = extravars(inv, fetch_dir)
        if selection is not None:
            variables["gridready_certify_skip"] = sorted({*variables["gridready_certify_skip"],
                                                          *selection_skip(selection)})
        if api is not None:  # a Job per node; check mode leaves out what loads the GPUs, as the role does
            if ctx.check:
                variables["gridready_certify_skip"] = sorted({*variables["gridready_certify_skip"],
                                                              *certify_jobs.check_mode_skip()})
            jobs_timer = Timer()
            no_probe = certify_jobs.probe_all(inv, todo, variables, fetch_dir, run_id=ctx.run_id, api=api)
            playbook = {"runner": "kubernetes-job", "jobs_seconds": jobs_timer.seconds,
                        "jobs_without_document": sorted(no_probe)}
        else:
            result = ansible.run_playbook(inv, "certify.yml", stage_dir, check=ctx.check, limit=limit,
                                          tags=ctx.tags, extravars=variables, forks=spec.parallel)
            unreachable = sorted(result.unreachable_hosts)
            playbook = {"runner_status": result.status, "runner_rc": result.rc, "playbook_seconds": result.seconds}
    spill = Spill(stage_dir)
    verdicts = judge_probes(inv, todo, fetch_dir, spill,
                            finish=lambda v: finished_verdict(v, spec, check=ctx.check, selection=selection),
                            no_probe=no_probe)
    if ctx.check:
        messages.append("check mode: read-only gates judged; nothing loaded the GPUs or the fabric (load gates and "
                        "the fabric phase not run)")
    if selection is not None:
        messages.append(f"a diagnostic run of {len(selection)} gate(s): its verdicts are this run's alone; the ledger "
                        "(what serve reads), the signed evidence and the fleet's certification stay as they were")
    wants_fabric = selection is None or bool(selection & set(FABRIC_GATE_NAMES))
    fabric = fabric_results(inv, ctx, verdicts, peers=sorted({*reused, *outside})) \
        if todo and not ctx.check and wants_fabric else None
    extra = fabric.node_results if fabric is not None else {}
    fleet = judge_fleet(spec, verdicts, reused=[*reused, *outside], customer=inv.customer, run_id=ctx.run_id,
                        extra=extra)
    reports = write_all(fleet, stage_dir, command=f"invoke certify ({inv.name})", fabric=fabric, spill=spill)
    signed, notes = ({}, []) if ctx.check or selection is not None else \
        attest.sign_nodes(ctx, fleet, stage_dir, reports, key, probes=PROBES)
    messages += notes
    if reused:
        messages.append(f"still certified from an earlier run (use --force to re-probe): {', '.join(sorted(reused))}")
    if outside:
        messages.append(f"outside --limit, certified in the ledger (counted for the policy, fabric partners): "
                        f"{', '.join(outside)}")
    return write_summary(
        inv, ctx, fleet, hosts=hosts, reused=reused, unreachable=unreachable, messages=messages, timer=timer,
        evidence=signed, record=selection is None,
        reports={k: str(p.relative_to(stage_dir)) for k, p in reports.items()},
        data={**playbook, "fabric": None if fabric is None else {
            "status": fabric.status, "reason": fabric.reason, "quarantined": fabric.quarantined,
            "pairwise_run_count": fabric.pairwise_run_count, "floor_gbps": fabric.floor_gbps,
            "set_busbw_gbps": [r.busbw_gbps for r in fabric.set_runs]}},
    )


def write_summary(inv: Inventory, ctx: RunContext, fleet: FleetVerdict, *, hosts: list[str] | None = None,
                  reused: dict[str, tuple[str, NodeVerdict]] | None = None, unreachable: list[str] | None = None,
                  messages: list[str] | None = None, timer: Timer | None = None,
                  reports: dict[str, str] | None = None, data: dict[str, Any] | None = None,
                  evidence: dict[str, tuple[str | None, str | None]] | None = None,
                  record: bool = True) -> CertifySummary:
    """The certify stage's writer: the fleet verdict (and nodes reused from an earlier run) as the CertifySummary
    contract, with the exit code the policy gives; written to <stage_dir>/summary.json, then merged into the
    customer's ledger (only the nodes this run judged; nothing for a check-mode run)."""
    reused, unreachable, timer = reused or {}, unreachable or [], timer or Timer()
    hosts = hosts if hosts is not None else [h for h in inv.gpu_hosts() if h in fleet.nodes or h in reused]
    todo = [h for h in hosts if h not in reused]
    none_reached = bool(todo) and set(unreachable) >= set(todo) and not reused
    messages = [*(messages or []), *([f"no node reachable: {', '.join(unreachable)}"] if none_reached else []),
                *fleet.messages]
    if fleet.simulated:
        messages.insert(0, f"SIMULATED: the evidence of {len(fleet.simulated)} node(s) came from gridready's "
                           "simulated NVIDIA tools: " + ", ".join(fleet.simulated))
    code = ExitCode.UNREACHABLE if none_reached else ExitCode(fleet.exit_code)
    if ctx.check and code is ExitCode.NOT_CERTIFIED:
        code = ExitCode.OK  # check mode records verdicts and enforces none; serve never reads a check summary
        messages.append("check mode: verdicts recorded, nothing quarantined; would quarantine "
                        + ", ".join(fleet.quarantined))
    status = "success" if code is ExitCode.OK else "unreachable" if code is ExitCode.UNREACHABLE else "not-certified"
    summary = CertifySummary(
        customer=inv.customer, run_id=ctx.run_id, status=status, exit_code=int(code),  # type: ignore[arg-type]
        check=ctx.check, started_at=timer.started_at, seconds=timer.seconds, messages=messages,
        hosts=node_entries(hosts, fleet, reused, unreachable, ctx.stage_dir(STAGE)),
        certified=fleet.certified, quarantined=sorted(fleet.quarantined), reused=sorted(reused),
        fleet_status=fleet.status, profile=fleet.profile, failure_policy=fleet.failure_policy,
        validity_hours=inv.spec.certification.validity_hours, reports=reports or {}, data=data or {},
        simulated=fleet.simulated,
    ).close(ctx)
    summary_path = ctx.stage_dir(STAGE) / contracts.SUMMARY_FILE
    groups = {h: inv.node_group_of(h) for h in summary.hosts}
    if record:  # a diagnostic run of some gates judges nothing the ledger could hold
        ledger.update(ctx.root, inv.customer, lambda book: ledger.record_certify(
            book, summary, summary_path, groups=groups, evidence=evidence))
    return summary


def node_entries(hosts: list[str], fleet: FleetVerdict, reused: dict[str, tuple[str, NodeVerdict]],
                 unreachable: list[str], stage_dir: Path) -> dict[str, NodeCertification]:
    """Each node's entry in the summary: verdict, validity, and the HCAs serve may hand to NCCL."""
    out: dict[str, NodeCertification] = {}
    for host in hosts:
        if host in reused:
            path, v = reused[host]
            passed, failed = hca_verdicts(v.gates, host)
            out[host] = NodeCertification(status="certified", valid_until=v.valid_until, certification=path,
                                          reused=True, hcas_passed=passed, hcas_failed=failed)
            continue
        v = fleet.nodes[host]
        passed, failed = hca_verdicts(v.gates, host)
        state = "unreachable" if host in unreachable else "certified" if v.certified else "quarantined"
        out[host] = NodeCertification(
            status=state, valid_until=v.valid_until, blocking=v.blocking,  # type: ignore[arg-type]
            certification=str(stage_dir / "nodes" / host / "certification.json"),
            hcas_passed=passed, hcas_failed=failed)
    return out

