"""Role gridready_triton_trtllm declares its interface: argument_specs match defaults key for key."""

from __future__ import annotations

from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_triton_trtllm"
TYPES = {"str": str, "bool": bool, "int": int, "list": list, "dict": dict}


def _load(rel: str):
    return yaml.safe_load((ROLE / rel).read_text())


def test_anatomy() -> None:
    for rel in ("defaults/main.yml", "tasks/main.yml", "handlers/main.yml", "meta/main.yml",
                "meta/argument_specs.yml", "templates/gridready-triton.service.j2"):
        assert (ROLE / rel).is_file(), rel
    assert _load("meta/main.yml")["galaxy_info"]["role_name"] == "gridready_triton_trtllm"


def test_argument_specs_match_defaults() -> None:
    defaults = _load("defaults/main.yml")
    options = _load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(options) == set(defaults)
    for name, opt in options.items():
        assert name.startswith("gridready_triton_trtllm_")
        assert opt["default"] == defaults[name], name
        assert isinstance(defaults[name], TYPES[opt["type"]]), name
        assert opt["description"], name
    assert all(k.startswith("__gridready_triton_trtllm_") for k in _load("vars/main.yml"))
