"""The machine-wide table of sandbox fleets: who holds which 10.77.0.x address, and the shared services.

Several fleets run at once (several test runs, a user's `invoke sandbox.up`), so every claim happens under
one lock (`/run/gridready-sandbox/lock`). The table lives in `/run/gridready-sandbox/fleets.json`; a table from an
earlier boot is discarded. Fleets made for one process (tests) carry their owner PID; a claim reaps the entries of
owners that died without tearing down (the caller then runs `fleet.down` on them).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from sandbox import paths, proc

FIRST, LAST = 2, 254  # usable host part of 10.77.0.0/24 (.1 is the bridge)
DYNAMIC_FIRST = 32  # generated fleets start here; .2-.31 stay for committed inventories (sandbox: .11-.13)


def _table_path() -> Path:
    return paths.RUN_ROOT / "fleets.json"


@contextlib.contextmanager
def locked() -> Iterator[dict[str, Any]]:
    """Hold the machine-wide lock; yields the table, written back (atomically) when the block succeeds."""
    paths.RUN_ROOT.mkdir(parents=True, exist_ok=True)
    with open(paths.RUN_ROOT / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = read()
        yield table
        tmp = _table_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
        tmp.replace(_table_path())


def read() -> dict[str, Any]:
    try:
        table = json.loads(_table_path().read_text())
    except (OSError, ValueError):
        table = {}
    if table.get("boot_id") != proc.boot_id():
        table = {"boot_id": proc.boot_id(), "fleets": {}, "services": {}}
    table.setdefault("fleets", {})
    table.setdefault("services", {})
    return table


def short_id(name: str) -> str:
    """6 hex digits for interface names (IFNAMSIZ is 16: `gr` + id + host index fits)."""
    return hashlib.sha1(name.encode()).hexdigest()[:6]


def check_address(addr: str, where: str) -> str:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise GridreadyError(f"{where}: {addr!r} is not an IP address", ExitCode.INVALID) from None
    if ip not in ipaddress.ip_network(paths.SUBNET) or not FIRST <= int(ip) & 0xFF <= LAST:
        raise GridreadyError(
            f"{where}: {addr} is outside the sandbox range 10.77.0.{FIRST}-{LAST}", ExitCode.INVALID
        )
    return str(ip)


def dead_owned(table: dict[str, Any]) -> list[str]:
    """Fleets whose owning process is gone (a test session that crashed): to be torn down."""
    return [name for name, f in table["fleets"].items()
            if f.get("owner_pid") and not proc.alive(f["owner_pid"], f.get("owner_start"))]


def claim(table: dict[str, Any], name: str, inventory: Path, wanted: dict[str, str | None],
          owner_pid: int | None = None) -> dict[str, str]:
    """Reserve an address per host (a given one, or the lowest free from .32 up). Caller holds the lock."""
    mine = table["fleets"].get(name)
    if mine and mine["inventory"] != str(inventory):
        raise GridreadyError(
            f"sandbox: fleet name {name!r} is already used by {mine['inventory']}; rename one inventory",
            ExitCode.INVALID,
        )
    sid = short_id(name)
    for other, f in table["fleets"].items():
        if other != name and f["short"] == sid:
            raise GridreadyError(f"sandbox: fleet {name!r} collides with {other!r}; rename it", ExitCode.INVALID)
    taken = {a: other for other, f in table["fleets"].items() if other != name for a in f["addresses"].values()}
    got: dict[str, str] = {}
    for host, addr in wanted.items():
        if addr is None:
            continue
        if addr in taken:
            raise GridreadyError(
                f"sandbox: {host} wants {addr}, held by fleet {taken[addr]!r}; stop it or change hosts.yml",
                ExitCode.INVALID,
            )
        got[host] = addr
    free = (f"10.77.0.{i}" for i in range(DYNAMIC_FIRST, LAST + 1)
            if f"10.77.0.{i}" not in taken and f"10.77.0.{i}" not in got.values())
    for host, addr in wanted.items():
        if addr is None:
            nxt = next(free, None)
            if nxt is None:
                raise GridreadyError("sandbox: no free address left in 10.77.0.0/24", ExitCode.INVALID)
            got[host] = nxt
    if owner_pid:
        owner_start = proc.start_time(owner_pid)
    else:  # a re-claim without an owner keeps the one the fleet had (a test's fleet stays the test's)
        owner_pid, owner_start = (mine or {}).get("owner_pid"), (mine or {}).get("owner_start")
    table["fleets"][name] = {"inventory": str(inventory), "short": sid, "addresses": got,
                             "owner_pid": owner_pid, "owner_start": owner_start}
    return {h: got[h] for h in wanted}


def release(table: dict[str, Any], name: str) -> None:
    table["fleets"].pop(name, None)
