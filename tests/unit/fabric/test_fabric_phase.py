"""run_fabric_phase end to end against the in-process fake fabric (tests/unit/fabric/fakefabric.py)."""

from __future__ import annotations

import json

import yaml

from gridready.certify.fabric import FabricResult
from gridready.spec.fabric import FabricSettings
from gridready.stages.fabric import run_fabric_phase

from .fakefabric import FakeFabric, hosts_in, make_inventory


def _run(n, faults, tmp_path, **settings):
    inv = make_inventory(n)
    fab = FakeFabric(inv, faults)
    res = run_fabric_phase(inv, None, list(inv.hosts), fab, out_dir=tmp_path,
                           settings=FabricSettings(**settings) if settings else None)
    return inv, fab, res


def test_healthy_six_hosts_all_certified(tmp_path):
    _, fab, r = _run(6, {}, tmp_path)
    assert r.status == "pass" and r.quarantined == {} and len(r.certified) == 6
    assert r.pairwise_run_count == 3 and r.floor_gbps == 340.0 and r.nic_gbytes == 400.0
    s = r.set_runs[0]
    assert s.status == "pass" and len(s.hosts) == 6 and s.transport == "NET/IB/GDRDMA" and s.pct_of_nic > 92
    assert s.curve and max(s.curve.values()) == s.busbw_gbps
    assert all(any(g.gate == "nccl_multinode_all_reduce" for g in r.node_results[n]) for n in r.nodes)
    assert {p.name for p in (tmp_path / "fabric").glob("*.png")} == {"fabric-pairs.png", "fabric-set.png"}, r.reason
    saved = FabricResult.model_validate_json((tmp_path / "fabric" / "fabric.json").read_text())
    assert saved.pairwise_run_count == 3
    env = fab.mpiruns[0]
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1" in env
    assert "NCCL_SOCKET_IFNAME=eth0" in env and "NCCL_DEBUG=INFO" in env


def test_half_rate_hca_is_named_by_its_port_and_kept_out_of_the_runs(tmp_path):
    _, fab, r = _run(6, {"gpu03": "half_rate"}, tmp_path)
    assert list(r.quarantined) == ["gpu03"] and "mlx5_1 port 1 rate 200" in r.quarantined["gpu03"]
    assert sorted(r.certified) == ["gpu01", "gpu02", "gpu04", "gpu05", "gpu06"]
    assert all("10.77.0.12" not in hosts_in(a) for a in fab.mpiruns)  # gpu03 = 10.77.0.12
    assert r.pairwise_run_count == 3 and r.status == "fail"  # 5 nodes: 2 pairs + the leftover vs a good one


def test_slow_node_with_healthy_ports_is_found_by_isolation(tmp_path):
    _, _, r = _run(12, {"gpu07": "slow"}, tmp_path)
    assert list(r.quarantined) == ["gpu07"] and "failed pairwise all-reduce with 2 partners" in r.quarantined["gpu07"]
    assert r.pairwise_run_count == 12 // 2 + 2 and r.isolation_rounds == 2
    assert len(r.certified) == 11 and r.set_runs[0].status == "pass" and "gpu07" not in r.set_runs[0].hosts
    gate = next(g for g in r.node_results["gpu07"] if g.gate == "fabric_isolation")
    assert gate.status == "fail" and gate.expected.floor == 250.0  # pairs: 62.5% of 400 (GCP's 250)
    partner = next(g for g in r.node_results["gpu08"] if g.gate == "fabric_isolation")
    assert partner.status == "pass"


def test_two_faults_without_the_hca_prefilter(tmp_path):
    _, _, r = _run(6, {"gpu02": "half_rate", "gpu05": "slow"}, tmp_path, exclude_hca_failures=False)
    assert sorted(r.quarantined) == ["gpu02", "gpu05"] and r.pairwise_run_count == 7
    assert sorted(r.certified) == ["gpu01", "gpu03", "gpu04", "gpu06"]


def test_socket_fallback_fails_the_pair(tmp_path):
    _, _, r = _run(6, {"gpu04": "socket"}, tmp_path)
    assert list(r.quarantined) == ["gpu04"]
    bad = [p for p in r.pair_runs if "gpu04" in p.hosts]
    assert all(p.status == "fail" and p.transport == "NET/Socket" for p in bad)


def test_counter_growth_over_the_fabric_runs(tmp_path):
    _, _, r = _run(4, {"gpu02": "flapping"}, tmp_path)
    bad = [g for g in r.node_results["gpu02"] if g.gate == "hca_counters" and g.status == "fail"]
    assert len(bad) == 8 and "symbol_error +" in bad[0].reason
    assert "gpu02" not in r.certified and "gpu02" not in r.quarantined  # counted, but not a pairwise failure


def test_one_node_and_disabled(tmp_path):
    inv = make_inventory(1)
    r = run_fabric_phase(inv, None, ["gpu01"], FakeFabric(inv), out_dir=tmp_path)
    assert r.status == "skipped" and r.certified == ["gpu01"] and r.pairwise_run_count == 0
    g = [g for g in r.node_results["gpu01"] if g.gate == "nccl_multinode_all_reduce"]
    assert g[0].status == "skipped" and not g[0].blocks_certification
    off = run_fabric_phase(inv, None, ["gpu01"], FakeFabric(inv), settings=FabricSettings(enabled=False))
    assert off.status == "skipped" and off.certified == ["gpu01"]


def test_result_is_json_serialisable(tmp_path):
    _, _, r = _run(4, {"gpu01": "slow"}, tmp_path)
    data = json.loads(r.model_dump_json())
    assert data["quarantined"].keys() == {"gpu01"} and data["pair_runs"][0]["curve"]


