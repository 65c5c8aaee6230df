"""The serving firewall survives a reboot and fails closed (issue #29, finding 11).

The nftables table used to be loaded by a handler only, and nftables.service is disabled on Debian 12, while the
Ray units are enabled: after a reboot Ray's GCS, its dashboard (job submission) and the API ports were open.
Now gridready-firewall.service loads the rules on every boot before the network and before Ray and the engines,
and every Ray and engine unit requires it.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest
import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"
ROLE = ROLES / "gridready_ray_node"
FW = "gridready-firewall.service"


def _unit(text: str) -> dict[tuple[str, str], list[str]]:
    """systemd unit text -> {(section, key): [values, in order, space-split]}."""
    out: dict[tuple[str, str], list[str]] = {}
    section = ""
    for raw in text.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        words = value.split() if key in {"Before", "After", "Requires", "Wants", "WantedBy", "BindsTo"} else [value]
        out.setdefault((section, key), []).extend(words)
    return out


def _render(role: Path, name: str, **over: object) -> dict[tuple[str, str], list[str]]:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(role / "templates"), undefined=jinja2.ChainableUndefined)
    env.filters["quote"] = lambda s: s
    ray_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    values = {
        "ansible_managed": "managed",
        "__gridready_ray_node_fw_tool": "nftables",
        "__gridready_ray_node_nft_file": ray_vars["__gridready_ray_node_nft_file"],
        "__gridready_ray_node_fw_unit": ray_vars["__gridready_ray_node_fw_unit"],
        "__gridready_ray_node_env_file": "/etc/gridready/ray.env",
        "__gridready_ray_node_libexec": "/usr/local/libexec/gridready",
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        "gridready_ray_node_head_address": "10.0.0.1:6379",
        **over,
    }
    return _unit(env.get_template(name).render(**values))


@pytest.mark.parametrize("tool", ["nftables", "ufw", "none"])
def test_the_firewall_unit_loads_at_boot_before_the_network_and_ray(tool: str) -> None:
    u = _render(ROLE, "gridready-firewall.service.j2", __gridready_ray_node_fw_tool=tool)
    assert u[("Unit", "DefaultDependencies")] == ["no"]
    assert {"network-pre.target", "ray-head.service", "ray-headwatch.service", "ray-worker.service"} <= set(
        u[("Unit", "Before")])
    assert "network-pre.target" in u[("Unit", "Wants")]
    assert u[("Service", "Type")] == ["oneshot"] and u[("Service", "RemainAfterExit")] == ["yes"]
    assert u[("Install", "WantedBy")] == ["sysinit.target"]  # enabled: pulled in on every boot
    start = u[("Service", "ExecStart")]
    if tool == "nftables":
        assert start == ["/usr/sbin/nft -f /etc/nftables.d/gridready-ray.nft"]
        assert "nftables.service" in u[("Unit", "After")]
        assert ("Unit", "Requires") not in u  # nftables.service may stay disabled (Debian 12's default)
    elif tool == "ufw":
        assert "ufw status" in start[0] and "Status: active" in start[0]
        assert u[("Unit", "Requires")] == ["ufw.service"]
    else:
        assert start == ["/bin/true"]
    assert u[("Service", "ExecReload")] == start  # a reload, not a restart: Requires= would restart Ray


@pytest.mark.parametrize("template", ["ray-head.service.j2", "ray-worker.service.j2", "ray-headwatch.service.j2"])
def test_ray_units_require_the_firewall_and_start_after_it(template: str) -> None:
    u = _render(ROLE, template)
    assert FW in u[("Unit", "Requires")]
    assert FW in u[("Unit", "After")]


def test_engine_units_require_the_firewall_and_start_after_it() -> None:
    item = {"name": "t", "served_name": "m", "ray_address": "10.0.0.1:6379", "expected_gpus": 8,
            "expected_nodes": 1, "args": [], "node_rank": 0, "nnodes": 1}
    vllm = _render(ROLES / "gridready_vllm", "vllm.service.j2", item=item, gridready_vllm_version="0",
                   gridready_vllm_user="ray", gridready_vllm_wait_script="w", gridready_vllm_venv="/v",
                   gridready_vllm_wait_timeout_s=600, __gridready_vllm_command=["vllm"])
    sglang = _render(ROLES / "gridready_sglang", "sglang.service.j2", item=item, gridready_sglang_pip_spec="s",
                     gridready_sglang_user="sglang", gridready_sglang_api_key="", __gridready_sglang_command=["s"])
    triton = _render(ROLES / "gridready_triton_trtllm", "gridready-triton.service.j2", gridready_triton_trtllm_tier="t",
                     gridready_triton_trtllm_mode="host", gridready_triton_trtllm_docker="/usr/bin/docker",
                     __gridready_triton_trtllm_container="c", __gridready_triton_trtllm_dir="/d",
                     gridready_triton_trtllm_visible_devices="all", gridready_triton_trtllm_shm_size="1g",
                     gridready_triton_trtllm_engine_cache_dir="/e", gridready_triton_trtllm_weights_dir="/w",
                     gridready_triton_trtllm_image="i")
    for u in (vllm, sglang, triton):
        assert FW in u[("Unit", "Requires")]
        assert FW in u[("Unit", "After")]


def test_the_role_enables_the_unit_and_loads_rules_without_a_handler() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "firewall.yml").read_text())
    names = [t["name"] for t in tasks]
    unit = next(t for t in tasks if t.get("ansible.builtin.template", {}).get("src") == "gridready-firewall.service.j2")
    svc = next(t for t in tasks if "ansible.builtin.systemd_service" in t)
    assert svc["ansible.builtin.systemd_service"]["enabled"] is True
    assert "reloaded" in svc["ansible.builtin.systemd_service"]["state"]
    assert "when" not in svc  # on every host of the tier, whichever tool (none: isolated network)
    # the fail of an unguarded host comes before anything that would let the engines start
    fail = next(i for i, t in enumerate(tasks) if "ansible.builtin.fail" in t)
    assert fail < names.index(unit["name"]) < names.index(svc["name"])
    assert not any("notify" in t for t in tasks)  # not a handler: loaded before Ray's handlers restart it
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    assert not any("nft" in str(h) for h in handlers)


@pytest.mark.parametrize("template", ["ray-headwatch.service.j2", "ray-worker.service.j2"])
def test_a_worker_waiting_for_its_head_never_holds_up_boot(template: str) -> None:
    """ray-headwatch waits for the head without a start timeout and ray-worker is ordered after it; with default
    dependencies multi-user.target (which wants both) is ordered after them, so a worker whose head is down never
    finished booting (systemd.target(5)). Without them the target does not wait; shutdown and sysinit kept."""
    u = _render(ROLE, template)
    assert u[("Unit", "DefaultDependencies")] == ["no"]
    assert {"sysinit.target", "basic.target"} <= set(u[("Unit", "After")])
    assert "sysinit.target" in u[("Unit", "Requires")]
    assert u[("Unit", "Conflicts")] == ["shutdown.target"] and u[("Unit", "Before")] == ["shutdown.target"]
    assert u[("Install", "WantedBy")] == ["multi-user.target"]  # still started at boot, just not waited for


def test_the_head_watch_waits_with_a_bounded_start_and_is_restarted() -> None:
    """A start job left waiting keeps the boot's job queue busy ("starting" for good); a bounded start that times
    out is restarted by Restart=always with no job queued between the tries."""
    u = _render(ROLE, "ray-headwatch.service.j2")
    assert 0 < int(u[("Service", "TimeoutStartSec")][0]) <= 90
    assert u[("Service", "Restart")] == ["always"] and u[("Unit", "StartLimitIntervalSec")] == ["0"]
