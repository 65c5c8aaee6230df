"""No silent skips in CI: with CI=true a skipped test, module or fixture fails unless tests/expected_skips.py lists
its node id (prefix) with a reason. xfail is not a skip; deselection (`-m 'not extended'`) is not a skip either.

Hooks imported by tests/conftest.py; `unlisted` is the rule alone."""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping
from typing import Any

import pytest

from tests.expected_skips import EXPECTED_SKIPS


def in_ci(env: Mapping[str, str] = os.environ) -> bool:
    return env.get("CI", "").strip().lower() in ("true", "1", "yes")


def _covers(key: str, nodeid: str) -> bool:
    if key.endswith("/"):
        return nodeid.startswith(key)
    return nodeid == key or nodeid.startswith((key + "::", key + "["))


def unlisted(nodeid: str, expected: Mapping[str, str] = EXPECTED_SKIPS) -> bool:
    """True where a skip of `nodeid` is not one of the expected ones."""
    return not any(_covers(key, nodeid) for key in expected)


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    rep: Any = report.longrepr
    return str(rep[2]) if isinstance(rep, tuple) and len(rep) == 3 else str(rep)


def _guard(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci() or not unlisted(report.nodeid):
        return
    why = _reason(report)
    report.outcome = "failed"
    report.longrepr = (f"{report.nodeid}: skipped in CI ({why}); a CI run must not skip it, or list it with its "
                       "reason in tests/expected_skips.py")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    _guard(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    _guard(outcome.get_result())
