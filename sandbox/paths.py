"""Where the sandbox fleet keeps its image cache, per-fleet state and run-time files, and its fixed addresses."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "GRIDREADY_SANDBOX_CACHE"
DEFAULT_CACHE = Path("/var/cache/gridready-sandbox")  # images, apt-cacher-ng cache, repo signing key
STATE_ROOT = Path("/var/lib/gridready-sandbox")  # fixed: committed hosts.yml files point into it
RUN_ROOT = Path("/run/gridready-sandbox")  # allocator lock + table, ssh control sockets, shared services

BRIDGE = "fleetbr0"
BRIDGE_ADDR = "10.77.0.1"
PREFIX_LEN = 24
SUBNET = "10.77.0.0/24"
BLACKHOLE = "10.77.0.0/16"
ACNG_PORT = 3142  # apt-cacher-ng for Debian packages
REPO_PORT = 8088  # flat repository of simulated NVIDIA packages
REPO_URL = f"http://{BRIDGE_ADDR}:{REPO_PORT}/nvidia/"
REPO_KEY_URL = f"http://{BRIDGE_ADDR}:{REPO_PORT}/keys/gridready-sandbox-archive-keyring.gpg"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def fleet_dir(name: str) -> Path:
    """State of one fleet: controller key, ssh_config, state.json, per-host overlay dirs."""
    return STATE_ROOT / "fleets" / name


def generated_inventory_dir(name: str) -> Path:
    """Inventories made by `geninv` (tests, benchmarks) live here, named after their fleet."""
    return STATE_ROOT / "inventories" / name


def control_dir(name: str) -> Path:
    """ssh ControlPath sockets of one fleet; wiped at every up and down (stale masters never get reused)."""
    return RUN_ROOT / "cp" / name


def repo_root() -> Path:
    """The source tree this package runs from (for subprocesses that import gridready)."""
    return Path(__file__).resolve().parents[1]
