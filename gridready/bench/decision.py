"""The decision record: the same workload on two (or more) tiers serving one model, compared by the spec's
objective, with the numbers side by side and what would change the outcome.

Tiers are compared per GPU: a tier on 8 GPUs serving twice the requests of a tier on 1 GPU does not win on goodput
or throughput, it costs four times as much per request. Goodput and throughput are divided by the tier's GPUs; cost
per token already counts every GPU. The reason and the record's headline say so and name each tier's GPUs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gridready.bench.verify import TierReport
from gridready.spec.decision import DecisionSpec, Objective

ORDER: tuple[Objective, ...] = ("goodput", "throughput", "cost")
UNITS = {"goodput": "req/s at SLO per GPU", "throughput": "output tok/s per GPU", "cost": "USD per 1M output tokens"}


class TierNumbers(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: str
    engine: str
    gpus: int
    gpu_hour_price_usd: float | None
    gate_passed: bool
    gate_level: str | None
    failed_slos: list[str]
    goodput_at_gate: float | None  # share of requests meeting every SLO at the gate level
    capacity_rps_at_slo: float  # best goodput req/s over levels whose goodput >= goodput_min
    capacity_level: str | None
    output_tok_s_at_slo: float  # output throughput at that level
    max_output_tok_s: float  # best output throughput over all levels, SLO or not
    max_output_level: str | None
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    e2e_p99_ms: float | None
    cost_per_mtok_usd: float | None  # at capacity_level; None without a price or without a level at SLO
    prefix_hit_rate: float | None = None  # share of prompt tokens the engine served from its prefix cache
    prefix_hit_source: str | None = None  # the engine's series it was read from
    prefix_engine_reported: float | None = None  # SGLang's own sglang:cache_hit_rate gauge

    def score(self, objective: Objective) -> float | None:
        """Higher is better, per GPU; None means not comparable (no price, nothing met the SLO)."""
        if objective == "goodput":
            return self.capacity_rps_at_slo / self.gpus
        if objective == "throughput":
            return self.max_output_tok_s / self.gpus
        return None if self.cost_per_mtok_usd is None else -self.cost_per_mtok_usd


class PrefixShootout(BaseModel):
    """Which tier reused the shared system prompt best (prefix-cache hit rate over the same workload)."""

    model_config = ConfigDict(extra="forbid")

    shared_prefix_len: int
    shared_prefix_share: float
    hit_rates: dict[str, float | None]  # tier -> hit rate (None: the engine exposes no prefix-cache series)
    winner: str | None
    statement: str


class PolicyFigures(BaseModel):
    """One routing policy inside a tier over a multi-turn chat replay."""

    model_config = ConfigDict(extra="forbid")

    requests: int
    failed: int
    ttft_p50_ms: float
    ttft_p90_ms: float
    prefix_hit_rate: float  # the engines' own prefix-cache hits / queries over the replay, summed over replicas
    seconds: float


class RoutingComparison(BaseModel):
    """Cache-aware routing inside a tier against round-robin, the same replay on the same replicas."""

    model_config = ConfigDict(extra="forbid")

    router: str
    simulated: bool
    cache_aware: PolicyFigures
    round_robin: PolicyFigures
    workload: dict[str, object]
    statement: str


def routing_comparison(cache_aware: PolicyFigures, round_robin: PolicyFigures, workload: dict[str, object],
                       router: str, simulated: bool) -> RoutingComparison:
    """The two policies' figures with one sentence comparing their TTFT and hit rate."""
    def ratio(a: float, b: float) -> str:
        return f"{b / a:.2f}x lower" if a > 0 and b > a else f"{a / b:.2f}x higher" if b > 0 and a > b else "equal"

    statement = (f"cache-aware: TTFT p50 {cache_aware.ttft_p50_ms} ms / p90 {cache_aware.ttft_p90_ms} ms, "
                 f"prefix-cache hit rate {cache_aware.prefix_hit_rate:.1%}; round-robin: "
                 f"{round_robin.ttft_p50_ms} / {round_robin.ttft_p90_ms} ms, {round_robin.prefix_hit_rate:.1%}; "
                 f"cache-aware p90 TTFT {ratio(cache_aware.ttft_p90_ms, round_robin.ttft_p90_ms)}")
    if simulated:
        statement = "SIMULATED engines: " + statement
    return RoutingComparison(router=router, simulated=simulated, cache_aware=cache_aware, round_robin=round_robin,
                             workload=workload, statement=statement)


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    objective: Objective
    decided_by: Objective | None  # the objective that separated the tiers (None: a tie on all)
    winner: str
    reason: str
    tiers: list[TierNumbers]
    by_objective: dict[str, str | None]  # who would win under each objective alone
    what_would_change: list[str]
    workload: dict[str, object]
    simulated: bool
    prefix_reuse: PrefixShootout | None = None
    routing: RoutingComparison | None = None  # routing inside a tier (benchmarks/router_cache_replay.py)


