"""Multi-node NCCL: launch commands from the inventory, nccl-tests + NCCL debug parsing, floors and verdicts.

Floors (ANCH = ../shared/reference/certify-anchors.md section 3.2): busbw is comparable with the per-node NIC
aggregate (8 x 400 Gb/s = 400 GB/s) for ring-dominated runs; the default floor is 92% of it (DeepOps 2x DGX A100
reached 94.27%). Tree/NVLS/CollNet at two nodes go over 100%, so the fraction is a safe lower bound there; per-algo
floors in the spec override it. The gate reads the max busbw at sizes >= min_bytes, never "Avg bus bandwidth", and
always reports the measured percentage of the NIC aggregate. A run that fell back to sockets fails whatever its
bandwidth; `#wrong` != 0 or out-of-bounds values fail.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.probe import nccl_tests
from gridready.spec.fabric import FabricSettings

S = GateStatus
NCCL_ALGO = {"ring": "Ring", "tree": "Tree", "nvls": "NVLS", "collnet": "CollNet"}
BINARY = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf"}


# ---------------------------------------------------------------- launch

@dataclass
class LaunchPlan:
    """One collective run over `hosts`: the argv to run on `launcher` and the files/env it implies."""

    hosts: list[str]
    launcher: str
    argv: list[str]
    env: dict[str, str]
    hostfile: str
    collective: str = "all_reduce"

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def nccl_env(
    hcas: list[str], socket_ifname: str | None, settings: FabricSettings, gid_index: int | None = None
) -> dict[str, str]:
    """-x environment: exact-match HCA list (`=` so mlx5_1 does not also pick mlx5_10), socket iface, debug."""
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    if hcas:
        env["NCCL_IB_HCA"] = "=" + ",".join(f"{h}:1" for h in hcas)
    if socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = socket_ifname
    if settings.algo in NCCL_ALGO:
        env["NCCL_ALGO"] = NCCL_ALGO[settings.algo]
    if settings.algo == "ring":
        env["NCCL_NVLS_ENABLE"] = "0"
    if gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(gid_index)
    env.update(settings.extra_env)
    return env


def _slots(hosts: list[str], gpus: int | Mapping[str, int]) -> dict[str, int]:
    return {h: gpus if isinstance(gpus, int) else gpus[h] for h in hosts}


def hostfile(hosts: list[str], gpus: int | Mapping[str, int], addresses: Mapping[str, str] | None = None) -> str:
    """Open MPI hostfile text (for the report and for manual reruns)."""
    slots = _slots(hosts, gpus)
    return "".join(f"{(addresses or {}).get(h, h)} slots={slots[h]}\n" for h in hosts)


def _binary(settings: FabricSettings, collective: str) -> str:
    path = settings.all_reduce_perf
    name = BINARY[collective]
    if path.endswith("all_reduce_perf"):
        return path[: -len("all_reduce_perf")] + name
    return f"{path.rstrip('/')}/{name}"


def mpirun_plan(
    hosts: list[str],
    gpus_per_node: int | Mapping[str, int],
    env: dict[str, str],
    settings: FabricSettings,
    *,
    addresses: Mapping[str, str] | None = None,
    collective: str = "all_reduce",
    min_bytes: int | None = None,
    max_bytes: int | None = None,
) -> LaunchPlan:
    """Open MPI launch of nccl-tests: one rank per GPU (`-g 1`), checking on (`-c check_iters`), a timeout (`-T`)."""
    slots = _slots(hosts, gpus_per_node)
    addrs = {h: (addresses or {}).get(h, h) for h in hosts}
    argv = [
        settings.mpirun, "--allow-run-as-root", "--tag-output",
        "-np", str(sum(slots.values())),
        "-H", ",".join(f"{addrs[h]}:{slots[h]}" for h in hosts),
        "--bind-to", "numa",
    ]
    for key, value in sorted(env.items()):
        argv += ["-x", f"{key}={value}"]
    argv += [
        _binary(settings, collective),
        "-b", str(min_bytes or settings.min_bytes), "-e", str(max_bytes or settings.max_bytes),
        "-f", "2", "-g", "1", "-c", str(settings.check_iters), "-n", str(settings.iters),
        "-T", str(settings.timeout_s),
    ]
    return LaunchPlan(hosts=list(hosts), launcher=hosts[0], argv=argv, env=env,
                      hostfile=hostfile(hosts, gpus_per_node, addresses), collective=collective)


def torchrun_plan(
    hosts: list[str],
    gpus_per_node: int,
    env: dict[str, str],
    settings: FabricSettings,
    *,
    addresses: Mapping[str, str] | None = None,
    port: int = 29511,
    module: str = "gridready.probe.torch_allreduce",
) -> list[LaunchPlan]:
    """Fallback without MPI: one torchrun per host (c10d rendezvous on the first), the probe's torch sweep.

    Contract with the probe: `python -m <module> --torchrun --min-bytes B --max-bytes E` initialises from the
    torchrun environment (env://) and rank 0 prints one JSON line {"rows": [{"bytes", "busbw_gbps"}], "wrong"}.
    """
    head = (addresses or {}).get(hosts[0], hosts[0])
    plans = []
    for host in hosts:
        argv = [
            "env", *[f"{k}={v}" for k, v in sorted(env.items())],
            "torchrun", f"--nnodes={len(hosts)}", f"--nproc-per-node={gpus_per_node}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={head}:{port}", f"--rdzv-id=gridready-{'+'.join(hosts)}",
            "-m", module, "--torchrun", "--min-bytes", str(settings.min_bytes), "--max-bytes", str(settings.max_bytes),
        ]
        plans.append(LaunchPlan(hosts=list(hosts), launcher=host, argv=argv, env=env,
                                hostfile=hostfile(hosts, gpus_per_node, addresses)))
    return plans


# ---------------------------------------------------------------- parsing

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<\w+>:|\d+:)\s?")  # mpirun --tag-output / srun -l


@dataclass
class Transport:
    kind: str  # "NET/IB/GDRDMA", "NET/IB", "NET/Socket", "P2P/SHM only" or "unknown"
    ib_devices: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


@dataclass
class CollectiveRun:
    """A parsed nccl-tests run: the busbw curve (bytes -> best of in/out-of-place) and its checks."""

    rows: list[dict[str, Any]]
    wrong: int | None  # sum of #wrong; None when checking was off (N/A) or an old `error` column
    out_of_bounds: int | None
    avg_busbw: float | None
    hosts: list[str]
    ranks: int
    transport: Transport
    errors: list[str]

    @property
    def curve(self) -> dict[int, float]:
        return {r["bytes"]: r["busbw"] for r in self.rows}

    def peak(self, min_bytes: int) -> tuple[float, int] | None:
        big = [(r["busbw"], r["bytes"]) for r in self.rows if r["bytes"] >= min_bytes]
        return max(big) if big else None


def parse_transport(lines: list[str]) -> Transport:
    """What NCCL actually used between nodes, from NCCL_DEBUG=INFO lines."""
    net = [ln for ln in lines if "NCCL INFO" in ln]
    via = [ln for ln in net if re.search(r"via NET/", ln)]
    socket = [ln for ln in net if re.search(r"via NET/Socket|Using network Socket", ln)]
    ib = [ln for ln in net if re.search(r"via NET/IB|Using network IB", ln)]
    devs: list[str] = []
    for ln in net:
        if m := re.search(r"NET/IB\s*:\s*Using\s+(.*)", ln):
            devs += re.findall(r"\[\d+\]([\w.]+):\d+", m.group(1))
    devs = list(dict.fromkeys(devs))
    if socket:
        return Transport("NET/Socket", devs, socket[:3])
    if any("GDRDMA" in ln for ln in via):
        return Transport("NET/IB/GDRDMA", devs, [ln for ln in via if "GDRDMA" in ln][:3])
    if ib:
        return Transport("NET/IB", devs, ib[:3])
    if net and any(re.search(r"via (P2P|SHM)", ln) for ln in net):
        return Transport("P2P/SHM only", devs, [])
    return Transport("unknown", devs, [])


def parse_nccl_tests(text: str) -> CollectiveRun:
    """nccl-tests text (any of `#wrong` / old `error` columns, srun/mpirun prefixes, interleaved NCCL lines), read by
    the one nccl-tests parser (gridready/probe/nccl_tests.py); busbw per size is the best of the two columns."""
    p = nccl_tests.parse_text(text)
    rows: list[dict[str, Any]] = []
    wrong_sum: int | None = None
    for r in p["rows"]:
        oop, ip = r.get("oop") or {}, r.get("ip") or {}
        row = {"bytes": r["bytes"], "busbw": max(v for v in (oop.get("busbw"), ip.get("busbw")) if v is not None),
               "busbw_oop": oop.get("busbw"), "busbw_ip": ip.get("busbw")}
        if p["wrong_kind"] == "count":
            w = [int(x) for x in (oop.get("wrong"), ip.get("wrong")) if x is not None]
            row["wrong"] = sum(w) if w else None
            if w:
                wrong_sum = (wrong_sum or 0) + sum(w)
        rows.append(row)
    lines = [_PREFIX.sub("", ln) for ln in text.splitlines()]
    return CollectiveRun(rows=rows, wrong=wrong_sum, out_of_bounds=p["out_of_bounds"], avg_busbw=p["avg_busbw"],
                         hosts=p["hosts"], ranks=p["ranks"], transport=parse_transport(lines), errors=p["errors"])


def parse_torch_sweep(text: str, hosts: list[str]) -> CollectiveRun:
    """The torchrun fallback's output: NCCL INFO lines plus rank 0's JSON line (see `torchrun_plan`)."""
    lines = text.splitlines()
    doc: dict[str, Any] = {}
    for ln in reversed(lines):
        if ln.lstrip().startswith("{"):
            try:
                doc = json.loads(ln)
                break
            except ValueError:
                continue
    raw = doc.get("rows") or doc.get("sizes") or []
    rows = [{"bytes": int(r["bytes"]), "busbw": float(r["busbw_gbps"])} for r in raw if "busbw_gbps" in r]
    errors = [] if doc else ["no JSON result from rank 0"]
    return CollectiveRun(rows=rows, wrong=doc.get("wrong"), out_of_bounds=None, avg_busbw=None, hosts=hosts,
                         ranks=0, transport=parse_transport(lines), errors=errors)


# ---------------------------------------------------------------- floors and verdicts

def multinode_floor(
    algo: str, nic_gbytes: float, settings: FabricSettings, spec_floor_gbps: float | None = None,
    spec_fraction: float | None = None,
) -> tuple[float, str]:
    """Floor for a run: the spec's absolute floor, else fabric.floor_gbps[algo], else fraction x NIC aggregate.

    `spec_fraction` is CertificationSpec.nccl.multinode_fraction_of_nic; it applies unless the fabric settings
    set their own per-algorithm fractions.
    """
    if spec_floor_gbps is not None:
        return spec_floor_gbps, "spec floors.multinode_busbw_gbps"
    if algo in settings.floor_gbps or "floor_fraction" in settings.model_fields_set or spec_fraction is None:
        return settings.floor_for(algo, nic_gbytes)
    return round(spec_fraction * nic_gbytes, 2), f"{spec_fraction:.0%} of {nic_gbytes:g} GB/s per-node NIC bandwidth"


@dataclass
class Verdict:
    status: GateStatus
    reason: str
    peak_gbps: float | None
    peak_bytes: int | None
    pct_of_nic: float | None
    transport: str


def judge_run(
    run: CollectiveRun | None,
    *,
    floor_gbps: float,
    nic_gbytes: float,
    min_bytes: int,
    expect_ranks: int | None = None,
    expect_hosts: int | None = None,
    require_gdr: bool = True,
    require_transport: bool = True,
    rc: int | None = 0,
) -> Verdict:
    """One run against its floor: errors, #wrong, out-of-bounds, socket fallback, then bandwidth."""
    if run is None or not run.rows:
        why = (run.errors[0] if run and run.errors else f"exit {rc}") if run or rc is not None else "no output"
        return Verdict(S.ERROR, f"no nccl-tests results ({why})", None, None, None, "unknown")
    tr = run.transport.kind
    peak = run.peak(min_bytes)
    pbw, pbytes = peak if peak else (None, None)
    pct = round(100 * pbw / nic_gbytes, 1) if pbw is not None and nic_gbytes else None
    bw_text = (f"peak busbw {pbw:g} GB/s at {(pbytes or 0) / 2**30:g} GiB = {pct}% of {nic_gbytes:g} GB/s NIC, "
               f"floor {floor_gbps:g}") if pbw is not None else ""
    if run.wrong:
        return Verdict(S.FAIL, f"#wrong = {run.wrong}: data corruption", pbw, pbytes, pct, tr)
    if run.out_of_bounds:
        return Verdict(S.FAIL, f"{run.out_of_bounds} out-of-bounds values", pbw, pbytes, pct, tr)
    if rc not in (0, None) or run.errors:
        return Verdict(S.ERROR, f"run failed (exit {rc}): {run.errors[0] if run.errors else 'see output'}",
                       pbw, pbytes, pct, tr)
    if expect_ranks and run.ranks and run.ranks != expect_ranks:
        return Verdict(S.ERROR, f"{run.ranks} ranks ran, expected {expect_ranks}", pbw, pbytes, pct, tr)
    if expect_hosts and run.hosts and len(run.hosts) < expect_hosts:
        return Verdict(S.ERROR, f"ranks ran on {len(run.hosts)} host(s), expected {expect_hosts}: not a "
                       "multi-node run", pbw, pbytes, pct, tr)
    if pbw is None:
        return Verdict(S.ERROR, f"sweep never reached {min_bytes / 2**30:g} GiB", None, None, None, tr)
    if tr == "NET/Socket":
        return Verdict(S.FAIL, f"NCCL fell back to sockets (NET/Socket); {bw_text}", pbw, pbytes, pct, tr)
    if pbw < floor_gbps:
        return Verdict(S.FAIL, f"{bw_text}: below the floor", pbw, pbytes, pct, tr)
    if tr == "unknown" and require_transport:
        return Verdict(S.ERROR, f"{bw_text}, but the NCCL transport is unknown (no NCCL_DEBUG=INFO lines)",
                       pbw, pbytes, pct, tr)
    if tr not in ("NET/IB/GDRDMA", "unknown") and require_gdr:
        return Verdict(S.WARN, f"{bw_text}; transport {tr} without GPUDirect RDMA", pbw, pbytes, pct, tr)
    return Verdict(S.PASS, f"{bw_text} over {tr}", pbw, pbytes, pct, tr)


def verdict_gate(gate: str, node: str, v: Verdict, floor_gbps: float, source: str, evidence: str | None,
                 required: bool = True) -> GateResult:
    return GateResult(
        gate=gate, node=node, status=v.status, reason=v.reason, unit="GB/s", evidence=evidence, required=required,
        measured={"busbw_gbps": v.peak_gbps, "bytes": v.peak_bytes, "pct_of_nic": v.pct_of_nic,
                  "transport": v.transport},
        expected=Expected(floor=floor_gbps, source=source),
    )
