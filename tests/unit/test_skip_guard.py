"""tests/skip_guard.py: in CI a skip outside tests/expected_skips.py fails the run; outside CI it stays a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.expected_skips import EXPECTED_SKIPS
from tests.skip_guard import in_ci, unlisted

REPO = Path(__file__).resolve().parents[2]
CASES = {
    "tests/gpu/test_gpu.py": "import pytest\n\ndef test_needs_gpu():\n    pytest.skip('no GPU')\n",
    "tests/unit/test_runtime_skip.py": "import pytest\n\ndef test_tool():\n    pytest.skip('tool missing')\n",
    "tests/unit/test_marked.py": ("import pytest\n\n@pytest.mark.skipif(True, reason='chromium missing')\n"
                                  "def test_browser():\n    pass\n"),
    "tests/unit/test_fixture_skip.py": ("import pytest\n\n@pytest.fixture\ndef fleet():\n    pytest.skip('no root')\n\n"
                                        "def test_fleet(fleet):\n    pass\n"),
    "tests/unit/test_xfail.py": ("import pytest\n\n@pytest.mark.xfail(strict=True, reason='known')\n"
                                 "def test_known():\n    assert False\n"),
    "tests/unit/test_ok.py": "def test_ok():\n    assert True\n",
}


# the inner run's conftest: the guard's hooks as tests/conftest.py imports them, and a log of every report's outcome
# as the terminal sees it (after the guard rewrote it)
INNER_CONFTEST = """
import os
from tests.skip_guard import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401


def _log(report):
    outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
    with open(os.environ["OUTCOMES"], "a") as fh:
        fh.write(f"{report.nodeid} {getattr(report, 'when', 'collect')} {outcome}\\n")


def pytest_runtest_logreport(report):
    _log(report)


def pytest_collectreport(report):
    if report.nodeid.endswith(".py"):
        _log(report)
"""


MODULE_SKIP = {"tests/unit/test_module_skip.py": "import pytest\n\npytest.importorskip('no_such_module_here')\n\n"
                                                "def test_never():\n    pass\n"}


def _run(tmp_path: Path, ci: str | None, cases: dict[str, str] = CASES) -> dict[str, str]:
    """Outcome per node id (its worst phase) of a pytest run over `cases` with the guard installed."""
    for rel, body in cases.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    log = tmp_path / "outcomes.txt"
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(REPO), "OUTCOMES": str(log)}
    if ci is not None:
        env["CI"] = ci
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                    "--rootdir", str(tmp_path), "tests"], cwd=tmp_path, env=env, capture_output=True, text=True,
                   timeout=120)
    rank = {"passed": 0, "xfailed": 1, "skipped": 2, "failed": 3}
    out: dict[str, str] = {}
    for line in log.read_text().splitlines():
        node, when, outcome = line.rsplit(" ", 2)
        label = f"{outcome} in {when}" if outcome == "failed" and when != "call" else outcome
        if node not in out or rank[outcome] > rank[out[node].split()[0]]:
            out[node] = label
    return out


def test_outside_ci_skips_stay_skips(tmp_path: Path) -> None:
    out = _run(tmp_path, None)
    assert out["tests/unit/test_runtime_skip.py::test_tool"] == "skipped"
    assert out["tests/unit/test_fixture_skip.py::test_fleet"] == "skipped"
    assert out["tests/unit/test_ok.py::test_ok"] == "passed"
    assert _run(tmp_path / "module", None, MODULE_SKIP) == {"tests/unit/test_module_skip.py": "skipped"}


def test_in_ci_every_unlisted_skip_fails_and_the_listed_one_stays(tmp_path: Path) -> None:
    out = _run(tmp_path, "true")
    assert out == {
        "tests/gpu/test_gpu.py": "passed",  # collected
        "tests/gpu/test_gpu.py::test_needs_gpu": "skipped",  # listed in tests/expected_skips.py
        "tests/unit/test_runtime_skip.py": "passed",
        "tests/unit/test_runtime_skip.py::test_tool": "failed",
        "tests/unit/test_marked.py": "passed",
        "tests/unit/test_marked.py::test_browser": "failed in setup",  # skipif marks skip in setup
        "tests/unit/test_fixture_skip.py": "passed",
        "tests/unit/test_fixture_skip.py::test_fleet": "failed in setup",
        "tests/unit/test_xfail.py": "passed",
        "tests/unit/test_xfail.py::test_known": "xfailed",  # not a skip
        "tests/unit/test_ok.py": "passed",
        "tests/unit/test_ok.py::test_ok": "passed",
    }
    # importorskip at import time: the module's collection fails (and, as any collection error, stops the run)
    assert _run(tmp_path / "module", "true", MODULE_SKIP) == {"tests/unit/test_module_skip.py": "failed in collect"}


def test_the_rule() -> None:
    assert in_ci({"CI": "true"}) and in_ci({"CI": "1"}) and not in_ci({}) and not in_ci({"CI": "false"})
    assert not unlisted("tests/gpu/test_torch.py::test_x")
    assert unlisted("tests/gpuish/test_x.py::test_x") and unlisted("tests/unit/report/test_browser_layout.py::t")
    listed = {"tests/unit/a.py": "r", "tests/unit/b.py::test_one": "r"}
    assert not unlisted("tests/unit/a.py::test_x", listed) and not unlisted("tests/unit/a.py", listed)
    assert not unlisted("tests/unit/b.py::test_one[1]", listed) and unlisted("tests/unit/b.py::test_two", listed)
    assert unlisted("tests/unit/ab.py::test_x", listed)


@pytest.mark.parametrize(("key", "reason"), sorted(EXPECTED_SKIPS.items()))
def test_every_listed_skip_names_a_place_and_a_reason(key: str, reason: str) -> None:
    assert (REPO / key.split("::")[0]).exists(), key
    assert len(reason.split()) >= 4, reason
