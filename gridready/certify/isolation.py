"""Finding the bad node: two-pass pairwise isolation over a `run_pair(a, b)` callable (pure, fabric-agnostic).

Pass 1 pairs the fleet (n/2 disjoint runs, one round). A node whose pair fails is only a *suspect* (its partner may
be the bad one). Pass 2 retests every suspect against a known-good node (one from a passing pair) that it has not
failed with; it is quarantined only after failing with two different partners, and cleared when it passes.
Odd fleets: the node left over in pass 1 is tested against known-good partners. Without any known-good node
(every pair failed) suspects are cross-paired with partners they have not met, to find a known-good node; a
failed cross run is not evidence against either side (neither partner is known-good). At most `max_cross_rounds`
such rounds run; if none passes the fabric itself is suspect and the nodes stay unresolved (not quarantined).
Run count: n/2 + about 2 per suspect (each suspect needs one retest, a bad one two), so O(N) (GCP CHS two-pass,
ANCH sections 0 and 4).
Rounds hold disjoint pairs, so a round can run in parallel (`parallel=True`).

Racks (`rack_of`, the inventory's `gridready_rack` host variable): pass 1 pairs nodes of different racks first and a
retest prefers a known-good partner from another rack, so every pair crosses the spine (GCP cluster-health-scanner
offers random and inter-rack pairing for this): a spine or leaf-uplink fault shows in the pairs, not only in the
all-node run. When two or more nodes of one rack end up bad and every failure of theirs crossed racks, two of them
run together inside the rack (phase "leaf"): passing there, the fault is the rack's leaf uplink, not the nodes;
they are unresolved with the rack named in `leaf_suspect`, never quarantined as bad.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PairOutcome:
    """What one pair run says; `detail` carries the caller's record (parsed run, curve, evidence path)."""

    ok: bool
    busbw_gbps: float | None = None
    reason: str = ""
    error: bool = False  # the run itself failed (no result): counts as a failure of the pair
    detail: Any = None


RunPair = Callable[[str, str], "PairOutcome | float | bool"]


@dataclass
class PairRecord:
    a: str
    b: str
    round: int
    phase: str  # "pair" (pass 1), "retest" (suspect vs known-good), "cross" (suspect vs suspect)
    outcome: PairOutcome
    wall_s: float = 0.0


@dataclass
class IsolationResult:
    nodes: list[str]
    good: list[str]  # passed a pair run (or cleared on retest)
    bad: list[str]  # failed with two different partners: quarantine
    unresolved: list[str]  # failed once and no further known-good partner was available
    runs: list[PairRecord] = field(default_factory=list)
    failed_with: dict[str, list[str]] = field(default_factory=dict)
    wall_s: float = 0.0
    leaf_suspect: dict[str, str] = field(default_factory=dict)  # node -> rack whose leaf uplink is suspect

    @property
    def run_count(self) -> int:
        return len(self.runs)

    @property
    def rounds(self) -> int:
        return max((r.round for r in self.runs), default=0)

    @property
    def fabric_wide(self) -> bool:
        """No pair passed at all: more likely the fabric (switch, SM, config) than the nodes."""
        return len(self.nodes) > 1 and not any(r.outcome.ok for r in self.runs)

    def partners(self, node: str) -> list[PairRecord]:
        return [r for r in self.runs if node in (r.a, r.b)]


def _normalise(value: PairOutcome | float | bool | None, floor: float | None) -> PairOutcome:
    if isinstance(value, PairOutcome):
        return value
    if isinstance(value, bool):
        return PairOutcome(ok=value, reason="pass" if value else "fail")
    if value is None:
        return PairOutcome(ok=False, error=True, reason="no result")
    if floor is None:
        raise ValueError("run_pair returned a bandwidth: pass floor= to judge it")
    ok = float(value) >= floor
    return PairOutcome(ok=ok, busbw_gbps=float(value), reason=f"{value:g} GB/s vs floor {floor:g}")


def _call(run_pair: RunPair, a: str, b: str, floor: float | None) -> tuple[PairOutcome, float]:
    t0 = time.monotonic()
    try:
        out = _normalise(run_pair(a, b), floor)
    except Exception as exc:  # a launcher crash is a failed pair, recorded with its message
        out = PairOutcome(ok=False, error=True, reason=f"{type(exc).__name__}: {exc}")
    return out, time.monotonic() - t0


