"""Passive health: what the watcher does about the signals of a certified fleet. Pure: signals and the ledger in,
actions out; `invoke watch` (gridready.stages.watch) carries them out.

A fault on a node (an Xid from the kernel log, a DCGM health watch or field, an engine's failed health check)
drains it from serving and re-certifies it on the gates that match the fault only; a pass returns it, a fail
quarantines it. A circuit breaker never lets drained nodes exceed `max_drain_share` of a pool (node group): a
fault past the breaker holds the node in service and says so (NVSentinel's 50% breaker is the default). Idle nodes
are re-certified once their last verdict is older than `recertify_days` (weekly by default); serving nodes in
rolling order, one at a time per pool, when no node of the pool is drained.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gridready.ledger import Ledger

SignalKind = Literal["xid", "dcgm_health", "dcgm_field", "engine_health"]
ActionKind = Literal["drain", "recertify", "hold", "return", "quarantine"]

# Xid -> the gates that re-judge its fault (NVIDIA's Xid catalog: memory, bus, NVLink, generic).
XID_GATES: dict[int, tuple[str, ...]] = {
    **{x: ("xid", "ecc", "row_remap", "dcgm") for x in (48, 63, 64, 92, 94, 95, 140)},
    **{x: ("xid", "gpu_inventory", "pcie_link", "dcgm") for x in (61, 62, 79, 119, 120)},
    **{x: ("xid", "nvlink", "peer_bandwidth", "nccl_allreduce") for x in (74, 144, 145, 146, 147, 148, 149)},
}
XID_DEFAULT = ("xid", "gpu_inventory", "dcgm")
# DCGM health watch systems (dcgmi health -c) -> gates.
DCGM_GATES: dict[str, tuple[str, ...]] = {
    "pcie": ("pcie_link", "h2d_bandwidth"), "nvlink": ("nvlink", "peer_bandwidth", "nccl_allreduce"),
    "memory": ("ecc", "row_remap", "hbm_bandwidth"), "mem": ("ecc", "row_remap", "hbm_bandwidth"),
    "thermal": ("temperature", "throttle", "clocks"), "power": ("power", "throttle"),
    "inforom": ("gpu_inventory", "software_versions"), "driver": ("software_versions", "services"),
    "nvswitch": ("nvlink", "services", "nccl_allreduce"),
}
ENGINE_GATES = ("services", "gpu_inventory", "dcgm", "gemm_bf16")


class Signal(BaseModel):
    """One observation the watcher reads (DCGM health/fields, Xid from the kernel log, engine health)."""

    model_config = ConfigDict(extra="forbid")

    node: str
    kind: SignalKind
    code: str = Field("", description="Xid number, DCGM health system, field name or the engine's tier")
    detail: str = ""
    severity: Literal["warning", "failure"] = "failure"


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: ActionKind
    node: str
    gates: list[str] = Field(default_factory=list, description="recertify: the gates to re-run")
    reason: str


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_drain_share: float = Field(0.5, gt=0, le=1, description="at most this share of a pool drained at once")
    recertify_days: float = Field(7, gt=0, description="re-certify a node whose verdict is older than this")


def gates_for(signal: Signal) -> list[str]:
    """The gates that re-judge the fault a signal reports."""
    if signal.kind == "xid":
        try:
            return list(XID_GATES.get(int(signal.code), XID_DEFAULT))
        except ValueError:
            return list(XID_DEFAULT)
    if signal.kind in ("dcgm_health", "dcgm_field"):
        key = signal.code.lower().removeprefix("dcgm_health_watch_")
        return list(next((g for k, g in DCGM_GATES.items() if k in key), ("dcgm",)))
    return list(ENGINE_GATES)


def _pools(book: Ledger, nodes: Iterable[str]) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for n in nodes:
        entry = book.nodes.get(n)
        pools.setdefault((entry.group if entry else None) or "(none)", []).append(n)
    return pools


def decide(book: Ledger, signals: Iterable[Signal], nodes: Iterable[str], policy: Policy | None = None,
           now: datetime | None = None) -> list[Action]:
    """The actions for one pass of the watcher over `nodes` (the inventory's GPU hosts).

    - a failure signal on a certified node: drain it (unless the breaker holds it) and re-certify its gates;
    - a drained node with no signal left: re-certify its gates (a pass returns it; the certify run records it);
    - warnings are reported, never acted on;
    - idle nodes past recertify_days: re-certify everything; serving nodes one per pool when none is drained.
    """
    policy = policy or Policy()
    now = now or datetime.now(UTC)
    nodes = list(nodes)
    roles = book.serving.roles if book.serving else {}
    faults: dict[str, list[Signal]] = {}
    for s in signals:
        if s.node in nodes and s.severity == "failure":
            faults.setdefault(s.node, []).append(s)
    actions: list[Action] = []
    acted: set[str] = set()
    for pool, members in sorted(_pools(book, nodes).items()):
        budget = math.floor(policy.max_drain_share * len(members) + 1e-9)
        drained = [n for n in members if (e := book.nodes.get(n)) and e.drained]
        for node in members:
            entry = book.nodes.get(node)
            if node not in faults or entry is None:
                continue
            gates = sorted({g for s in faults[node] for g in gates_for(s)})
            reason = "; ".join(f"{s.kind} {s.code} {s.detail}".strip() for s in faults[node])
            if entry.drained or entry.verdict != "certified":
                actions.append(Action(kind="recertify", node=node, gates=gates, reason=f"still faulty: {reason}"))
            elif len(drained) >= budget:
                actions.append(Action(kind="hold", node=node, gates=gates, reason=(
                    f"circuit breaker: {len(drained)} of {len(members)} node(s) of {pool} drained, at most "
                    f"{budget} ({policy.max_drain_share:.0%}); {reason}")))
            else:
                drained.append(node)
                actions += [Action(kind="drain", node=node, gates=gates, reason=reason),
                            Action(kind="recertify", node=node, gates=gates, reason=reason)]
            acted.add(node)
        for node in drained:
            entry = book.nodes.get(node)
            if node in acted or entry is None or not entry.drained:
                continue
            actions.append(Action(kind="recertify", node=node, gates=[],
                                  reason=f"drained ({entry.drain_reason}); no fault signal left"))
            acted.add(node)
        rolling = not drained
        for node in members:
            entry = book.nodes.get(node)
            if node in acted or entry is None or entry.verdict != "certified":
                continue
            judged = datetime.fromisoformat(entry.judged_at)
            judged = judged if judged.tzinfo else judged.replace(tzinfo=UTC)
            if now - judged < timedelta(days=policy.recertify_days):
                continue
            if node in roles:
                if not rolling:
                    continue
                rolling = False  # one serving node of the pool at a time
                actions.append(Action(kind="drain", node=node, reason="scheduled re-certification (rolling)"))
            actions.append(Action(kind="recertify", node=node, reason=f"scheduled: last verdict {entry.judged_at}"))
            acted.add(node)
    return actions


def outcome(actions: Iterable[Action], verdicts: Mapping[str, str]) -> list[Action]:
    """After the re-certification: a drained node that passed returns, one that did not is quarantined."""
    out = []
    for a in actions:
        if a.kind != "recertify" or a.node not in verdicts:
            continue
        passed = verdicts[a.node] == "certified"
        out.append(Action(kind="return" if passed else "quarantine", node=a.node, gates=a.gates,
                          reason="re-certification passed" if passed else f"re-certification: {verdicts[a.node]}"))
    return out


# ---------------------------------------------------------------- signals from what the nodes already print

def from_kernel_log(node: str, text: str, seen: Iterable[str] = ()) -> list[Signal]:
    """Xid lines of `journalctl -k` / dmesg (gridready.probe.kernel_log); lines in `seen` were acted on before."""
    from gridready.probe import kernel_log

    done = set(seen)
    return [Signal(node=node, kind="xid", code=str(x["xid"]), detail=f"{x['pci']}: {x['message']}"[:200])
            for x in kernel_log.parse(text)["xid"] if x["line"] not in done]


def from_dcgm_health(node: str, text: str) -> list[Signal]:
    """`dcgmi health -c` (after `dcgmi health -s a`): each system of each entity reported Warning or Failure becomes
    a signal, its incident messages (the rows under it) the detail.

    The layout is dcgmi's tree (NVIDIA DCGM, dcgmi/Health.cpp GenerateOutputFromResponse with DcgmiOutputTree,
    https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-health.html): an
    `Overall Health` row, then per entity a `-> <id>` row, an `-> Errors` row and one `-> <System> system` row per
    unhealthy system with its state, each incident message on the rows below it with an empty left cell
    (tests/unit/test_health.py DCGM_REPORT).

    An unhealthy `Overall Health` with no system row under it is one signal of system `overall`. A one-row form
    (`| PCIe system | Failure: ... |`) reads the same. `Error: Health watches not enabled` gives nothing."""
    out: list[Signal] = []
    overall = ""
    entity = ""
    current: dict[str, str] | None = None
    found: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.startswith("|") or line.count("|") < 3:
            continue
        left, right = (c.strip() for c in line.strip().strip("|").split("|", 1))
        label = left.removeprefix("->").strip()
        low = label.lower()
        state = right.split(" ", 1)[0].rstrip(":,-").lower()
        if low == "overall health":
            overall = state
            current = None
        elif not left and current is not None and right:
            current["detail"] = f"{current['detail']} {right}".strip()  # an incident message's overflow row
        elif label.isdigit() and left.startswith("->"):
            entity, current = label, None
        elif right and (low == "driver" or any(k in low for k in DCGM_GATES)):
            current = {"system": next((k for k in DCGM_GATES if k in low), "driver"), "state": state,
                       "entity": entity, "detail": right.split(" ", 1)[1].lstrip("-: ") if " " in right else ""}
            found.append(current)
        else:
            current = None
    for f in found:
        if f["state"] not in ("warning", "failure"):
            continue
        where = f"GPU {f['entity']}: " if f["entity"] else ""
        out.append(Signal(node=node, kind="dcgm_health", code=f["system"], detail=(where + f["detail"])[:200],
                          severity="failure" if f["state"] == "failure" else "warning"))
    if not out and overall in ("warning", "failure"):
        out.append(Signal(node=node, kind="dcgm_health", code="overall", detail=f"Overall Health: {overall}",
                          severity="failure" if overall == "failure" else "warning"))
    return out


def from_engine(node: str, tier: str, healthy: bool, detail: str = "") -> list[Signal]:
    """A tier's engine on `node` that failed its health check."""
    return [] if healthy else [Signal(node=node, kind="engine_health", code=tier, detail=detail[:200])]
