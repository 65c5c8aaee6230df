"""How often the gates are wrong, per gate: real fault and noise lines from public sources judged through the real
parsers and gates (the corpus, tests/fixtures/corpus/*.yml), and real healthy probe documents judged whole (every
non-pass verdict there is a false fail). `invoke certify --accuracy` prints the table; the unit tests re-judge the
corpus line by line.

A corpus case is one verbatim line (or the few lines one notice spans) with its source, the tool that printed it,
the gate that reads it, the verdict that gate must give and the documented reason. Each family is judged in the
context it comes in:
- kernel log (gates xid, pcie_link): the line is the kernel log of a node whose log reaches back to boot;
- nvidia-smi -q (gates row_remap, ecc, throttle): the line replaces its own key in a healthy real `-q` capture
  (the 1 x H200 machine's, tests/fixtures/h200x1), inside the section the case names;
- nccl-tests (gate nccl_allreduce): a result row replaces the row of its size in the healthy real 2 x H200
  `all_reduce_perf` capture (tests/fixtures/h200x2); any other line (a failure, the out-of-bounds count) replaces
  the capture's line of the same kind or is appended.
A verdict is the worst the gate gives; `error` is what the gate gives a run that did not complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from gridready import catalog
from gridready.certify import memory_errors, nccl, pcie, thermal, xid
from gridready.certify.expectations import Expectations
from gridready.certify.result import GateResult, GateStatus
from gridready.probe import kernel_log, nccl_tests, nvsmi
from gridready.spec import NodeGroup
from gridready.spec.certification import CertificationSpec

Verdict = Literal["pass", "warn", "fail", "error"]
RANK = {GateStatus.SKIPPED: 0, GateStatus.PASS: 1, GateStatus.WARN: 2, GateStatus.FAIL: 3, GateStatus.ERROR: 4}


class Case(BaseModel):
    """One real line and what the gate that reads it must say."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    line: str = Field(min_length=1)
    source: str = Field(min_length=8)  # URL, or repository@commit:path
    tool: str = Field(min_length=3)  # the tool and version that printed it
    gate: Literal["xid", "pcie_link", "row_remap", "ecc", "throttle", "nccl_allreduce"]
    verdict: Verdict
    reason: str = Field(min_length=8)  # the documented reason for the verdict
    section: str | None = None  # nvidia-smi -q: the section holding the line's key ("Remapped Rows")


def load_corpus(root: Path) -> list[Case]:
    """Every case of every `*.yml` under `root`, in file order."""
    cases: list[Case] = []
    for path in sorted(root.glob("*.yml")):
        doc = yaml.safe_load(path.read_text()) or {}
        cases += [Case.model_validate(c) for c in doc.get("cases") or []]
    return cases


def _worst(results: Iterable[GateResult]) -> GateStatus:
    return max((r.status for r in results), key=RANK.__getitem__, default=GateStatus.PASS)


def _exp(sku: str, gpus: int, platform: str) -> Expectations:
    found = catalog.lookup(sku)
    assert found is not None
    return Expectations(node="corpus", sku=found, gpus=gpus, spec=CertificationSpec(), platform=platform)


def _kernel_doc(case: Case) -> dict[str, Any]:
    return {"kernel_log": {"source": "corpus", **kernel_log.parse(case.line), "from_boot": True}, "system": {}}


def _xid(case: Case, _: str) -> GateStatus:
    return _worst(xid.xid(_kernel_doc(case), _exp("h100", 8, "baremetal")))


def _pcie(case: Case, _: str) -> GateStatus:
    return _worst(r for r in pcie.pcie_link(_kernel_doc(case), _exp("h100", 8, "baremetal")) if r.hca)


def _in_section(base: str, section: str | None, line: str) -> str:
    """`base` with `line` in place of its key's line inside `section` (re-indented to the base's indentation), or
    added at the top of that section where the base prints no such key (an older driver's key)."""
    key = line.split(":", 1)[0].strip()
    lines = base.splitlines()
    start, depth = 0, -1
    if section:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == section)
        depth = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip()
                and len(lines[i]) - len(lines[i].lstrip()) <= depth), len(lines))
    pat = re.compile(rf"^(\s*){re.escape(key)}\s*:")
    for i in range(start + 1 if section else 0, end):
        if m := pat.match(lines[i]):
            lines[i] = m.group(1) + line.strip()
            return "\n".join(lines) + "\n"
    lines.insert(start + 1, " " * (depth + 4) + line.strip())
    return "\n".join(lines) + "\n"


