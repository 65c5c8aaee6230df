"""Prometheus textfile metrics (node_exporter textfile collector), values in base units (bytes/s, FLOP/s, s).

Written family by family, node by node, straight to the file (text exposition format 0.0.4): a fleet of 10,000
nodes has over a million samples, which a client-library registry would hold in memory all at once."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from gridready.artifacts import open_atomic
from gridready.certify.judge import FleetVerdict, NodeVerdict
from gridready.certify.result import GateStatus
from gridready.report.worst import worst_by_gate

Sample = tuple[tuple[str, ...], float]  # label values after customer and node, value
_RATES = (("hbm_copy_tbps", "hbm_copy", 1e12), ("h2d_gbps", "h2d", 1e9), ("d2h_gbps", "d2h", 1e9))


def _gate_status(v: NodeVerdict) -> Iterator[Sample]:
    for gate, worst in worst_by_gate(v).items():
        yield (gate, (worst or GateStatus.ERROR).value), 1


def _certified(v: NodeVerdict) -> Iterator[Sample]:
    yield (), 1 if v.certified else 0


def _valid_until(v: NodeVerdict) -> Iterator[Sample]:
    if v.valid_until:
        yield (), dt.datetime.fromisoformat(v.valid_until).timestamp()


def _flops(v: NodeVerdict) -> Iterator[Sample]:
    for g in v.figures.get("gpus", []):
        for key, dtype in (("bf16_gemm_tflops", "bf16"), ("fp8_gemm_tflops", "fp8")):
            if g.get(key) is not None:
                yield (str(g["gpu"]), dtype), g[key] * 1e12


def _bandwidth(v: NodeVerdict) -> Iterator[Sample]:
    for g in v.figures.get("gpus", []):
        for key, kind, scale in _RATES:
            if g.get(key) is not None:
                yield (str(g["gpu"]), kind), g[key] * scale


def _peer(v: NodeVerdict) -> Iterator[Sample]:
    for p in v.figures.get("peer", []):
        if p.get("gbps") is not None:
            yield (str(p["src"]), str(p["dst"])), p["gbps"] * 1e9


def _busbw(v: NodeVerdict) -> Iterator[Sample]:
    nr = next((r for r in v.gates if r.gate == "nccl_allreduce" and isinstance(r.measured, dict)), None)
    if nr and nr.measured.get("max_busbw_gbps") is not None:
        yield (), nr.measured["max_busbw_gbps"] * 1e9


def _wall(v: NodeVerdict) -> Iterator[Sample]:
    if v.figures.get("probe_wall_s") is not None:
        yield (), v.figures["probe_wall_s"]


# name, help, labels after customer and node, samples of one node
FAMILIES: tuple[tuple[str, str, tuple[str, ...], Callable[[NodeVerdict], Iterator[Sample]]], ...] = (
    ("gridready_gate_status", "1 for the gate's worst status on the node (state set)", ("gate", "status"),
     _gate_status),
    ("gridready_node_certified", "1 when every required gate passed", (), _certified),
    ("gridready_certification_valid_until_timestamp_seconds", "end of the validity window", (), _valid_until),
    ("gridready_gpu_gemm_flops", "dense GEMM throughput, FLOP/s", ("gpu", "dtype"), _flops),
    ("gridready_gpu_bandwidth_bytes_per_second", "per-GPU copy bandwidth, bytes/s", ("gpu", "kind"), _bandwidth),
    ("gridready_gpu_peer_bandwidth_bytes_per_second", "GPU->GPU copy bandwidth, bytes/s", ("src", "dst"), _peer),
    ("gridready_nccl_allreduce_busbw_bytes_per_second",
     "max all-reduce bus bandwidth at sizes >= the spec's minimum, bytes/s", (), _busbw),
    ("gridready_probe_duration_seconds", "wall time of the node probe", (), _wall),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def write_metrics(fleet: FleetVerdict, out: IO[str]) -> None:
    cust = _label(fleet.customer or "")
    for name, help_text, labels, samples in FAMILIES:
        out.write(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
        for node, v in fleet.nodes.items():
            head = f'customer="{cust}",node="{_label(node)}"'
            for values, value in samples(v):
                extra = "".join(f',{k}="{_label(x)}"' for k, x in zip(labels, values, strict=True))
                out.write(f"{name}{{{head}{extra}}} {_number(value)}\n")


def write_prom(fleet: FleetVerdict, path: Path) -> Path:
    """Written to a temp file and renamed into place (atomic for the textfile collector, never through a link;
    readable by the node exporter)."""
    with open_atomic(path, mode=0o644) as out:
        write_metrics(fleet, out)
    return path
