"""The multi-node fabric phase the certify stage runs after single-node judging (execution: SSH, threads,
evidence, plots); the gates it applies are the pure functions of gridready.certify.hca, isolation and multinode.

    result = run_fabric_phase(inv, ctx, certified_nodes, runner)

1. HCA data per node: the probe's `hca` dict when given, else `gridready/probe/hca.py collect` run on each node
   through the runner (the file is stdlib only and travels as `python3 -c`), in parallel.
2. HCA gates per node (gridready.certify.hca); a node failing one is named with its port and kept out of the
   pairwise runs (settings.exclude_hca_failures).
3. Error counters snapshotted on every node, then pairwise isolation (gridready.certify.isolation) with mpirun +
   nccl-tests over each pair, then each collective over the whole known-good set, then counters again: the
   `hca_counters` gate covers the fabric traffic.
4. Per-node gates, busbw curves per pair and for the set, plots and raw outputs under `<out_dir>/fabric/`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from gridready import ansible, bastion, console
from gridready.artifacts import write_atomic, write_json_atomic
from gridready.certify import hca as hca_gates
from gridready.certify import isolation, multinode
from gridready.certify.fabric import CollectiveRecord, FabricResult
from gridready.certify.outliers import flag_outliers, hca_bw_per_node
from gridready.certify.result import Expected, GateResult, GateStatus
from gridready.inventory import Inventory
from gridready.spec.fabric import FabricSettings

S = GateStatus
PROBE_SRC = Path(__file__).resolve().parent.parent / "probe" / "hca.py"


# ---------------------------------------------------------------- runners

@dataclass
class CommandResult:
    rc: int | None
    stdout: str
    stderr: str = ""
    wall_s: float = 0.0


class FabricRunner(Protocol):
    """Runs one command on one inventory host and returns its output (never raises for a failed command)."""

    hostvars: Mapping[str, Mapping[str, Any]]  # each host's variables, as Ansible layers them

    def run(self, host: str, argv: Sequence[str], timeout: float) -> CommandResult: ...


def _false(value: Any) -> bool:
    return value is False or str(value).strip().lower() in ("false", "no", "off", "0")


class SshRunner:
    """OpenSSH to each host as Ansible's ssh connection plugin reaches it: `ansible_host`, `ansible_user`,
    `ansible_port`, `ansible_ssh_private_key_file` and `ansible_ssh_common_args` from the host's variables
    (gridready.ansible.hostvars), and host keys checked against known_hosts unless the inventory sets
    `ansible_host_key_checking: false`, which the plugin turns into `-o StrictHostKeyChecking=no`
    (docs.ansible.com, ansible.builtin.ssh connection, option host_key_checking). `--` ends ssh's options before
    the destination. With `ssh_config`: `ssh -F <ssh_config> -- <host>`."""

    BASE = ("-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10")

    def __init__(self, hostvars: Mapping[str, Mapping[str, Any]], ssh_config: Path | None = None,
                 jump: Sequence[str] = ()) -> None:
        self.hostvars = hostvars
        self.ssh_config = ssh_config
        self.jump = list(jump)  # the cluster's bastion (gridready.bastion): -F <config> -o ProxyJump=...

    @classmethod
    def from_inventory(cls, inv: Inventory, ssh_config: Path | None = None) -> SshRunner:
        if inv.spec.bastion is None:
            return cls(ansible.hostvars(inv), ssh_config=ssh_config)
        folder = Path(tempfile.mkdtemp(prefix="gridready-bastion-"))  # public facts only, removed with the runner
        runner = cls(ansible.hostvars(inv), ssh_config=ssh_config, jump=bastion.write(inv.spec.bastion, folder))
        weakref.finalize(runner, shutil.rmtree, folder, ignore_errors=True)
        return runner

    def ssh_argv(self, host: str) -> list[str]:
        if self.ssh_config is not None:
            return ["ssh", "-F", str(self.ssh_config), "-o", "BatchMode=yes", "--", host]
        hv = self.hostvars.get(host, {})
        argv = ["ssh", *self.BASE, *self.jump]
        checking = hv.get("ansible_ssh_host_key_checking", hv.get("ansible_host_key_checking", True))
        if _false(checking):
            argv += ["-o", "StrictHostKeyChecking=no"]
        argv += shlex.split(str(hv.get("ansible_ssh_common_args") or ""))
        if hv.get("ansible_port"):
            argv += ["-p", str(hv["ansible_port"])]
        if hv.get("ansible_ssh_private_key_file"):
            argv += ["-i", str(hv["ansible_ssh_private_key_file"])]
        target = str(hv.get("ansible_host", host))
        user = hv.get("ansible_user")
        return [*argv, "--", f"{user}@{target}" if user else target]

    def is_local(self, host: str) -> bool:
        """`ansible_connection: local` (a controller that is its own node): Ansible runs there without SSH, and so
        does this runner (docs.ansible.com, ansible.builtin.local connection)."""
        hv = self.hostvars.get(host, {})
        return self.ssh_config is None and str(hv.get("ansible_connection", "")).split(".")[-1] == "local"

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """The command line that runs `argv` on `host`: locally through sh, else through ssh."""
        if self.is_local(host):
            return ["sh", "-c", shlex.join(argv)]
        return [*self.ssh_argv(host), shlex.join(argv)]

    def run(self, host: str, argv: Sequence[str], timeout: float) -> CommandResult:
        t0 = time.monotonic()
        try:
            p = subprocess.run(self.command(host, argv), capture_output=True, text=True, timeout=timeout,
                               check=False)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return CommandResult(None, out, f"timed out after {timeout}s", time.monotonic() - t0)
        return CommandResult(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


# ---------------------------------------------------------------- helpers

def _group(inv: Any, host: str) -> Any:
    name = inv.node_group_of(host)
    group = inv.spec.group(name) if name else None
    if group is None:
        raise ValueError(f"{host}: not in any node group of cluster.yml")
    return group


def settings_of(inv: Any) -> FabricSettings:
    """The spec's fabric settings (CertificationSpec.fabric once it exists), else the defaults."""
    found = getattr(inv.spec.certification, "fabric", None)
    return found if isinstance(found, FabricSettings) else FabricSettings()