_GATES_Q: dict[str, Callable[[dict[str, Any], Expectations], list[GateResult]]] = {
    "row_remap": memory_errors.row_remap, "ecc": memory_errors.ecc, "throttle": thermal.throttle}


def _smi(case: Case, base_q: str) -> GateStatus:
    q = nvsmi.parse_q(_in_section(base_q, case.section, case.line))
    doc = {"nvidia_smi": {"present": True, "query": [], "q": q}}
    return _worst(_GATES_Q[case.gate](doc, _exp("h200", 1, "passthrough")))


_ROW = re.compile(r"^\s*(?:\d+:\s*)?(\d+)\s+\d+\s+\w+\s+\w+")
_NCCL_BASE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "h200x2" / "all_reduce_perf.txt"


def _with_nccl_line(base: str, line: str) -> str:
    lines = base.splitlines()
    row = _ROW.match(line)
    if row:
        at = next((i for i, ln in enumerate(lines) if (m := _ROW.match(ln)) and m.group(1) == row.group(1)), None)
    else:
        kind = "Out of bounds" if "Out of bounds" in line else None
        at = next((i for i, ln in enumerate(lines) if kind and kind in ln), None)
    if at is not None:
        lines[at] = line
    else:
        last = max((i for i, ln in enumerate(lines) if _ROW.match(ln)), default=len(lines) - 1)
        lines.insert(last + 1, line)
    return "\n".join(lines) + "\n"


def _nccl(case: Case, _: str) -> GateStatus:
    parsed = nccl_tests.parse_text(_with_nccl_line(_NCCL_BASE.read_text(), case.line))
    doc = {"nccl_tests": {"present": True, "collectives": {"all_reduce": {"runs": [
        {"rc": 0, "timed_out": False, "parsed": parsed}]}}}}
    return _worst(nccl.nccl_allreduce(doc, _exp("h200", 2, "passthrough")))


JUDGES: dict[str, Callable[[Case, str], GateStatus]] = {"xid": _xid, "pcie_link": _pcie, "row_remap": _smi,
                                                        "ecc": _smi, "throttle": _smi, "nccl_allreduce": _nccl}


def judge(case: Case, base_q: str) -> GateStatus:
    """The verdict the gate gives on this case's line."""
    return JUDGES[case.gate](case, base_q)


def agrees(case: Case, status: GateStatus) -> bool:
    return status.value == case.verdict


# ---- real healthy probe documents ---------------------------------------------------------------------------------

def judge_capture(doc: dict[str, Any], sku: str, gpus: int, platform: str) -> list[GateResult]:
    """Every gate over one real healthy probe document, with the quick profile; gates whose step the capture did not
    run (an older probe without sdc/goodput, no DCGM on the machine) are not applicable there, never passed."""
    from gridready.certify.judge import judge_node

    absent = [g for g, key in (("sdc", "sdc"), ("training_goodput", "goodput"), ("dcgm", "dcgm"))
              if not (doc.get(key) or {}).get("present")]
    spec = CertificationSpec(profile="quick", not_applicable=absent)
    group = NodeGroup.model_validate({"name": "capture", "sku": sku, "gpus_per_node": gpus, "platform": platform,
                                     "gpudirect_rdma": False})
    verdict = judge_node(spec, group, doc, node="capture")
    return [r for r in verdict.gates if r.status is not GateStatus.SKIPPED]


class Row(BaseModel):
    gate: str
    healthy_runs: int = 0  # real healthy probe documents in which the gate gave a verdict
    false_fails: int = 0  # ... and that verdict was fail or error
    fault_lines: int = 0  # corpus lines the gate must fail or warn on
    detected: int = 0
    noise_lines: int = 0  # corpus lines the gate must pass
    noise_passed: int = 0


def table(cases: list[Case], base_q: str, captures: list[tuple[str, dict[str, Any], str, int, str]]) -> list[Row]:
    """Per gate: corpus lines judged and judged as documented, healthy captures judged and false fails."""
    rows: dict[str, Row] = {}
    for case in cases:
        row = rows.setdefault(case.gate, Row(gate=case.gate))
        ok = agrees(case, judge(case, base_q))
        if case.verdict == "pass":
            row.noise_lines += 1
            row.noise_passed += ok
        else:
            row.fault_lines += 1
            row.detected += ok
    for _, doc, sku, gpus, platform in captures:
        per: dict[str, GateStatus] = {}
        for r in judge_capture(doc, sku, gpus, platform):
            per[r.gate] = max(per.get(r.gate, GateStatus.PASS), r.status, key=RANK.__getitem__)
        for gate, status in per.items():
            row = rows.setdefault(gate, Row(gate=gate))
            row.healthy_runs += 1
            row.false_fails += status in (GateStatus.FAIL, GateStatus.ERROR)
    return sorted(rows.values(), key=lambda r: r.gate)


