"""Load and validate a generated 1,000-node inventory; prints the best and median wall time of several loads.

Run: .venv/bin/python benchmarks/inventory_load.py [--nodes 1000] [--repeat 7]
Goal (issue 2): under 2 s. Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from gridready.inventory import load


def generate(root: Path, nodes: int) -> Path:
    """A customer with 8 node groups of H200/H100 nodes, 8 NDR HCAs each, two serving tiers."""
    inv = root / "inventories" / "bigfleet"
    (inv / "group_vars" / "all").mkdir(parents=True)
    groups = 8
    per_group = nodes // groups
    nics = [{"name": f"mlx5_{i}", "kind": "infiniband", "rate_gbps": 400, "rail": i} for i in range(8)]
    cluster = {
        "customer": "bigfleet",
        "node_groups": [{"name": f"pod{g:02d}", "sku": "H200-SXM-141GB" if g % 2 else "0x2330",
                         "gpus_per_node": 8, "nics": nics} for g in range(groups)],
        "certification": {"min_certified_nodes": nodes // 2},
        "serving": {"tiers": [
            {"name": f"tier{t}", "engine": "vllm", "served_name": f"m{t}", "node_group": f"pod{t:02d}",
             "model": {"hf_id": "meta-llama/Llama-3.3-70B-Instruct", "revision": "6f6073b4"},
             "tensor_parallel": 8, "pipeline_parallel": 2, "replicas": 4} for t in range(2)]},
    }
    hosts = {"all": {"children": {
        f"pod{g:02d}": {"hosts": {f"gpu{g:02d}-{n:04d}": {"ansible_host": f"198.51.{g}.{n % 250 + 1}"}
                                  for n in range(per_group)}}
        for g in range(groups)}}}
    (inv / "cluster.yml").write_text(yaml.safe_dump(cluster))
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (inv / "group_vars" / "all" / "main.yml").write_text("gridready_nvidia_driver_reboot: allowed\n")
    return inv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inv_dir = generate(Path(tmp), args.nodes)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            inv = load(inv_dir)
            times.append(time.perf_counter() - t0)
        print(f"nodes={len(inv.gpu_hosts())} hosts.yml={(inv_dir / 'hosts.yml').stat().st_size} bytes "
              f"best={min(times):.3f}s median={statistics.median(times):.3f}s max={max(times):.3f}s")


if __name__ == "__main__":
    main()
