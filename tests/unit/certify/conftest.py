"""pytest fixtures of the certification tests; the readers live in fixtures_io.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gridready.certify.expectations import Expectations
from gridready.certify.result import GateResult
from tests.unit.certify.fixtures_io import probe_quick

GATE_NAME = re.compile(r"[a-z][a-z0-9_]*")  # the keys of summary.json, report.json and the quarantine list


@pytest.fixture
def quick_doc() -> dict[str, Any]:
    return probe_quick()


@pytest.fixture(autouse=True)
def results_are_well_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every verdict a certification test produces, on every branch it reaches, names its gate as a lowercase key and
    its evidence as a lowercase path into the probe document (what the report and the quarantine list key on)."""
    original = Expectations.result

    def checked(self: Expectations, gate: str, *args: Any, **kw: Any) -> GateResult:
        r = original(self, gate, *args, **kw)
        assert GATE_NAME.fullmatch(r.gate), f"gate name {r.gate!r}"
        assert r.evidence is None or (r.evidence[:1].islower() and r.evidence != r.evidence.upper()), \
            f"{r.gate}: evidence {r.evidence!r}"
        return r

    monkeypatch.setattr(Expectations, "result", checked)
