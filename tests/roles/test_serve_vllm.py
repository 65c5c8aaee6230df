"""`serve` on a 3-host sandbox fleet: a real 3-node Ray cluster under systemd and the vLLM unit (SIMULATED engine).

The serve stage runs for real (gridready.stages.serve -> playbooks/serve.yml); only the certification is
written by the test (all three hosts certified). One tier spans the three nodes (TP 8 x PP 3 = 24 simulated
GPUs), so the vllm unit may start only after both workers joined.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from gridready import inventory, vault
from gridready.artifacts import RunContext
from gridready.stages import serve
from tests.summaries import certification

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
TIER = "llama8b-ray"
UNIT = f"vllm-{TIER}"
SERVED = "llama-3.1-8b"


def _run(inv_dir: Path, root: Path, run_id: str) -> Any:
    inv = inventory.load(inv_dir)
    return serve.run(inv, RunContext(customer=inv.customer, run_id=run_id, root=root))


def _get(url: str, key: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
        return json.loads(resp.read())


def _show(fleet: Any, host: str, unit: str, prop: str) -> str:
    return fleet.ssh(host, f"systemctl show -p {prop} --value {unit}").stdout.strip()


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1)


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory, monkeypatch_module):
    fleet = make_module_fleet(3, healthy=True)
    cluster = yaml.safe_load((fleet.inventory / "cluster.yml").read_text())
    cluster["serving"]["tiers"] = [{
        "name": TIER, "engine": "vllm", "served_name": SERVED,
        "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct", "revision": "0e9e39f249a16976918f6564b8830bc894c89659"},
        "tensor_parallel": 8, "pipeline_parallel": 3,
    }]
    # a hung engine is restarted after two failed probes, 5 s apart, of 2 s each
    cluster["serving"]["engine_health"] = {"interval_s": 5, "timeout_s": 2, "failures": 2}
    (fleet.inventory / "cluster.yml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    root = tmp_path_factory.mktemp("artifacts")
    certification(inventory.load(fleet.inventory), fleet.names, root=root, run_id="20261130T000000Z-test")
    monkeypatch_module.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the bench has its own tests
    monkeypatch_module.setenv("ANSIBLE_CACHE_PLUGIN_CONNECTION", fleet.ansible_env()["ANSIBLE_CACHE_PLUGIN_CONNECTION"])
    t0 = time.monotonic()
    first = _run(fleet.inventory, root, "20261130T010000Z-run1")
    first_s = time.monotonic() - t0
    return {"fleet": fleet, "root": root, "first": first, "first_s": first_s}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_first_run_succeeds_on_three_nodes(served) -> None:
    first = served["first"]
    assert first.exit_code == 0, first.messages
    (plan,) = first.data["plan"]
    assert (plan["tensor_parallel"], plan["pipeline_parallel"]) == (8, 3)
    print(f"first serve run: {served['first_s']:.1f} s")


def test_units_and_ports(served) -> None:
    fleet = served["fleet"]
    head, *workers = fleet.names
    h = fleet.host(head)
    for unit in ("ray-head", UNIT):
        assert h.service(unit).is_running and h.service(unit).is_enabled, unit
    ip = fleet.addresses[head]
    assert h.socket(f"tcp://{ip}:6379").is_listening
    assert h.socket("tcp://0.0.0.0:8000").is_listening
    unit_text = h.file(f"/etc/systemd/system/{UNIT}.service").content_string
    assert "ExecStartPre=" in unit_text and "BindsTo=ray-head.service" in unit_text
    # the real command line from the pinned package in Ray's venv; the engine itself says it is SIMULATED
    assert "ExecStart=/opt/ray/venv/bin/vllm serve meta-llama/" in unit_text
    summary = h.check_output("/opt/ray/venv/bin/python3 -m pip show vllm | grep ^Summary")
    assert "SIMULATED" in summary
    env = h.file("/etc/gridready/ray.env").content_string
    assert f"VLLM_HOST_IP={ip}" in env and "NCCL_SOCKET_IFNAME=eth0" in env and "NCCL_IB_HCA==mlx5_0" in env
    for worker in workers:
        w = fleet.host(worker)
        for unit in ("ray-headwatch", "ray-worker"):
            assert w.service(unit).is_running and w.service(unit).is_enabled, (worker, unit)
        assert w.socket(f"tcp://{fleet.addresses[worker]}:6380").is_listening
        assert f"--node-ip-address={fleet.addresses[worker]}" in w.file(
            "/etc/systemd/system/ray-worker.service").content_string


def test_ray_status_shows_three_nodes_and_every_gpu(served) -> None:
    fleet = served["fleet"]
    head = fleet.names[0]
    out = fleet.ssh(head, f"runuser -u ray -- /opt/ray/venv/bin/ray status --address {fleet.addresses[head]}:6379")
    assert "/24.0 GPU" in out.stdout, out.stdout
    assert out.stdout.split("Active:", 1)[1].split("Pending:", 1)[0].count("node_") == 3


def test_vllm_started_only_after_every_worker_joined(served) -> None:
    fleet = served["fleet"]
    head, *workers = fleet.names
    started = int(_show(fleet, head, UNIT, "ExecMainStartTimestampMonotonic"))
    for worker in workers:  # one kernel: the containers share CLOCK_MONOTONIC
        joined = int(_show(fleet, worker, "ray-worker", "ActiveEnterTimestampMonotonic"))
        assert 0 < joined < started, (worker, joined, started)
    log = fleet.ssh(head, f"journalctl -u {UNIT} --no-pager -o cat").stdout
    assert "24/24 GPUs, 3/3 nodes" in log, log[-2000:]


def test_models_answer_and_the_engine_joined_ray(served) -> None:
    fleet = served["fleet"]
    url = f"http://{fleet.addresses[fleet.names[0]]}:8000"
    inv = inventory.load(fleet.inventory)
    key = vault.read(inv.customer, inv.path)[vault.API_KEY_VAR]  # vLLM's --api-key guards /v1 (serve made it)
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(f"{url}/v1/models")
    assert refused.value.code == 401
    assert SERVED in [m["id"] for m in _get(f"{url}/v1/models", key)["data"]]
    ray_info = _get(f"{url}/gridready/info").get("ray", {})
    assert ray_info.get("ray") == "joined", ray_info
    assert ray_info.get("cluster_gpus") == 24.0 and ray_info.get("alive_nodes") == 3


def test_second_run_changes_nothing(served) -> None:
    second = _run(served["fleet"].inventory, served["root"], "20261130T020000Z-run2")
    assert second.exit_code == 0, second.messages
    changed = {h: o.changed for h, o in second.hosts.items() if o.changed}
    assert changed == {}, changed


def _answers(fleet: Any) -> bool:
    """The tier lists its model (with the key; without it vLLM answers 401, an HTTPError: an OSError)."""
    url = f"http://{fleet.addresses[fleet.names[0]]}:8000/v1/models"
    inv = inventory.load(fleet.inventory)
    key = vault.read(inv.customer, inv.path)[vault.API_KEY_VAR]
    try:
        return SERVED in [m["id"] for m in _get(url, key)["data"]]
    except OSError:
        return False


def test_a_hung_engine_is_restarted_by_its_health_timer(served) -> None:
    """SIGSTOP leaves the engine's process "active" under systemd with its port open and no answer, as a hung
    engine would be; the health timer's probes time out and it restarts the unit, which serves again."""
    fleet = served["fleet"]
    head = fleet.names[0]
    timer = f"gridready-engine-health@{UNIT}.timer"
    assert _show(fleet, head, timer, "ActiveState") == "active" and _show(fleet, head, timer, "UnitFileState") \
        == "enabled"
    for worker in fleet.names[1:]:  # workers serve no HTTP: no check there
        assert _show(fleet, worker, timer, "ActiveState") == "inactive"
    before = _show(fleet, head, UNIT, "InvocationID")
    fleet.ssh(head, f"kill -STOP {_show(fleet, head, UNIT, 'MainPID')}")
    assert not _answers(fleet)
    _wait(lambda: _show(fleet, head, UNIT, "InvocationID") != before, 90, "the health timer to restart the engine")
    _wait(lambda: _answers(fleet), 180, "the restarted engine to serve again")
    log = fleet.ssh(head, f"journalctl -u gridready-engine-health@{UNIT} --no-pager -o cat").stdout
    assert "unhealthy 2 times in a row: restarting it" in log, log[-2000:]


