"""Simulated nccl-tests binaries (all_reduce_perf, all_gather_perf, ...): the nccl-tests 2.x text format.

Bus bandwidth comes from the profile: the SKU's NVLink figure (hardware.py) inside one node (ring, or NVLS unless
NCCL_NVLS_ENABLE=0 / NCCL_ALGO=Ring), the HCAs across nodes. Under the simulated `mpirun` the env var
GRIDREADY_SIM_WORLD holds every participant's profile and the slowest participant bounds the result.
Marker: a `# gridready-sim:` comment after `# Collective test starting`. `-J file` writes nccl-tests 2.19.6's JSON
layout (src/common.cu's JSON writer; a real capture in tests/fixtures/h200x1/nccl-tests-J): `version` 3, `args`,
the process's whole `env` (as the real tool writes it), `nccl_version`, `config` with `devices[]`, `results[]` of
{size, count, type, redop, root, out_of_place, in_place: {time, alg_bw, bus_bw, nwrong}, actual_iterations,
experiment_name}, `out_of_bounds`, `average_bus_bandwidth`, `errors`; plus `gridready_simulated: true` (the
simulator's marker, a key the real writer never emits).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import simcore
from .simcore import Host

ENV_WORLD = "GRIDREADY_SIM_WORLD"
NIC_EFFICIENCY = 0.94  # ring busbw / NIC line rate on a healthy IB fabric (ANCH 3.2: 92% floor, ~94% seen)
SOCKET_GBPS = 2.9  # busbw over the management Ethernet when NCCL falls back to sockets
TYPE_SIZE = {"int8": 1, "uint8": 1, "half": 2, "bfloat16": 2, "float": 4, "int32": 4, "double": 8, "int64": 8}


@dataclass(frozen=True)
class Collective:
    name: str
    redop: bool  # prints the reduction op (else "none")
    root: int  # -1: no root
    bus_factor: str  # "allreduce" 2(n-1)/n, "gather" (n-1)/n, "one" 1


COLLECTIVES = {
    "all_reduce_perf": Collective("all_reduce", True, -1, "allreduce"),
    "all_gather_perf": Collective("all_gather", False, -1, "gather"),
    "reduce_scatter_perf": Collective("reduce_scatter", True, -1, "gather"),
    "alltoall_perf": Collective("alltoall", False, -1, "gather"),
    "broadcast_perf": Collective("broadcast", False, 0, "one"),
    "reduce_perf": Collective("reduce", True, 0, "one"),
    "sendrecv_perf": Collective("sendrecv", False, -1, "one"),
    "gather_perf": Collective("gather", False, 0, "gather"),
    "scatter_perf": Collective("scatter", False, 0, "gather"),
    "hypercube_perf": Collective("hypercube", False, -1, "gather"),
}


def parse_size(text: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper()
    return int(float(t[:-1]) * mult[t[-1]]) if t and t[-1] in mult else int(t)


@dataclass
class Options:
    minbytes: int = 32 << 20
    maxbytes: int = 32 << 20
    factor: int = 1
    stepbytes: int = 1 << 20
    ngpus: int = 1
    nthreads: int = 1
    iters: int = 20
    warmup: int = 1
    check: int = 1
    dtype: str = "float"
    op: str = "sum"
    graph: int = 0
    json_out: str | None = None


def parse(argv: list[str]) -> Options:
    o = Options()
    it = iter(range(len(argv)))
    names = {
        ("-b", "--minbytes"): "minbytes",
        ("-e", "--maxbytes"): "maxbytes",
        ("-f", "--stepfactor"): "factor",
        ("-i", "--stepbytes"): "stepbytes",
        ("-g", "--ngpus"): "ngpus",
        ("-t", "--nthreads"): "nthreads",
        ("-n", "--iters"): "iters",
        ("-w", "--warmup_iters"): "warmup",
        ("-c", "--check"): "check",
        ("-d", "--datatype"): "dtype",
        ("-o", "--op"): "op",
        ("-G", "--cudagraph"): "graph",
        ("-J", "--output_file"): "json_out",
    }
    for i in it:
        a = argv[i]
        key, val = [*a.split("=", 1), None][:2] if a.startswith("--") else (a, None)
        for flags, attr in names.items():
            if key in flags:
                if val is None and i + 1 < len(argv):
                    val = argv[i + 1]
                    next(it, None)
                if val is None:
                    continue
                cur = getattr(o, attr)
                setattr(
                    o,
                    attr,
                    parse_size(val)
                    if attr in {"minbytes", "maxbytes", "stepbytes"}
                    else (int(val) if isinstance(cur, int) else val),
                )
    return o


def sizes(o: Options) -> list[int]:
    out, s = [], o.minbytes
    while s <= o.maxbytes:
        out.append(s)
        s = s * o.factor if o.factor > 1 else s + o.stepbytes
    return out or [o.minbytes]


# ---- the bandwidth model ---------------------------------------------------------------------------------------


def nvlink_bound(host: Host, ngpus: int, env: dict[str, str], collective: str = "all_reduce") -> float:
    """Peak busbw (GB/s) of one node's GPUs from the SKU's reference (hardware.py) for this collective (its
    all_reduce one where it has none: busbw normalises the collectives, nccl-tests doc/PERFORMANCE.md), lowered by
    NVLink, PCIe and NCCL faults."""
    nvls_off = env.get("NCCL_NVLS_ENABLE") == "0" or env.get("NCCL_ALGO", "").lower() == "ring"
    mine = [f for f in host.sku["nccl"] if f.get("collective", "all_reduce") == collective]
    ref_list = mine or [f for f in host.sku["nccl"] if f.get("collective", "all_reduce") == "all_reduce"]
    refs = {(f["gpus"], f["algo"]): f["reference_gbps"] for f in ref_list}
    algo = "nvls" if not nvls_off and (ngpus, "nvls") in refs else "ring"
    cands = [g for (g, a) in refs if a == algo and g <= ngpus]
    peak = refs[(max(cands), algo)] if cands else host.sku["nvlink_links"] * host.sku["nvlink_link_gbps"] * 0.75
    used = host.gpus[:ngpus]
    links = int(host.sku["nvlink_links"]) or 1
    worst = min((g.nvlinks_active for g in used), default=links)
    if worst == 0:  # a GPU with no NVLink: the ring crosses PCIe
        gen, width = min((g.pcie for g in used), key=lambda p: simcore.GEN_GBPS_PER_LANE.get(p[0], 1) * p[1])
        peak = simcore.GEN_GBPS_PER_LANE.get(gen, 1.0) * width * 0.8
    else:
        peak *= worst / links
    low = host.fault("low_nccl_busbw")
    if low:
        peak *= float(low.get("factor") or 0.6)
    return peak


def usable_hcas(host: Host, env: dict[str, str]) -> list[simcore.Hca]:
    if env.get("NCCL_IB_DISABLE") == "1" or env.get("NCCL_NET", "").lower() == "socket":
        return []
    wanted = [w.split(":")[0] for w in env.get("NCCL_IB_HCA", "").lstrip("=^").split(",") if w]
    exclude = env.get("NCCL_IB_HCA", "").startswith("^")
    out = []
    for hca in host.hcas:
        hit = any(hca.name.startswith(w) for w in wanted)
        if hca.up and (not wanted or hit != exclude):
            out.append(hca)
    return out


def network_bound(host: Host, env: dict[str, str]) -> tuple[float, bool]:
    """(busbw bound GB/s, IB usable) of one node across nodes: even striping makes the slowest rail count."""
    hcas = usable_hcas(host, env)
    if not hcas:
        return SOCKET_GBPS, False
    rails = []
    for hca in hcas:
        gpu = host.gpus[hca.index] if hca.index < len(host.gpus) else host.gpus[0]
        pcie_gbps = min(simcore.GEN_GBPS_PER_LANE.get(g, 1.0) * w * 0.85 for g, w in (gpu.pcie, hca.pcie))
        rails.append(min(hca.rate / 8.0, pcie_gbps))
    return len(rails) * min(rails) * NIC_EFFICIENCY, True


def bus_factor(kind: str, n: int) -> float:
    if kind == "allreduce":
        return 2.0 * (n - 1) / n if n > 1 else 0.0
    if kind == "gather":
        return (n - 1) / n if n > 1 else 0.0
    return 1.0


def run_model(world: list[Host], ranks_per_host: int, env: dict[str, str],
              collective: str = "all_reduce") -> tuple[float, float, bool]:
    """(peak busbw GB/s, latency us, ib) for this set of hosts."""
    if len(world) == 1:
        return nvlink_bound(world[0], ranks_per_host, env, collective), 19.0 + 1.5 * ranks_per_host, True
    bounds = [network_bound(h, env) for h in world]
    ib = all(b[1] for b in bounds)
    peak = min(
        min(b[0] for b in bounds),
        min(nvlink_bound(h, ranks_per_host, {**env, "NCCL_NVLS_ENABLE": "1"}) * 1.1 for h in world),
    )
    return peak, (42.0 if ib else 160.0) + 2.0 * len(world), ib


def _fmt_time(us: float) -> str:
    return f"{us:.2f}" if us < 10000 else (f"{us:.1f}" if us < 100000 else f"{us:.0f}")


# ---- output --------------------------------------------------------------------------------------------------

_OUT, _IN = "out-of-place", "in-place"
_COLS = "    time   algbw   busbw  #wrong"
_UNITS = "    (us)  (GB/s)  (GB/s)    "
HEADER = (
    f"#{_OUT:>74}{_IN:>31}          \n"
    f"#       size         count      type   redop    root {_COLS} {_COLS} \n"
    f"#        (B)    (elements)                           {_UNITS}     {_UNITS}     \n"
)


def load_world() -> tuple[list[Host], int, int]:
    """(hosts, ranks per host, first pid) from the simulated mpirun, else this host alone."""
    raw = os.environ.get(ENV_WORLD)
    if not raw:
        return [simcore.load()], 0, os.getpid()
    world = json.loads(raw)
    hosts = [simcore.from_dict(p) for p in world["profiles"]]
    return hosts, int(world.get("ranks_per_host", 0)), int(world.get("pid", os.getpid()))


def nccl_debug_lines(world: list[Host], nranks: int, ib: bool, env: dict[str, str], pid: int) -> list[str]:
    """NCCL_DEBUG=INFO lines of rank 0 naming the transport (what the fabric gate parses)."""
    level = env.get("NCCL_DEBUG", "").upper()
    if level not in {"INFO", "TRACE", "WARN"}:
        return []
    v = simcore.versions()
    me = world[0]
    p = f"{me.name}:{pid}:{pid} [0]"
    oob = f"eth0:{me.address or '127.0.0.1'}<0>"
    lines = []
    if not ib and len(world) > 1:
        lines.append(f"{p} NCCL WARN NET/IB : No device found.")
    if level == "WARN":
        return lines
    lines += [
        f"{p} NCCL INFO Bootstrap: Using {oob}",
        f"{p} NCCL INFO cudaDriverVersion {v['cuda'].replace('.', '')}00",
        f"{p} NCCL INFO NCCL version {v['nccl']}+cuda{v['cuda']}",
    ]
    if len(world) == 1:
        lines.append(f"{p} NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
        return lines
    hcas = usable_hcas(me, env)
    if ib:
        devs = " ".join(
            f"[{i}]{h.name}:1/{'IB' if h.link_layer == 'InfiniBand' else 'RoCE'}" for i, h in enumerate(hcas)
        )
        lines += [f"{p} NCCL INFO NET/IB : Using {devs} ; OOB {oob}", f"{p} NCCL INFO Using network IB"]
    else:
        lines += [f"{p} NCCL INFO NET/Socket : Using [0]{oob}", f"{p} NCCL INFO Using network Socket"]
    per = nranks // len(world)
    lines.append(
        f"{p} NCCL INFO comm 0x5581d2f0 rank 0 nranks {nranks} cudaDev 0 busId {me.gpus[0].bus:x}000 - Init START"
    )
    for ch in range(max(1, len(hcas)) if ib else 2):
        peer = per % nranks
        via = f"NET/IB/{ch}/GDRDMA" if ib else f"NET/Socket/{ch}"
        lines.append(f"{p} NCCL INFO Channel {ch:02d}/0 : {nranks - per}[0] -> 0[0] [receive] via {via}")
        lines.append(f"{p} NCCL INFO Channel {ch:02d}/0 : 0[0] -> {peer}[0] [send] via {via}")
    lines += [
        f"{p} NCCL INFO Connected all rings",
        f"{p} NCCL INFO comm 0x5581d2f0 rank 0 nranks {nranks} - Init COMPLETE",
    ]
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    name = Path(prog or sys.argv[0]).name
    coll = COLLECTIVES.get(name, COLLECTIVES["all_reduce_perf"])
    o = parse(args)
    env = dict(os.environ)
    world, ranks_per_host, pid = load_world()
    simcore.mark_load()
    per_host = ranks_per_host * o.ngpus if ranks_per_host else o.ngpus
    per_host = min(per_host, min(len(h.gpus) for h in world))
    nranks = per_host * len(world)
    v = simcore.versions()
    code = v["nccl"].replace(".", "")[:1] + v["nccl"].split(".")[1].zfill(2) + v["nccl"].split(".")[2].zfill(2)
    out = [
        f"# nccl-tests version {v['nccl_tests']} nccl-headers={code} nccl-library={code}",
        f"# Collective test starting: {name}",
        simcore.marker(",".join(h.name for h in world)),
        f"# nThread {o.nthreads} nGpus {o.ngpus} minBytes {o.minbytes} maxBytes {o.maxbytes} "
        + (f"step: {o.factor}(factor)" if o.factor > 1 else f"step: {o.stepbytes}(bytes)")
        + f" warmup iters: {o.warmup} iters: {o.iters} agg iters: 1 validation: {o.check} graph: {o.graph} unalign: 0",
        "#",
        "# Using devices",
    ]
    rank = 0
    devices: list[dict[str, object]] = []
    for hi, h in enumerate(world):
        for g in h.gpus[:per_host]:
            rpid = pid + (hi * 1000 + g.index if ranks_per_host else 0)
            devices.append({"rank": rank, "group": 0, "pid": rpid, "hostname": h.name, "device": g.index,
                            "device_hex": f"0000:{g.bus:02x}:00", "device_info": g.display["name"]})
            out.append(
                f"#  Rank {rank:>2} Group  0 Pid {rpid:>6} on {h.name:>10} device {g.index:>2} "
                f"[0000:{g.bus:02x}:00] {g.display['name']}"
            )
            rank += 1
    out.append("#")
    peak, lat, ib = run_model(world, per_host, env, coll.name)
    out += nccl_debug_lines(world, nranks, ib, env, pid)
    for h in world:
        for g in h.gpus[:per_host]:
            x = g.has("xid")
            if x and x.get("code") == 79:
                sys.stdout.write("\n".join(out) + "\n")
                sys.stdout.write(
                    f"{h.name}: Test CUDA failure common.cu:1054 'unspecified launch failure'\n"
                    f" .. {h.name} pid {pid}: Test failure common.cu:1154\n"
                )
                return 1
    out.append(HEADER.rstrip("\n"))
    tsize = TYPE_SIZE.get(o.dtype, 4)
    factor = bus_factor(coll.bus_factor, nranks)
    rows: list[dict[str, object]] = []
    busbws: list[float] = []
    for s in sizes(o):
        count = s // tsize // (nranks if coll.bus_factor == "gather" and coll.name != "alltoall" else 1)
        cells = []
        parts: dict[str, dict[str, object]] = {}
        for place in ("out", "in"):
            key = f"{world[0].name}/{name}/{s}/{place}"
            bus_bytes = s * max(factor, 0.5)
            eff = 1.0 + (6e6 / s) ** 0.7
            t = lat * simcore.jitter(key + "lat", 0.08) + bus_bytes / (peak * 1e3) * eff * simcore.jitter(key, 0.006)
            algbw = s / (t * 1e3)
            busbw = algbw * factor
            # nccl-tests src/sendrecv.cu: reportErrors = in_place ? 0 : 1, so its in-place #wrong prints N/A always
            unchecked = o.check == 0 or (coll.name == "sendrecv" and place == "in")
            wrong = "N/A" if unchecked else "0"
            cells.append(f"{_fmt_time(t):>7}  {algbw:>6.2f}  {busbw:>6.2f}  {wrong:>6}")
            busbws.append(busbw)
            parts["out_of_place" if place == "out" else "in_place"] = {
                "time": t, "alg_bw": algbw, "bus_bw": busbw, "nwrong": None if unchecked else 0.0}
        redop = o.op if coll.redop else "none"
        rows.append({"size": s, "count": count, "type": o.dtype, "redop": redop, "root": f"{coll.root:>6}",
                     **parts, "actual_iterations": o.iters, "experiment_name": ""})
        out.append(f"{s:>12}  {count:>12}  {o.dtype:>8}  {redop:>6}  {coll.root:>6}  " + "  ".join(cells))
        crashed = next((h for h in world if h.fault("nccl_crash")), None)
        if crashed is not None and s >= 1 << 30:
            # the run dies after the 1 GiB row: NCCLCHECK prints its line and returns testNcclError (3), which
            # TESTCHECK relays up to main's exit code (nccl-tests src/common.h, src/common.cu)
            sys.stdout.write("\n".join(out) + "\n")
            sys.stdout.write(f"{crashed.name}: Test NCCL failure common.cu:1124 'unhandled system error (run with "
                             f"NCCL_DEBUG=INFO for details) / '\n .. {crashed.name} pid {pid}: Test failure "
                             "common.cu:1454\n")
            return 3
    avg = sum(busbws) / len(busbws)
    out += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {avg:.3f} ",
        "#",
        f"# Collective test concluded: {name}",
        "#",
        "",
    ]
    sys.stdout.write("\n".join(out) + "\n")
    if o.json_out:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        config = {"nthreads": o.nthreads, "ngpus": o.ngpus, "minimum_bytes": o.minbytes, "maximum_bytes": o.maxbytes,
                  "step_factor": o.factor, "warmup_iters": o.warmup, "iterations": o.iters,
                  "aggregated_iterations": 1, "validation": o.check, "graph": o.graph, "devices": devices}
        doc = {"version": 3, "start_time": stamp, "args": [prog or sys.argv[0], *args], "env": env,
               "nccl_version": int(code), "config": config, "results": rows,
               "out_of_bounds": {"count": 0, "okay": "true"},
               "average_bus_bandwidth": {"bandwidth": avg, "okay": "true" if o.check else "unchecked"},
               "errors": [""], "end_time": stamp, "gridready_simulated": True}
        Path(o.json_out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
