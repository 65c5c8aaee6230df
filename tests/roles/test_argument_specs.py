"""Every provision role declares its interface: meta/argument_specs.yml options match defaults/main.yml exactly
(names, defaults, types), and every public variable carries the role prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"
ROLES = ["gridready_preflight", "gridready_nvidia_driver", "gridready_fabricmanager", "gridready_dcgm",
         "gridready_nccl", "gridready_rdma", "gridready_container_engine", "gridready_container_toolkit",
         "gridready_host_tuning", "gridready_probe_runtime"]
OS_ROLES = [r for r in ROLES if r != "gridready_probe_runtime"]  # the probe runtime is pip only, the same everywhere
TYPES = {"str": str, "path": str, "bool": bool, "int": int, "float": float, "list": list, "dict": dict}
ANATOMY = ["defaults/main.yml", "tasks/main.yml", "handlers/main.yml", "meta/main.yml", "meta/argument_specs.yml",
           "vars/Debian-12.yml", "vars/Ubuntu-22.yml", "vars/Ubuntu-24.yml"]


def _load(role: str, rel: str):
    return yaml.safe_load((ROLES_DIR / role / rel).read_text())


@pytest.mark.parametrize("role", OS_ROLES)
def test_role_has_the_standard_anatomy(role):
    missing = [rel for rel in ANATOMY if not (ROLES_DIR / role / rel).is_file()]
    assert not missing
    assert any((ROLES_DIR / role / "templates").iterdir())
    assert _load(role, "meta/main.yml")["galaxy_info"]["role_name"] == role


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    defaults = _load(role, "defaults/main.yml") or {}
    options = _load(role, "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(options) == set(defaults), {"only in specs": set(options) - set(defaults),
                                           "only in defaults": set(defaults) - set(options)}
    for name, opt in options.items():
        assert opt.get("default") == defaults[name], name
        assert isinstance(defaults[name], TYPES[opt["type"]]), f"{name}: {opt['type']}"
        assert opt.get("description"), name
        if "choices" in opt:
            assert defaults[name] in opt["choices"], name


@pytest.mark.parametrize("role", ROLES)
def test_public_variables_carry_the_role_prefix(role):
    prefix = role + "_"
    assert all(name.startswith(prefix) for name in _load(role, "defaults/main.yml") or {})
    internal = {}
    for path in (ROLES_DIR / role / "vars").glob("*.yml"):
        internal.update(yaml.safe_load(path.read_text()) or {})
    assert all(name.startswith("__" + prefix) for name in internal), sorted(internal)
