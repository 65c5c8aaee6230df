"""Role gridready_triton_trtllm on a sandbox host: unit, ports, engine cache and readiness.

One healthy host, provisioned as provision does it for Docker (the NVIDIA repository, gridready_container_engine,
gridready_container_toolkit: the sandbox serves SIMULATED docker-ce and nvidia-container-toolkit under their real
names). The tier is rendered by gridready.serving.triton exactly as the serve stage does, with the digest of the
sandbox registry's image from the inventory's pins (triton_versions.yml, written at bring-up), then the role runs
twice (the second run must change nothing and reuse the engine): it pulls the image by digest, builds the engine
in it and runs the server in it with Docker, as on a real host. Only the image's tools are simulated.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gridready import catalog
from gridready.inventory import site_pins
from gridready.serving import triton
from gridready.spec.parallel import Parallelism
from gridready.spec.serving import Tier
from gridready.spec.triton import TritonSettings
from tests.roles.serve_run import provision_docker

pytestmark = pytest.mark.sandbox
TIER = "trt-8b"
UNIT = f"gridready-triton-{TIER}.service"
SERVED = "llama-3.1-8b"
HF_ID, REVISION = "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"
# the serve playbook puts the serving firewall's boot unit on a Triton node before the role (the unit requires it);
# here its tool is "none" on a network declared isolated: the firewall itself is tested in test_serve_vllm
PLAYBOOK = """\
- name: Triton tier under test
  hosts: node1
  gather_facts: false
  pre_tasks:
    - name: The serving firewall's boot unit
      ansible.builtin.include_role:
        name: gridready_ray_node
        tasks_from: firewall.yml
      vars:
        gridready_ray_node_role: worker
        gridready_ray_node_firewall: none
        gridready_ray_node_network_isolated: true
        gridready_ray_node_firewall_members: []
        gridready_ray_node_api_ports: []
        gridready_ray_node_internal_ports: []
  roles:
    - role: gridready_triton_trtllm
"""


def _extravars(tmp: Path, inventory_dir: Path) -> dict[str, Any]:
    tier = Tier(name=TIER, engine="triton-trtllm", served_name=SERVED, tensor_parallel=1,
                pipeline_parallel=1, port=9000, model={"hf_id": HF_ID, "revision": REVISION})
    plan = triton.make_plan(tier, TritonSettings(mode="engine"), sku=catalog.lookup("h200"),
                            parallel=Parallelism(1, 1, 8), site_pins=site_pins(inventory_dir))
    repo = triton.write_repository(plan, tmp / "repo")
    return triton.hosts_extravars(plan, repo, ["node1"])


def _recap(out: str) -> dict[str, int]:
    line = next(x for x in out.splitlines() if x.startswith("node1") and "ok=" in x)
    return {k: int(v) for k, v in (p.split("=") for p in line.split(":", 1)[1].split())}


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, b""


@pytest.fixture(scope="module")
def triton_host(make_module_fleet, tmp_path_factory):
    fleet = make_module_fleet(1, healthy=True)
    tmp = tmp_path_factory.mktemp("triton-role")
    (tmp / "vars.json").write_text(json.dumps(_extravars(tmp, fleet.inventory)))
    (tmp / "play.yml").write_text(PLAYBOOK)
    provision_docker(fleet, tmp)
    # the checkpoint the engine is converted from (serve's gridready_model_weights downloads it there)
    snapshot = f"/var/lib/gridready/models/{HF_ID}/{REVISION}"
    fleet.ssh("node1", f"mkdir -p {snapshot} && echo '{{\"architectures\": [\"LlamaForCausalLM\"]}}' "
                       f"> {snapshot}/config.json")
    runs = [fleet.ansible_playbook(tmp / "play.yml", "-v", "-e", f"@{tmp / 'vars.json'}", check=False)
            for _ in range(2)]
    runs.append(fleet.ansible_playbook(tmp / "play.yml", "--check", "-e", f"@{tmp / 'vars.json'}", check=False))
    return fleet, runs


def _journal(fleet: Any) -> str:
    return fleet.ssh("node1", f"journalctl -u {UNIT} --no-pager -o cat -n 60", check=False).stdout


def test_second_run_changes_nothing_and_reuses_the_engine(triton_host) -> None:
    fleet, (first, second, check) = triton_host
    assert first.returncode == 0 and _recap(first.stdout)["failed"] == 0, (
        first.stdout[-4000:] + "\n--- unit log\n" + _journal(fleet)[-3000:])
    assert _recap(second.stdout)["changed"] == 0, second.stdout[-3000:]
    assert _recap(check.stdout)["changed"] == 0, check.stdout[-3000:]  # --check after a run reports nothing
    events = [{"event": "runner_on_ok", "event_data": {"host": "node1", "res": {"stdout": out.stdout}}}
              for out in (first, second)]
    assert [r["status"] for r in triton.engine_records_from_events(events)] == ["built", "cached"]


def test_unit_files_and_ports(triton_host) -> None:
    fleet, _ = triton_host
    host = fleet.host("node1")
    unit = host.service(UNIT)
    assert unit.is_running and unit.is_enabled
    unit_text = host.file(f"/etc/systemd/system/{UNIT}").content_string
    # the unit runs the pinned image with Docker and the nvidia runtime; no trace of a simulation in the product
    assert "docker run --rm --name gridready-triton-trt-8b --runtime=nvidia" in unit_text
    image = re.search(r"nvcr\.io/nvidia/tritonserver@sha256:[0-9a-f]{64}", unit_text)
    assert image and "SIMULATED" not in unit_text
    # what is simulated says so: the image of the sandbox registry and the engine the image's tritonserver runs
    inspect = host.run(f"docker image inspect {image.group(0)}")
    assert inspect.rc == 0 and "SIMULATED" in inspect.stdout
    assert "SIMULATED" in _journal(fleet)
    assert json.loads(host.file("/etc/docker/daemon.json").content_string)["runtimes"]["nvidia"]
    # the entry model's directory carries the served name: Triton knows a model only by that name
    assert host.file(f"/var/lib/gridready/triton/{TIER}/repo/{SERVED}/config.pbtxt").is_file
    assert not host.file(f"/var/lib/gridready/triton/{TIER}/repo/ensemble").exists
    assert host.file(f"/var/lib/gridready/triton/{TIER}/launch.sh").mode == 0o755
    ip = fleet.addresses["node1"]
    for port in (8000, 9000):  # KServe HTTP beside the OpenAI frontend, which serves /metrics on its own port
        # Triton has no auth of its own: it binds the service address only (serving/triton/launch.py)
        assert host.socket(f"tcp://{ip}:{port}").is_listening, port
        assert not host.socket(f"tcp://0.0.0.0:{port}").is_listening, port
    assert not host.socket("tcp://0.0.0.0:8002").is_listening  # the frontend has no --metrics-port
    markers = host.run("ls /var/lib/gridready/engines/*/gridready-engine.json")
    assert markers.rc == 0 and markers.stdout.count("gridready-engine.json") == 1


def test_readiness_against_the_simulated_endpoints(triton_host) -> None:
    fleet, _ = triton_host
    base = f"http://{fleet.addresses['node1']}"
    assert _get(f"{base}:8000/v2/health/ready")[0] == 200
    assert _get(f"{base}:8000/v2/models/{SERVED}/ready")[0] == 200
    assert _get(f"{base}:8000/v2/models/ensemble/ready")[0] != 200  # no model of that name in the repository
    status, body = _get(f"{base}:9000/metrics")
    assert status == 200 and b"nv_" in body
    status, body = _get(f"{base}:9000/v1/models")
    assert status == 200 and SERVED.encode() in body