def numbers(r: TierReport, spec: DecisionSpec) -> TierNumbers:
    price = spec.price(r.tier)
    at_slo = [s for s in r.levels if s.goodput is not None and s.goodput >= r.slo.goodput_min]
    cap = max(at_slo, key=lambda s: s.goodput_rps, default=None)
    best = max(r.levels, key=lambda s: s.output_throughput, default=None)
    gate = next((s for s in r.levels if s.level.label == r.gate.level), None)
    cost = None
    if price is not None and cap is not None and cap.output_throughput > 0:
        cost = price * r.gpus / (cap.output_throughput * 3600.0) * 1e6
    return TierNumbers(
        tier=r.tier, engine=r.engine, gpus=r.gpus, gpu_hour_price_usd=price, gate_passed=r.gate.passed,
        gate_level=r.gate.level, failed_slos=r.gate.failed_slos,
        goodput_at_gate=gate.goodput if gate else None,
        capacity_rps_at_slo=cap.goodput_rps if cap else 0.0, capacity_level=cap.level.label if cap else None,
        output_tok_s_at_slo=cap.output_throughput if cap else 0.0,
        max_output_tok_s=best.output_throughput if best else 0.0, max_output_level=best.level.label if best else None,
        ttft_p99_ms=gate.ttft.p99 if gate else None, tpot_p99_ms=gate.tpot.p99 if gate else None,
        e2e_p99_ms=gate.e2e.p99 if gate else None, cost_per_mtok_usd=cost,
        prefix_hit_rate=r.prefix_cache.hit_rate if r.prefix_cache else None,
        prefix_hit_source=(f"{r.prefix_cache.hit_series} / {r.prefix_cache.query_series}"
                           if r.prefix_cache else None),
        prefix_engine_reported=r.prefix_cache.engine_reported if r.prefix_cache else None)


def shootout(rows: list[TierNumbers], reports: list[TierReport], spec: DecisionSpec) -> PrefixShootout | None:
    """The prefix-reuse comparison, when the workload carried a shared system prompt."""
    wl = reports[0].workload
    if not wl.shared_prefix_len:
        return None
    rates = {r.tier: r.prefix_hit_rate for r in rows}
    known = sorted(((v, t) for t, v in rates.items() if v is not None), reverse=True)
    ttft = {r.tier: r.ttft_p99_ms for r in rows}
    if not known:
        return PrefixShootout(shared_prefix_len=wl.shared_prefix_len, shared_prefix_share=wl.shared_prefix_share,
                              hit_rates=rates, winner=None,
                              statement="no tier exposed prefix-cache metrics; no prefix-reuse winner")
    (best, who), rest = known[0], known[1:]
    if rest and _rel(best, rest[0][0]) <= spec.tie_margin:
        statement = (f"prefix reuse is a tie within {spec.tie_margin:.0%}: "
                     + ", ".join(f"{t} {v:.1%}" for v, t in known))
        winner = None
    else:
        others = "; ".join(f"{t} {v:.1%} (TTFT p99 {_v(ttft[t])} ms)" for v, t in rest) or "no other tier measured"
        statement = (f"{who} reuses the shared {wl.shared_prefix_len}-token system prompt best: "
                     f"{best:.1%} of prompt tokens from its prefix cache (TTFT p99 {_v(ttft[who])} ms) vs {others}")
        winner = who
    missing = [t for t, v in rates.items() if v is None]
    if missing:
        statement += f"; no prefix-cache series from {', '.join(missing)}"
    return PrefixShootout(shared_prefix_len=wl.shared_prefix_len, shared_prefix_share=wl.shared_prefix_share,
                          hit_rates=rates, winner=winner, statement=statement)


