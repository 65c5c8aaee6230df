"""The rolling provision: a serving fleet changed a batch at a time, never all at once (docs/provision.md, "Rolling
provision"). The provision stage rolls where nodes serve; per batch:

1. drain: the serving nodes are marked drained in the ledger and the router is re-applied without their replicas
   (gridready.stages.serve.drain.sync_serving, the watcher's drain); then the requests those replicas still run
   finish (the engines' own in-flight gauges, bounded);
2. provision: playbooks/provision.yml limited to the batch;
3. reboot where a host reports one owed (provision.yml's `gridready_reboot` fact), then provision again: a host that
   still owes a reboot, or fails its post-state check, fails here;
4. re-certify the gates the change can affect: every gate after a reboot or a change of the driver, fabric manager,
   RDMA stack, probe runtime or host tuning; the version, service and NCCL/DCGM gates after the other roles;
   nothing where nothing changed;
5. wait until the node's engines answer /health (bounded), then return it: undrained in the ledger, the router
   re-applied with its replicas.

A node that fails any step stays drained; the roll stops before its next batch once more nodes failed than
`--max-fail` tolerates (default none). Nodes that serve nothing roll first, in one batch; serving nodes in batches
cut along the deployment's replicas, the replica of the node that holds the router (no serving.router.hosts) last
(gridready.stages.roll_plan). The roll's state is
`artifacts/<customer>/roll.json` (gridready.stages.roll_state): `status` shows it, a second run resumes it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from gridready import ansible, ledger, usage
from gridready.artifacts import RunContext, new_run_id
from gridready.bench.http import HttpError, fetch
from gridready.contracts import CertifySummary, HostOutcome, ProvisionSummary
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.stages import roll_plan, roll_state
from gridready.stages.common import Timer, outcome_from_playbook
from gridready.stages.roll_state import NodeRoll, RollState

Converge = Callable[[Inventory, RunContext, Path, str | None],
                    tuple[str, ExitCode, dict[str, HostOutcome], dict[str, Any]]]
Certify = Callable[[Inventory, RunContext], CertifySummary]
Route = Callable[[Inventory, RunContext], dict[str, Any]]

# Roles whose change reaches what every gate measures: the kernel module and its user space, the NVSwitch fabric,
# the HCAs and peer memory, the probe's own runtime, the host's kernel and CPU settings.
EVERY_GATE_ROLES = frozenset({"nvidia_driver", "fabricmanager", "rdma", "probe_runtime", "host_tuning"})
VERSION_GATES = ("software_versions", "min_versions", "services")
ROLE_GATES: dict[str, tuple[str, ...]] = {
    "nccl": (*VERSION_GATES, "nccl_allreduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_alltoall",
             "nccl_sendrecv"),
    "dcgm": (*VERSION_GATES, "dcgm"),
    "container_engine": VERSION_GATES,
    "container_toolkit": VERSION_GATES,
}


def gates_after(changed_roles: Iterable[str], rebooted: bool) -> tuple[str, ...] | None:
    """The gates a node's change can affect: () for every gate, None for none (nothing changed)."""
    roles = set(changed_roles) - {"preflight"}
    if rebooted or roles & EVERY_GATE_ROLES or roles - ROLE_GATES.keys():
        return ()
    if not roles:
        return None
    return tuple(sorted({g for r in roles for g in ROLE_GATES[r]}))


@dataclass(frozen=True)
class Waits:
    """The bounds of the roll's waits, in seconds."""

    in_flight_s: float = 300.0  # requests the drained replicas still run
    health_s: float = 900.0  # a rebooted node's engines answering /health again
    poll_s: float = 2.0


def selected(inv: Inventory, limit: str | None) -> list[str]:
    """The GPU nodes of the inventory that `--limit` selects (Ansible's pattern rules), in inventory order."""
    nodes = inv.gpu_hosts()
    if limit is None:
        return nodes
    chosen = set(usage.hosts_matching(inv, limit))
    return [n for n in nodes if n in chosen]


def plan_nodes(inv: Inventory, ctx: RunContext, book: ledger.Ledger) -> tuple[list[str], list[str]]:
    """(idle, serving) among the selected nodes: serving are the nodes of the ledger's deployment."""
    serving = set(book.serving.roles) if book.serving else set()
    nodes = selected(inv, ctx.limit)
    return [n for n in nodes if n not in serving], [n for n in nodes if n in serving]


