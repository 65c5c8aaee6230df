"""The README's environment table names every GRIDREADY_* variable the product reads, and no other (issue 33,
docs that match the code): the names are read from the code itself."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# read as environment variables (os.environ / a *_ENV constant / the variables usage.py checks), outside the probe
# and the generated scripts' own names (GRIDREADY_MPI_HOSTS, GRIDREADY_ENGINE lines, GRIDREADY_TIER_* keys)
READ = re.compile(r"""(?:environ(?:\.get)?\(|environ\[|_ENV = |ENV = |for name in \(|, )"(GRIDREADY_[A-Z_]+)\"""")


def _read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in [*(REPO / "gridready").rglob("*.py"), REPO / "tasks.py"]:
        if "probe" in path.parts:
            continue
        names |= set(READ.findall(path.read_text()))
    return names


def test_every_variable_the_code_reads_is_in_the_readme() -> None:
    table = (REPO / "README.md").read_text().split("## Environment", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(GRIDREADY_[A-Z_]+)`", table))
    read = _read_by_the_code()
    assert {"GRIDREADY_INVENTORY", "GRIDREADY_PULUMI_PASSPHRASE", "GRIDREADY_EVIDENCE_KEY"} <= read  # the scan works
    assert read - documented == set(), "undocumented"
    assert documented - read == set(), "documented but never read"
