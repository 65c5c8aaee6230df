"""Shared fixtures. The sandbox fleet (`fleet`, `make_fleet`): sandbox/pytest_plugin.py, docs/sandbox.md."""

import importlib.util
import os

import pytest

from sandbox.pytest_plugin import fleet, make_fleet, make_module_fleet  # noqa: F401
from tests.skip_guard import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401  (CI: no silent skips)


@pytest.fixture(autouse=True)
def one_command_line_per_test():
    """gridready.cli keeps the run id and the validated inventory for one command line (functools.cache); a test is
    one command line, so what one test set (a bad GRIDREADY_RUN_ID) never reaches the next on the same worker."""
    yield
    from gridready import cli

    cli._raw_run_id.cache_clear()
    cli.inventory.cache_clear()


@pytest.fixture(scope="session")
def vault_password_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vault") / "vault-pass"
    path.write_text("test-only vault password\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="session", autouse=True)
def vault_password(vault_password_file):
    """One test-only vault password for the whole session (serve keeps the vLLM API key in the customer's
    ansible-vault). Session-scoped, so module fixtures that run a pipeline see it too: a vault written by one run
    must open in the next."""
    if os.environ.get("GRIDREADY_VAULT_PASSWORD_FILE"):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDREADY_VAULT_PASSWORD_FILE", str(vault_password_file))
        yield


# Tests that boot or reach sandbox hosts, use a GPU or run the real router live under these directories. Under
# pytest-xdist (`-n 2`, the default addopts) they form two work units, each run on one worker in file order: the
# end-to-end and fleet tests, and the role suites (their session fleet is the roles' own) with the router and GPU
# tests. A fleet is shared only within a worker, so the tests of one unit never race each other; the two units run
# side by side on fleets of their own (the sandbox allocates addresses per fleet, docs/sandbox.md). The pure tests
# (unit, simulator, lint) go one by one to whichever worker is free.
# the reboot witness (its own 2-host fleet, ~140 s) runs in the roles unit: the e2e unit is the longer one
SERIAL_GROUPS = {"tests/sandbox/test_reboot_firewall.py": "fleet-roles",
                 "tests/sandbox/test_reboot_worker_head_down.py": "fleet-roles", "tests/e2e/": "fleet-e2e",
                 "tests/sandbox/": "fleet-e2e",
                 "tests/gpu/": "fleet-roles", "tests/roles/": "fleet-roles", "tests/router/": "fleet-roles"}
SERIAL_DIRS = tuple(SERIAL_GROUPS)
_FLEET_FIXTURES = {"fleet", "make_fleet", "make_module_fleet"}


def _serial(nodeid: str) -> bool:
    return nodeid.startswith(SERIAL_DIRS)


if importlib.util.find_spec("xdist"):  # a GPU machine runs its tests without it (benchmarks/gpu_machine_run.sh)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
        """xdist's own `--dist loadgroup` cannot mark groups under pytest 9.2 (it rewrites `item._nodeid`, which
        pytest no longer reads), so the grouping is by directory, in a scheduler of its load-by-scope kind."""
        from xdist.scheduler import LoadScopeScheduling

        class SerialFleetScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return next((group for prefix, group in SERIAL_GROUPS.items() if nodeid.startswith(prefix)), nodeid)

        return SerialFleetScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that needs the serial worker must live in one of SERIAL_DIRS; otherwise it could race a fleet."""
    stray = [item.nodeid for item in items if not _serial(item.nodeid) and (
        item.get_closest_marker("sandbox") or item.get_closest_marker("gpu")
        or _FLEET_FIXTURES & set(getattr(item, "fixturenames", ())))]
    if stray:
        raise pytest.UsageError(f"{stray[0]}: uses sandbox hosts or a GPU outside {', '.join(SERIAL_DIRS)}; "
                                "move it there (tests/conftest.py: SERIAL_DIRS)")
