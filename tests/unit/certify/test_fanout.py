"""certification.parallel: the certify playbook's fan-out (Ansible forks), checked against the controller's limits
before any probe starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gridready import ansible
from gridready.errors import InvalidInput
from gridready.spec.certification import CertificationSpec
from gridready.stages import certify as stage
from gridready.stages import fanout
from tests.unit.certify.fixtures_io import probe_quick
from tests.unit.certify.test_stage import FakeRunner, _ctx, _inv

KEY = "inventories/acme/cluster.yml: certification.parallel"


def test_the_playbook_runs_with_the_specs_fan_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunner({"gpu-a": probe_quick(), "gpu-b": probe_quick()})
    monkeypatch.setattr(ansible, "run_playbook", fake)
    inv = _inv(tmp_path)
    inv.spec.certification.parallel = 40
    stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0101"))
    assert fake.calls[0]["forks"] == 40


def test_default_fan_out_is_ansibles_and_must_be_positive() -> None:
    assert CertificationSpec().parallel == 25
    for bad in (0, -1, 100_000):
        with pytest.raises(ValidationError, match="parallel"):
            CertificationSpec(parallel=bad)


def test_too_few_open_files_stop_before_any_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunner({"gpu-a": probe_quick(), "gpu-b": probe_quick()})
    monkeypatch.setattr(ansible, "run_playbook", fake)
    monkeypatch.setattr(fanout, "this_controller", lambda: fanout.Controller(open_files=1024, available_mib=None))
    inv = _inv(tmp_path)
    inv.spec.certification.parallel = 500
    with pytest.raises(InvalidInput) as err:
        stage.run(inv, _ctx(tmp_path, "20261130T030000Z-0102"))
    assert len(err.value.lines) == 1 and err.value.code == 2
    line = err.value.lines[0]
    assert line.endswith("certification.parallel: 500 nodes at once need about 4256 open files on the controller, "
                         "which allows 1024 (ulimit -n): raise the limit or lower it to 96")
    assert "cluster.yml" in line and not fake.calls


def test_fan_out_at_the_limit_runs_and_short_memory_is_a_warning() -> None:
    files, mib = fanout.needs(96)
    assert (files, mib) == (1024, 1024 + 96 * 60)
    assert fanout.check(96, KEY, fanout.Controller(open_files=1024, available_mib=mib)) == []
    with pytest.raises(InvalidInput):
        fanout.check(97, KEY, fanout.Controller(open_files=1024, available_mib=None))
    (warning,) = fanout.check(96, KEY, fanout.Controller(open_files=1 << 20, available_mib=4096))
    assert warning.startswith(f"warning: {KEY}: 96 nodes at once need about 6784 MiB") and "lower it to 51" in warning
