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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--address", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--info", default="{}")
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
        alive = [n for n in ray.nodes() if n.get("Alive")]
        print(json.dumps({"event": "ray-joined", "address": args.address, "namespace": "gridready",
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
