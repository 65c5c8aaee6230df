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
    assert line.endswith("certification.parallel: 500 nodes at once need about 2564 open files on the controller, "
                         "which allows 1024 (ulimit -n): raise the limit or lower it to 192")
    assert "cluster.yml" in line and not fake.calls


def test_fan_out_at_the_limit_runs_and_short_memory_is_a_warning() -> None:
    files, mib = fanout.needs(192)
    assert (files, mib) == (1024, 1024 + 192 * 45)
    assert fanout.check(192, KEY, fanout.Controller(open_files=1024, available_mib=mib)) == []
    with pytest.raises(InvalidInput):
        fanout.check(193, KEY, fanout.Controller(open_files=1024, available_mib=None))
    (warning,) = fanout.check(96, KEY, fanout.Controller(open_files=1 << 20, available_mib=4096))
    assert warning.startswith(f"warning: {KEY}: 96 nodes at once need about 5344 MiB") and "lower it to 68" in warning


def test_validate_refuses_a_fan_out_this_controller_cannot_hold(tmp_path: Path) -> None:
    """`gridready -i <inventory> validate` under a soft open-file limit below what certification.parallel needs:
    one line naming the file and key, exit 2 (before, validate said the inventory was valid and certify stopped)."""
    import resource
    import subprocess
    import sys

    files, _ = fanout.needs(25)  # the sandbox inventory's fan-out: the default
    limit = files - 20

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    run = subprocess.run([str(Path(sys.executable).parent / "gridready"), "-i", "inventories/sandbox", "validate"],
                         cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, check=False,
                         preexec_fn=lower, env={**__import__("os").environ, "GRIDREADY_ARTIFACTS": str(tmp_path)})
    lines = [x for x in run.stderr.splitlines() if x.strip()]
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and "inventories/sandbox/cluster.yml: certification.parallel: 25 nodes at once need " \
        f"about {files} open files on the controller, which allows {limit} (ulimit -n)" in lines[0], run.stderr


def test_too_few_processes_for_the_workers_and_their_ssh_masters_stop_it() -> None:
    """Each node probed at once is three processes of the controller's user (a worker, its SSH client, the
    ControlPersist master that outlives the node's tasks by 60 s): a user process limit below that is refused."""
    roomy = fanout.Controller(open_files=1 << 20, available_mib=None, processes=64 + 3 * 40)
    assert fanout.check(40, KEY, roomy) == []
    with pytest.raises(InvalidInput) as err:
        fanout.check(41, KEY, roomy)
    assert err.value.lines == [f"{KEY}: 41 nodes at once need about 187 processes on the controller (an Ansible "
                               "worker, an SSH client and its ControlPersist master each), which allows 184 "
                               "(ulimit -u): raise the limit or lower it to 40"]
