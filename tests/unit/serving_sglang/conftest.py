"""The serving fixtures (inventories of certified H200 nodes) and the simulated-engine factory."""

from tests.unit.bench.conftest import engine_factory
from tests.unit.serving.conftest import make_inv, write_certify

__all__ = ["engine_factory", "make_inv", "write_certify"]
