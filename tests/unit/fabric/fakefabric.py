"""An in-process fake fabric for the fabric phase: answers the probe's `collect`/`snapshot` and mpirun runs.

Each host has 8 x 400G HCAs; faults: `half_rate` (one HCA at 200 Gb/s: HCA gates see it, and NCCL over that node
runs at about half), `slow` (NCCL busbw x0.5 with healthy ports: only the pairwise runs can find it), `socket`
(NCCL falls back to NET/Socket). busbw of a run is bounded by its worst participant, as in the sandbox simulator.
The nccl-tests and NCCL INFO lines follow the formats of tests/fixtures/public/nccl-tests.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gridready.inventory import Inventory
from gridready.spec import ClusterSpec
from gridready.stages.fabric import CommandResult

HEALTHY_BUSBW = 388.0  # GB/s at large sizes on 8 x 400G (97% of the NIC aggregate)


def make_inventory(n: int, *, gpus: int = 8, roce: bool = False) -> Inventory:
    hosts = [f"gpu{i:02d}" for i in range(1, n + 1)]
    spec = ClusterSpec.model_validate({
        "customer": "fabric-test",
        "node_groups": [{
            "name": "h200", "sku": "h200", "gpus_per_node": gpus, "mgmt_interface": "eth0",
            "nics": [{"name": f"mlx5_{i}", "kind": "roce" if roce else "infiniband", "rate_gbps": 400, "rail": i}
                     for i in range(8)],
        }],
    })
    host_vars = {h: {"ansible_host": f"10.77.0.{10 + i}"} for i, h in enumerate(hosts)}
    return Inventory(name="fabric-test", path=Path("/nonexistent"), spec=spec, hosts=host_vars,
                     groups={"h200": hosts, "all": hosts})


class FakeFabric:
    def __init__(self, inv: Inventory, faults: dict[str, str] | None = None, run_s: float = 0.0) -> None:
        self.inv = inv
        self.hostvars = inv.hosts  # the fake inventory has no group_vars: its host vars are all there is
        self.faults = faults or {}
        self.run_s = run_s  # simulated wall time of one nccl-tests run
        self.by_addr = {str(v["ansible_host"]): h for h, v in inv.hosts.items()}
        self.counters = {h: 0 for h in inv.hosts}
        self.mpiruns: list[list[str]] = []

    # -- probe
    def _hca(self, host: str) -> dict[str, Any]:
        fault = self.faults.get(host)
        sysfs, topo_links = {}, {}
        for i in range(8):
            rate = "200 Gb/sec (4X HDR)" if fault == "half_rate" and i == 1 else "400 Gb/sec (4X NDR)"
            sysfs[f"mlx5_{i}"] = {
                "fw_ver": "28.41.1000", "hca_type": "MT4129", "board_id": "MT_0000000838",
                "pcie": {"address": f"0000:{0x19 + i:02x}:00.0", "current_link_speed": "32.0 GT/s PCIe",
                         "current_link_width": "16", "max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16"},
                "netdevs": [f"ibp{i}s0"],
                "ports": {"1": {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": rate,
                                "link_layer": "InfiniBand", "counters": self._ctrs(host), "gids": {},
                                "gid_types": {}}},
            }
            topo_links[f"GPU{i}"] = {f"NIC{j}": ("PIX" if j == i else "NODE") for j in range(8)}
        bw = {f"mlx5_{i}": {"hca": f"mlx5_{i}", "gpu": i, "rc": 0, "error": None,
                            "parsed": {"avg_gbits": 196.0 if fault == "half_rate" and i == 1 else 392.0}}
              for i in range(8)}
        snap = self._snapshot(host)
        return {"sysfs": sysfs, "counters_before": snap, "counters_after": snap,
                "ibstat": {"rc": None, "error": "ibstat not found"},
                "topo": {"rc": 0, "parsed": {"gpus": [f"GPU{i}" for i in range(8)],
                                             "nics": {f"NIC{j}": f"mlx5_{j}" for j in range(8)},
                                             "links": topo_links}},
                "netdevs": {}, "ib_write_bw": bw}

    def _ctrs(self, host: str) -> dict[str, int]:
        return {"link_downed": 0, "symbol_error": self.counters[host], "port_rcv_errors": 0,
                "link_error_recovery": 0}

    def _snapshot(self, host: str) -> dict[str, Any]:
        return {"time": time.time(), "counters": {f"mlx5_{i}": {"1": self._ctrs(host)} for i in range(8)}}

    # -- nccl-tests
    def _busbw(self, hosts: list[str]) -> float:
        worst = 1.0
        for h in hosts:
            f = self.faults.get(h)
            if f in ("half_rate", "slow"):
                worst = min(worst, 0.5)
        return HEALTHY_BUSBW * worst

    def _nccl(self, argv: list[str]) -> str:
        hosts_arg = argv[argv.index("-H") + 1]
        addrs = [p.split(":")[0] for p in hosts_arg.split(",")]
        slots = [int(p.split(":")[1]) for p in hosts_arg.split(",")]
        hosts = [self.by_addr[a] for a in addrs]
        b, e = int(argv[argv.index("-b") + 1]), int(argv[argv.index("-e") + 1])
        peak = self._busbw(hosts)
        socket = any(self.faults.get(h) == "socket" for h in hosts)
        lines = [f"# nThread 1 nGpus 1 minBytes {b} maxBytes {e} step: 2(factor) warmup iters: 5 iters: 20 "
                 "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
        rank = 0
        for h, s in zip(hosts, slots, strict=True):
            for d in range(s):
                lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {h:>10} device  {d} "
                             f"[0x{0x18 + d:02x}] NVIDIA H200")
                rank += 1
        via = "via NET/Socket/0" if socket else "via NET/IB/0/GDRDMA"
        lines.append(f"{hosts[0]}:1000:1020 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] {via}")
        lines.append(f"{hosts[0]}:1000:1020 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0")
        lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
                  "   algbw   busbw #wrong",
                  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
                  "  (GB/s)  (GB/s)"]
        size, n = b, rank
        while size <= e:
            bw = round(peak * (1 - 0.25 * (1 << 30) / (size + (1 << 30))) * (1.0 if size >= (2 << 30) else 0.97), 2)
            alg = round(bw / (2 * (n - 1) / n), 2)
            t = round(size / (alg * 1e3), 1)
            lines.append(f"{size:>12} {size // 4:>13}     float     sum      -1 {t:>8} {alg:>7} {bw:>7}      0 "
                         f"{t:>8} {alg:>7} {bw:>7}      0")
            size *= 2
        lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {peak * 0.8:.3f}", "#"]
        return "\n".join(f"[1,0]<stdout>:{ln}" for ln in lines) + "\n"

    # -- FabricRunner
    def run(self, host: str, argv: Sequence[str], timeout: float) -> CommandResult:
        argv = list(argv)
        if "python3" in argv:
            cmd = argv[-1] if argv[-1] in ("snapshot",) else argv[argv.index("-c") + 2]
            for h in self.counters:
                if self.faults.get(h) == "flapping":
                    self.counters[h] += 50
            data = self._snapshot(host) if cmd == "snapshot" else self._hca(host)
            return CommandResult(0, json.dumps(data) + "\n")
        if "torchrun" in argv:
            rdzv = next(a for a in argv if a.startswith("--rdzv-id="))
            hosts = rdzv.split("=", 1)[1].removeprefix("gridready-").split("+")
            peak = self._busbw(hosts)
            rows = [{"bytes": b << 30, "busbw_gbps": round(peak * f, 2)} for b, f in ((1, 0.9), (2, 0.96), (8, 1.0))]
            via = "via NET/Socket/0" if any(self.faults.get(h) == "socket" for h in hosts) else "via NET/IB/0/GDRDMA"
            out = f"{host}:1:1 [0] NCCL INFO Channel 00/0 : 7[7] -> 8[0] [send] {via}\n"
            if host == hosts[0]:
                out += json.dumps({"rows": rows, "wrong": 0}) + "\n"
            return CommandResult(0, out)
        if argv and argv[0].endswith("mpirun"):
            self.mpiruns.append(argv)
            if self.run_s:
                time.sleep(self.run_s)
            return CommandResult(0, self._nccl(argv), wall_s=self.run_s)
        return CommandResult(127, "", f"unknown command {argv[:1]}")


def hosts_in(argv: list[str]) -> list[str]:
    return re.findall(r"(10\.77\.0\.\d+):", argv[argv.index("-H") + 1])
