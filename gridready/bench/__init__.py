"""Serving verification: readiness, smoke, load benchmark against the SLOs, SLO gate and decision record.

The serve stage calls, per tier and then once for all tiers serving one model:

    report = verify_tier(Endpoint.for_tier(tier, host), tier, workload, gpus=plan.gpus, unit_state=..., log_lines=...)
    write_tier_reports(stage_dir, [report, ...], customer)      # bench/<tier>.json, junit.xml, .prom
    decision = decide([report_a, report_b], DecisionSpec(...))
    write_decision(stage_dir / "decision", decision, [report_a, report_b])
    report.gate.raise_if_failed()                                # StageFailed: exit 3, names the SLO

See docs/bench.md.
"""

from gridready.bench.decision import Decision, TierNumbers, decide
from gridready.bench.endpoint import Endpoint
from gridready.bench.gate import GateOutcome, SloCheck, slo_gate
from gridready.bench.outputs import write_json, write_junit, write_prom, write_tier_reports
from gridready.bench.protocols import Api
from gridready.bench.readiness import ReadinessReport, await_ready
from gridready.bench.record import bench_data, write_decision, write_decisions_by_model
from gridready.bench.smoke import SmokeReport, smoke
from gridready.bench.stats import LevelSummary, Stats
from gridready.bench.verify import TierReport, averify_tier, verify_tier
from gridready.bench.workload import Level, Workload
from gridready.spec.decision import DecisionSpec

__all__ = [
    "Api", "Decision", "DecisionSpec", "Endpoint", "GateOutcome", "Level", "LevelSummary", "ReadinessReport",
    "SloCheck", "SmokeReport", "Stats", "TierNumbers", "TierReport", "Workload", "averify_tier", "await_ready",
    "bench_data", "decide", "slo_gate", "smoke", "verify_tier", "write_decision", "write_decisions_by_model",
    "write_json", "write_junit", "write_prom", "write_tier_reports",
]
