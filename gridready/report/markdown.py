"""report.md and report.html, laid out for a fleet: a summary first (SIMULATED banner where any evidence was
simulated, counts per gate and status, the nodes that are not certified with their reasons), then the failed,
erroring, warning and waived gates with measured and expected values, then the node x gate matrix, then plots.

A large fleet is summarised, failures first, so a page stays readable and small at any size: beyond PER_NODE_UP_TO
nodes the matrix has one row per distinct pattern of gate statuses (how many nodes, which), identical failures
on many nodes are one row, and each list stops at ROWS_SHOWN rows with a line saying how many more there are and
where they are (report.json lists every node, nodes/<node>/certification.json every result)."""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from gridready.certify.judge import GATE_NAMES, FleetVerdict
from gridready.certify.result import GateResult, GateStatus
from gridready.report.humanize import expected_text, measured_text
from gridready.report.worst import worst_by_gate as _worst_by_gate

_ICON = {GateStatus.PASS: "pass", GateStatus.WARN: "WARN", GateStatus.FAIL: "FAIL", GateStatus.ERROR: "ERROR",
         GateStatus.SKIPPED: "n/a", None: ""}
_COLUMNS = (GateStatus.PASS, GateStatus.WARN, GateStatus.FAIL, GateStatus.ERROR, GateStatus.SKIPPED)
_REASONS_SHOWN = 3  # per node in the summary; the detail table lists every one


def _gates(fleet: FleetVerdict) -> list[str]:
    seen = list(GATE_NAMES)
    for v in fleet.nodes.values():
        seen += [r.gate for r in v.gates if r.gate not in seen]
    present = {r.gate for v in fleet.nodes.values() for r in v.gates}
    return [g for g in dict.fromkeys(["probe", *seen]) if g in present]


_GROUP_FROM = 4  # the same warning on this many nodes or more is one row naming how many and which
PER_NODE_UP_TO = 200  # nodes: up to this many the matrix and the measurements have a row per node
ROWS_SHOWN = 500  # rows of each list on a page; the rest are counted and pointed to


def _nodes_named(names: list[str]) -> str:
    return f"{len(names)} nodes: {', '.join(names[:3])} ... {names[-1]}"


def _grouped(found: list[tuple[str, GateResult]]) -> list[tuple[str, GateResult]]:
    """One identical result (same gate, place, status, reason and values) on many nodes as one row."""
    same: dict[tuple[str, ...], list[tuple[str, GateResult]]] = {}
    for node, r in found:
        key = (r.gate, _where(r), r.status.value, str(r.waived), r.reason, measured_text(r),
               expected_text(r.expected, r.unit))
        same.setdefault(key, []).append((node, r))
    rows: list[tuple[str, GateResult]] = []
    for group in same.values():
        rows += group if len(group) < _GROUP_FROM else [(_nodes_named([n for n, _ in group]), group[0][1])]
    return rows


def _problems(fleet: FleetVerdict) -> list[tuple[str, GateResult]]:
    """(node label, result): fails, errors and waivers first, one row each in a fleet of up to PER_NODE_UP_TO
    nodes (an identical one on many nodes is one row beyond); then warnings, where one identical warning on many
    nodes is a single row."""
    bad = [(v.node, r) for _, v in sorted(fleet.nodes.items()) for r in v.gates
           if r.status in (GateStatus.FAIL, GateStatus.ERROR) or r.waived]
    warned = [(v.node, r) for _, v in sorted(fleet.nodes.items()) for r in v.gates
              if r.status is GateStatus.WARN and not r.waived]
    return (bad if len(fleet.nodes) <= PER_NODE_UP_TO else _grouped(bad)) + _grouped(warned)


def _more(shown: int, total: int, what: str, where: str) -> str | None:
    """The line closing a list cut at ROWS_SHOWN rows."""
    return f"... and {total - shown} more {what} ({where})" if total > shown else None