def _v(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _ranked(rows: list[TierNumbers], objective: Objective) -> list[tuple[float, TierNumbers]]:
    scored = [(s, r) for r in rows if (s := r.score(objective)) is not None]
    return sorted(scored, key=lambda x: x[0], reverse=True)


def _rel(a: float, b: float) -> float:
    """Relative lead of score a over score b (both 'higher is better', possibly negative costs)."""
    return (a - b) / max(abs(a), abs(b), 1e-12)


def _fmt(objective: Objective, score: float) -> str:
    if objective == "cost":
        return f"${-score:.3f} per 1M output tokens"
    return f"{score:.2f} {UNITS[objective]}"


def _gpus(r: TierNumbers) -> str:
    return f"{r.gpus} GPU{'s' if r.gpus != 1 else ''}"


def _winner_by(rows: list[TierNumbers], objective: Objective) -> str | None:
    ranked = _ranked(rows, objective)
    if not ranked or (objective == "goodput" and ranked[0][0] <= 0):
        return None
    return ranked[0][1].tier


def decide(reports: list[TierReport], spec: DecisionSpec | None = None, model: str | None = None) -> Decision:
    """Compare tiers serving one model (the caller groups them, e.g. by model source; served names may differ)
    that ran the same workload. model: the record's title (default: the served names). ValueError when fewer
    than two reports or different workloads."""
    spec = spec or DecisionSpec()
    if len(reports) < 2:
        raise ValueError("a decision needs at least two tier reports")
    models = sorted({r.model for r in reports})
    workloads = {r.workload.model_dump_json(exclude={"api"}) for r in reports}
    if len(workloads) != 1:
        raise ValueError("tiers ran different workloads; a decision needs the same one")
    rows = [numbers(r, spec) for r in reports]
    order = [spec.objective, *(o for o in ORDER if o != spec.objective)]
    decided_by: Objective | None = None
    winner = rows[0]
    reason = ""
    for obj in order:
        ranked = _ranked(rows, obj)
        if len(ranked) < 2:
            continue  # e.g. no price: not comparable on cost
        (s1, r1), (s2, r2) = ranked[0], ranked[1]
        if obj == "goodput" and s1 <= 0:
            continue  # no tier met its SLO at any level
        lead = _rel(s1, s2)
        if lead > spec.tie_margin:
            decided_by, winner = obj, r1
            reason = (f"{r1.tier} wins on {obj} per GPU: {_fmt(obj, s1)} on {_gpus(r1)} vs {_fmt(obj, s2)} for "
                      f"{r2.tier} on {_gpus(r2)} ({lead:.1%} ahead, tie margin {spec.tie_margin:.0%})")
            if obj != spec.objective:
                reason = f"tie on {spec.objective} (within {spec.tie_margin:.0%}); " + reason
            break
    if decided_by is None:
        winner = max(rows, key=lambda r: r.max_output_tok_s / r.gpus)
        reason = (f"no objective separates the tiers per GPU by more than {spec.tie_margin:.0%} (or none met its "
                  f"SLO); {winner.tier} kept for its higher peak throughput per GPU")
    by: dict[str, str | None] = {o: _winner_by(rows, o) for o in ORDER}
    return Decision(model=model or " / ".join(models), objective=spec.objective, decided_by=decided_by,
                    winner=winner.tier, reason=reason, tiers=rows, by_objective=by,
                    what_would_change=_what_would_change(rows, reports, winner, decided_by, spec, by),
                    workload=reports[0].workload.model_dump(mode="json", exclude={"api"}),
                    simulated=any(r.simulated for r in reports), prefix_reuse=shootout(rows, reports, spec))


def _what_would_change(rows: list[TierNumbers], reports: list[TierReport], winner: TierNumbers,
                       decided_by: Objective | None, spec: DecisionSpec, by: dict[str, str | None]) -> list[str]:
    out: list[str] = []
    others = [r for r in rows if r.tier != winner.tier]
    if decided_by is not None:
        for o in others:
            s_w, s_o = winner.score(decided_by), o.score(decided_by)
            if s_w is None or s_o is None:
                continue
            if decided_by == "cost":
                out.append(f"{o.tier} would win on cost if its cost per 1M tokens fell by "
                           f"{1 - (-s_w) / (-s_o):.0%} (to ${-s_w:.3f}).")
            elif s_o > 0:
                out.append(f"{o.tier} would need {s_w / s_o - 1:.0%} more {UNITS[decided_by]} to win on "
                           f"{decided_by}.")
            else:
                out.append(f"{o.tier} met its SLO at no load level; it cannot win on {decided_by} until it does.")
    for obj, who in by.items():
        if who is not None and who != winner.tier and obj != spec.objective:
            out.append(f"With objective '{obj}' instead of '{spec.objective}', {who} would win.")
    for o in others:
        price = o.gpu_hour_price_usd
        if price is not None and winner.cost_per_mtok_usd is not None and o.output_tok_s_at_slo > 0:
            breakeven = winner.cost_per_mtok_usd * o.output_tok_s_at_slo * 3600.0 / 1e6 / o.gpus
            if breakeven < price:
                out.append(f"{o.tier} becomes cheaper per token than {winner.tier} below "
                           f"${breakeven:.2f} per GPU-hour (now ${price:.2f}).")
        if o.failed_slos:
            measured = {c.slo: c.measured for r in reports if r.tier == o.tier for c in r.gate.checks}
            relax = ", ".join(f"{s} to {measured.get(s)}" for s in o.failed_slos if measured.get(s) is not None)
            if relax:
                out.append(f"{o.tier} fails {', '.join(o.failed_slos)} at {o.gate_level}; it would pass with "
                           f"{relax}.")
    out += _crossovers(reports)
    if any(r.simulated for r in reports):
        out.append("These numbers come from gridready's simulated engine; rerun on the real fleet before acting.")
    return out


def _crossovers(reports: list[TierReport]) -> list[str]:
    """Load levels where the throughput order differs from the order at the gate level."""
    if len(reports) != 2:
        return []
    a, b = reports
    flips = []
    for la in a.levels:
        lb = b.level(la.level.value)
        if lb is not None and la.output_throughput > 0 and lb.output_throughput > 0:
            flips.append((la.level.label, la.output_throughput > lb.output_throughput))
    if len({f for _l, f in flips}) > 1:
        lead = ", ".join(f"{lab}: {a.tier if first else b.tier}" for lab, first in flips)
        return [f"The throughput leader changes with load ({lead}); a different target load changes the answer."]
    return []
