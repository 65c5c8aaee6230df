"""The serving firewall survives a reboot and fails closed, witnessed on a sandbox fleet (issue #29, finding 11).

Two certified hosts, one vLLM tier of one node (TP 8, SIMULATED engine): the serving node is the only cluster member,
the other host is certified but not a member, so it stands for any machine of the network. The serving node reboots
for real (`systemctl reboot`; the sandbox launcher starts the container again as systemd-nspawn@.service does, and
the kernel state of its network namespace, nftables rules included, is emptied as a real reboot's fresh kernel has
it). While it comes back and after, the non-member reaches none of Ray's GCS port, the dashboard/job port and the
engine's API port, while the controller (an allowed client: the role adds its ssh source address) gets the engine's
/health again. The last test is the negative control: with the boot unit made a no-op (what a handler-only load
amounts to after a reboot), the same probe sees the GCS port open, so the witness is not vacuous.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.roles.serve_run import fleet_env, serve_fleet
from tests.sandbox.waiting import health, wait

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
TIER = "llama8b-reboot"
FW = "gridready-firewall.service"
GCS, DASHBOARD, API = 6379, 8265, 8000  # serving.ray_port, Ray's dashboard/job API, the tier's default port
READY_S = 300  # the engine after a reboot: Ray's head, then vLLM (SIMULATED) until /health answers
# from a non-member: "dropped" is the table's answer (its rules drop), "refused" a port nobody listens on yet;
# either is closed, "open" never is
PROBE = """\
import json, socket, sys
out = {}
for port in map(int, sys.argv[2:]):
    s = socket.socket()
    s.settimeout(1.5)
    try:
        s.connect((sys.argv[1], port))
        out[port] = "open"
    except ConnectionRefusedError:
        out[port] = "refused"
    except TimeoutError:
        out[port] = "dropped"
    except OSError as err:
        out[port] = f"unreachable: {err}"
    finally:
        s.close()