def _matrix_rows(fleet: FleetVerdict, gates: list[str]) -> list[tuple[str, bool, dict[str, GateStatus]]]:
    """(label, certified, worst status per gate): a row per node, sorted by name, up to PER_NODE_UP_TO nodes;
    beyond, a row per distinct pattern of statuses naming its nodes, failures first, then the most common."""
    if len(fleet.nodes) <= PER_NODE_UP_TO:
        return [(n, v.certified, _worst_by_gate(v)) for n, v in sorted(fleet.nodes.items())]
    patterns: dict[tuple[bool, tuple[GateStatus | None, ...]], list[str]] = {}
    for n, v in sorted(fleet.nodes.items()):
        worst = _worst_by_gate(v)
        patterns.setdefault((v.certified, tuple(worst.get(g) for g in gates)), []).append(n)
    order = sorted(patterns.items(), key=lambda kv: (kv[0][0], -len(kv[1])))
    return [(names[0] if len(names) == 1 else _nodes_named(names), ok,
             {g: s for g, s in zip(gates, statuses, strict=True) if s is not None})
            for (ok, statuses), names in order]


def _gate_counts(fleet: FleetVerdict, gates: list[str]) -> dict[str, Counter[GateStatus | None]]:
    """Per gate: how many nodes have each status as their worst result of that gate (one pass over the results)."""
    counts: dict[str, Counter[GateStatus | None]] = {g: Counter() for g in gates}
    for v in fleet.nodes.values():
        for g, s in _worst_by_gate(v).items():
            counts.setdefault(g, Counter())[s] += 1
    return counts


def _where(r: GateResult) -> str:
    return f"GPU {r.gpu}" if r.gpu is not None else (r.hca or "")


def simulated_note(fleet: FleetVerdict) -> str | None:
    if not fleet.simulated:
        return None
    nodes = fleet.simulated
    named = ", ".join(nodes[:8]) + (f" and {len(nodes) - 8} more" if len(nodes) > 8 else "")
    return (f"SIMULATED: the evidence of {len(nodes)} of {len(fleet.nodes)} node(s) came from gridready's simulated "
            f"NVIDIA tools ({named}); these figures say nothing about real hardware.")


def _not_certified(fleet: FleetVerdict) -> tuple[list[tuple[str, str]], int]:
    """(node, why) per node not certified, and how many nodes those rows name; beyond PER_NODE_UP_TO nodes, nodes
    with the same reasons share a row, the most common first, up to ROWS_SHOWN rows."""
    rows: dict[str, list[str]] = {}
    for node, v in sorted(fleet.nodes.items()):
        if v.certified:
            continue
        shown = "; ".join(v.blocking[:_REASONS_SHOWN]) or fleet.quarantined.get(node, "not certified")
        more = len(v.blocking) - _REASONS_SHOWN
        rows.setdefault(shown + (f" (and {more} more)" if more > 0 else ""), []).append(node)
    if len(fleet.nodes) <= PER_NODE_UP_TO:
        each = sorted((n, why) for why, names in rows.items() for n in names)
        return each, len(each)
    ranked = sorted(rows.items(), key=lambda kv: -len(kv[1]))[:ROWS_SHOWN]
    return ([(names[0] if len(names) == 1 else _nodes_named(names), why) for why, names in ranked],
            sum(len(names) for _, names in ranked))


def _not_applicable(fleet: FleetVerdict) -> list[tuple[str, str, int]]:
    """(gate, reason, nodes) of every n/a result: the reason a gate was not run is part of the verdict."""
    seen: dict[tuple[str, str], int] = {}
    for v in fleet.nodes.values():
        for key in dict.fromkeys((r.gate, r.reason) for r in v.gates if r.status is GateStatus.SKIPPED):
            seen[key] = seen.get(key, 0) + 1
    return [(g, why, n) for (g, why), n in seen.items()]


