"""Runs ON node1 (a Ray driver must run on a Ray node): one task pinned to every alive node."""

import json
import socket

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(address="auto", logging_level="ERROR")


@ray.remote(num_cpus=1)
def where() -> list:
    return [socket.gethostname(), ray.util.get_node_ip_address()]


nodes = [n for n in ray.nodes() if n["Alive"]]
refs = [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in nodes]
print(json.dumps(sorted(ray.get(refs, timeout=120))))
