"""On the sandbox fleet: the engine, copied to a host and started as a systemd unit with --ray-address,
joins the real Ray cluster as a driver with a named actor, and verify_tier drives it over 10.77.0.x.

Uses the shared 3-host `fleet` (Ray on two of them). Needs root and systemd-nspawn (skips otherwise).
"""

from __future__ import annotations

import base64
import io
import json
import tarfile
import time
import urllib.request

import pytest

from gridready.bench import Endpoint, Workload, verify_tier
from gridready.spec.serving import Slo, Tier
from tests.unit.bench.conftest import REPO

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
RAY = "/opt/ray/venv/bin/ray"
UNIT = "gridready-sim-bench-test"
START = ("RAY_USAGE_STATS_ENABLED=0 {ray} start --num-cpus=1 --memory=1000000000 --object-store-memory=100000000 "
         "--disable-usage-stats --node-ip-address={ip} {extra}")
ACTOR_CHECK = """
import json, ray
ray.init(address="{addr}", namespace="gridready", logging_level="WARNING")
info = ray.get(ray.get_actor("{name}").info.remote())
print(json.dumps(info))
"""


def _engine_tarball() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(REPO / "sandbox" / "engine", arcname="engine",
                filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return base64.b64encode(buf.getvalue()).decode()


def test_engine_joins_ray_and_serves_the_benchmark(fleet):
    f = fleet
    head, worker = f.names[:2]
    hip, wip = f.addresses[head], f.addresses[worker]
    f.install_ray([head, worker])  # a fresh host has none: from the sandbox's package index, as the role does
    f.ssh(head, START.format(ray=RAY, ip=hip, extra="--head --port=6379 --include-dashboard=false"), timeout=180)
    try:
        f.ssh(worker, START.format(ray=RAY, ip=wip, extra=f"--address={hip}:6379"), timeout=180)
        f.ssh(head, "mkdir -p /opt/gridready-sim && base64 -d | tar -xz -C /opt/gridready-sim",
              input=_engine_tarball())
        f.ssh(head, f"systemd-run --unit {UNIT} --property=WorkingDirectory=/opt/gridready-sim "
                    f"/usr/bin/python3 -m engine serve m --port 8000 --ttft-ms 30 --itl-ms 10 --load-seconds 1 "
                    f"--ray-address {hip}:6379 --ray-required --tensor-parallel-size 8")
        tier = Tier(name="sim", engine="vllm", model={"local_path": "/m"}, served_name="m",
                    slo=Slo(ttft_ms_p99=1000, tpot_ms_p99=200))
        report = verify_tier(
            Endpoint(url=f"http://{hip}:8000", model="m"), tier,
            Workload(concurrency=[1, 4], num_prompts=8, duration_s=5, input_len=16, output_len=8, warmup=0),
            gpus=1, ready_timeout_s=120,
            unit_state=lambda: f.ssh(head, f"systemctl is-active {UNIT}", check=False).stdout.strip(),
            log_lines=lambda: f.ssh(head, f"journalctl -u {UNIT} -n 20 --no-pager", check=False).stdout.splitlines())
        assert report.readiness.ready, report.readiness.reason
        assert report.ok and report.simulated, report.gate.message
        deadline = time.monotonic() + 60
        while True:
            with urllib.request.urlopen(f"http://{hip}:8000/gridready/info", timeout=10) as r:
                ray_state = json.loads(r.read()).get("ray", {})
            if ray_state.get("ray") == "joined" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert ray_state.get("ray") == "joined", ray_state
        assert ray_state["alive_nodes"] == 2 and ray_state["driver_node_ip"] == hip
        assert "--tensor-parallel-size" in f.ssh(head, f"journalctl -u {UNIT} --no-pager").stdout
        # the named actor is visible to another driver, from the worker host
        out = f.ssh(worker, "RAY_USAGE_STATS_ENABLED=0 /opt/ray/venv/bin/python -", timeout=120,
                    input=ACTOR_CHECK.format(addr=f"{hip}:6379", name=ray_state["actor"])).stdout
        info = json.loads(out.strip().splitlines()[-1])
        assert info["models"] == ["m"] and info["simulated"] is True
    finally:
        f.ssh(head, f"systemctl stop {UNIT}", check=False)
        for h in (worker, head):
            f.ssh(h, f"{RAY} stop --force", check=False, timeout=120)