def markdown(rows: list[Row]) -> str:
    head = ("| gate | healthy runs judged | false fails | fault lines judged | detected | noise lines judged | "
            "passed |\n|---|---:|---:|---:|---:|---:|---:|")
    body = [f"| {r.gate} | {r.healthy_runs} | {r.false_fails} | {r.fault_lines} | {r.detected} | {r.noise_lines} | "
            f"{r.noise_passed} |" for r in rows]
    return "\n".join([head, *body])


def load_captures(paths: Iterable[tuple[Path, str, int, str]]) -> list[tuple[str, dict[str, Any], str, int, str]]:
    """(path, SKU, GPUs, platform) of real probe documents -> those that exist, read."""
    return [(str(p), json.loads(p.read_text()), sku, gpus, plat) for p, sku, gpus, plat in paths if p.is_file()]


# ---- `invoke certify --accuracy` ----------------------------------------------------------------------------------

H200 = "H200-SXM-141GB"
# the recorded real healthy probe documents (relative to the repository): the lent H200 machines' earlier runs, and
# every quick run of docs/examples/h200x1/accuracy/ (benchmarks/h200_accuracy_run.sh writes them; one per folder)
CAPTURES: tuple[tuple[str, str, int, str], ...] = (
    ("tests/fixtures/h200x2/probe_quick.json", H200, 2, "passthrough"),
    ("tests/fixtures/h200x1/probe_quick_after.json", H200, 1, "passthrough"),
    ("docs/examples/h200x1/probe.json", H200, 1, "passthrough"),
)
RUNS = "docs/examples/*/accuracy/*/probe.json"  # one-GPU runs on real machines (benchmarks/h200_accuracy_run.sh)
# the corpus and the captures are the repository's (tests/fixtures, docs/examples): the checkout gridready runs from
REPOSITORY = Path(__file__).resolve().parents[2]


def _sku_of(path: Path) -> str:
    """The catalog SKU of the GPU a one-GPU run probed (its PCI device id), H200 where unreadable."""
    try:
        rows = ((json.loads(path.read_text()).get("nvidia_smi") or {}).get("query") or [])
        dev = str(rows[0].get("pci.device_id") or "").lower()
        found = catalog.lookup("0x" + dev[2:6]) if dev.startswith("0x") else None
    except (OSError, ValueError, IndexError, AttributeError):
        found = None
    return found.name if found else H200


def report(root: Path) -> tuple[list[Row], list[str]]:
    """(the table, one line per corpus line misjudged or healthy run failed) for the repository at `root`."""
    cases = load_corpus(root / "tests" / "fixtures" / "corpus")
    base_q = (root / "tests" / "fixtures" / "h200x1" / "nvidia-smi-q.txt").read_text()
    paths = [(root / p, sku, n, plat) for p, sku, n, plat in CAPTURES]
    paths += [(p, _sku_of(p), 1, "passthrough") for p in sorted(root.glob(RUNS))]
    captures = load_captures(paths)
    problems = [f"corpus: {c.gate} gives {s.value} where {c.verdict} is documented ({c.source}): "
                f"{c.line.splitlines()[0][:100]}" for c in cases if not agrees(c, s := judge(c, base_q))]
    for path, doc, sku, gpus, platform in captures:
        problems += [f"{Path(path).relative_to(root)}: {r.gate} {r.status.value}: {r.reason}"
                     for r in judge_capture(doc, sku, gpus, platform)
                     if r.status in (GateStatus.FAIL, GateStatus.ERROR)]
    rows = table(cases, base_q, captures)
    rows.append(Row(gate="(healthy runs)", healthy_runs=len(captures)))
    return rows, problems


def print_report(root: Path, as_json: bool = False) -> None:
    """Print the per-gate table (Markdown, or JSON with --json); a misjudged line or a false fail exits 5."""
    import sys

    from gridready.errors import NotCertified

    rows, problems = report(root)
    if as_json:
        sys.stdout.write(json.dumps({"gates": [r.model_dump() for r in rows], "problems": problems}, indent=2) + "\n")
    else:
        sys.stdout.write(markdown(rows) + "\n")
    if problems:
        raise NotCertified("\n".join(problems))
