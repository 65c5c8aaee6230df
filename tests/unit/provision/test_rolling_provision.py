"""The rolling provision's orchestration (gridready.stages.roll) with Ansible faked at the runner boundary
(gridready.ansible.run_playbook): provision.yml, reboot.yml and the router play of serve.yml. Three nodes serve one
tier of three replicas behind the router, which runs on a router host of its own (serving.router.hosts) unless a
test says otherwise; certify is the stage's own writer."""

from __future__ import annotations

import io
from typing import Any

import pytest
import yaml
from rich.console import Console

from gridready import ansible, ledger
from gridready.artifacts import RunContext
from gridready.errors import InvalidInput
from gridready.stages import provision, roll, roll_state, serve, status
from gridready.stages.common import Timer
from gridready.stages.serve import deploy as serve_deploy
from gridready.stages.serve.drain import sync_serving
from tests.summaries import certification
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving.test_serve_router import with_router
from tests.unit.serving.test_serve_stage import _fake_playbook

NODES = ["gpu01", "gpu02", "gpu03"]
TIER = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1, replicas=3)


class Fleet:
    """The faked runner: what each play did, in order; hosts in `broken` fail provision.yml."""

    def __init__(self, broken: set[str] | None = None, roles: tuple[str, ...] = ("gridready_nvidia_driver",),
                 owed: bool = True) -> None:
        self.log: list[tuple[str, tuple[str, ...]]] = []
        self.router_upstreams: list[set[str]] = []
        self.broken = broken or set()
        self.roles = roles
        self.owed = owed
        self.rebooted: set[str] = set()

    def run_playbook(self, inv, playbook, stage_dir, **kw) -> ansible.PlaybookResult:
        hosts = tuple(kw["limit"].split(",")) if kw.get("limit") else ()
        if playbook == "serve.yml":
            bases = {d["litellm_params"]["api_base"]
                     for d in kw["extravars"]["gridready_serve_router"]["config"]["model_list"]}
            self.router_upstreams.append(bases)
            self.log.append(("router", tuple(sorted(bases))))
            return ansible.PlaybookResult(playbook=playbook, status="successful", rc=0, hosts={}, events=[])
        self.log.append((playbook, hosts))
        stats, events = {}, []
        for h in hosts:
            if playbook == "reboot.yml":
                self.rebooted.add(h)
                stats[h] = ansible.HostStats(ok=3, changed=1)
                continue
            if h in self.broken:
                stats[h] = ansible.HostStats(ok=5, failures=1)
                events.append({"event": "runner_on_failed", "event_data": {
                    "host": h, "task": "Install the NVIDIA driver packages", "role": "gridready_nvidia_driver",
                    "res": {"msg": "E: Unable to locate package nvidia-driver-cuda=580.95.05-1"}}})
                continue
            first = h not in self.rebooted
            stats[h] = ansible.HostStats(ok=20, changed=2 if first else 0)
            if first:
                events += [{"event": "runner_on_ok", "event_data": {
                    "host": h, "task": "Install the packages", "role": r, "res": {"changed": True}}}
                    for r in self.roles]
            owed = self.owed and first
            events.append({"event": "runner_on_ok", "event_data": {
                "host": h, "task": "Report whether a reboot is owed", "res": {"ansible_facts": {"gridready_reboot": {
                    "owed": owed, "rebooted": False,
                    "reasons": ["NVIDIA kernel module package changed"] if owed else []}}}}})
        return ansible.PlaybookResult(playbook=playbook, status="failed" if self.broken & set(hosts) else "successful",
                                      rc=2 if self.broken & set(hosts) else 0, hosts=stats, events=events)


ROUTER_HOST, ROUTER_IP = "lb01", "10.77.0.50"


def with_router_host(inv):
    """The router on a host of its own: `lb01` in an inventory group `routers`, outside the node groups."""
    path = inv.path / "hosts.yml"
    doc = yaml.safe_load(path.read_text())
    doc["all"]["children"]["routers"] = {"hosts": {ROUTER_HOST: {"ansible_host": ROUTER_IP}}}
    path.write_text(yaml.safe_dump(doc))
    return with_router(inv, hosts=[ROUTER_HOST])


def _served(make_inv, monkeypatch, router_host: bool = True, nodes: int = 3, tier=TIER):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = make_inv(nodes, [tier])
    inv = with_router_host(inv) if router_host else with_router(inv)
    NODES = [f"gpu{i:02d}" for i in range(1, nodes + 1)]  # noqa: N806
    path, _ = certification(inv, NODES)
    root = path.parents[3]
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook({}))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T050000Z-serv", root=root)).exit_code == 0
    return inv, root


