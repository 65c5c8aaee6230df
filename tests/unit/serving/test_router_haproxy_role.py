"""roles/gridready_router with proxy haproxy: the keys' map the role writes from the vault is the one the loopback
harness writes (gridready.serving.router_haproxy.keys_map), the environment file holds the tiers' key and not the
master key, and the unit reloads through a configuration check, tied to the firewall as the engines are."""

from __future__ import annotations

import subprocess
import typing
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from gridready.serving import router_haproxy
from gridready.spec.router import RouterKey, RouterSpec
from tests.unit.serving.test_firewall_boot import _render
from tests.unit.serving.test_router_haproxy import UPS, route

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_router"
KEYS = [{"name": "tight", "key": "sk-b", "rpm_limit": 2}, {"name": "ci", "key": "sk-a", "rpm_limit": None}]


@pytest.fixture(scope="module", autouse=True)
def _plugins() -> None:
    init_plugin_loader()


def _template(name: str, **variables: typing.Any) -> str:
    templar = Templar(loader=DataLoader(), variables={"ansible_managed": "managed", **variables})
    return str(templar.template(trust_as_template((ROLE / "templates" / name).read_text())))


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_roles_keys_map_is_the_harness_map_plus_the_serving_api_key() -> None:
    text = _template("keys.map.j2", gridready_router_keys=KEYS,
                     gridready_router_env={"LITELLM_MASTER_KEY": "sk-m", "GRIDREADY_TIER_X_API_KEY": "sk-t"})
    expected = router_haproxy.keys_map({k["name"]: k["key"] for k in KEYS})
    assert _lines(text)[:2] == expected.splitlines()
    assert _lines(text)[2] == router_haproxy.keys_map({"serving-api-key": "sk-m"}).strip()
    assert "sk-a" not in text and "sk-m" not in text and "sk-t" not in text


def test_the_environment_file_holds_the_tiers_key_only() -> None:
    text = _template("haproxy.env.j2", gridready_router_env={"LITELLM_MASTER_KEY": "sk-m",
                                                             "GRIDREADY_TIER_X_API_KEY": "sk-t"})
    assert _lines(text) == ["GRIDREADY_TIER_X_API_KEY=sk-t"]


def test_the_unit_reloads_through_a_check_and_is_tied_to_the_firewall() -> None:
    unit = _render(ROLE, "gridready-router-haproxy.service.j2", gridready_router_dir="/etc/r",
                   gridready_router_bind="10.0.0.1", gridready_router_port=4000,
                   gridready_router_haproxy_user="haproxy", gridready_router_haproxy_group="haproxy")
    assert unit[("Service", "Type")] == ["notify"]
    assert unit[("Service", "ExecStart")] == ["/usr/sbin/haproxy -Ws -f /etc/r/haproxy.cfg"]
    assert unit[("Service", "ExecReload")] == ["/usr/sbin/haproxy -c -q -f /etc/r/haproxy.cfg",
                                               "/bin/kill -USR2 $MAINPID"]
    assert unit[("Service", "User")] == ["haproxy"] and unit[("Service", "EnvironmentFile")] == ["/etc/r/router.env"]
    assert "gridready-firewall.service" in unit[("Unit", "Requires")]
    assert unit[("Unit", "StartLimitBurst")] == ["6"]


def test_the_config_is_checked_before_it_goes_live() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "haproxy.yml").read_text())
    names = [t["name"] for t in tasks]
    write = next(t for t in tasks if "haproxy.cfg" in str(t.get("ansible.builtin.copy", {}).get("dest", "")))
    assert write["ansible.builtin.copy"]["validate"] == "/usr/sbin/haproxy -c -q -f %s"
    assert write["notify"] == "Reload the router"
    # the files the configuration reads are written before it is checked
    assert names.index("Write the models' map and list") < names.index(write["name"])
    assert names.index("Write the client keys' SHA-256 digests (from the vault)") < names.index(write["name"])
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    reload_ = next(h for h in handlers if h["name"] == "Reload the router")
    assert reload_["ansible.builtin.systemd_service"]["state"] == "reloaded"


@pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v haproxy"], capture_output=True).returncode != 0,
                    reason="no haproxy binary on PATH (apt-get install haproxy)")
def test_the_rendered_configuration_passes_haproxys_own_check(tmp_path: Path) -> None:
    spec = RouterSpec(enabled=True, proxy="haproxy", keys=[RouterKey(name="ci", vault_var="v", rpm_limit=5)])
    files = router_haproxy.render(spec, [route(fallback=["spare"])], UPS, bind="127.0.0.1", port=4000,
                                  directory=str(tmp_path))
    (tmp_path / router_haproxy.MODELS_MAP).write_text(files.models_map)
    (tmp_path / router_haproxy.MODELS_JSON).write_text(files.models_json)
    (tmp_path / router_haproxy.KEYS_MAP).write_text(router_haproxy.keys_map({"ci": "sk-a"}))
    (tmp_path / "haproxy.cfg").write_text(files.config)
    check = subprocess.run(["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "WARNING" not in check.stdout + check.stderr