def _md_cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def render_md(fleet: FleetVerdict, plots: Mapping[str, Path | None], command: str | None = None, *,
              notes: Mapping[str, str] | None = None) -> str:
    """`notes`: plot name -> why it was not drawn, said in place of the plot."""
    out = [f"# gridready certification: {fleet.customer or ''} run {fleet.run_id or ''}".rstrip(), ""]
    note = simulated_note(fleet)
    if note:
        out += [f"> **{note}**", ""]
    out += ["## Summary", "",
            f"- status: **{fleet.status}** (exit {fleet.exit_code}); profile `{fleet.profile}`; policy "
            f"`{fleet.failure_policy}` (minimum {fleet.min_certified_nodes} certified)",
            f"- nodes: {len(fleet.nodes)} judged, {len(fleet.certified)} certified, {len(fleet.quarantined)} "
            f"quarantined" + (f", {len(fleet.reused)} still valid from an earlier run" if fleet.reused else "")]
    if fleet.reused:
        out.append(f"- still valid from an earlier run (not re-probed): {', '.join(fleet.reused)}")
    out += [f"- {m}" for m in fleet.messages]
    if command:
        out += ["", "Command:", "", f"    {command}"]
    gates = _gates(fleet)
    counts = _gate_counts(fleet, gates)
    out += ["", "### Gates by status (nodes)", "", "| gate | " + " | ".join(_ICON[s] for s in _COLUMNS) + " |",
            "|---|" + "---:|" * len(_COLUMNS)]
    for g in gates:
        out.append(f"| {g} | " + " | ".join(str(counts[g][s] or "") for s in _COLUMNS) + " |")
    out += ["", "### Nodes not certified", ""]
    rows, named = _not_certified(fleet)
    out += ["| node | why |", "|---|---|", *(f"| {n} | {_md_cell(why)} |" for n, why in rows)] if rows else ["none"]
    out += [m for m in [_more(named, len(fleet.quarantined), "nodes not certified", _EVERY_NODE)] if m]
    na = _not_applicable(fleet)
    if na:
        out += ["", "### Not applicable (n/a: not run, not passed)", "", "| gate | why | nodes |", "|---|---|---:|",
                *(f"| {g} | {_md_cell(why)} | {n} |" for g, why, n in na)]
    probs = _problems(fleet)
    out += ["", "## Failed, erroring, warning and waived gates", ""]
    if probs:
        out += ["| node | gate | GPU/link | status | reason | measured | expected | evidence |",
                "|---|---|---|---|---|---|---|---|"]
        for node, r in probs[:ROWS_SHOWN]:
            out.append(f"| {node} | {r.gate} | {_where(r)} | {r.status.value}{' (waived)' if r.waived else ''} | "
                       f"{_md_cell(r.reason)} | {_md_cell(measured_text(r))} | "
                       f"{_md_cell(expected_text(r.expected, r.unit))} | {r.evidence or ''} |")
        out += [m for m in [_more(ROWS_SHOWN, len(probs), "rows", _EVERY_RESULT)] if m]
    else:
        out.append("none")
    matrix = _matrix_rows(fleet, gates)
    out += ["", "## Gates per node", "", *([_PATTERNS, ""] if len(fleet.nodes) > PER_NODE_UP_TO else []),
            "| node | certified | " + " | ".join(gates) + " |", "|---|---|" + "---|" * len(gates)]
    for label, ok, worst in matrix[:ROWS_SHOWN]:
        out.append(f"| {label} | {'yes' if ok else '**no**'} | " + " | ".join(_ICON[worst.get(g)] for g in gates)
                   + " |")
    out += [m for m in [_more(ROWS_SHOWN, len(matrix), "patterns", _EVERY_NODE)] if m]
    out += ["", "## Measurements", ""]
    for name, p in plots.items():
        if p:
            out += [f"![{name}]({p.name})", ""]
        elif name in (notes or {}):
            out += [f"*{name}: {(notes or {})[name]}*", ""]
    if len(fleet.nodes) > PER_NODE_UP_TO:
        out += [f"Per-GPU figures and all-reduce sweeps of the {len(fleet.nodes)} nodes: {_EVERY_RESULT}."]
    else:
        out += _measurements_md(fleet)
    out += ["", "Skipped (not applicable per the spec) gates are listed as `n/a`; they were not run and not passed."]
    if note:
        out += ["", f"**{note}**"]
    return "\n".join(out) + "\n"