def _hooks(fleet: Fleet, certified: list[str], monkeypatch, quarantine: set[str] | None = None,
           gates_seen: list[tuple[str, ...]] | None = None) -> roll.Hooks:
    monkeypatch.setattr(ansible, "run_playbook", fleet.run_playbook)

    def certify(inv_, sub):
        nodes = sub.limit.split(",")
        fleet.log.append(("certify", tuple(nodes)))
        certified.extend(nodes)
        if gates_seen is not None:
            gates_seen.append(sub.gates)
        bad = [n for n in nodes if n in (quarantine or set())]
        return certification(inv_, [n for n in nodes if n not in bad], bad, run_id=sub.run_id, root=sub.root,
                             record=not sub.gates)[1]

    def router(inv_, ctx):
        return sync_serving(inv_, ctx)

    return roll.Hooks(converge=provision.converge, certify=certify, route=router, in_flight=lambda url: 0,
                      healthy=lambda url: True, sleep=lambda s: None)


def _roll(inv, root, hooks, run_id, **flags):
    ctx = RunContext(customer="acme", run_id=run_id, root=root, **flags)
    ctx.claim_stage("provision")
    return roll.apply(inv, ctx, Timer(), hooks, key=roll.key_of(provision.extravars(inv), ctx))


def _ip(node: str) -> str:
    return f"http://10.77.0.{10 + int(node[-2:])}:8000/v1"