print(json.dumps(out))
"""


def _probe(fleet: Any, source: str, target: str, ports: tuple[int, ...]) -> dict[int, str]:
    res = fleet.ssh(source, f"python3 - {target} {' '.join(map(str, ports))}", input=PROBE, timeout=60)
    return {int(k): v for k, v in json.loads(res.stdout).items()}


def _show(fleet: Any, host: str, unit: str, *props: str) -> dict[str, str]:
    out = fleet.ssh(host, f"systemctl show {' '.join(f'-p {p}' for p in props)} {unit}").stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def served(make_module_fleet, tmp_path_factory, monkeypatch_module) -> dict[str, Any]:
    fleet = make_module_fleet(2, healthy=True)

    def edit(cluster: dict[str, Any]) -> None:
        serving = cluster["serving"]
        assert "network_isolated" not in serving  # the sandbox runs the real firewall path of the role
        serving["tiers"] = [{
            "name": TIER, "engine": "vllm", "served_name": "llama-3.1-8b",
            "model": {"hf_id": "meta-llama/Llama-3.1-8B-Instruct",
                      "revision": "0e9e39f249a16976918f6564b8830bc894c89659"},
            "tensor_parallel": 8, "pipeline_parallel": 1, "replicas": 1,
        }]
        serving["router"]["enabled"] = False  # the router has its own tests; one engine is the witness here

    monkeypatch_module.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")  # the bench has its own tests
    with fleet_env(fleet):
        out = serve_fleet(fleet, tmp_path_factory.mktemp("artifacts"), "20261201T010000Z-reboot", edit)
    assert out["result"].exit_code == 0, out["result"].messages
    active = {h: fleet.ssh(h, "systemctl is-active ray-head", check=False).stdout.strip() for h in fleet.names}
    (member,) = [h for h, state in active.items() if state == "active"]
    (outsider,) = [h for h in fleet.names if h != member]
    record = json.loads(fleet.ssh(member, "cat /etc/gridready/firewall-ray.json").stdout)
    assert record["tool"] == "nftables", record
    assert record["members"] == [fleet.addresses[member]], record
    assert fleet.addresses[outsider] not in record["members"] + record["clients"], record
    return {**out, "member": member, "outsider": outsider}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_the_firewall_holds_before_a_reboot(served) -> None:
    fleet, member, outsider = served["fleet"], served["member"], served["outsider"]
    ip = fleet.addresses[member]
    assert health(ip, API)  # the controller is an allowed client of the API port
    # dropped, not refused: the table's rules answer (the dashboard is off in the sandbox, its port closed anyway)
    assert _probe(fleet, outsider, ip, (GCS, DASHBOARD, API)) == dict.fromkeys((GCS, DASHBOARD, API), "dropped")
    assert fleet.ssh(member, f"python3 - 127.0.0.1 {GCS} {API}", input=PROBE).stdout.count("open") == 2


def test_after_a_reboot_the_ports_stay_closed_and_the_engine_answers_again(served) -> None:
    fleet, member, outsider = served["fleet"], served["member"], served["outsider"]
    ip = fleet.addresses[member]
    seen: list[dict[int, str]] = []
    fleet.reboot(member, poll=lambda: seen.append(_probe(fleet, outsider, ip, (GCS, DASHBOARD, API))))

    def answered() -> bool:
        seen.append(_probe(fleet, outsider, ip, (GCS, DASHBOARD, API)))
        return health(ip, API)

    wait(answered, READY_S, f"the engine's /health on {member} after its reboot")
    seen.append(_probe(fleet, outsider, ip, (GCS, DASHBOARD, API)))
    assert len(seen) >= 2
    opened = [p for p in seen if "open" in p.values()]
    assert not opened, f"a port answered a non-member while {member} came back: {opened}"
    assert seen[-1] == dict.fromkeys((GCS, DASHBOARD, API), "dropped"), seen[-1]
    print(f"{len(seen)} probes from {outsider} while {member} came back: {sorted({str(p) for p in seen})}")
    # the rules are this boot's: the unit loaded them, before Ray
    fw = _show(fleet, member, FW, "ActiveState", "UnitFileState", "Before", "ActiveEnterTimestampMonotonic")
    head = _show(fleet, member, "ray-head.service", "Requires", "After", "ActiveEnterTimestampMonotonic")
    assert fw["ActiveState"] == "active" and fw["UnitFileState"] == "enabled", fw
    assert "ray-head.service" in fw["Before"].split() and "network-pre.target" in fw["Before"].split(), fw
    assert FW in head["Requires"].split() and FW in head["After"].split(), head
    assert 0 < int(fw["ActiveEnterTimestampMonotonic"]) < int(head["ActiveEnterTimestampMonotonic"]), (fw, head)
    table = fleet.ssh(member, "nft list table inet gridready_ray").stdout
    assert "set members" in table and ip in table and f"{GCS}" in table, table
    booted = fleet.ssh(member, "systemctl show -p ActiveEnterTimestampMonotonic sysinit.target --value").stdout
    assert int(booted.strip()) < int(head["ActiveEnterTimestampMonotonic"])


def test_without_the_boot_unit_the_same_probe_sees_the_gcs_port_open(served) -> None:
    """Negative control (last: it leaves the node unguarded): the boot unit made a no-op, as if the rules were only
    loaded by a handler during the run; after a reboot nothing loads them and the GCS port answers a non-member."""
    fleet, member, outsider = served["fleet"], served["member"], served["outsider"]
    ip = fleet.addresses[member]
    dropin = f"/etc/systemd/system/{FW}.d/zz-test-noop.conf"
    lines = "'[Service]' 'ExecStart=' 'ExecStart=/bin/true' 'ExecReload=' 'ExecReload=/bin/true'"
    fleet.ssh(member, f"mkdir -p {dropin.rsplit('/', 1)[0]} && printf '%s\\n' {lines} > {dropin} "
                      "&& systemctl daemon-reload")
    fleet.reboot(member)
    wait(lambda: _probe(fleet, outsider, ip, (GCS,))[GCS] == "open", READY_S, f"Ray's GCS on {member}")
    assert fleet.ssh(member, "nft list tables").stdout.strip() == ""
