"""Joins a Ray cluster for the simulated engine; run with the host's Ray interpreter, not the engine's.

    /opt/ray/venv/bin/python ray_member.py --address 10.77.0.11:6379 --name sim-llama-8000 --info '{...}'

Connects as a Ray driver (namespace "gridready"), places one named actor that holds the engine's info, prints
one JSON line ({"event": "ray-joined", ...} or {"event": "ray-failed", "error": ...}) and then stays connected
until its stdin closes (the engine exited). Self-contained on purpose: the engine starts it by file path.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def place_ranks(ray: Any, world_size: int, engine_dir: str, timeout_s: float) -> dict[str, str]:
    """What vLLM's Ray executor does before loading weights: a placement group of one {"GPU": 1} bundle per rank
    (vllm/v1/executor/ray_utils.py initialize_ray_cluster, strategy PACK), then a worker actor per bundle that
    imports vllm on the bundle's node; a node without the engine package fails the engine with
    ModuleNotFoundError (vLLM's parallelism docs: every node needs the same Python environment). One import check
    per node stands for that node's ranks. Returns node IP -> engine directory found there."""
    from ray.util.placement_group import placement_group, placement_group_table
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = placement_group([{"GPU": 1.0} for _ in range(world_size)], strategy="PACK")
    if not pg.wait(timeout_s):
        raise TimeoutError(f"placement group of {world_size} GPU bundles not ready in {timeout_s:.0f} s "
                           f"(cluster has {ray.cluster_resources().get('GPU', 0.0)} GPUs)")
    first_bundle: dict[str, int] = {}
    for index, node_id in sorted(placement_group_table(pg)["bundles_to_node_id"].items()):
        first_bundle.setdefault(node_id, int(index))

    @ray.remote(num_cpus=0, num_gpus=1)
    class RankWorker:
        """Stands in for vLLM's RayWorkerWrapper: its first act is importing the engine."""

        def __init__(self, package_dir: str) -> None:
            import importlib.util
            from pathlib import Path

            init = Path(package_dir) / "__init__.py"
            spec = importlib.util.spec_from_file_location("gridready_sim_engine", init,
                                                          submodule_search_locations=[package_dir])
            if not init.is_file() or spec is None or spec.loader is None:
                raise ModuleNotFoundError(f"No module named 'vllm' (SIMULATED: no engine package at {package_dir}"
                                          f" on {ray.util.get_node_ip_address()})")
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            self._dir = package_dir

        def node(self) -> str:
            return ray.util.get_node_ip_address()

    workers = [RankWorker.options(  # type: ignore[attr-defined]
        scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=i),
    ).remote(engine_dir) for i in first_bundle.values()]
    return {ip: engine_dir for ip in ray.get([w.node.remote() for w in workers], timeout=timeout_s)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--info", default="{}")
    ap.add_argument("--world-size", type=int, default=0,
                    help="ranks of a --distributed-executor-backend ray engine: one GPU bundle each")
    ap.add_argument("--engine-dir", default="", help="the engine package every rank's node must hold")
    ap.add_argument("--pg-timeout", type=float, default=60.0)
    args = ap.parse_args()
    try:
        import ray  # only the Ray interpreter has it

        ray.init(address=args.address, namespace="gridready", log_to_driver=False, logging_level="WARNING",
                 configure_logging=False)

        @ray.remote(num_cpus=0)
        class SimulatedEngine:
            """Stands in for the vLLM engine actor; holds what the engine serves."""

            def __init__(self, info: dict) -> None:
                self._info = info

            def info(self) -> dict:
                return {**self._info, "node_ip": ray.util.get_node_ip_address()}

        actor = SimulatedEngine.options(  # type: ignore[attr-defined]
            name=args.name, get_if_exists=True).remote(json.loads(args.info))
        info = ray.get(actor.info.remote(), timeout=60)
        ranks = place_ranks(ray, args.world_size, args.engine_dir, args.pg_timeout) if args.world_size else {}
        alive = [n for n in ray.nodes() if n.get("Alive")]
        print(json.dumps({"event": "ray-joined", "rank_nodes": ranks, "address": args.address, "namespace": "gridready",
                          "actor": args.name, "actor_node_ip": info.get("node_ip"),
                          "driver_node_ip": ray.util.get_node_ip_address(), "alive_nodes": len(alive),
                          "cluster_gpus": ray.cluster_resources().get("GPU", 0.0), "ray_version": ray.__version__}),
              flush=True)
    except Exception as err:  # report any failure as one line; the engine decides what to do
        print(json.dumps({"event": "ray-failed", "error": f"{type(err).__name__}: {err}"}), flush=True)
        return 1
    for _ in sys.stdin:  # hold the driver (and its actor) until the engine closes our stdin
        pass
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