def test_each_node_is_drained_rebooted_and_re_certified_before_it_serves_again(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    assert provision.rolls(inv, RunContext(customer="acme", run_id="20261206T060000Z-chk1", root=root))
    fleet, certified = Fleet(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T060000Z-roll")
    assert summary.exit_code == 0, summary.messages
    want = []
    for node in NODES:
        drained = ("router", tuple(sorted(_ip(n) for n in NODES if n != node)))
        returned = ("router", tuple(sorted(_ip(n) for n in NODES)))
        want += [drained, ("provision.yml", (node,)), ("reboot.yml", (node,)), ("provision.yml", (node,)),
                 ("certify", (node,)), returned]
    assert fleet.log == want
    # one node at a time: never two replicas out of the router together
    assert all(len(up) >= 2 for up in fleet.router_upstreams)
    state = roll_state.read(root, "acme")
    assert state.status == "done" and all(state.nodes[n].step == "done" and state.nodes[n].rebooted for n in NODES)
    assert state.batches == [["gpu01"], ["gpu02"], ["gpu03"]] and state.nodes["gpu01"].gates == []
    book = ledger.read(root, "acme")[1]
    assert not any(book.nodes[n].drained for n in NODES)
    assert all(book.nodes[n].verdict == "certified" for n in NODES)


def test_a_roll_whose_second_batch_fails_stops_there_and_resumes(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified = Fleet(broken={"gpu02"}), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T070000Z-roll")
    assert summary.exit_code == 3
    assert any(m.startswith("gpu02 failed at provisioning: provision: failed: Install the NVIDIA driver packages: "
                            "E: Unable to locate package") for m in summary.messages), summary.messages
    assert any("roll stopped" in m and "batches 3-3 not started" in m for m in summary.messages), summary.messages
    assert not any("gpu03" in hosts for what, hosts in fleet.log if what != "router")  # never touched
    book = ledger.read(root, "acme")[1]
    assert book.nodes["gpu02"].drained and "rolling provision" in (book.nodes["gpu02"].drain_reason or "")
    assert not book.nodes["gpu01"].drained and not book.nodes["gpu03"].drained
    assert fleet.router_upstreams[-1] == {_ip("gpu01"), _ip("gpu03")}  # the others serve, the failed one not
    state = roll_state.read(root, "acme")
    assert state.status == "stopped"
    assert [state.nodes[n].step for n in NODES] == ["done", "failed", "pending"]
    doc = status.view(inv, book, roll=state)
    assert doc["roll"]["nodes"]["gpu02"]["step"] == "failed"
    shown = Console(width=240, record=True, file=io.StringIO())
    shown.print(status.roll_table(doc["roll"]))
    row = next(ln for ln in shown.export_text().splitlines() if ln.lstrip("│ ").startswith("gpu02"))
    assert "failed" in row and "provisioning: provision: failed" in row

    # fixed, run again: gpu02 first, then gpu03; gpu01 is done and left alone
    fleet2 = Fleet()
    again = _roll(inv, root, _hooks(fleet2, certified, monkeypatch), "20261206T080000Z-roll")
    assert again.exit_code == 0, again.messages
    provisioned = [hosts for what, hosts in fleet2.log if what == "provision.yml"]
    assert provisioned == [("gpu02",), ("gpu02",), ("gpu03",), ("gpu03",)]
    state = roll_state.read(root, "acme")
    assert state.status == "done" and state.runs == ["20261206T070000Z-roll", "20261206T080000Z-roll"]
    assert not any(ledger.read(root, "acme")[1].nodes[n].drained for n in NODES)
    assert fleet2.router_upstreams[-1] == {_ip(n) for n in NODES}


def test_a_node_that_fails_its_re_certification_stays_drained(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified = Fleet(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch, quarantine={"gpu01"}), "20261206T090000Z-roll")
    assert summary.exit_code == 3
    assert any(m.startswith("gpu01 failed at certifying: re-certification") and "quarantined" in m
               for m in summary.messages), summary.messages
    assert [h for what, h in fleet.log if what == "provision.yml"] == [("gpu01",), ("gpu01",)]
    book = ledger.read(root, "acme")[1]
    assert book.nodes["gpu01"].drained and book.nodes["gpu01"].verdict == "quarantined"
    assert fleet.router_upstreams[-1] == {_ip("gpu02"), _ip("gpu03")}


def test_max_fail_lets_the_roll_go_on(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified = Fleet(broken={"gpu01"}), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T100000Z-roll", max_fail="1")
    assert summary.exit_code == 3  # a node failed: said, and it stays drained
    assert [h for what, h in fleet.log if what == "provision.yml"] == [("gpu01",), ("gpu02",), ("gpu02",),
                                                                        ("gpu03",), ("gpu03",)]
    assert roll_state.read(root, "acme").nodes["gpu03"].step == "done"
    assert ledger.read(root, "acme")[1].nodes["gpu01"].drained


def test_a_change_without_reboot_re_certifies_its_gates_only(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified, gates = Fleet(roles=("gridready_dcgm",), owed=False), [], []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch, gates_seen=gates), "20261206T110000Z-roll",
                    batch="2")
    assert summary.exit_code == 0, summary.messages
    assert not any(what == "reboot.yml" for what, _ in fleet.log)
    assert gates == [("dcgm", "min_versions", "services", "software_versions")] * 2
    assert roll_state.read(root, "acme").batches == [["gpu01", "gpu02"], ["gpu03"]]
    assert not any(ledger.read(root, "acme")[1].nodes[n].drained for n in NODES)


def test_idle_nodes_roll_first_in_one_batch_without_drain(make_inv, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = with_router_host(make_inv(4, [vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=1,
                                                  replicas=2)]))
    path, _ = certification(inv, ["gpu01", "gpu02", "gpu03", "gpu04"])
    root = path.parents[3]
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook({}))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T050000Z-serv", root=root)).exit_code == 0
    serving = sorted(ledger.read(root, "acme")[1].serving.roles)
    idle = sorted(set(["gpu01", "gpu02", "gpu03", "gpu04"]) - set(serving))
    fleet, certified = Fleet(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T120000Z-roll")
    assert summary.exit_code == 0, summary.messages
    assert fleet.log[0] == ("provision.yml", tuple(idle))  # no router play before the idle batch
    assert roll_state.read(root, "acme").batches == [idle, serving[:1], serving[1:]]


def test_nothing_serving_is_one_plain_run(make_inv, monkeypatch):
    inv = make_inv(3, [TIER])
    path, _ = certification(inv, NODES)
    root = path.parents[3]
    assert not provision.rolls(inv, RunContext(customer="acme", run_id="20261206T130000Z-plai", root=root))
    assert not provision.rolls(inv, RunContext(customer="acme", run_id="20261206T130000Z-plai", root=root,
                                               check=True))


@pytest.mark.parametrize(("flags", "needle"), [
    ({"batch": "0"}, "--batch: (command line): '0' is out of range"),
    ({"batch": "ten"}, "--batch: (command line): 'ten' is not a node count"),
    ({"max_fail": "200%"}, "--max-fail: (command line): '200%' is out of range"),
])
def test_bad_roll_flags_are_refused_before_anything_runs(make_inv, monkeypatch, flags, needle):
    inv, root = _served(make_inv, monkeypatch)

    def contact(*_a: Any, **_k: Any):
        raise AssertionError("a playbook ran")

    monkeypatch.setattr(ansible, "run_playbook", contact)
    ctx = RunContext(customer="acme", run_id="20261206T140000Z-flag", root=root, **flags)
    with pytest.raises(InvalidInput) as err:
        provision.run(inv, ctx)
    assert err.value.lines == [needle] or err.value.lines[0].startswith(needle)
    assert roll_state.read(root, "acme") is None


def test_a_router_that_cannot_drain_the_node_stops_the_batch_before_provision(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified = Fleet(), []
    hooks = _hooks(fleet, certified, monkeypatch)
    hooks.route = lambda inv_, ctx: {"applied": False, "reason": "no deployment in the ledger"}
    summary = _roll(inv, root, hooks, "20261206T150000Z-roll")
    assert summary.exit_code == 3
    assert any(m.startswith("gpu01 failed at draining: the router was not re-applied") for m in summary.messages)
    assert not any(what == "provision.yml" for what, _ in fleet.log)
    assert ledger.read(root, "acme")[1].nodes["gpu01"].drained


@pytest.mark.parametrize(("owed", "rebooted", "want"), [
    (True, False, True), ("True", "False", True), ("false", False, False), (False, True, False)])
def test_the_reboot_fact_is_read_as_provision_yml_reports_it(owed, rebooted, want):
    res = {"ansible_facts": {"gridready_reboot": {"owed": owed, "rebooted": rebooted, "reasons": ["kernel"]}}}
    got = provision.reboot_of(res)
    assert got is not None and got["owed"] is want and got["reasons"] == ["kernel"]
    assert provision.reboot_of({"ansible_facts": {}}) is None


def test_in_flight_reads_the_engines_running_and_queued_gauges():
    vllm = ('# HELP vllm:num_requests_running Number of requests in model execution batches.\n'
            '# TYPE vllm:num_requests_running gauge\n'
            'vllm:num_requests_running{engine="0",model_name="chat"} 2.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="chat"} 1.0\n'
            'vllm:num_requests_swapped{engine="0",model_name="chat"} 7.0\n')
    assert roll._metric_sum(vllm, roll.IN_FLIGHT_GAUGES) == 3.0
    sglang = 'sglang:num_running_reqs{model_name="m"} 0.0\nsglang:num_queue_reqs{model_name="m"} 4.0\n'
    assert roll._metric_sum(sglang, roll.IN_FLIGHT_GAUGES) == 4.0
    assert roll._metric_sum("vllm:num_requests_running{} not-a-number\n", roll.IN_FLIGHT_GAUGES) == 0.0


class RouterPlays(Fleet):
    """The faked runner, also keeping the router play's variables."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.router_vars: list[dict[str, Any]] = []

    def run_playbook(self, inv, playbook, stage_dir, **kw) -> ansible.PlaybookResult:
        if playbook == "serve.yml":
            self.router_vars.append(kw["extravars"])
        return super().run_playbook(inv, playbook, stage_dir, **kw)


def test_the_router_host_is_never_rolled_and_keeps_the_router(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch)
    fleet, certified = RouterPlays(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T160000Z-roll")
    assert summary.exit_code == 0, summary.messages
    assert roll_state.read(root, "acme").batches == [["gpu01"], ["gpu02"], ["gpu03"]]
    assert not any(ROUTER_HOST in hosts for what, hosts in fleet.log if what != "router")
    assert len(fleet.router_vars) == 6  # drained and returned, each node
    for run_vars in fleet.router_vars:
        routed = run_vars["gridready_serve_router"]
        assert (routed["hosts"], routed["host"], routed["bind"]) == ([ROUTER_HOST], ROUTER_HOST, ROUTER_IP)
        assert routed["url"] == f"http://{ROUTER_IP}:4000"
        assert routed["firewall"] == {"api_ports": [4000], "routed_ports": []}  # the router host's own
        serve_vars = run_vars["gridready_serve"]
        assert serve_vars["router_clients"] == [f"{ROUTER_IP}/32"]
        assert ROUTER_HOST not in serve_vars["hosts"]
        for node in NODES:  # the tier port admits the router host only; no node opens the router's port
            assert serve_vars["hosts"][node]["routed_ports"] == [8000]
            assert 4000 not in serve_vars["hosts"][node]["api_ports"]


def test_the_serving_head_that_holds_the_router_rolls_last(make_inv, monkeypatch):
    inv, root = _served(make_inv, monkeypatch, router_host=False)
    fleet, certified = RouterPlays(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T170000Z-roll")
    assert summary.exit_code == 0, summary.messages
    assert roll_state.read(root, "acme").batches == [["gpu02"], ["gpu03"], ["gpu01"]]
    assert [h for what, h in fleet.log if what == "reboot.yml"] == [("gpu02",), ("gpu03",), ("gpu01",)]
    assert all(v["gridready_serve_router"]["host"] == "gpu01" for v in fleet.router_vars)  # it never moves


def test_a_replica_over_two_nodes_rolls_as_one_batch(make_inv, monkeypatch):
    tier = vllm_tier(name="chat", tensor_parallel=8, pipeline_parallel=2, replicas=2)
    inv, root = _served(make_inv, monkeypatch, nodes=4, tier=tier)
    fleet, certified = Fleet(), []
    summary = _roll(inv, root, _hooks(fleet, certified, monkeypatch), "20261206T180000Z-roll")  # --batch 1
    assert summary.exit_code == 0, summary.messages
    assert roll_state.read(root, "acme").batches == [["gpu01", "gpu02"], ["gpu03", "gpu04"]]
    assert [h for what, h in fleet.log if what == "reboot.yml"] == [("gpu01", "gpu02"), ("gpu03", "gpu04")]
    # one replica out at a time: the router always holds the other
    assert [len(up) for up in fleet.router_upstreams] == [1, 2, 1, 2]


def _with_router_hosts(make_inv, hosts: list[str], target: str = "hosts", tier_routers: bool = False):
    inv = make_inv(3, [TIER], target)
    path = inv.path / "hosts.yml"
    doc = yaml.safe_load(path.read_text())
    doc["all"]["children"]["routers"] = {"hosts": {"lb01": {"ansible_host": ROUTER_IP},
                                                   "lb02": {"ansible_host": "10.77.0.51"}}}
    path.write_text(yaml.safe_dump(doc))
    extra = {"tier_routers": {"enabled": True}} if tier_routers else {}
    return with_router(inv, hosts=hosts, **extra)


@pytest.mark.parametrize(("hosts", "target", "tier_routers", "line"), [
    (["lb09"], "hosts", False, "cluster.yml: serving.router.hosts[0]: host 'lb09' is not in "),
    (["lb01", "gpu02"], "hosts", False,
     "cluster.yml: serving.router.hosts[1]: host 'gpu02' is in node group 'gpu_nodes': a router host serves no "
     "GPU work"),
    (["lb01"], "kubernetes", False, "cluster.yml: serving.router.hosts: only for serving.target hosts"),
    (["lb01", "lb01"], "hosts", False, "cluster.yml: serving.router.hosts: 'lb01' named twice"),
    (["lb01", "lb02"], "hosts", True, "cluster.yml: serving.router: hosts: one router host only with "
                                      "tier_routers enabled"),
])
def test_a_bad_router_host_is_one_line_naming_the_key(make_inv, hosts, target, tier_routers, line):
    with pytest.raises(InvalidInput) as err:
        _with_router_hosts(make_inv, hosts, target, tier_routers)
    assert any(line in got for got in err.value.lines), err.value.lines
    assert err.value.code == 2 and len(err.value.lines) == 1


def test_two_router_hosts_each_bind_their_own_address(make_inv, monkeypatch):
    monkeypatch.setenv("GRIDREADY_SERVE_SKIP_BENCH", "1")
    inv = _with_router_hosts(make_inv, ["lb01", "lb02"])
    path, _ = certification(inv, NODES)
    root = path.parents[3]
    captured: dict[str, Any] = {}
    monkeypatch.setattr(serve_deploy.ansible, "run_playbook", _fake_playbook(captured))
    assert serve.run(inv, RunContext(customer="acme", run_id="20261206T190000Z-serv", root=root)).exit_code == 0
    run_vars = captured["extravars"]
    routed = run_vars["gridready_serve_router"]
    assert routed["hosts"] == ["lb01", "lb02"] and routed["binds"] == {"lb01": ROUTER_IP, "lb02": "10.77.0.51"}
    assert sorted(run_vars["gridready_serve"]["router_clients"]) == [f"{ROUTER_IP}/32", "10.77.0.51/32"]
