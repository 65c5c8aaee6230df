"""Regenerate the committed certification examples with the current judge and renderer, in one command:

    PYTHONPATH=$PWD .venv/bin/python tools/render_examples.py

- docs/examples/h200x1, h200x2: the reports re-rendered from the verdicts of the real runs (their report.json);
- docs/examples/failed-fleet: a SIMULATED fleet of 12 nodes judged from the simulator's own tool outputs
  (sandbox.probe_docs, no host booted): 6 healthy, 6 each with one fault (PCIe Gen4 x8, NVLink down, Xid 79,
  uncorrectable ECC, row remap pending, HW slowdown), and one node whose probe output never came back (an error,
  not a failure). The PyTorch gates are n/a: the simulated documents have no torch section.

tests/unit/test_examples_render.py renders the same into a temporary folder and fails when a committed file differs.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gridready import inventory  # noqa: E402
from gridready.certify.judge import FleetVerdict, judge_fleet, judge_node  # noqa: E402
from gridready.report.writer import write_all  # noqa: E402

EXAMPLES = REPO / "docs" / "examples"
COMMAND = "PYTHONPATH=$PWD .venv/bin/python tools/render_examples.py"
REAL = ("h200x1", "h200x2")
REAL_FILES = ("report.md", "report.html", "junit.xml", "quarantine.yml")
FAILED = "failed-fleet"
FAILED_FILES = ("report.json", "report.md", "report.html", "junit.xml", "quarantine.yml", "metrics.prom")
JUDGED_AT = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)  # fixed: the example does not change with the clock
NO_TORCH = ("gemm_bf16", "gemm_fp8", "hbm_bandwidth", "h2d_bandwidth", "peer_bandwidth")


def failed_fleet() -> FleetVerdict:
    from sandbox.probe_docs import fleet_docs

    inv = inventory.load("sandbox")
    spec = inv.spec.certification.model_copy(update={"not_applicable": [
        *inv.spec.certification.not_applicable, *NO_TORCH]})
    group = inv.spec.node_groups[0]
    docs = [*fleet_docs(12, faulted_every=2), ("gpu0012", None)]  # every odd node carries the next fault
    verdicts = [judge_node(spec, group, doc, node=host, node_group=group.name,
                           driver_branch=inv.spec.software.driver_branch, evidence=f"probes/{host}/probe.json",
                           now=JUDGED_AT) for host, doc in docs]
    return judge_fleet(spec, verdicts, customer="sandbox", run_id="failed-fleet-example", now=JUDGED_AT)


def render(out: Path) -> dict[str, Path]:
    """Every example into `out/<example>/` (what is committed under docs/examples); example -> folder."""
    folders = {}
    for ex in REAL:
        fleet = FleetVerdict.model_validate(json.loads((EXAMPLES / ex / "report.json").read_text()))
        write_all(fleet, out / ex, command=COMMAND)
        folders[ex] = out / ex
    write_all(failed_fleet(), out / FAILED, command=COMMAND)
    folders[FAILED] = out / FAILED
    return folders


def committed_files(ex: str) -> tuple[str, ...]:
    return FAILED_FILES if ex == FAILED else REAL_FILES


def main() -> int:
    with tempfile.TemporaryDirectory() as td:
        for ex, folder in render(Path(td)).items():
            dest = EXAMPLES / ex
            dest.mkdir(exist_ok=True)
            names = [*committed_files(ex), *(p.name for p in folder.glob("*.png"))]
            if ex == FAILED:
                shutil.rmtree(dest / "nodes", ignore_errors=True)
                shutil.copytree(folder / "nodes", dest / "nodes")
            for name in names:
                shutil.copy(folder / name, dest / name)
                print(dest / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
