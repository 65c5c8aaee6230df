"""report.md and report.html: fleet summary, per-node gate matrix, failed gates with evidence, plots."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

from gridready.certify.judge import GATE_NAMES, FleetVerdict, NodeVerdict
from gridready.certify.result import GateResult, GateStatus

_ICON = {GateStatus.PASS: "pass", GateStatus.WARN: "WARN", GateStatus.FAIL: "FAIL", GateStatus.ERROR: "ERROR",
         GateStatus.SKIPPED: "n/a", None: ""}


def _gates(fleet: FleetVerdict) -> list[str]:
    seen = list(GATE_NAMES)
    for v in fleet.nodes.values():
        seen += [r.gate for r in v.gates if r.gate not in seen]
    present = {r.gate for v in fleet.nodes.values() for r in v.gates}
    return [g for g in dict.fromkeys(["probe", *seen]) if g in present]


def _problems(fleet: FleetVerdict) -> list[tuple[NodeVerdict, GateResult]]:
    return [(v, r) for v in fleet.nodes.values() for r in v.gates
            if r.status in (GateStatus.FAIL, GateStatus.ERROR, GateStatus.WARN) or r.waived]


def _fmt(r: GateResult) -> str:
    if r.measured is None or isinstance(r.measured, (dict, list)):
        return ""
    return f"{r.measured:.4g}" if isinstance(r.measured, float) else str(r.measured)


def render_md(fleet: FleetVerdict, plots: Mapping[str, Path | None], command: str | None = None) -> str:
    out = [f"# gridready certification: {fleet.customer or ''} run {fleet.run_id or ''}".rstrip(), ""]
    out += [f"- status: **{fleet.status}** (exit {fleet.exit_code}); profile `{fleet.profile}`; policy "
            f"`{fleet.failure_policy}` (minimum {fleet.min_certified_nodes} certified)",
            f"- certified: {', '.join(fleet.certified) or 'none'}",
            f"- quarantined: {', '.join(fleet.quarantined) or 'none'}"]
    if fleet.reused:
        out.append(f"- still valid from an earlier run (not re-probed): {', '.join(fleet.reused)}")
    out += [f"- {m}" for m in fleet.messages]
    if command:
        out += ["", "Command:", "", f"    {command}"]
    gates = _gates(fleet)
    out += ["", "## Gates per node", "", "| node | certified | " + " | ".join(gates) + " |",
            "|---|---|" + "---|" * len(gates)]
    for node, v in sorted(fleet.nodes.items()):
        out.append(f"| {node} | {'yes' if v.certified else '**no**'} | "
                   + " | ".join(_ICON[v.worst(g)] for g in gates) + " |")
    probs = _problems(fleet)
    out += ["", "## Failed, erroring, warning and waived gates", ""]
    if probs:
        out += ["| node | gate | GPU/link | status | reason | measured | expected | evidence |",
                "|---|---|---|---|---|---|---|---|"]
        for v, r in probs:
            exp = r.expected.model_dump(exclude_none=True) if r.expected else {}
            where = r.gpu if r.gpu is not None else (r.hca or "")
            out.append(f"| {v.node} | {r.gate} | {where} | {r.status.value}{' (waived)' if r.waived else ''} | "
                       f"{r.reason.replace('|', '/')} | {_fmt(r)} {r.unit or ''} | "
                       f"{str(exp).replace('|', '/')} | {r.evidence or ''} |")
    else:
        out.append("none")
    out += ["", "## Measurements", ""]
    for name, p in plots.items():
        if p:
            out += [f"![{name}]({p.name})", ""]
    out += ["| node | GPU | bf16 TFLOP/s | fp8 TFLOP/s | HBM TB/s | H2D GB/s | D2H GB/s |",
            "|---|---|---|---|---|---|---|"]
    for node, v in sorted(fleet.nodes.items()):
        for g in v.figures.get("gpus", []):
            cells = [g.get(k) for k in ("bf16_gemm_tflops", "fp8_gemm_tflops", "hbm_copy_tbps", "h2d_gbps", "d2h_gbps")]
            out.append(f"| {node} | {g['gpu']} | " + " | ".join(f"{c:.4g}" if c is not None else "-" for c in cells)
                       + " |")
    for node, v in sorted(fleet.nodes.items()):
        nr = next((r for r in v.gates if r.gate == "nccl_allreduce"), None)
        if nr:
            out.append(f"\n{node} all-reduce: {nr.reason}")
    out += ["", "Skipped (not applicable per the spec) gates are listed as `n/a`; they were not run and not passed."]
    return "\n".join(out) + "\n"


def render_html(fleet: FleetVerdict, plots: Mapping[str, Path | None], command: str | None = None) -> str:
    e = html.escape
    gates = _gates(fleet)
    color = {"pass": "#cfc", "WARN": "#ffc", "FAIL": "#fbb", "ERROR": "#f99", "n/a": "#eee", "": "#fff"}
    rows = []
    for node, v in sorted(fleet.nodes.items()):
        cells = "".join(f'<td style="background:{color[_ICON[v.worst(g)]]}">{_ICON[v.worst(g)]}</td>' for g in gates)
        rows.append(f"<tr><th>{e(node)}</th><td>{'yes' if v.certified else '<b>no</b>'}</td>{cells}</tr>")
    probs = "".join(
        f"<tr><td>{e(v.node)}</td><td>{e(r.gate)}</td><td>{e(str(r.gpu if r.gpu is not None else r.hca or ''))}</td>"
        f"<td>{e(r.status.value)}{' (waived)' if r.waived else ''}</td><td>{e(r.reason)}</td>"
        f"<td>{e(_fmt(r))} {e(r.unit or '')}</td>"
        f"<td>{e(str(r.expected.model_dump(exclude_none=True)) if r.expected else '')}</td>"
        f"<td><code>{e(r.evidence or '')}</code></td></tr>" for v, r in _problems(fleet))
    imgs = "".join(f'<p><img src="{e(p.name)}" alt="{e(n)}"></p>' for n, p in plots.items() if p)
    msgs = "".join(f"<li>{e(m)}</li>" for m in fleet.messages)
    cmd = f"<p>Command: <code>{e(command)}</code></p>" if command else ""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>gridready certification {e(fleet.run_id or '')}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #999;padding:3px 6px}}</style></head><body>
<h1>gridready certification: {e(fleet.customer or '')} {e(fleet.run_id or '')}</h1>
<ul><li>status: <b>{e(fleet.status)}</b> (exit {fleet.exit_code}); profile {e(fleet.profile)};
policy {e(fleet.failure_policy)} (minimum {fleet.min_certified_nodes})</li>
<li>certified: {e(', '.join(fleet.certified) or 'none')}</li>
<li>quarantined: {e(', '.join(fleet.quarantined) or 'none')}</li>{msgs}</ul>{cmd}
<h2>Gates per node</h2><table><tr><th>node</th><th>certified</th>{''.join(f'<th>{e(g)}</th>' for g in gates)}</tr>
{''.join(rows)}</table>
<h2>Failed, erroring, warning and waived gates</h2>
<table><tr><th>node</th><th>gate</th><th>GPU/link</th><th>status</th><th>reason</th><th>measured</th>
<th>expected</th><th>evidence</th></tr>{probs}</table>
<h2>Measurements</h2>{imgs}
</body></html>
"""