def test_torchrun_fallback_finds_the_slow_node(tmp_path):
    _, fab, r = _run(6, {"gpu05": "slow"}, tmp_path, launcher="torchrun")
    assert list(r.quarantined) == ["gpu05"] and r.pairwise_run_count == 5
    assert r.set_runs[0].status == "pass" and r.set_runs[0].transport == "NET/IB/GDRDMA"
    assert "torchrun" in r.set_runs[0].command and not fab.mpiruns


def test_probe_data_without_gdr_gets_bandwidth_measured(tmp_path):
    inv = make_inventory(4)
    fab = FakeFabric(inv, {"gpu02": "half_rate"})
    probe = {h: {k: v for k, v in fab._hca(h).items() if k != "ib_write_bw"} for h in inv.hosts}
    calls: list[str] = []
    real = fab.run

    def spy(host, argv, timeout):
        if "python3" in argv:
            calls.append(argv[argv.index("-c") + 2])
        return real(host, argv, timeout)

    fab.run = spy  # type: ignore[method-assign]
    r = run_fabric_phase(inv, None, list(inv.hosts), fab, probe_hca=probe)
    assert calls.count("gdr") == 4 and "collect" not in calls
    gdr = [g for g in r.node_results["gpu02"] if g.gate == "hca_gdr_bw" and g.status == "fail"]
    assert [g.hca for g in gdr] == ["mlx5_1"]


def test_hostvars_are_ansibles_own_layering(tmp_path):
    """The fabric phase reaches hosts with the variables ansible-inventory computes (group_vars/all, hosts.yml
    all.vars, group_vars/<group>, host), not a re-implementation of Ansible's precedence."""
    from gridready import ansible
    from gridready.stages.fabric import SshRunner, _probe_cmd

    inv = make_inventory(2)
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "group_vars" / "all" / "sim.yml").write_text("gridready_rdma_sysfs_root: /var/lib/sim\n")
    (tmp_path / "group_vars" / "h200.yml").write_text("ansible_user: ops\nansible_port: 2200\n")
    hosts = {h: {"ansible_host": v["ansible_host"]} for h, v in inv.hosts.items()}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_port": 2222, "ansible_host_key_checking": False},
        "children": {"h200": {"hosts": hosts}}}}))
    inv.path = tmp_path
    hv = ansible.hostvars(inv)
    assert {k: hv["gpu01"][k] for k in ("gridready_rdma_sysfs_root", "ansible_user", "ansible_port", "ansible_host")} \
        == {"gridready_rdma_sysfs_root": "/var/lib/sim", "ansible_user": "ops", "ansible_port": 2200,
            "ansible_host": "10.77.0.10"}
    assert _probe_cmd(hv, "gpu01", "snapshot")[:2] == ["env", "GRIDREADY_SYSFS_ROOT=/var/lib/sim"]
    argv = SshRunner(hv).ssh_argv("gpu01")
    assert argv[-2:] == ["--", "ops@10.77.0.10"] and "StrictHostKeyChecking=no" in argv
    checked = SshRunner({"gpu01": {**hv["gpu01"], "ansible_host_key_checking": True}}).ssh_argv("gpu01")
    assert not any("StrictHostKeyChecking" in a or "known_hosts" in a.lower() for a in checked)


def test_a_local_connection_runs_without_ssh():
    """The lent H200 run (docs/examples/h200x1/issue28): inventory `local` sets `ansible_connection: local` and the
    machine has no ssh client; the fabric phase called `ssh -- localhost` and certify ended in FileNotFoundError."""
    from gridready.stages.fabric import SshRunner

    runner = SshRunner({"h200": {"ansible_connection": "local", "ansible_host": "localhost"},
                        "gpu01": {"ansible_host": "10.0.0.1", "ansible_connection": "ssh"}})
    assert runner.command("h200", ["echo", "a b"]) == ["sh", "-c", "echo 'a b'"]
    assert runner.command("gpu01", ["true"])[0] == "ssh"
    done = runner.run("h200", ["sh", "-c", "echo $0 ran here", "probe"], timeout=10)
    assert (done.rc, done.stdout.strip()) == (0, "probe ran here")
    assert SshRunner({"h": {"ansible_connection": "ansible.builtin.local"}}).is_local("h")


def test_the_phase_says_each_run_as_it_ends(tmp_path):
    """The fabric phase runs for minutes: each step is said as it ends, every collective run with its result,
    bandwidth and floor, and the phase ends with its summary."""
    said: list[str] = []
    inv = make_inventory(4)
    r = run_fabric_phase(inv, None, list(inv.hosts), FakeFabric(inv, {"gpu03": "slow"}), out_dir=tmp_path,
                         progress=said.append)
    pairs = [ln for ln in said if ln.startswith("pair all_reduce on ")]
    assert len(pairs) == r.pairwise_run_count >= 2
    for rec in r.pair_runs:
        line = next(ln for ln in pairs if ln.startswith(f"pair all_reduce on {' + '.join(rec.hosts)}: "))
        assert f"{rec.status.value} ({rec.busbw_gbps:g} GB/s, floor {rec.floor_gbps:g} GB/s)" in line
    assert said[0] == "4 node(s): HCA state, counters and GPUDirect RDMA bandwidth"
    assert said[1] == "HCA gates: 4/4 node(s) pass"
    assert any(ln.startswith("set all_reduce on 3 nodes: pass") for ln in said) and said[-1] == r.reason