def key_of(extravars: dict[str, Any], ctx: RunContext) -> str:
    """The digest a roll is known by: the role variables of every node group and the tags it applies."""
    what = {"vars": extravars.get("gridready_group_vars", {}), "tags": ctx.tags, "skip_tags": ctx.skip_tags,
            "force": ctx.force}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def failure_of(result: ansible.PlaybookResult, host: str) -> str:
    """The first failed task on `host` and what it said, one line."""
    for ev in result.events:
        data = ev["event_data"]
        if data.get("host") == host and ev["event"] in ("runner_on_failed", "runner_on_unreachable") \
                and not data.get("ignore_errors"):
            res = data.get("res") or {}
            said = " ".join(str(res.get("msg") or res.get("stderr") or "").split())
            return f"{data.get('task')}: {said[:300]}"
    return "no task result"


# The engines' gauges of requests running and queued: vLLM (docs "Production Metrics": vllm:num_requests_running,
# vllm:num_requests_waiting) and SGLang (docs/references/production_metrics.md: sglang:num_running_reqs,
# sglang:num_queue_reqs).
IN_FLIGHT_GAUGES = ("num_requests_running", "num_requests_waiting", "num_running_reqs", "num_queue_reqs")


def _metric_sum(text: str, suffixes: tuple[str, ...]) -> float:
    """The sum of the Prometheus samples whose name ends in one of `suffixes`."""
    total = 0.0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.endswith(suffixes):
            try:
                total += float(line.rsplit(" ", 1)[1])
            except (IndexError, ValueError):
                continue
    return total


def in_flight(url: str) -> float | None:
    """Requests an engine still runs or queues (its /metrics), None when it cannot be read."""
    try:
        code, _, body = asyncio.run(fetch(url, "/metrics", timeout=5))
    except HttpError:
        return None
    if code != 200:
        return None
    return _metric_sum(body.decode(errors="replace"), IN_FLIGHT_GAUGES)


def healthy(url: str) -> bool:
    try:
        return asyncio.run(fetch(url, "/health", timeout=5))[0] == 200
    except HttpError:
        return False


def replica_urls(inv: Inventory, book: ledger.Ledger, nodes: Iterable[str]) -> dict[str, list[str]]:
    """Per node, the engine URLs of the replicas it takes part in (target hosts; empty on Kubernetes, where the
    taint moves the pods, or when the deployment cannot be planned again)."""
    from gridready.stages.serve.drain import deployed

    if inv.spec.serving.target != "hosts":
        return {}
    found = deployed(inv, book)
    if isinstance(found, str):
        return {}
    cert, plans = found
    wanted = set(nodes)
    out: dict[str, list[str]] = {}
    for plan in plans:
        for replica in plan.replicas:
            url = f"http://{cert.certified[replica.head].ip}:{plan.tier.port}"
            for n in set(replica.nodes) & wanted:
                out.setdefault(n, []).append(url)
    return out


def deployment_shape(inv: Inventory, book: ledger.Ledger) -> tuple[list[tuple[str, ...]], str | None]:
    """The deployment's replicas (their nodes), and the node the router runs on where that is a serving node (the
    serving head, no serving.router.hosts); ([], None) when the deployment cannot be planned again."""
    from gridready.stages.serve.drain import deployed

    found = deployed(inv, book)
    if isinstance(found, str):
        return [], None
    _, plans = found
    replicas = [tuple(r.nodes) for p in plans for r in p.replicas]
    spec = inv.spec.serving
    on_node = spec.target == "hosts" and spec.router.enabled and not spec.router.hosts
    head = next((r.head for p in plans for r in p.replicas), None)
    return replicas, head if on_node else None


@dataclass
class Hooks:
    """What the roll composes: the provision run, the certify stage, the router's drain, the engines' gauges. The
    stage passes the real ones; tests fake them beneath (ansible.run_playbook) or here."""

    converge: Converge
    certify: Certify
    route: Route
    in_flight: Callable[[str], float | None] = in_flight
    healthy: Callable[[str], bool] = healthy
    waits: Waits = field(default_factory=Waits)
    sleep: Callable[[float], None] = time.sleep