_EVERY_NODE = "report.json lists every node with its failing gates"
_EVERY_RESULT = "each node's nodes/<node>/certification.json holds every result and figure"
_PATTERNS = ("One row per pattern of gate statuses (nodes with the same status on every gate), nodes not certified "
             "first, then the most common.")


def _measurements_md(fleet: FleetVerdict) -> list[str]:
    out = ["| node | GPU | bf16 TFLOP/s | fp8 TFLOP/s | HBM TB/s | H2D GB/s | D2H GB/s |",
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
    return out


# fail (the node measured below its bar) and error (the gate could not judge) in different hues, not two reds
_COLOR = {"pass": "#cfc", "WARN": "#ffc", "FAIL": "#f99", "ERROR": "#c9b3f2", "n/a": "#eee", "": "#fff"}
_MEANING = {"pass": "pass", "WARN": "warn", "FAIL": "fail: measured below its bar",
            "ERROR": "error: the gate could not judge (no data, a probe step failed)",
            "n/a": "n/a: not applicable, not run"}
_SHORT = {"pass": "ok", "WARN": "W", "FAIL": "F", "ERROR": "E", "n/a": "-", "": ""}
_CSS = """body{font-family:sans-serif;margin:16px;max-width:1368px}
table{border-collapse:collapse;font-size:12px;margin-bottom:1em}td,th{border:1px solid #999;padding:2px 5px}
.sim{background:#b00;color:#fff;font-weight:bold;padding:8px 12px;font-size:15px}
.detail{table-layout:fixed;width:100%}.detail td{overflow-wrap:anywhere;vertical-align:top}
.matrix th.g{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:normal;padding:4px 1px}
.matrix td{text-align:center;padding:1px 2px;font-size:11px;min-width:20px}.matrix th{font-size:11px}
.wrap{overflow-x:auto}td.n{text-align:right}img{max-width:100%}.note{font-style:italic;color:#555}
.legend span{display:inline-block;min-width:20px;text-align:center;border:1px solid #999;margin-left:8px}"""


def _more_html(shown: int, total: int, what: str, where: str) -> str:
    line = _more(shown, total, what, where)
    return f'<p class="note">{html.escape(line)}</p>' if line else ""


def render_html(fleet: FleetVerdict, plots: Mapping[str, Path | None], command: str | None = None, *,
                notes: Mapping[str, str] | None = None) -> str:
    """`notes`: plot name -> why it was not drawn, said in place of the plot."""
    e = html.escape
    legend = '<p class="legend">' + " ".join(
        f'<span style="background:{_COLOR[k]}">{e(_SHORT[k])}</span> {e(m)}' for k, m in _MEANING.items()) + "</p>"
    gates = _gates(fleet)
    counts = _gate_counts(fleet, gates)
    note = simulated_note(fleet)
    banner = f'<p class="sim">{e(note)}</p>' if note else ""
    by_status = "".join(
        f"<tr><th>{e(g)}</th>" + "".join(f'<td class="n">{counts[g][s] or ""}</td>' for s in _COLUMNS) + "</tr>"
        for g in gates)
    nc, named = _not_certified(fleet)
    not_cert = ("<table class=\"detail\"><col style=\"width:180px\"><col><tr><th>node</th><th>why</th></tr>"
                + "".join(f"<tr><td>{e(n)}</td><td>{e(why)}</td></tr>" for n, why in nc) + "</table>"
                if nc else "<p>none</p>") + _more_html(named, len(fleet.quarantined), "nodes not certified",
                                                       _EVERY_NODE)
    na = _not_applicable(fleet)
    na_html = ("<h3>Not applicable (n/a: not run, not passed)</h3>"
               "<table><tr><th>gate</th><th>why</th><th>nodes</th></tr>"
               + "".join(f'<tr><td>{e(g)}</td><td>{e(why)}</td><td class="n">{n}</td></tr>' for g, why, n in na)
               + "</table>" if na else "")
    rows = _matrix_rows(fleet, gates)
    matrix = []
    for label, ok, worst in rows[:ROWS_SHOWN]:
        cells = "".join(f'<td style="background:{_COLOR[_ICON[worst.get(g)]]}">{_SHORT[_ICON[worst.get(g)]]}</td>'
                        for g in gates)
        matrix.append(f"<tr><th>{e(label)}</th><td>{'yes' if ok else '<b>no</b>'}</td>{cells}</tr>")
    matrix_note = (f"<p>{e(_PATTERNS)}</p>" if len(fleet.nodes) > PER_NODE_UP_TO else "") + legend
    matrix_more = _more_html(ROWS_SHOWN, len(rows), "patterns", _EVERY_NODE)
    found = _problems(fleet)
    probs = "".join(
        f"<tr><td>{e(node)}</td><td>{e(r.gate)}</td><td>{e(_where(r))}</td>"
        f"<td>{e(r.status.value)}{' (waived)' if r.waived else ''}</td><td>{e(r.reason)}</td>"
        f"<td>{e(measured_text(r))}</td><td>{e(expected_text(r.expected, r.unit))}</td>"
        f"<td><code>{e(r.evidence or '')}</code></td></tr>" for node, r in found[:ROWS_SHOWN])
    probs_more = _more_html(ROWS_SHOWN, len(found), "rows", _EVERY_RESULT)
    why = notes or {}
    imgs = "".join(f'<p><img src="{e(p.name)}" alt="{e(n)}"></p>' if p else
                   f'<p class="note">{e(n)}: {e(why[n])}</p>' if n in why else "" for n, p in plots.items())
    msgs = "".join(f"<li>{e(m)}</li>" for m in fleet.messages)
    cmd = f"<p>Command: <code>{e(command)}</code></p>" if command else ""
    reused = f", {len(fleet.reused)} still valid from an earlier run" if fleet.reused else ""
    heads = "".join(f'<th class="g">{e(g)}</th>' for g in gates)
    title = f"gridready certification{' (SIMULATED)' if note else ''}: {fleet.customer or ''} {fleet.run_id or ''}"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(title)}</title>
