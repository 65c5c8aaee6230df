"""Shared fixtures. The sandbox fleet (`fleet`, `make_fleet`): gridready/sandbox/pytest_plugin.py, docs/sandbox.md."""

import os

import pytest

from gridready.sandbox.pytest_plugin import fleet, make_fleet  # noqa: F401


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
