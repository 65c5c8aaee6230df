"""Run history that cannot mislead: slug run ids, newest by recorded time, no reuse of a run id, one stage at a
time per customer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridready.artifacts import RunContext, customer_lock, latest_summary, validate_run_id
from gridready.errors import InvalidInput
from tests.unit.test_inventory_errors import make_inventory

REPO = Path(__file__).resolve().parents[2]


def _summary(root: Path, run_id: str, finished: str, **extra: object) -> Path:
    path = root / "acme" / run_id / "certify" / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"stage": "certify", "run_id": run_id, "started_at": finished,
                                "finished_at": finished, **extra}))
    return path


@pytest.mark.parametrize("bad", ["../../x", "a/b", "..", ".hidden", "", "x" * 65, "run id", "r\n1", "r1;rm"])
def test_run_ids_that_are_not_slugs_are_refused(bad):
    with pytest.raises(InvalidInput) as err:
        validate_run_id(bad)
    assert err.value.lines[0].startswith("GRIDREADY_RUN_ID: (run id): must match")


@pytest.mark.parametrize("good", ["20261130T031400Z-3f9a", "123-10", "ci_4711"])
def test_slug_run_ids_pass(good):
    assert validate_run_id(good) == good


def test_newest_summary_is_decided_by_recorded_time_not_by_name(tmp_path):
    _summary(tmp_path, "123-9", "2026-11-30T01:00:00+00:00")
    _summary(tmp_path, "123-10", "2026-11-30T02:00:00+00:00")
    _summary(tmp_path, "20261130T015000Z-aaaa", "2026-11-30T01:50:00+00:00")  # a local run between two CI runs
    _, data = latest_summary(tmp_path, "acme", "certify")
    assert data["run_id"] == "123-10"


def test_a_check_mode_summary_is_skipped_and_equal_times_go_by_write_order(tmp_path):
    _summary(tmp_path, "b", "2026-11-30T02:00:00+00:00")
    time.sleep(0.01)
    _summary(tmp_path, "a", "2026-11-30T02:00:00+00:00")
    _summary(tmp_path, "z", "2026-11-30T03:00:00+00:00", check=True)
    assert latest_summary(tmp_path, "acme", "certify")[1]["run_id"] == "a"
    assert latest_summary(tmp_path, "acme", "certify", include_check=True)[1]["run_id"] == "z"


def test_a_stage_is_claimed_once_per_run_id(tmp_path):
    ctx = RunContext(customer="acme", run_id="r1", root=tmp_path)
    ctx.claim_stage("provision")
    ctx.claim_stage("certify")
    with pytest.raises(InvalidInput) as err:
        ctx.claim_stage("provision")
    assert "run 'r1' of acme already has a provision stage" in err.value.lines[0]


def test_a_second_holder_of_the_customer_lock_is_refused_with_who_holds_it(tmp_path):
    code = ("import sys, time; from pathlib import Path; from gridready.artifacts import customer_lock\n"
            "with customer_lock(Path(sys.argv[1]), 'acme', 'run r1 stage certify (pid 1)'):\n"
            "    print('held', flush=True); time.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(InvalidInput) as err, customer_lock(tmp_path, "acme", "run r2 stage serve", wait_s=0.6):
            pass
        assert "run r1 stage certify (pid 1) is using customer acme" in err.value.lines[0]
    finally:
        holder.kill()
        holder.wait()
    with customer_lock(tmp_path, "acme", "run r2 stage serve"):  # released when its process ended
        pass


def _invoke(tmp_path: Path, *tasks: str, run_id: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRIDREADY_INVENTORY": "acme", "GRIDREADY_HOME": str(tmp_path), "GRIDREADY_RUN_ID": run_id,
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *tasks], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_run_id_with_a_path_exits_2_and_writes_nothing(tmp_path):
    make_inventory(tmp_path)
    proc = _invoke(tmp_path, "serve", run_id="../../x")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: GRIDREADY_RUN_ID: (run id): must match")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "artifacts").exists()
    assert not any(tmp_path.parent.glob("x"))


def test_the_same_run_id_twice_exits_2_with_a_clear_line(tmp_path):
    make_inventory(tmp_path)
    first = _invoke(tmp_path, "serve", run_id="ci-41")
    assert first.returncode == 5, first.stderr  # no certification yet: fail closed
    second = _invoke(tmp_path, "serve", run_id="ci-41")
    assert second.returncode == 2, second.stderr
    assert "error: GRIDREADY_RUN_ID: (run id): run 'ci-41' of acme already has a serve stage" in second.stderr
    summary = json.loads((tmp_path / "artifacts" / "acme" / "ci-41" / "serve" / "summary.json").read_text())
    assert summary["exit_code"] == 5  # the first run's record is untouched
