"""Judge fetched probe documents offline and write every report format:

    python -m gridready.report --inventory local --probe localhost=probe.json --out DIR

The node group of each host comes from the inventory; nothing runs on any node.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gridready.certify.judge import judge_fleet, judge_node
from gridready.inventory import load
from gridready.report.writer import write_all


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridready.report", description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", required=True, help="inventory name or path (inventories/<name>)")
    ap.add_argument("--probe", action="append", required=True, metavar="HOST=PATH", help="probe JSON of a host")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--run-id", default=None)
    a = ap.parse_args(argv)
    inv = load(a.inventory)
    spec = inv.spec.certification
    verdicts = []
    for item in a.probe:
        host, _, path = item.partition("=")
        group = inv.spec.group(inv.node_group_of(host) or "")
        if group is None:
            print(f"{host}: not in any node group of {inv.name}", file=sys.stderr)
            return 2
        verdicts.append(judge_node(spec, group, json.loads(Path(path).read_text()), node=host,
                                   node_group=group.name, driver_branch=inv.spec.software.driver_branch,
                                   rdma_stack=inv.spec.software.rdma_stack, evidence=Path(path).name))
    fleet = judge_fleet(spec, verdicts, customer=inv.customer, run_id=a.run_id)
    cmd = "python -m gridready.report " + " ".join(argv if argv is not None else sys.argv[1:])
    for name, path in write_all(fleet, a.out, command=cmd).items():
        print(f"{name}: {path}")
    return fleet.exit_code


if __name__ == "__main__":
    sys.exit(main())
