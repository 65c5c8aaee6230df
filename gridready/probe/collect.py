"""Run every collector; each one fails soft into `errors` and an absent tool is recorded as absent."""

from __future__ import annotations

import datetime as dt
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from . import SCHEMA, dcgm, goodput, gpu_burn, hca, kernel_log, lspci, nccl_tests, nvbandwidth, nvml, nvsmi, sdc, sysfs
from .profiles import PROFILES, sweep_sizes
from .tools import run, which

TOOLS = ("nvidia-smi", "dcgmi", "all_reduce_perf", "nvbandwidth", "gpu_burn", "lspci", "dmesg", "journalctl",
         "systemctl", "nv-fabricmanager")
SERVICES = ("nvidia-fabricmanager", "nvidia-persistenced", "nvidia-dcgm")


def os_release(path: str = "/etc/os-release") -> dict[str, str]:
    """ID and VERSION_ID of /etc/os-release (os-release(5)); {} where it cannot be read."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                key, sep, val = line.strip().partition("=")
                if sep and key in ("ID", "VERSION_ID"):
                    out[key.lower()] = val.strip().strip('"')
    except OSError:
        pass
    return out


def nccl_env(algo: str) -> dict[str, str]:
    """Environment that pins the all-reduce algorithm the spec names."""
    if algo == "ring":
        return {"NCCL_NVLS_ENABLE": "0"}
    if algo == "nvls":
        return {"NCCL_NVLS_ENABLE": "1", "NCCL_ALGO": "NVLS"}
    return {"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Tree"}


class Probe:
    def __init__(self, opts: dict[str, Any]) -> None:
        self.opts = opts
        self.prof = {**PROFILES[opts["profile"]]}
        self.doc: dict[str, Any] = {
            "schema": SCHEMA, "host": socket.gethostname(), "profile": opts["profile"], "options": opts,
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(), "kernel": platform.release(), "os": os_release(),
            "tools": {t: which(t) for t in TOOLS}, "errors": [], "timings_s": {}, "raw": {},
        }
        self.bus_of_index: dict[int, str] = {}

    def err(self, collector: str, error: str) -> None:
        self.doc["errors"].append({"collector": collector, "error": error[:2000]})

    def step(self, name: str, fn: Callable[[], None]) -> None:
        if name in self.opts.get("skip", ()):
            self.doc["timings_s"][name] = None
            return
        t0 = time.monotonic()
        try:
            fn()
        except Exception as exc:  # a collector bug must not lose the rest of the probe
            self.err(name, f"{type(exc).__name__}: {exc}")
        self.doc["timings_s"][name] = round(time.monotonic() - t0, 2)

    def _tool(self, key: str, argv: list[str], timeout: float = 60) -> str | None:
        res = run(argv, timeout_s=timeout)
        if res["absent"]:
            return None
        self.doc["raw"][key] = res["stdout"]
        if res["rc"] != 0 or res["timed_out"]:
            self.err(key, f"{' '.join(argv)}: rc={res['rc']} timed_out={res['timed_out']} {res['stderr'][-400:]}")
        return res["stdout"] if res["rc"] == 0 else None

    # --- collectors -------------------------------------------------------------------------------------------
    def nvidia_smi(self) -> None:
        smi: dict[str, Any] = {"present": which("nvidia-smi") is not None}
        self.doc["nvidia_smi"] = smi
        if not smi["present"]:
            return
        csv = self._tool("nvidia_smi_query", ["nvidia-smi", f"--query-gpu={nvsmi.QUERY_FIELDS}", "--format=csv"])
        if csv is None:
            csv = self._tool("nvidia_smi_query", ["nvidia-smi", f"--query-gpu={nvsmi.QUERY_FIELDS_MIN}",
                                                  "--format=csv"])
        smi["query"] = nvsmi.parse_query_csv(csv) if csv else []
        for row in smi["query"]:
            if isinstance(row.get("index"), int) and row.get("pci.bus_id"):
                self.bus_of_index[row["index"]] = str(row["pci.bus_id"])
        smi["q"] = self._nvidia_smi_q()
        st = self._tool("nvidia_smi_nvlink_s", ["nvidia-smi", "nvlink", "-s"])
        smi["nvlink_status"] = nvsmi.parse_nvlink_status(st) if st is not None else None
        er = self._tool("nvidia_smi_nvlink_e", ["nvidia-smi", "nvlink", "-e"])
        smi["nvlink_errors"] = nvsmi.parse_nvlink_errors(er) if er is not None else None
        self._tool("nvidia_smi_topo", ["nvidia-smi", "topo", "-m"])

    def _nvidia_smi_q(self) -> dict[str, Any] | None:
        """`-q -x` (NVIDIA's machine-readable form) first; the `-q` text where the XML is refused or unreadable."""
        res = run(["nvidia-smi", "-q", "-x"], timeout_s=60)
        if res["rc"] == 0 and not res["timed_out"]:
            self.doc["raw"]["nvidia_smi_q_x"] = res["stdout"]
            try:
                return nvsmi.parse_q_xml(res["stdout"])
            except ValueError as exc:
                self.err("nvidia_smi_q_x", f"{exc}; reading the -q text instead")
        q = self._tool("nvidia_smi_q", ["nvidia-smi", "-q"])
        return {**nvsmi.parse_q(q), "format": "text"} if q else None

    def nvml(self) -> None:
        if not nvml.available():
            self.doc["nvml"] = {"present": False}
            return
        self.doc["nvml"] = {"present": True, **nvml.collect()}

    def system(self) -> None:
        cmd = sysfs.cmdline()
        io = sysfs.iommu()
        mods = sysfs.modules()
        self.doc["system"] = {
            "cmdline": cmd, "iommu_groups": io["groups"], "iommu_mode": sysfs.iommu_mode(cmd, io["groups"]),
            "modules": mods, "peermem_loaded": sysfs.peermem_loaded(mods),
            "pcie_endpoints": sysfs.pci_endpoints(),
            "cpu_hypervisor": sysfs.cpu_hypervisor(),
            "simulated_sysfs": sysfs.simulated(),
            "dmi": sysfs.dmi(),
        }
        if mods is None:
            self.err("system.modules", "cannot read /proc/modules")
        if which("lspci"):
            out = self._tool("lspci_vvv", ["lspci", "-vvv"], timeout=60)
            self.doc["system"]["lspci"] = lspci.parse(out) if out else None

    def kernel(self) -> None:
        """The kernel log since boot: dmesg first; where it is empty (some hosts print nothing and exit 0) or its
        ring buffer wrapped (no boot lines), journalctl -k -b, which keeps the whole boot where journald stores it.
        `from_boot` false: Xids before its first line are unknown (the xid gate cannot pass)."""
        found: list[tuple[str, str, dict[str, Any]]] = []
        for argv in (["dmesg", "--time-format", "iso"], ["dmesg"], ["journalctl", "-k", "-b", "--no-pager", "-q"]):
            if found and argv[0] == "dmesg":
                continue  # the second dmesg form only where the first failed
            res = run(argv, timeout_s=60)
            if res["absent"] or res["rc"] != 0 or not res["stdout"].strip():
                continue
            parsed = kernel_log.parse(res["stdout"])
            found.append((" ".join(argv), res["stdout"], parsed))
            if parsed["from_boot"]:
                break
        if not found:
            self.doc["kernel_log"] = {"source": None}
            self.err("kernel_log", "no readable kernel log (dmesg / journalctl -k empty or failing)")
            return
        src, text, parsed = next((f for f in found if f[2]["from_boot"]), found[0])
        self.doc["raw"]["kernel_log"] = "\n".join(ln for ln in text.splitlines()
                                                  if "Xid" in ln or "NVRM" in ln or "limited by" in ln)[-200_000:]
        self.doc["kernel_log"] = {"source": src, **parsed}

    def health_after(self) -> None:
        """The health snapshot again after the load phases (DCGM, nccl-tests, nvbandwidth, gpu_burn, torch): the
        gates judge what the certification's own stress changed (new Xids, remap pending, slowdowns, counter
        deltas), as DCGM's plugins watch these fields while they run. `after` mirrors the idle sections."""
        after: dict[str, Any] = {"taken": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        self.doc["after"] = after
        if which("nvidia-smi"):
            smi: dict[str, Any] = {"present": True}
            res = run(["nvidia-smi", f"--query-gpu={nvsmi.QUERY_FIELDS}", "--format=csv"], timeout_s=60)
            smi["query"] = nvsmi.parse_query_csv(res["stdout"]) if res["rc"] == 0 else []
            res = run(["nvidia-smi", "-q", "-x"], timeout_s=60)
            try:
                smi["q"] = nvsmi.parse_q_xml(res["stdout"]) if res["rc"] == 0 else None
            except ValueError as exc:
                smi["q"] = None
                self.err("after.nvidia_smi_q_x", str(exc))
            if res["rc"] == 0:
                self.doc["raw"]["after_nvidia_smi_q_x"] = res["stdout"]
            res = run(["nvidia-smi", "nvlink", "-e"], timeout_s=60)
            smi["nvlink_errors"] = nvsmi.parse_nvlink_errors(res["stdout"]) if res["rc"] == 0 else None
            if smi["q"] is None:
                self.err("after.nvidia_smi", "nvidia-smi -q -x unreadable after the load")
            after["nvidia_smi"] = smi
        src = (self.doc.get("kernel_log") or {}).get("source")
        if src:
            res = run(src.split(" "), timeout_s=60)
            if res["rc"] == 0 and res["stdout"].strip():
                after["kernel_log"] = {"source": src, **kernel_log.parse(res["stdout"])}
            else:
                self.err("after.kernel_log", f"{src}: rc={res['rc']}, {len(res['stdout'])} bytes after the load")

    def services(self) -> None:
        out: dict[str, Any] = {}
        if which("systemctl"):
            for svc in SERVICES:
                res = run(["systemctl", "is-active", svc], timeout_s=15)
                out[svc] = res["stdout"].strip() or None
        self.doc["services"] = {"manager": "systemd" if which("systemctl") else None, "state": out}

    def dcgm(self) -> None:
        level = int(self.opts.get("dcgm_level") or self.prof["dcgm_level"])
        if which("dcgmi") is None:
            self.doc["dcgm"] = {"present": False, "level": level}
            return
        res = dcgm.collect(level, timeout_s=float(self.opts["timeout"]), precision=self.opts.get("dcgm_precision"),
                           outlier_pcnt=float(self.opts.get("dcgm_outlier_pcnt") or 0))
        self.doc["raw"]["dcgmi_diag"] = res["run"]["stdout"]
        self.doc["dcgm"] = {"present": True, "level": level, "rc": res["run"]["rc"], "parameters": res["parameters"],
                            "timed_out": res["run"]["timed_out"], "parsed": res["parsed"],
                            "parse_error": res["parse_error"],
                            "retries": [{"plugin": r["plugin"], "rc": r["run"]["rc"], "parsed": r.get("parsed")}
                                        for r in res["retries"]]}

    def nccl_tests(self) -> None:
        """Each collective of `collectives` (default all_reduce) with its `<collective>_perf`, best of N runs."""
        wanted = list(self.opts.get("collectives") or ["all_reduce"])
        n = len(self.bus_of_index) or int(self.opts.get("gpus") or 0)
        if n == 1:  # a collective needs a peer: the gates are n/a on one GPU, so the runs would only cost time
            # (5 collectives x best of 2 took 7.4 s of an 18 s quick probe on the lent H200: issue 30)
            self.doc["nccl_tests"] = {"present": False, "skipped": "one GPU: a collective has no peer"}
            return
        per: dict[str, Any] = {}
        for coll in wanted:
            binary = nccl_tests.find_binary(f"{coll}_perf", self.opts.get("nccl_tests_dir"))
            self.doc["tools"][f"{coll}_perf"] = binary
            if binary is None:
                continue
            runs, raw = [], []
            for _ in range(max(1, int(self.opts["best_of"]))):  # best of N against a flaky moment, never an average
                with tempfile.TemporaryDirectory() as tmp:
                    res = nccl_tests.collect(max(n, 1), self.opts["nccl_min_bytes"], self.opts["nccl_max_bytes"],
                                             nccl_env(self.opts["algo"]), float(self.opts["timeout"]),
                                             os.path.join(tmp, "nccl.json"), binary,
                                             check_iters=int(self.opts.get("nccl_check_iters") or 1))
                raw.append(res["run"]["stdout"])
                runs.append({"rc": res["run"]["rc"], "timed_out": res["run"]["timed_out"],
                             "parsed": res["json"] or res["parsed"]})
                if res["run"]["timed_out"] or res["run"]["rc"] != 0:
                    break
            self.doc["raw"][f"{coll}_perf"] = "\n".join(raw)
            per[coll] = {"runs": runs}
        if not per:
            self.doc["nccl_tests"] = {"present": False}
            return
        self.doc["nccl_tests"] = {"present": True, "env": nccl_env(self.opts["algo"]), "algo": self.opts["algo"],
                                  "collectives": per, "runs": (per.get("all_reduce") or {}).get("runs", [])}

    def torch(self) -> None:
        tdoc: dict[str, Any] = {"present": False}
        self.doc["torch"] = tdoc
        try:
            import torch
        except Exception as exc:
            tdoc["import_error"] = f"{type(exc).__name__}: {exc}"
            return
        tdoc.update(present=True, version=torch.__version__, cuda=torch.version.cuda,
                    cuda_available=torch.cuda.is_available(), device_count=torch.cuda.device_count())
        try:  # the build description (https://docs.pytorch.org/docs/stable/config_mod.html), kept as raw evidence
            self.doc["raw"]["torch_config"] = str(torch.__config__.show())
        except Exception as exc:
            self.err("torch.config", f"{type(exc).__name__}: {exc}")
        if not tdoc["cuda_available"] or tdoc["device_count"] == 0:
            return
        from . import torch_allreduce, torch_bench

        errors: list[dict[str, str]] = []
        tdoc.update(torch_bench.run_all(self.prof, self._sample_link, errors))
        self.doc["errors"] += errors
        world = tdoc["device_count"]
        dist = getattr(torch, "distributed", None)  # a build without it: is_available() False (torch.distributed docs)
        if world < 2 or dist is None or not dist.is_available():
            tdoc["allreduce"] = None
            return
        sizes = sweep_sizes(self.prof["ar_min_bytes"], self.opts["nccl_max_bytes"], self.prof["ar_factor"],
                            self.opts["nccl_min_bytes"])
        try:
            tdoc["allreduce"] = torch_allreduce.sweep(world, sizes, self.prof["ar_iters"], self.prof["ar_warmup"],
                                                      int(self.opts["best_of"]), nccl_env(self.opts["algo"]),
                                                      float(self.opts["timeout"]))
            tdoc["allreduce"]["algo"] = self.opts["algo"]
        except Exception as exc:
            tdoc["allreduce"] = None
            self.err("torch.allreduce", f"{type(exc).__name__}: {exc}")
        tdoc["collectives"] = {}
        for coll in [c for c in self.opts.get("collectives") or [] if c != "all_reduce"]:
            try:
                tdoc["collectives"][coll] = torch_allreduce.sweep(
                    world, sizes, self.prof["ar_iters"], self.prof["ar_warmup"], int(self.opts["best_of"]),
                    nccl_env(self.opts["algo"]), float(self.opts["timeout"]), collective=coll)
            except Exception as exc:
                self.err(f"torch.{coll}", f"{type(exc).__name__}: {exc}")

    def _torch_gpus(self) -> str | None:
        """Why the torch workloads cannot run here, or None."""
        t = self.doc.get("torch") or {}
        if not t.get("present"):
            return f"torch not importable ({t.get('import_error')})"
        if not t.get("cuda_available") or not t.get("device_count"):
            return "torch sees no CUDA device"
        return None

    def sdc(self) -> None:
        """Seeded GEMM digests on every GPU (probe/sdc.py), after the torch benchmarks have heated the GPUs."""
        if why := self._torch_gpus():
            self.doc["sdc"] = {"present": False, "reason": why}
            return
        errors: list[dict[str, str]] = []
        text = sdc.run_all(self.prof, errors)
        self.doc["errors"] += errors
        self.doc["raw"]["sdc"] = text
        self.doc["sdc"] = {"present": True, **sdc.parse(text)}

    def goodput(self) -> None:
        """The ~1B decoder's training steps on every GPU (probe/goodput.py); not in the quick profile."""
        steps = int(self.prof.get("goodput_steps") or 0)
        if not steps:
            self.doc["goodput"] = {"present": False, "ran": False,
                                   "reason": f"the {self.opts['profile']} profile runs no training steps"}
            return
        if why := self._torch_gpus():
            self.doc["goodput"] = {"present": False, "ran": True, "reason": why}
            return
        errors: list[dict[str, str]] = []
        text = goodput.run_all(self.prof, errors)
        self.doc["errors"] += errors
        self.doc["raw"]["goodput"] = text
        self.doc["goodput"] = {"present": True, "ran": True, **goodput.parse(text)}

    def gpu_burn(self) -> None:
        """burn-in only, where gpu_burn is installed (the torch GEMM burn runs regardless)."""
        secs = int(self.prof.get("gemm_burn_s") or 0)
        if secs and which("gpu_burn"):
            res = gpu_burn.collect(secs, float(self.opts["timeout"]) + secs)
            self.doc["raw"]["gpu_burn"] = res.pop("stdout_tail")
            self.doc["gpu_burn"] = res

    def nvbandwidth(self) -> None:
        if which("nvbandwidth") is None:
            self.doc["nvbandwidth"] = {"present": False}
            return
        res = nvbandwidth.collect(float(self.opts["timeout"]))
        self.doc["raw"]["nvbandwidth"] = res.pop("raw", "")
        self.doc["nvbandwidth"] = res

    def hca(self) -> None:
        """The fabric collectors (probe/hca.py): HCA ports, rates and counters."""
        self.doc["hca"] = hca.collect()

    def _sample_link(self, index: int) -> dict[str, Any]:
        """PCIe link of GPU `index` read while copies run: NVML and sysfs."""
        out: dict[str, Any] = {}
        if nvml.available():
            out["nvml"] = nvml.pcie(index)
        bus = self.bus_of_index.get(index)
        if bus:
            bdf = bus.lower()[-12:]  # 00000000:00:06.0 -> 0000:00:06.0
            for ep in sysfs.pci_endpoints():
                if ep["bdf"] == bdf:
                    out["sysfs"] = {k: ep[k] for k in ("gen_current", "gen_max", "width_current", "width_max")}
        return out

    def run(self) -> dict[str, Any]:
        t0 = time.monotonic()
        steps = (("nvidia_smi", self.nvidia_smi), ("nvml", self.nvml), ("system", self.system),
                 ("kernel_log", self.kernel), ("services", self.services), ("dcgm", self.dcgm),
                 ("nccl_tests", self.nccl_tests), ("nvbandwidth", self.nvbandwidth), ("hca", self.hca),
                 ("gpu_burn", self.gpu_burn), ("torch", self.torch), ("sdc", self.sdc), ("goodput", self.goodput),
                 ("health_after", self.health_after))
        for name, fn in steps:
            self.step(name, fn)
        self.doc["wall_s"] = round(time.monotonic() - t0, 2)
        self.doc["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        self.doc["argv"] = sys.argv
        return self.doc