SYSFS_VARS = ("gridready_sysfs_root", "gridready_rdma_sysfs_root", "gridready_preflight_sysfs_root")


def _probe_cmd(hostvars: Mapping[str, Mapping[str, Any]], host: str, *args: str) -> list[str]:
    hv = hostvars.get(host, {})
    root = next((hv[k] for k in SYSFS_VARS if hv.get(k) and "{{" not in str(hv[k])), None)
    env = ["env", f"GRIDREADY_SYSFS_ROOT={root}"] if root else []
    return [*env, "python3", "-c", PROBE_SRC.read_text(), *args]


def _json_of(res: CommandResult) -> dict[str, Any] | None:
    for line in reversed(res.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _parallel(fn: Any, items: Iterable[str]) -> dict[str, Any]:
    items = list(items)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(items)))) as pool:
        return dict(zip(items, pool.map(fn, items), strict=True))


def _node_gate(gate: str, node: str, status: GateStatus, reason: str, **kw: Any) -> GateResult:
    return GateResult(gate=gate, node=node, status=status, reason=reason, **kw)


# ---------------------------------------------------------------- the phase

def run_fabric_phase(
    inv: Any,
    ctx: Any,
    certified_nodes: Sequence[str],
    runner: FabricRunner | None = None,
    *,
    probe_hca: Mapping[str, Mapping[str, Any] | None] | None = None,
    settings: FabricSettings | None = None,
    out_dir: Path | None = None,
    alone_blocks: bool = False,
    progress: Callable[[str], None] | None = None,
) -> FabricResult:
    """Fabric gates over the nodes that passed single-node certification (see the module docstring). `progress`
    gets one line per step (default: console lines with the time since the phase began)."""
    settings = settings or settings_of(inv)
    runner = runner or SshRunner.from_inventory(inv)
    hostvars = runner.hostvars
    cert = inv.spec.certification
    nodes = list(dict.fromkeys(certified_nodes))
    if out_dir is None and ctx is not None:
        out_dir = ctx.stage_dir("certify")
    fdir = out_dir / "fabric" if out_dir else None
    results: dict[str, list[GateResult]] = {n: [] for n in nodes}
    if not settings.enabled or not nodes:
        why = "fabric phase disabled by the spec" if not settings.enabled else "no certified nodes"
        return FabricResult(status="skipped", reason=why, nodes=nodes, certified=nodes, node_results=results)
    say = progress or console.Steps("fabric")
    say(f"{len(nodes)} node(s): HCA state, counters"
        + (" and GPUDirect RDMA bandwidth" if settings.gdr_bw else ""))
    groups = {n: _group(inv, n) for n in nodes}
    addresses = {n: str(hostvars.get(n, {}).get("ansible_host", n)) for n in nodes}
    timeout = float(settings.timeout_s)
    t0 = time.monotonic()
    timings: dict[str, float] = {}

    # 1-2. HCA data (the probe's, else collected here; GDR bandwidth added where the probe skipped it)
    given: dict[str, Any] = dict(probe_hca or {})
    qos = ["--qos"] if settings.roce.pfc_priorities is not None else []

    def collect(host: str) -> dict[str, Any] | None:
        data = given.get(host)
        if not data:
            args = ["collect", *(["--gdr"] if settings.gdr_bw else []), *qos]
            return _json_of(runner.run(host, _probe_cmd(hostvars, host, *args), timeout))
        if settings.gdr_bw and "ib_write_bw" not in data:
            hcas = [n.name for n in groups[host].nics if n.kind != "ethernet"]
            gdr = _json_of(runner.run(host, _probe_cmd(hostvars, host, "gdr", *hcas), timeout))
            if gdr is not None:
                data = {**data, "ib_write_bw": gdr.get("ib_write_bw", {})}
        return dict(data)

    hca_data: dict[str, Any] = _parallel(collect, nodes)
    hca_floor = cert.floors.hca_write_bw_gbits
    for n in nodes:
        results[n] += hca_gates.judge_hcas(n, groups[n], hca_data.get(n), settings, hca_floor)
    hca_failed = {
        n: "; ".join(g.reason for g in results[n] if g.blocks_certification)
        for n in nodes if any(g.blocks_certification and g.gate != "hca_counters" for g in results[n])
    }
    eligible = [n for n in nodes if not (settings.exclude_hca_failures and n in hca_failed)]
    say(f"HCA gates: {len(nodes) - len(hca_failed)}/{len(nodes)} node(s) pass"
        + (f"; failed: {', '.join(sorted(hca_failed))}" if hca_failed else ""))
    ib_hcas = {n: hca_gates.passing_hcas(results[n], n) for n in nodes}

    def snapshot(host: str) -> dict[str, Any] | None:
        return _json_of(runner.run(host, _probe_cmd(hostvars, host, "snapshot"), 60))

    before = _parallel(snapshot, eligible) if eligible else {}
    timings["hca"] = round(time.monotonic() - t0, 3)

    nic = min((groups[n].nic_bandwidth_gbytes for n in eligible), default=0.0) or None
    floor, fsource = multinode.multinode_floor(
        settings.algo, nic or 0.0, settings, cert.floors.multinode_busbw_gbps, cert.nccl.multinode_fraction_of_nic
    )
    pair_floor = min(floor, round(settings.pair_floor_fraction * (nic or 0.0), 2))
    pair_source = fsource if pair_floor == floor else (
        f"{settings.pair_floor_fraction:.1%} of {nic or 0.0:g} GB/s per-node NIC bandwidth (pairs)")
    lock = threading.Lock()
    seq = [0]

    def launch(hosts: list[str], phase: str, collective: str, min_bytes: int, floor: float) -> CollectiveRecord:
        common = [h for h in ib_hcas[hosts[0]] if all(h in ib_hcas[x] for x in hosts[1:])]
        roce = next((x for x in groups[hosts[0]].nics if x.kind == "roce" and x.gid_index is not None), None)
        env = multinode.nccl_env(common, settings.socket_ifname or groups[hosts[0]].mgmt_interface, settings,
                                 roce.gid_index if roce else None)
        slots = {h: groups[h].gpus_per_node for h in hosts}
        if settings.launcher == "torchrun":
            plans = multinode.torchrun_plan(hosts, groups[hosts[0]].gpus_per_node, env, settings,
                                            addresses=addresses)
            plan = plans[0]
            with ThreadPoolExecutor(max_workers=len(plans)) as pool:
                outs = list(pool.map(lambda p: runner.run(p.launcher, p.argv, timeout + 60), plans))
            res = outs[0]
            rc = next((o.rc for o in outs if o.rc not in (0, None)), res.rc)
            text = res.stdout + ("\n" + res.stderr if res.stderr else "")
            parsed = multinode.parse_torch_sweep(text, hosts)
            expect_ranks = None
        else:
            plan = multinode.mpirun_plan(hosts, slots, env, settings, addresses=addresses, collective=collective,
                                         min_bytes=min_bytes)
            res = runner.run(plan.launcher, plan.argv, timeout + 60)
            rc = res.rc
            text = res.stdout + ("\n" + res.stderr if res.stderr else "")
            parsed = multinode.parse_nccl_tests(text)
            expect_ranks = sum(slots.values())
        nic_h = min(groups[h].nic_bandwidth_gbytes for h in hosts)
        v = multinode.judge_run(parsed, floor_gbps=floor, nic_gbytes=nic_h, min_bytes=min_bytes,
                                expect_ranks=expect_ranks, expect_hosts=len(hosts),
                                require_gdr=settings.require_gdr, rc=rc)
        evidence = None
        if fdir:
            with lock:
                seq[0] += 1
                name = f"{seq[0]:03d}-{phase}-{collective}-{'-'.join(hosts) if len(hosts) <= 2 else 'set'}.txt"
            path = write_atomic(fdir / name, f"# {plan.command}\n# rc={res.rc} wall={res.wall_s:.1f}s\n{text}")
            evidence = str(path)
        busbw = f"{v.peak_gbps:g} GB/s" if v.peak_gbps is not None else "no bandwidth"
        say(f"{phase} {collective} on {' + '.join(hosts) if len(hosts) <= 2 else f'{len(hosts)} nodes'}: "
            f"{v.status.value} ({busbw}, floor {floor:g} GB/s) in {res.wall_s:.1f} s")
        return CollectiveRecord(
            hosts=hosts, collective=collective, phase=phase, status=v.status, busbw_gbps=v.peak_gbps,
            pct_of_nic=v.pct_of_nic, floor_gbps=floor, transport=v.transport, reason=v.reason,
            curve=parsed.curve, wall_s=round(res.wall_s, 3), command=plan.command, evidence=evidence,
        )

    # 3. pairwise isolation, then the whole known-good set
    pair_records: list[CollectiveRecord] = []
    iso = None
    good = list(eligible)
    if settings.isolation and len(eligible) >= 2:
        say(f"pairwise all_reduce isolation over {len(eligible)} node(s) (floor {pair_floor:g} GB/s)")

        def run_pair(a: str, b: str) -> isolation.PairOutcome:
            rec = launch([a, b], "pair", "all_reduce", settings.pair_min_bytes, pair_floor)
            ok = rec.status in (S.PASS, S.WARN)
            return isolation.PairOutcome(ok=ok, busbw_gbps=rec.busbw_gbps, reason=rec.reason,
                                         error=rec.status is S.ERROR, detail=rec)

        racks = {n: str(hostvars[n]["gridready_rack"]) for n in eligible
                 if (hostvars.get(n) or {}).get("gridready_rack") not in (None, "")}
        iso = isolation.isolate(eligible, run_pair, parallel=settings.parallel_pairs, rack_of=racks)
        for r in iso.runs:
            rec = r.outcome.detail if isinstance(r.outcome.detail, CollectiveRecord) else None
            if rec is not None:
                pair_records.append(rec.model_copy(update={"phase": r.phase, "round": r.round}))
        good = iso.good
    # a node an HCA gate failed is quarantined whatever its pairs showed: kept in the all-node run it narrows the
    # HCAs every member may use (NCCL_IB_HCA is their intersection) and the run's failure would blame the fabric
    good = [n for n in good if n not in hca_failed]
    timings["isolation"] = round(time.monotonic() - t0 - timings["hca"], 3)
    set_records = [
        launch(good, "set", c, settings.min_bytes, floor) for c in settings.collectives
    ] if len(good) >= 2 else []

    timings["set"] = round(time.monotonic() - t0 - timings["hca"] - timings["isolation"], 3)
    after = _parallel(snapshot, eligible) if eligible else {}
    for n in eligible:
        b, a = (before.get(n) or {}).get("counters") or {}, (after.get(n) or {}).get("counters") or {}
        for i, g in enumerate(results[n]):
            if g.gate == "hca_counters" and g.hca and g.hca in b and g.hca in a:  # else keep the probe's window
                results[n][i] = hca_gates.counter_gate(n, g.hca, before[n], after[n], settings)

    # 4. per-node gates
    quarantined: dict[str, str] = {n: f"HCA: {why}" for n, why in hca_failed.items()}
    unresolved: list[str] = []
    if iso is not None:
        for n in eligible:
            runs = [
                {"partner": r.b if r.a == n else r.a, "phase": r.phase, "ok": r.outcome.ok,
                 "busbw_gbps": r.outcome.busbw_gbps}
                for r in iso.partners(n)
            ]
            partners = ", ".join(f"{x['partner']} {x['busbw_gbps'] or 'n/a'} GB/s" for x in runs if not x["ok"])
            if n in iso.bad:
                why = f"failed pairwise all-reduce with {len(set(iso.failed_with[n]))} partners ({partners})"
                quarantined[n] = f"fabric: {why}"
                results[n].append(_node_gate("fabric_isolation", n, S.FAIL, why, measured=runs,
                                             expected=Expected(floor=pair_floor, source=pair_source), unit="GB/s"))
            elif n in iso.leaf_suspect:
                unresolved.append(n)
                results[n].append(_node_gate(
                    "fabric_isolation", n, S.ERROR, f"failed only across racks ({partners}) and passed inside rack "
                    f"{iso.leaf_suspect[n]}: the rack's leaf uplink is suspect, not this node", measured=runs))
            elif n in iso.unresolved:
                unresolved.append(n)
                results[n].append(_node_gate(
                    "fabric_isolation", n, S.ERROR, f"failed with {partners}; no known-good partner left to "
                    + ("confirm (the whole fabric failed)" if iso.fabric_wide else "confirm"), measured=runs))
            else:
                results[n].append(_node_gate(
                    "fabric_isolation", n, S.PASS, f"passed pairwise all-reduce ({len(runs)} runs)", measured=runs,
                    expected=Expected(floor=pair_floor, source=pair_source), unit="GB/s"))
    for rec in set_records:
        # every member passed its pairs, so a failing all-node run names no node: a fabric-level fault (spine,
        # oversubscription, routing). It still blocks, as an error that says so, never as this node's failure.
        fabric_level = rec.status is S.FAIL and iso is not None and set(rec.hosts) <= set(iso.good)
        why = (f"{len(rec.hosts)} nodes: {rec.reason}; every member passed its pairwise runs, so the fault is the "
               "fabric's (spine, oversubscription), not attributable to this node" if fabric_level else
               f"{len(rec.hosts)} nodes: {rec.reason}")
        for n in rec.hosts:
            results[n].append(multinode.verdict_gate(
                f"nccl_multinode_{rec.collective}", n,
                multinode.Verdict(S.ERROR if fabric_level else rec.status, why, rec.busbw_gbps, None,
                                  rec.pct_of_nic, rec.transport), floor, fsource, rec.evidence))
    if len(good) < 2 and len(nodes) == 1:
        # alone in a fleet of several GPU nodes (no peer passed now or is still certified): not run, which blocks
        why = ("not run: no certified peer to pair with in this run or still valid (re-certify it together with a "
               "certified node)" if alone_blocks else "one GPU node: nothing to test across nodes")
        results[nodes[0]].append(_node_gate("nccl_multinode_all_reduce", nodes[0], S.SKIPPED, why,
                                            required=alone_blocks))
    _fleet_outliers(results, pair_records, hca_data, inv, cert)

    blocked = {n for n in nodes if any(g.blocks_certification for g in results[n])}
    certified = [n for n in nodes if n not in blocked]
    if any(r.status is S.ERROR for r in set_records) and not quarantined:
        status: Literal["pass", "fail", "error", "skipped"] = "error"
    elif blocked:
        status = "fail"
    elif len(nodes) < 2:
        status = "skipped"
    else:
        status = "pass"
    summary = (f"{len(certified)}/{len(nodes)} nodes pass the fabric gates; quarantined: "
               f"{', '.join(sorted(quarantined)) or 'none'}; pairwise runs: {len(pair_records)}")
    result = FabricResult(
        status=status, reason=summary, nodes=nodes, certified=certified, quarantined=quarantined,
        unresolved=unresolved, node_results=results, pair_runs=pair_records, set_runs=set_records,
        pairwise_run_count=len(pair_records), isolation_rounds=iso.rounds if iso else 0,
        isolation_wall_s=iso.wall_s if iso else 0.0, fabric_wide_failure=bool(iso and iso.fabric_wide),
        nic_gbytes=nic, floor_gbps=floor, floor_source=fsource, timings_s=timings,
    )
    if fdir:
        try:
            from gridready.report.fabric_plots import plot_fabric

            result.plots = [str(p) for p in plot_fabric(result, fdir)]
        except Exception as exc:  # a plot must never fail certification; say why in the result
            result.reason += f" (plots not drawn: {exc})"
        result.timings_s["total"] = round(time.monotonic() - t0, 3)
        write_json_atomic(fdir / "fabric.json", result)
    say(summary)
    return result


def _fleet_outliers(results: dict[str, list[GateResult]], pairs: list[CollectiveRecord],
                    probe_hca: Mapping[str, Any], inv: Any, cert: Any) -> None:
    """Fleet-relative flags for the node's best pair busbw and its slowest HCA's ib_write_bw."""
    best: dict[str, float | None] = {}
    for rec in pairs:
        for n in rec.hosts:
            if rec.busbw_gbps is not None:
                best[n] = max(best.get(n) or 0.0, rec.busbw_gbps)
    group_of = {n: inv.node_group_of(n) or "?" for n in results}
    figures = {"pair_busbw_gbps": best, "hca_write_bw_gbits": hca_bw_per_node(
        {n: d for n, d in probe_hca.items() if d and n in results})}
    for fig, values in figures.items():
        for g in flag_outliers(fig, values, group_of, threshold=cert.outlier_mad_threshold,
                               action=cert.outlier_action):
            results[g.node].append(g)