def _wait(predicate: Callable[[], bool], bound_s: float, hooks: Hooks) -> bool:
    deadline = time.monotonic() + bound_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        hooks.sleep(hooks.waits.poll_s)
    return True


@dataclass
class Batch:
    """One batch of the roll: its nodes go through the steps together; a node that fails leaves the others."""

    inv: Inventory
    ctx: RunContext
    state: RollState
    index: int
    nodes: list[str]
    hooks: Hooks
    out: Path
    outcomes: dict[str, HostOutcome] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    changed: dict[str, list[str]] = field(default_factory=dict)  # node -> the roles that changed something

    @property
    def live(self) -> list[str]:
        return [n for n in self.nodes if self.state.nodes[n].step != "failed"]

    @property
    def serving(self) -> list[str]:
        return [n for n in self.live if self.state.nodes[n].serving]

    def step(self, nodes: Iterable[str], step: roll_state.Step) -> None:
        for n in nodes:
            self.state.nodes[n].step = step
        roll_state.write(self.ctx.root, self.state)

    def fail(self, node: str, why: str) -> None:
        entry = self.state.nodes[node]
        entry.reason = f"{entry.step}: {why}"
        entry.step = "failed"
        entry.seconds = round(time.monotonic() - self.started, 1)
        reason = f"rolling provision {self.ctx.run_id}: {entry.reason}"
        ledger.update(self.ctx.root, self.inv.customer, partial(ledger.drain, node=node, reason=reason, held=True))
        self.outcomes.setdefault(node, HostOutcome(status="failed")).status = "failed"
        self.outcomes[node].detail["roll"] = entry.reason
        roll_state.write(self.ctx.root, self.state)

    def route(self, what: str) -> bool:
        """Re-apply the router (or the taints) to the ledger's drained set; False when it failed."""
        result = self.hooks.route(self.inv, self.ctx)
        if result.get("exit_code"):
            return False
        if not result.get("applied"):
            spec = self.inv.spec.serving
            if spec.target == "hosts" and spec.router.enabled:  # a router that still sends to the node
                self.notes.append(f"batch {self.index} {what}: the router was not re-applied: {result.get('reason')}")
                return False
            self.notes.append(f"batch {self.index} {what}: serving not re-applied: {result.get('reason')}")
        return True

    def roll(self) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        for n in self.nodes:
            self.state.nodes[n].started_at, self.state.nodes[n].run_id = stamp, self.ctx.run_id
        self.drain()
        rebooted = self.provision()
        self.certify(rebooted)
        self.give_back()

    def drain(self) -> None:
        serving = self.serving
        if not serving:
            return
        self.step(serving, "draining")
        why = f"rolling provision {self.ctx.run_id}, batch {self.index}"
        for n in serving:
            ledger.update(self.ctx.root, self.inv.customer, partial(ledger.drain, node=n, reason=why, held=True))
        if not self.route("drain"):
            for n in serving:
                self.fail(n, "the router was not re-applied without the node (see the run's watch/router-* "
                             "artifacts)")
            return
        book = ledger.read(self.ctx.root, self.inv.customer)[1]
        urls = sorted({u for us in replica_urls(self.inv, book, serving).values() for u in us})
        left: dict[str, float | None] = {}

        def finished() -> bool:
            left.update({u: self.hooks.in_flight(u) for u in urls})
            return all(not v for v in left.values())

        if not _wait(finished, self.hooks.waits.in_flight_s, self.hooks):
            busy = ", ".join(f"{u} ({v:g})" for u, v in sorted(left.items()) if v)
            for n in serving:
                self.fail(n, f"requests still running after {self.hooks.waits.in_flight_s:g} s: {busy}")

    def provision(self) -> set[str]:
        """Provision, reboot where owed, provision again there; the nodes that rebooted."""
        live = self.live
        if not live:
            return set()
        self.step(live, "provisioning")
        _, _, hosts, _ = self.hooks.converge(self.inv, self.ctx, self.out / "provision", ",".join(live))
        changed = {n: list(hosts[n].detail.get("changed_roles") or []) for n in live if n in hosts}
        self._judge(live, hosts, "provision")
        owed = [n for n in self.live if (hosts[n].detail.get("reboot") or {}).get("owed")]
        if not owed:
            self.changed = changed
            return set()
        self.step(owed, "rebooting")
        result = ansible.run_playbook(self.inv, "reboot.yml", self.out / "reboot", limit=",".join(owed),
                                      extravars={"gridready_reboot_why": {
                                          n: "; ".join(hosts[n].detail["reboot"].get("reasons") or []) for n in owed}})
        _, _, after = outcome_from_playbook(result)
        for n in owed:
            if n not in after or after[n].status in ("failed", "unreachable"):
                self.fail(n, f"reboot: {failure_of(result, n)}")
        rebooted = [n for n in owed if self.state.nodes[n].step != "failed"]
        for n in rebooted:
            self.state.nodes[n].rebooted = True
        if rebooted:
            self.step(rebooted, "verifying")
            _, _, again, _ = self.hooks.converge(self.inv, self.ctx, self.out / "verify", ",".join(rebooted))
            self._judge(rebooted, again, "provision after the reboot")
            for n in rebooted:
                if n in again:
                    changed[n] = sorted(set(changed.get(n, [])) | set(again[n].detail.get("changed_roles") or []))
                    reboot = again[n].detail.get("reboot") or {}
                    if self.state.nodes[n].step != "failed" and reboot.get("owed"):
                        self.fail(n, "a reboot is still owed after the reboot: "
                                     + ("; ".join(reboot.get("reasons") or []) or "no reason given"))
        self.changed = changed
        return set(rebooted)

    def _judge(self, nodes: list[str], hosts: dict[str, HostOutcome], what: str) -> None:
        for n in nodes:
            got = hosts.get(n)
            if got is None:
                self.fail(n, f"{what}: no result for the host")
                continue
            self.outcomes[n] = got
            if got.status in ("failed", "unreachable", "error"):
                self.fail(n, f"{what}: {got.status}: {got.detail.get('failure') or 'see the run artifacts'}")

    def certify(self, rebooted: set[str]) -> None:
        groups: dict[tuple[str, ...], list[str]] = {}
        for n in self.live:
            gates = gates_after(self.changed.get(n, []), n in rebooted)
            self.state.nodes[n].gates = None if gates is None else list(gates)
            if gates is not None:
                groups.setdefault(gates, []).append(n)
        for gates, nodes in sorted(groups.items()):
            self.step(nodes, "certifying")
            run_id = new_run_id()
            sub = replace(self.ctx, run_id=run_id, limit=",".join(nodes), force=True, check=False, gates=gates,
                          skip_gates=(), tags=None, skip_tags=None)
            sub.claim_stage("certify")
            try:
                summary = self.hooks.certify(self.inv, sub)
            except GridreadyError as err:
                for n in nodes:
                    self.fail(n, f"re-certification (run {run_id}): {err}")
                continue
            path = sub.stage_dir("certify") / "summary.json"
            for n in nodes:
                got = summary.hosts.get(n)
                if gates and got is not None:  # a run of some gates records nothing itself (gridready.ledger)
                    merge = partial(ledger.record_targeted, node=n, result=got, gates=gates, summary_path=path,
                                    run_id=run_id)
                    ledger.update(self.ctx.root, self.inv.customer, merge)
                if got is None or got.status != "certified":
                    why = "; ".join(got.blocking[:3]) if got is not None and got.blocking else ""
                    self.fail(n, f"re-certification (run {run_id}, gates: {', '.join(gates) or 'all'}): "
                                 f"{got.status if got else 'not judged'}" + (f": {why}" if why else ""))

    def give_back(self) -> None:
        serving = self.serving
        if serving:
            book = ledger.read(self.ctx.root, self.inv.customer)[1]
            urls = replica_urls(self.inv, book, serving)
            self.step(serving, "returning")
            for n in serving:
                down = [u for u in urls.get(n, []) if not _wait(lambda u=u: self.hooks.healthy(u),
                                                                self.hooks.waits.health_s, self.hooks)]
                if down:
                    self.fail(n, f"engine not healthy after {self.hooks.waits.health_s:g} s: {', '.join(down)}")
            back = self.serving
            why = f"rolling provision {self.ctx.run_id}: provisioned, re-certified, returned"
            for n in back:
                ledger.update(self.ctx.root, self.inv.customer, partial(ledger.undrain, node=n, reason=why))
            if back and not self.route("return"):
                for n in back:
                    self.fail(n, "the router was not re-applied with the node (see the run's watch/router-* "
                                 "artifacts)")
        seconds = round(time.monotonic() - self.started, 1)
        for n in self.live:
            self.state.nodes[n].step, self.state.nodes[n].seconds = "done", seconds
        roll_state.write(self.ctx.root, self.state)


