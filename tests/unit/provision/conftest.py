"""The serving inventories of tests/unit/serving, for the rolling provision's tests."""

from tests.unit.serving.conftest import make_inv, write_certify  # noqa: F401 (fixtures)
