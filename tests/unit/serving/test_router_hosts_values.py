"""`gridready_serve_router` on hosts to the value: where the router runs, which tiers are routable and on which
health path, one upstream per replica, the ports each head opens to the router, the tier routers' ports and
binds, and the whole play variable over a mix of vLLM, SGLang and Triton tiers.

Plans are stand-ins with the fields these functions read of gridready.serving.topology.TierPlan (tier.name,
engine, port, served_name, triton settings; replicas[].head)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gridready.serving import router, router_hosts
from gridready.serving.router import Upstream
from gridready.serving.tier_router import TierRouter
from gridready.spec.router import RouterSpec

IPS = {"gpu01": "10.0.0.1", "gpu02": "10.0.0.2", "gpu03": "10.0.0.3", "gpu04": "10.0.0.4"}
CERTIFIED = {h: SimpleNamespace(ip=ip) for h, ip in IPS.items()}
KEYS = [{"name": "ci", "vault_var": "vault_router_key_ci"}]


def tier(name: str, engine: str = "vllm", port: int = 8000, frontend: str | None = None,
         openai_frontend: bool = True, triton: bool = True) -> SimpleNamespace:
    settings = None
    if engine == "triton-trtllm" and triton:
        settings = SimpleNamespace(frontend=frontend, openai_frontend=openai_frontend)
    return SimpleNamespace(name=name, engine=engine, port=port, served_name=f"{name}-model", triton=settings)


def plan(t: SimpleNamespace, *heads: str) -> SimpleNamespace:
    return SimpleNamespace(tier=t, replicas=tuple(SimpleNamespace(head=h) for h in heads))


@pytest.mark.parametrize("t, routable, health", [
    (tier("v1", "vllm"), True, "/health"),
    (tier("s1", "sglang"), True, "/health"),
    (tier("t1", "triton-trtllm"), True, "/health/ready"),  # Triton's OpenAI frontend, on by default
    (tier("t2", "triton-trtllm", openai_frontend=False), False, "/health/ready"),  # KServe v2 only
    (tier("t3", "triton-trtllm", frontend="trtllm-serve", openai_frontend=False), True, "/health"),
    (tier("t4", "triton-trtllm", frontend="triton", openai_frontend=True), True, "/health/ready"),
    (tier("t5", "triton-trtllm", triton=False), True, "/health/ready"),  # no settings: Triton's defaults
    (tier("t6", "triton-trtllm", frontend="", openai_frontend=False), False, "/health/ready"),
    (tier("t7", "triton-trtllm", frontend="", openai_frontend=True), True, "/health/ready"),
    (tier("e1", "embedding"), False, "/health"),
])
def test_which_tiers_are_routable_and_their_health_path(t, routable, health):
    assert router_hosts.openai_compatible(t) is routable
    assert router_hosts.health_path(t) == health


def test_placement_on_the_named_hosts_else_the_serving_head():
    plans = [plan(tier("aa"), "gpu03", "gpu01"), plan(tier("bb"), "gpu02")]
    assert router_hosts.placement(RouterSpec(), plans, CERTIFIED) == {"gpu03": "10.0.0.3"}
    spec = RouterSpec(hosts=["edge2", "edge1"])
    assert router_hosts.placement(spec, plans, CERTIFIED, {"edge1": "192.0.2.1", "edge2": "192.0.2.2",
                                                           "other": "x"}) == {"edge2": "192.0.2.2",
                                                                              "edge1": "192.0.2.1"}
    with pytest.raises(KeyError):  # a router host whose address was not declared
        router_hosts.placement(spec, plans, CERTIFIED)


def test_upstreams_one_per_replica_with_the_tier_key_where_it_has_one():
    plans = [plan(tier("aa", port=8000), "gpu01", "gpu02"),
             plan(tier("tt", "triton-trtllm", port=9000), "gpu03"),
             plan(tier("kk", "triton-trtllm", port=9100, openai_frontend=False), "gpu04")]
    plans.insert(0, plans.pop())  # a tier that is not routed, first: skipped, the rest still read
    got = router_hosts.upstreams(plans, CERTIFIED, {"aa", "kk"})
    assert got == {
        "aa": [Upstream("aa", "http://10.0.0.1:8000/v1", "aa-model", "GRIDREADY_TIER_AA_API_KEY", "/health"),
               Upstream("aa", "http://10.0.0.2:8000/v1", "aa-model", "GRIDREADY_TIER_AA_API_KEY", "/health")],
        "tt": [Upstream("tt", "http://10.0.0.3:9000/v1", "tt-model", None, "/health/ready")],
    }


def test_upstream_ports_per_head_sorted():
    plans = [plan(tier("aa", port=8001), "gpu02", "gpu01"), plan(tier("bb", port=8000), "gpu02"),
             plan(tier("kk", "triton-trtllm", port=9100, openai_frontend=False), "gpu01"),
             plan(tier("cc", port=8001), "gpu02")]
    got = router_hosts.upstream_ports(plans)
    assert got == {"gpu01": [8001], "gpu02": [8000, 8001]}
    assert list(got) == ["gpu01", "gpu02"]


def _on(**kw: Any) -> RouterSpec:
    return RouterSpec(enabled=True, keys=KEYS, **kw)


def test_tier_routers_one_per_routable_tier_on_consecutive_ports():
    spec = _on(num_retries=3, tier_routers={"enabled": True, "port": 4200, "policy": "round_robin",
                                            "health_check_interval_s": 9})
    plans = [plan(tier("aa", port=8000), "gpu01", "gpu02"),
             plan(tier("kk", "triton-trtllm", port=9100, openai_frontend=False), "gpu03"),
             plan(tier("ee", port=8002)),  # no replica: no tier router, and no port taken
             plan(tier("bb", "sglang", port=8001), "gpu04")]
    got = router_hosts.tier_routers(spec, plans, CERTIFIED)
    assert got == [
        TierRouter("aa", "10.0.0.1", 4200, ("http://10.0.0.1:8000", "http://10.0.0.2:8000"), "round_robin", 9, 3),
        TierRouter("bb", "10.0.0.1", 4201, ("http://10.0.0.4:8001",), "round_robin", 9, 3),
    ]
    placed = router_hosts.tier_routers(spec, plans, CERTIFIED, {"edge": "192.0.2.9"})
    assert [t.bind for t in placed] == ["192.0.2.9", "192.0.2.9"]


@pytest.mark.parametrize("spec", [
    RouterSpec(tier_routers={"enabled": True}),  # the router off
    RouterSpec(enabled=True, keys=KEYS),  # tier routers off
])
def test_no_tier_routers_unless_both_are_on(spec):
    assert router_hosts.tier_routers(spec, [plan(tier("aa"), "gpu01")], CERTIFIED) == []


def test_no_tier_routers_without_plans():
    assert router_hosts.tier_routers(_on(tier_routers={"enabled": True}), [], CERTIFIED) == []


def test_through_tier_routers_replaces_a_tier_s_replicas_by_its_router():
    ups = {"aa": [Upstream("aa", "http://10.0.0.1:8000/v1", "aa-model", "K", "/health/ready"),
                  Upstream("aa", "http://10.0.0.2:8000/v1", "aa-model", "K", "/health/ready")],
           "bb": [Upstream("bb", "http://10.0.0.3:8001/v1", "bb-model", None, "/health")]}
    routers = [TierRouter("aa", "10.0.0.9", 4100, ("w",))]
    assert router_hosts.through_tier_routers(ups, routers) == {
        "aa": [Upstream("aa", "http://10.0.0.9:4100/v1", "aa-model", "K", "/health")], "bb": ups["bb"]}
    assert router_hosts.tier_router_vars(routers) == [{
        "tier": "aa", "port": 4100, "url": "http://10.0.0.9:4100", "workers": ["w"],
        "argv": ["vllm-router", "--host", "10.0.0.9", "--port", "4100", "--worker-urls", "w", "--policy",
                 "cache_aware", "--health-check-interval-secs", "5", "--retry-max-retries", "1", "--log-level",
                 "warning"]}]


def test_routes_default_to_one_per_served_name():
    plans = [plan(tier("aa"), "gpu01"), plan(tier("bb"), "gpu02")]
    got = router_hosts.routes_for(RouterSpec(), plans)
    assert [(r.model, [t.tier for t in r.targets]) for r in got] == [("aa-model", ["aa"]), ("bb-model", ["bb"])]
    spec = RouterSpec(routes=[{"model": "x", "targets": [{"tier": "bb"}]}])
    assert router_hosts.routes_for(spec, plans) == spec.routes


def test_the_router_play_variable_whole_on_the_serving_head():
    spec = _on(port=4500)
    plans = [plan(tier("aa", port=8000), "gpu02", "gpu01"),
             plan(tier("kk", "triton-trtllm", port=9100, openai_frontend=False), "gpu03")]
    got = router_hosts.router_extravars(spec, plans, CERTIFIED, {"aa"})["gridready_serve_router"]
    ups = router_hosts.upstreams(plans, CERTIFIED, {"aa"})
    routes = router_hosts.routes_for(spec, plans[:1])
    assert got == {
        "host": "gpu02", "hosts": ["gpu02"], "binds": {"gpu02": "10.0.0.2"}, "dedicated": False,
        "bind": "10.0.0.2", "port": 4500,
        "proxy": "litellm", "models": ["aa-model"], "live_path": "/health/liveliness",
        "config": router.litellm_config(spec, routes, ups),
        "tier_routers": [],
        "keys": [{"name": "ci", "vault_var": "vault_router_key_ci", "rpm_limit": None, "tpm_limit": None}],
        "tier_key_envs": ["GRIDREADY_TIER_AA_API_KEY"],
        "url": "http://10.0.0.2:4500",
        "upstream_ports": {"gpu01": [8000], "gpu02": [8000]},
    }


def test_the_router_play_variable_on_dedicated_hosts_through_tier_routers():
    spec = _on(hosts=["edge1"], tier_routers={"enabled": True, "port": 4300},
               routes=[{"model": "m", "targets": [{"tier": "aa"}, {"tier": "bb"}]}])
    plans = [plan(tier("aa", port=8000), "gpu01"), plan(tier("bb", "sglang", port=8001), "gpu02", "gpu03")]
    got = router_hosts.router_extravars(spec, plans, CERTIFIED, set(), placed={"edge1": "192.0.2.1"})
    var = got["gridready_serve_router"]
    assert (var["host"], var["hosts"], var["binds"], var["dedicated"], var["bind"], var["url"]) == (
        "edge1", ["edge1"], {"edge1": "192.0.2.1"}, True, "192.0.2.1", "http://192.0.2.1:4000")
    assert [(t["tier"], t["port"], t["url"]) for t in var["tier_routers"]] == [
        ("aa", 4300, "http://192.0.2.1:4300"), ("bb", 4301, "http://192.0.2.1:4301")]
    bases = [d["litellm_params"]["api_base"] for d in var["config"]["model_list"]]
    assert bases == ["http://192.0.2.1:4300/v1", "http://192.0.2.1:4301/v1"]
    assert var["models"] == ["m"] and var["tier_key_envs"] == []
    assert var["upstream_ports"] == {"gpu01": [8000], "gpu02": [8001], "gpu03": [8001]}


def test_explicit_routes_are_taken_as_given():
    spec = _on()
    plans = [plan(tier("aa"), "gpu01")]
    routes = router_hosts.routes_for(_on(routes=[{"model": "zz", "targets": [{"tier": "aa"}]}]), plans)
    var = router_hosts.router_extravars(spec, plans, CERTIFIED, set(), routes=routes)["gridready_serve_router"]
    assert var["models"] == ["zz"]
    assert router_hosts.router_extravars(spec, plans, CERTIFIED, set(), routes=[])["gridready_serve_router"][
        "models"] == []


def test_nothing_when_the_router_is_off_or_nothing_is_planned():
    assert router_hosts.router_extravars(RouterSpec(), [plan(tier("aa"), "gpu01")], CERTIFIED, set()) == {}
    assert router_hosts.router_extravars(_on(), [], CERTIFIED, set()) == {}


def test_haproxy_variables_carry_its_files_and_no_litellm_config():
    spec = _on(proxy="haproxy")
    plans = [plan(tier("aa"), "gpu01")]
    ups = router_hosts.upstreams(plans, CERTIFIED, set())
    routes = router_hosts.routes_for(spec, plans)
    got = router_hosts.proxy_vars(spec, routes, ups, "10.0.0.1")
    files = router_hosts.router_haproxy.render(spec, routes, ups, bind="10.0.0.1", port=4000,
                                               directory="/etc/gridready/router")
    assert got == {"proxy": "haproxy", "models": ["aa-model"], "live_path": "/health/liveliness", "config": {},
                   "haproxy": {"config": files.config, "models_map": files.models_map,
                               "models_json": files.models_json}}
    assert "/etc/gridready/router/" in files.config


def test_haproxy_through_the_play_variable_listens_on_the_router_s_bind():
    spec = _on(proxy="haproxy")
    plans = [plan(tier("aa"), "gpu02")]
    var = router_hosts.router_extravars(spec, plans, CERTIFIED, set())["gridready_serve_router"]
    files = router_hosts.router_haproxy.render(spec, router_hosts.routes_for(spec, plans),
                                               router_hosts.upstreams(plans, CERTIFIED, set()), bind="10.0.0.2",
                                               port=4000, directory="/etc/gridready/router")
    assert var["haproxy"]["config"] == files.config and "10.0.0.2:4000" in files.config
