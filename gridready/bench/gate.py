"""The SLO gate: a tier passes when every SLO in its spec holds at the gate level; else exit 3, naming the SLO."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gridready.bench.stats import LevelSummary
from gridready.errors import StageFailed
from gridready.exitcodes import ExitCode
from gridready.spec.serving import Slo


class SloCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slo: str  # the spec key: ttft_ms_p99, tpot_ms_p99, e2e_ms_p99, goodput_min, or readiness/smoke/requests
    limit: float | None
    measured: float | None
    unit: str
    passed: bool
    reason: str


class GateOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: str
    level: str | None
    passed: bool
    checks: list[SloCheck]
    message: str

    @property
    def failed_slos(self) -> list[str]:
        return [c.slo for c in self.checks if not c.passed]

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.passed else ExitCode.STAGE_FAILED

    def raise_if_failed(self) -> None:
        """Raise StageFailed (exit 3) with the message naming each failed SLO."""
        if not self.passed:
            raise StageFailed(self.message)


def _upper(slo: str, limit: float, measured: float | None, what: str) -> SloCheck:
    if measured is None:
        return SloCheck(slo=slo, limit=limit, measured=None, unit="ms", passed=False,
                        reason=f"{slo}: no {what} measured, cannot pass")
    ok = measured <= limit
    rel = "<=" if ok else ">"
    return SloCheck(slo=slo, limit=limit, measured=round(measured, 3), unit="ms", passed=ok,
                    reason=f"{slo}: p99 {what} {measured:.1f} ms {rel} {limit:g} ms")


def slo_gate(tier: str, summary: LevelSummary | None, slo: Slo) -> GateOutcome:
    """Judge one level's summary against the tier's SLO. Missing data fails; it never passes."""
    if summary is None or summary.completed == 0:
        why = "no benchmark results" if summary is None else f"no request completed ({'; '.join(summary.errors)})"
        check = SloCheck(slo="requests", limit=None, measured=0, unit="requests", passed=False, reason=why)
        return GateOutcome(tier=tier, level=summary.level.label if summary else None, passed=False, checks=[check],
                           message=f"tier {tier}: SLO gate failed: {why}")
    checks = []
    if slo.ttft_ms_p99 is not None:
        checks.append(_upper("ttft_ms_p99", slo.ttft_ms_p99, summary.ttft.p99, "TTFT"))
    if slo.tpot_ms_p99 is not None:
        checks.append(_upper("tpot_ms_p99", slo.tpot_ms_p99, summary.tpot.p99, "TPOT"))
    if slo.e2e_ms_p99 is not None:
        checks.append(_upper("e2e_ms_p99", slo.e2e_ms_p99, summary.e2e.p99, "end-to-end latency"))
    g = summary.goodput or 0.0
    ok = g >= slo.goodput_min
    checks.append(SloCheck(slo="goodput_min", limit=slo.goodput_min, measured=round(g, 4), unit="ratio", passed=ok,
                           reason=f"goodput_min: {g:.1%} of {summary.completed + summary.failed} requests met every "
                                  f"SLO {'>=' if ok else '<'} {slo.goodput_min:.0%}"
                                  + (f" ({summary.failed} failed)" if summary.failed else "")))
    failed = [c for c in checks if not c.passed]
    level = summary.level.label
    if failed:
        msg = f"tier {tier} at {level}: SLO failed: " + "; ".join(c.reason for c in failed)
    else:
        msg = f"tier {tier} at {level}: all SLOs met (goodput {g:.1%})"
    return GateOutcome(tier=tier, level=level, passed=not failed, checks=checks, message=msg)


def failed_gate(tier: str, slo: str, reason: str) -> GateOutcome:
    """A gate that failed before any benchmark (readiness, smoke)."""
    check = SloCheck(slo=slo, limit=None, measured=None, unit="", passed=False, reason=reason)
    return GateOutcome(tier=tier, level=None, passed=False, checks=[check],
                       message=f"tier {tier}: {slo} failed: {reason}")
