"""`python -m sandbox up|down|status [INVENTORY_DIR] [--hosts N] [--json]` (invoke wraps the same API)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gridready.errors import GridreadyError
from sandbox import fleet


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox")
    ap.add_argument("action", choices=["up", "down", "status"])
    ap.add_argument("inventory", nargs="?", default="inventories/sandbox", type=Path)
    ap.add_argument("--hosts", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        if args.action == "down":
            fleet.down(args.inventory)
            st = fleet.status(args.inventory)
        elif args.action == "up":
            st = fleet.up(args.inventory, args.hosts)
        else:
            st = fleet.status(args.inventory, args.hosts)
    except GridreadyError as err:
        print(f"error: {err}", file=sys.stderr)
        return int(err.code)
    print(st.model_dump_json(indent=2) if args.json else fleet.format_status(st))
    return 0


if __name__ == "__main__":
    sys.exit(main())
