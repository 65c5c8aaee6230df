"""Prometheus textfile metrics (node_exporter textfile collector), values in base units (bytes/s, FLOP/s, s)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gridready.artifacts import write_atomic
from gridready.certify.judge import FleetVerdict
from gridready.certify.result import GateStatus


def registry(fleet: FleetVerdict) -> CollectorRegistry:
    reg = CollectorRegistry()
    cust = fleet.customer or ""
    status = Gauge("gridready_gate_status", "1 for the gate's worst status on the node (state set)",
                   ["customer", "node", "gate", "status"], registry=reg)
    certified = Gauge("gridready_node_certified", "1 when every required gate passed", ["customer", "node"],
                      registry=reg)
    valid = Gauge("gridready_certification_valid_until_timestamp_seconds", "end of the validity window",
                  ["customer", "node"], registry=reg)
    flops = Gauge("gridready_gpu_gemm_flops", "dense GEMM throughput, FLOP/s", ["customer", "node", "gpu", "dtype"],
                  registry=reg)
    bw = Gauge("gridready_gpu_bandwidth_bytes_per_second", "per-GPU copy bandwidth, bytes/s",
               ["customer", "node", "gpu", "kind"], registry=reg)
    peer = Gauge("gridready_gpu_peer_bandwidth_bytes_per_second", "GPU->GPU copy bandwidth, bytes/s",
                 ["customer", "node", "src", "dst"], registry=reg)
    busbw = Gauge("gridready_nccl_allreduce_busbw_bytes_per_second",
                  "max all-reduce bus bandwidth at sizes >= the spec's minimum, bytes/s", ["customer", "node"],
                  registry=reg)
    wall = Gauge("gridready_probe_duration_seconds", "wall time of the node probe", ["customer", "node"],
                 registry=reg)
    for node, v in fleet.nodes.items():
        certified.labels(cust, node).set(1 if v.certified else 0)
        if v.valid_until:
            valid.labels(cust, node).set(dt.datetime.fromisoformat(v.valid_until).timestamp())
        for gate in dict.fromkeys(r.gate for r in v.gates):
            worst = v.worst(gate) or GateStatus.ERROR
            status.labels(cust, node, gate, worst.value).set(1)
        for g in v.figures.get("gpus", []):
            gpu = str(g["gpu"])
            for key, dtype in (("bf16_gemm_tflops", "bf16"), ("fp8_gemm_tflops", "fp8")):
                if g.get(key) is not None:
                    flops.labels(cust, node, gpu, dtype).set(g[key] * 1e12)
            for key, kind, scale in (("hbm_copy_tbps", "hbm_copy", 1e12), ("h2d_gbps", "h2d", 1e9),
                                     ("d2h_gbps", "d2h", 1e9)):
                if g.get(key) is not None:
                    bw.labels(cust, node, gpu, kind).set(g[key] * scale)
        for p in v.figures.get("peer", []):
            if p.get("gbps") is not None:
                peer.labels(cust, node, str(p["src"]), str(p["dst"])).set(p["gbps"] * 1e9)
        nr = next((r for r in v.gates if r.gate == "nccl_allreduce" and isinstance(r.measured, dict)), None)
        if nr and nr.measured.get("max_busbw_gbps") is not None:
            busbw.labels(cust, node).set(nr.measured["max_busbw_gbps"] * 1e9)
        if v.figures.get("probe_wall_s") is not None:
            wall.labels(cust, node).set(v.figures["probe_wall_s"])
    return reg


def write_prom(fleet: FleetVerdict, path: Path) -> Path:
    """The text exposition, renamed into place (atomic for the textfile collector, never through a link)."""
    return write_atomic(path, generate_latest(registry(fleet)), mode=0o644)
