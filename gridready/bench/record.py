"""decision.md, decision.json and the plots of a decision record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridready.artifacts import make_dirs
from gridready.bench.decision import Decision, RoutingComparison, decide
from gridready.bench.outputs import write_json, write_text_atomic
from gridready.bench.verify import TierReport

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _pyplot() -> Any:
    """matplotlib on the Agg backend, imported only when a plot is drawn (it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

PCTS = (("p50", "-"), ("p90", "--"), ("p99", ":"))


def _log_axis(ax: Axes, reports: list[TierReport]) -> None:
    """Log2 x axis labelled with the actual load levels."""
    ax.set_xscale("log", base=2)
    ticks = sorted({lv.level.value for r in reports for lv in r.levels})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()


def _x(reports: list[TierReport]) -> str:
    kinds = {lv.level.kind for r in reports for lv in r.levels}
    return "request rate (req/s)" if kinds == {"rate"} else "concurrency (requests in flight)"


def _fit_to_data(ax: Axes, metric: str, reports: list[TierReport], limits: list[float]) -> None:
    """The y axis spans the measured percentiles, not an SLO line far above them (which flattened the data at the
    bottom); an SLO above the range is said in the axis label instead."""
    ax.set_ylabel("ms")
    ys = [y for r in reports for lv in r.levels for q, _ in PCTS if (y := getattr(getattr(lv, metric), q)) is not None]
    if not ys:
        return
    top = max(ys) * 1.15
    ax.set_ylim(0, top)
    above = sorted({lim for lim in limits if lim > top})
    if above:
        ax.set_ylabel(f"ms (SLO p99 {', '.join(f'{lim:g}' for lim in above)} ms: above this range)")


def plot_latency(path: Path, reports: list[TierReport], simulated: bool) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, metric, title in zip(axes, ("ttft", "tpot", "e2e"), ("TTFT", "TPOT", "End-to-end latency"),
                                 strict=True):
        limits: list[float] = []
        for i, r in enumerate(reports):
            color = f"C{i}"
            xs = [lv.level.value for lv in r.levels]
            for q, style in PCTS:
                ys = [getattr(getattr(lv, metric), q) for lv in r.levels]
                ax.plot(xs, [float("nan") if y is None else y for y in ys], style, marker="o", color=color,
                        label=f"{r.tier} {q}")
            limit = {"ttft": r.slo.ttft_ms_p99, "tpot": r.slo.tpot_ms_p99, "e2e": r.slo.e2e_ms_p99}[metric]
            if limit:
                ax.axhline(limit, color=color, alpha=0.4, linewidth=1)
                limits.append(limit)
        _fit_to_data(ax, metric, reports, limits)
        ax.set_title(title + (" (SLO p99: thin line)" if metric == "ttft" else ""))
        ax.set_xlabel(_x(reports))
        _log_axis(ax, reports)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle("Latency percentiles per tier" + (" — SIMULATED engine" if simulated else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_throughput(path: Path, reports: list[TierReport], simulated: bool) -> Path:
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for i, r in enumerate(reports):
        xs = [lv.level.value for lv in r.levels]
        ax1.plot(xs, [lv.output_throughput for lv in r.levels], "-o", color=f"C{i}", label=f"{r.tier} output")
        ax2.plot(xs, [lv.request_throughput for lv in r.levels], "-o", color=f"C{i}", label=f"{r.tier} completed")
        ax2.plot(xs, [lv.goodput_rps for lv in r.levels], "--s", color=f"C{i}", label=f"{r.tier} at SLO (goodput)")
    ax1.set_ylabel("output tokens / s")
    ax2.set_ylabel("requests / s")
    for ax in (ax1, ax2):
        ax.set_xlabel(_x(reports))
        _log_axis(ax, reports)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Throughput vs load per tier" + (" — SIMULATED engine" if simulated else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _v(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None else fmt.format(x)


def markdown(d: Decision, plots: list[str]) -> str:
    t = d.tiers
    head = "| | " + " | ".join(f"**{r.tier}** ({r.engine}, {r.gpus} GPU)" for r in t) + " |"
    sep = "|---|" + "---|" * len(t)
    rows = [
        ("SLO gate", [("pass" if r.gate_passed else f"FAIL: {', '.join(r.failed_slos)}") + f" at {r.gate_level}"
                      for r in t]),
        ("goodput at gate level", [_v(r.goodput_at_gate and r.goodput_at_gate * 100, "{:.1f} %") for r in t]),
        ("capacity at SLO (req/s)", [f"{r.capacity_rps_at_slo:.2f} at {r.capacity_level or '-'}" for r in t]),
        ("output tok/s at that level", [f"{r.output_tok_s_at_slo:.1f}" for r in t]),
        ("peak output tok/s", [f"{r.max_output_tok_s:.1f} at {r.max_output_level or '-'}" for r in t]),
        ("TTFT p99 at gate (ms)", [_v(r.ttft_p99_ms) for r in t]),
        ("TPOT p99 at gate (ms)", [_v(r.tpot_p99_ms) for r in t]),
        ("E2E p99 at gate (ms)", [_v(r.e2e_p99_ms) for r in t]),
        ("GPU-hour price (USD)", [_v(r.gpu_hour_price_usd, "{:.2f}") for r in t]),
        ("USD per 1M output tokens", [_v(r.cost_per_mtok_usd, "{:.3f}") for r in t]),
        ("prefix-cache hit rate (run)", [_v(r.prefix_hit_rate and r.prefix_hit_rate * 100, "{:.1f} %")
                                         if r.prefix_hit_rate is not None else "-" for r in t]),
        ("engine's own hit-rate gauge", [_v(r.prefix_engine_reported and r.prefix_engine_reported * 100,
                                            "{:.1f} %") if r.prefix_engine_reported is not None else "-"
                                         for r in t]),
    ]
    lines = [f"# Engine decision: {d.model}", ""]
    if d.simulated:
        lines += ["> **SIMULATED**: these tiers ran gridready's simulated engine, not vLLM/SGLang/TensorRT-LLM on "
                  "GPUs.", ""]
    gpus = ", ".join(f"{r.tier} on {r.gpus} GPU{'s' if r.gpus != 1 else ''}" for r in t)
    lines += [f"**Winner per GPU: {d.winner}** (objective: {d.objective} per GPU; decided by: "
              f"{d.decided_by or 'tie'}; compared per GPU: {gpus})", "",
              d.reason + ".", "", "## Numbers side by side", "", head, sep]
    lines += [f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows]
    if d.prefix_reuse is not None:
        p = d.prefix_reuse
        lines += ["", "## Prefix-reuse shootout", "",
                  f"Shared system prompt of {p.shared_prefix_len} tokens on {p.shared_prefix_share:.0%} of the "
                  f"requests. **Prefix-reuse winner: {p.winner or 'none'}**. {p.statement}.", "",
                  "Sources: " + "; ".join(f"{r.tier}: {r.prefix_hit_source}" for r in t if r.prefix_hit_source)
                  + " (difference over the benchmark run)."]
    if d.routing is not None:
        lines += routing_section(d.routing)
    lines += ["", "Who would win under each objective alone: "
              + ", ".join(f"{k}: {v or 'none'}" for k, v in d.by_objective.items()) + ".", "",
              "## What would change the decision", ""]
    lines += [f"- {w}" for w in d.what_would_change] or ["- nothing measured points to a different choice"]
    wl = d.workload
    lines += ["", "## Workload", "",
              f"Same on every tier: levels {wl.get('request_rate') or wl.get('concurrency')} "
              f"({'Poisson req/s' if wl.get('request_rate') else 'fixed concurrency'}), input {wl['input_len']} / "
              f"output {wl['output_len']} tokens, at most {wl['num_prompts']} requests or {wl['duration_s']} s per "
              f"level, dataset {wl.get('dataset') or 'synthetic'}.", "", "## Plots", ""]
    lines += [f"![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def routing_section(r: RoutingComparison) -> list[str]:
    """The Markdown lines of a decision record's routing comparison, from its heading on."""
    label = " (SIMULATED engines)" if r.simulated else ""
    rows = [("requests (failed)", lambda f: f"{f.requests} ({f.failed})"),
            ("TTFT p50 (ms)", lambda f: f"{f.ttft_p50_ms:.1f}"), ("TTFT p90 (ms)", lambda f: f"{f.ttft_p90_ms:.1f}"),
            ("engines' prefix-cache hit rate", lambda f: f"{f.prefix_hit_rate:.1%}")]
    lines = ["", f"## Routing inside a tier: cache-aware vs round-robin{label}", "",
             f"Tier router {r.router}, the same multi-turn chat replay under each policy "
             f"({', '.join(f'{k} {v}' for k, v in r.workload.items())}).", "",
             "| | cache-aware | round-robin |", "|---|---|---|"]
    lines += [f"| {name} | {cell(r.cache_aware)} | {cell(r.round_robin)} |" for name, cell in rows]
    return [*lines, "", r.statement + "."]


def write_decision(out_dir: Path, decision: Decision, reports: list[TierReport]) -> dict[str, Path]:
    """Write decision.json, decision.md, latency_percentiles.png, throughput_vs_concurrency.png in out_dir."""
    make_dirs(out_dir)  # never through a link
    lat = plot_latency(out_dir / "latency_percentiles.png", reports, decision.simulated)
    thr = plot_throughput(out_dir / "throughput_vs_concurrency.png", reports, decision.simulated)
    paths = {"json": write_json(out_dir / "decision.json", decision),
             "md": write_text_atomic(out_dir / "decision.md", markdown(decision, [lat.name, thr.name])),
             "latency_plot": lat, "throughput_plot": thr}
    return paths



def write_decisions_by_model(stage_dir: Path, by_source: list[tuple[str, TierReport]], spec: Any) -> None:
    """One decision record per model source that two or more tiers serve (stage_dir/decision/<source>), from the
    spec's decision rule; `by_source`: each compared tier's report with its model's source."""
    groups: dict[str, list[TierReport]] = {}
    for source, report in by_source:
        groups.setdefault(source, []).append(report)
    for source, group in groups.items():
        if len(group) > 1:
            write_decision(stage_dir / "decision" / source.replace("/", "--"), decide(group, spec), group)


def bench_data(reports: list[TierReport]) -> dict[str, Any]:
    """serve's `data.bench`: each tier's gate verdict, message and whether its engine was simulated."""
    return {r.tier: {"passed": r.gate.passed, "message": r.gate.message, "simulated": r.simulated} for r in reports}
