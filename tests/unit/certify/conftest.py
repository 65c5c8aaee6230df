"""pytest fixtures of the certification tests; the readers live in fixtures_io.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.certify.fixtures_io import probe_quick


@pytest.fixture
def quick_doc() -> dict[str, Any]:
    return probe_quick()