def test_stopping_the_head_restarts_the_workers(served) -> None:
    fleet = served["fleet"]
    head, *workers = fleet.names
    before = {w: _show(fleet, w, "ray-worker", "InvocationID") for w in workers}
    fleet.ssh(head, "systemctl stop ray-head")
    assert _show(fleet, head, UNIT, "ActiveState") != "active"  # BindsTo/PartOf: vLLM goes with its head
    for w in workers:
        _wait(lambda w=w: _show(fleet, w, "ray-worker", "ActiveState") != "active", 30, f"{w} ray-worker to stop")
    fleet.ssh(head, "systemctl start ray-head")  # pulls vllm-<tier> in (WantedBy=ray-head.service)
    for w in workers:
        _wait(lambda w=w: _show(fleet, w, "ray-worker", "ActiveState") == "active"
              and _show(fleet, w, "ray-worker", "InvocationID") != before[w], 60, f"{w} ray-worker to rejoin")
    _wait(lambda: _answers(fleet), 180, "the vLLM unit to come back after the head restart")
    assert _show(fleet, head, UNIT, "ActiveState") == "active"


def test_serve_down_stops_every_serving_unit_and_records_nothing_served(served) -> None:
    """Issue 33, verbs: `invoke serve --down` (last in this module: it takes the fleet's tier down). Every unit the
    serving roles installed is stopped and disabled on every node, the firewall unit stays, and the ledger holds an
    empty deployment."""
    from gridready import ledger
    from gridready.stages.serve import down as serve_down

    fleet, root = served["fleet"], served["root"]
    inv = inventory.load(fleet.inventory)
    res = serve_down.run(inv, RunContext(customer=inv.customer, run_id="20261130T020000Z-down", root=root))
    assert res.exit_code == 0, res.messages
    head, *workers = fleet.names
    stopped = res.data["stopped"][head]
    assert stopped.index(f"{UNIT}.service") < stopped.index("ray-head.service")  # the engine before its Ray head
    assert all("ray-worker.service" in res.data["stopped"][w] for w in workers)
    for host in fleet.names:
        for unit in (f"{UNIT}.service", "ray-head.service", "ray-worker.service"):
            assert _show(fleet, host, unit, "ActiveState") != "active", (host, unit)
            assert _show(fleet, host, unit, "UnitFileState") in ("disabled", ""), (host, unit)
        assert _show(fleet, host, "gridready-firewall.service", "UnitFileState") in ("enabled", "static", "")
    _, book = ledger.read(root, inv.customer)
    assert book.serving is not None and book.serving.roles == {}
    assert not _answers(fleet)