<style>{_CSS}</style></head><body>
<h1>{e(title)}</h1>{banner}
<h2>Summary</h2>
<ul><li>status: <b>{e(fleet.status)}</b> (exit {fleet.exit_code}); profile {e(fleet.profile)};
policy {e(fleet.failure_policy)} (minimum {fleet.min_certified_nodes})</li>
<li>nodes: {len(fleet.nodes)} judged, {len(fleet.certified)} certified,
{len(fleet.quarantined)} quarantined{reused}</li>
{msgs}</ul>{cmd}
<h3>Gates by status (nodes)</h3>
<table><tr><th>gate</th>{''.join(f'<th>{_ICON[s]}</th>' for s in _COLUMNS)}</tr>{by_status}</table>
<h3>Nodes not certified</h3>{not_cert}{na_html}
<h2>Failed, erroring, warning and waived gates</h2>
<table class="detail"><col style="width:110px"><col style="width:110px"><col style="width:70px"><col style="width:60px">
<col style="width:330px"><col style="width:230px"><col style="width:250px"><col>
<tr><th>node</th><th>gate</th><th>GPU/link</th><th>status</th><th>reason</th><th>measured</th>
<th>expected</th><th>evidence</th></tr>{probs}</table>{probs_more}
<h2>Gates per node</h2>{matrix_note}
<div class="wrap"><table class="matrix"><tr><th>node</th><th>certified</th>{heads}</tr>
{''.join(matrix)}</table></div>{matrix_more}
<h2>Measurements</h2>{imgs}{banner}
</body></html>
"""
