"""The committed mutation record (docs/mutation.md) is the one its per-mutant results give, and every mutant in them
that was run and not killed is named in its module's explanation (docs/examples/mutation/explained)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from benchmarks import mutation_score as ms

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs/examples/mutation/results-cca9fe6-meta.tar.gz"


def _unpacked(tmp_path: Path) -> Path:
    with tarfile.open(RESULTS) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path


def test_the_record_is_the_table_of_its_results(tmp_path):
    text, per_package = ms.table(_unpacked(tmp_path), ms.MODULES)
    assert text in (REPO / "docs/mutation.md").read_text()
    assert set(per_package) == set(ms.MODULES)


def test_every_survivor_of_the_record_is_named_in_an_explanation(tmp_path):
    assert ms.unexplained(_unpacked(tmp_path), ms.MODULES) == {}