def _start(inv: Inventory, ctx: RunContext, key: str, book: ledger.Ledger) -> tuple[RollState, list[list[str]]]:
    """The roll this run makes or resumes, and its batches."""
    batch = roll_plan.parse_amount(ctx.batch, "--batch", zero_ok=False)
    max_fail = roll_plan.parse_amount(ctx.max_fail, "--max-fail", zero_ok=True)
    idle, serving = plan_nodes(inv, ctx, book)
    previous = roll_state.resumable(roll_state.read(ctx.root, inv.customer), key)
    size = roll_plan.batch_size(len(serving), batch)
    tolerated = roll_plan.max_failures(len(idle) + len(serving), max_fail)
    done = previous.done() if previous else set()
    first = [n for n, e in book.nodes.items() if e.drained and previous is not None and n in previous.nodes]
    replicas, router_node = deployment_shape(inv, book)
    plan = roll_plan.batches(idle, serving, size, done, sorted(first), replicas=replicas, last=router_node)
    state = previous or RollState(customer=inv.customer, key=key, batch_size=size, max_failures=tolerated)
    state.status, state.stopped_because, state.current = "running", None, 0
    state.batch_size, state.max_failures, state.batches = size, tolerated, plan
    state.runs.append(ctx.run_id)
    for i, nodes in enumerate(plan, 1):
        for n in nodes:
            state.nodes[n] = NodeRoll(batch=i, serving=n in serving)
    roll_state.write(ctx.root, state)
    return state, plan


