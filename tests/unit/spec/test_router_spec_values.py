"""serving.router at the value level: the CPython per OS the router's lock is made for, and each model rule of a
route, a key list and the router hosts with the exact one-line error an operator reads."""

from __future__ import annotations

import pytest

from gridready.spec.router import ROUTER_PYTHON, Route, RouterSpec, router_python
from tests.unit.spec.spec_lines import lines


@pytest.mark.parametrize(("os_name", "want"), [
    ("ubuntu-22.04", "3.10"), ("ubuntu-24.04", "3.12"), ("debian-12", "3.11"), ("debian-13", "3.13"),
    ("rhel-9", None), ("", None),
])
def test_router_python_is_major_minor(os_name, want):
    assert router_python(os_name) == want


def test_router_python_drops_only_the_patch_release():
    for os_name, full in ROUTER_PYTHON.items():
        major, minor, _patch = full.split(".")
        assert router_python(os_name) == f"{major}.{minor}"


def route(*targets: tuple[str, int], fallback: list[str] | None = None) -> dict[str, object]:
    return {"model": "llama", "targets": [{"tier": t, "weight": w} for t, w in targets],
            "fallback": fallback or []}


@pytest.mark.parametrize(("data", "want"), [
    (route(("a1", 1)), []),
    (route(("a1", 0), ("b1", 1)), []),           # one weighted target is enough (a canary beside it)
    (route(("a1", 1), ("b1", 0)), []),
    (route(("a1", 0)), ["cluster.yml: (top level): at least one target needs a weight above 0"]),
    (route(("a1", 0), ("b1", 0)), ["cluster.yml: (top level): at least one target needs a weight above 0"]),
    (route(("a1", 1), ("a1", 2)), ["cluster.yml: (top level): a tier appears twice in targets"]),
    (route(("a1", 1), ("b1", 1), ("a1", 1)), ["cluster.yml: (top level): a tier appears twice in targets"]),
    (route(("a1", 1), fallback=["b1"]), []),
    (route(("a1", 1), ("b1", 1), fallback=["c1", "b1"]),
     ["cluster.yml: (top level): a fallback tier is also a target"]),
])
def test_route_rules(data, want):
    assert lines(Route, data) == want


KEY = {"name": "team-a", "vault_var": "vault_router_a"}


@pytest.mark.parametrize(("data", "want"), [
    ({}, []),
    ({"enabled": True, "keys": [KEY]}, []),
    ({"enabled": False, "keys": []}, []),
    ({"enabled": True}, ["cluster.yml: (top level): an enabled router needs at least one entry in keys"]),
    ({"hosts": ["r1", "r2"]}, []),
    ({"hosts": ["r1"], "tier_routers": {"enabled": True}}, []),
    ({"hosts": ["r1", "r2"], "tier_routers": {"enabled": True}},
     ["cluster.yml: (top level): hosts: one router host only with tier_routers enabled (the controller drains "
      "each tier router through its own API, and there is one per tier)"]),
    ({"hosts": ["r1", "r2", "r1", "r3", "r2"]}, ["cluster.yml: hosts: 'r1', 'r2' named twice"]),
    ({"hosts": ["r2", "r2"]}, ["cluster.yml: hosts: 'r2' named twice"]),
    ({"routes": [route(("a1", 1)), {**route(("b1", 1)), "model": "other"}]}, []),
    ({"routes": [route(("a1", 1)), route(("b1", 1))]}, ["cluster.yml: (top level): two routes have the same model"]),
])
def test_router_spec_rules(data, want):
    assert lines(RouterSpec, data) == want


@pytest.mark.parametrize(("key", "ok", "bad"), [
    ("port", 1024, 1023), ("port", 65535, 65536), ("num_retries", 5, 6), ("num_retries", 0, -1),
])
def test_router_bounds(key, ok, bad):
    assert lines(RouterSpec, {key: ok}) == []
    assert len(lines(RouterSpec, {key: bad})) == 1