def isolate(
    nodes: Sequence[str],
    run_pair: RunPair,
    *,
    floor: float | None = None,
    parallel: bool = False,
    max_workers: int | None = None,
    max_cross_rounds: int = 2,
    rack_of: Mapping[str, str] | None = None,
) -> IsolationResult:
    """Run the two-pass isolation over `nodes` (kept in the given order for a reproducible pairing; with `rack_of`,
    partners come from different racks first)."""
    rack = dict(rack_of or {})
    order = list(dict.fromkeys(nodes))
    res = IsolationResult(nodes=order, good=[], bad=[], unresolved=[])
    failed: dict[str, list[str]] = {n: [] for n in order}  # evidence: pass-1 partner and known-good partners
    met: dict[str, set[str]] = {n: set() for n in order}  # everyone a node has run with
    good: set[str] = set()
    cross_rounds = 0
    t_start = time.monotonic()
    rnd = 0

    def run_round(pairs: list[tuple[str, str]], phase: str) -> list[tuple[str, str, PairOutcome]]:
        nonlocal rnd
        rnd += 1
        if parallel and len(pairs) > 1:
            with ThreadPoolExecutor(max_workers=max_workers or len(pairs)) as pool:
                outs = list(pool.map(lambda p: _call(run_pair, p[0], p[1], floor), pairs))
        else:
            outs = [_call(run_pair, a, b, floor) for a, b in pairs]
        done = []
        for (a, b), (out, wall) in zip(pairs, outs, strict=True):
            met[a].add(b)
            met[b].add(a)
            res.runs.append(PairRecord(a, b, rnd, phase, out, round(wall, 3)))
            done.append((a, b, out))
        return done

    # pass 1: a pairing of the fleet, across racks where the inventory names them
    first, leftover = _pairing(order, rack)
    pending: list[str] = leftover
    for a, b, out in run_round(first, "pair") if first else []:
        if out.ok:
            good |= {a, b}
        else:
            failed[a].append(b)
            failed[b].append(a)
            pending += [a, b]
    position = {n: i for i, n in enumerate(order)}
    pending = sorted(set(pending), key=position.__getitem__)

    # pass 2..: retest suspects until each is cleared, quarantined or out of partners
    while pending:
        if good:
            pairs, used = [], set()
            partners = sorted(good, key=position.__getitem__)  # once per round, not per suspect (O(N) per round)
            for s in pending:
                free = [g for g in partners if g not in used and g not in met[s]]
                g = next((g for g in free if rack.get(g, "") != rack.get(s, "") or s not in rack), None) or next(
                    iter(free), None)
                if g is not None:
                    pairs.append((s, g))
                    used.add(g)
            phase = "retest"
        elif cross_rounds < max_cross_rounds:
            cross_rounds += 1
            pairs, used = [], set()
            for s in pending:
                if s in used:
                    continue
                t = next((t for t in pending if t != s and t not in used and t not in met[s]), None)
                if t is not None:
                    pairs.append((s, t))
                    used |= {s, t}
            phase = "cross"
        else:
            pairs = []
        if not pairs:
            res.unresolved = list(pending)
            break
        for a, b, out in run_round(pairs, phase):
            if out.ok:
                good |= {a, b}
            elif phase == "retest":
                failed[a].append(b)
        pending = [n for n in pending if n not in good and len(set(failed[n])) < 2]
    res.bad = [n for n in order if n not in good and len(set(failed[n])) >= 2]
    for r, members in _leaf_candidates(res.bad, failed, rack).items():
        a, b, out = run_round([(members[0], members[1])], "leaf")[0]
        if out.ok:  # fine together inside the rack, failing only across it: the leaf uplink, not the nodes
            res.bad = [n for n in res.bad if n not in members]
            res.unresolved += members
            res.leaf_suspect.update(dict.fromkeys(members, r))
    res.good = [n for n in order if n in good]
    res.failed_with = {n: f for n, f in failed.items() if f}
    res.wall_s = round(time.monotonic() - t_start, 3)
    return res


def _pairing(order: list[str], rack: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """Disjoint pairs for pass 1 and the node left over: consecutive without racks; with racks, each pair takes one
    node from the two racks with the most nodes left (a node meets another rack whenever one is left)."""
    if not rack:
        return [(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)], order[-1:] if len(order) % 2 else []
    buckets: dict[str, list[str]] = {}
    for n in order:
        buckets.setdefault(rack.get(n, ""), []).append(n)
    pairs: list[tuple[str, str]] = []
    while True:
        left = sorted((r for r in buckets if buckets[r]), key=lambda r: -len(buckets[r]))  # stable: first seen wins
        if len(left) >= 2:
            pairs.append((buckets[left[0]].pop(0), buckets[left[1]].pop(0)))
        elif left:
            rest = buckets[left[0]]
            pairs += [(rest[i], rest[i + 1]) for i in range(0, len(rest) - 1, 2)]
            return pairs, rest[-1:] if len(rest) % 2 else []
        else:
            return pairs, []


def _leaf_candidates(bad: list[str], failed: Mapping[str, list[str]],
                     rack: Mapping[str, str]) -> dict[str, list[str]]:
    """Racks with two or more bad nodes whose every failure crossed racks: {rack: those nodes}."""
    out: dict[str, list[str]] = {}
    for n in bad:
        r = rack.get(n)
        if r and all(rack.get(p) != r for p in failed.get(n, [])):
            out.setdefault(r, []).append(n)
    return {r: m for r, m in out.items() if len(m) >= 2}