def apply(inv: Inventory, ctx: RunContext, timer: Timer, hooks: Hooks, *, key: str) -> ProvisionSummary:
    """Roll the selected nodes (the provision stage's run where nodes serve); its summary, exit 3 naming every
    node that failed."""
    state, plan = _start(inv, ctx, key, ledger.read(ctx.root, inv.customer)[1])
    stage_dir = ctx.stage_dir("provision")
    outcomes: dict[str, HostOutcome] = {}
    notes: list[str] = []
    try:
        for i, nodes in enumerate(plan, 1):
            state.current = i
            batch = Batch(inv, ctx, state, i, nodes, hooks, stage_dir / f"batch-{i}")
            batch.roll()
            outcomes.update(batch.outcomes)
            notes += batch.notes
            failed = state.failed()
            if roll_plan.should_stop(len(failed), state.max_failures) and i < len(plan):
                state.stopped_because = (f"{len(failed)} node(s) failed ({', '.join(failed)}), at most "
                                         f"{state.max_failures} tolerated; batches {i + 1}-{len(plan)} not started")
                break
    except BaseException as err:
        state.status, state.stopped_because = "stopped", f"interrupted: {type(err).__name__}: {err}"
        roll_state.write(ctx.root, state)
        raise
    state.status = "stopped" if state.failed() or state.stopped_because else "done"
    roll_state.write(ctx.root, state)
    return _summary(inv, ctx, timer, state, outcomes, notes)


def _summary(inv: Inventory, ctx: RunContext, timer: Timer, state: RollState, outcomes: dict[str, HostOutcome],
             notes: list[str]) -> ProvisionSummary:
    failed = state.failed()
    messages = [f"{n} failed at {state.nodes[n].reason}; it stays drained" for n in failed]
    if state.stopped_because:
        messages.append(f"roll stopped: {state.stopped_because}")
    if failed:
        messages.append(f"`gridready -i {inv.name} provision` resumes the roll (the failed nodes first, the done "
                        "ones left alone)")
    messages += notes
    for n, entry in state.nodes.items():
        if n in outcomes:
            outcomes[n].detail["roll"] = entry.model_dump()
    code = ExitCode.STAGE_FAILED if failed else ExitCode.OK
    return ProvisionSummary(
        customer=inv.customer, run_id=ctx.run_id, status="failed" if failed else "success",
        exit_code=int(code), check=False, started_at=timer.started_at, seconds=timer.seconds, hosts=outcomes,
        messages=messages, data={"rolled": True, "roll": state.model_dump()},
    ).close(ctx)
