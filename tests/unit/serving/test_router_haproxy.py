"""gridready.serving.router_haproxy: the HAProxy configuration and files the gridready_router role writes
(`serving.router.proxy: haproxy`); the real binary runs them in tests/router/test_haproxy_router.py."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from gridready.serving import router, router_haproxy
from gridready.spec.router import HAProxySettings, Route, RouterKey, RouterSpec, RouteTarget

UPS = {
    "batch": [router.Upstream("batch", "http://10.77.0.11:8000/v1", "llama", router.tier_key_env("batch"))],
    "hot": [router.Upstream("hot", "http://10.77.0.12:8001/v1", "llama", None)],
    "spare": [router.Upstream("spare", "http://10.77.0.13:8000/v1", "llama", None)],
}
SPEC = RouterSpec(enabled=True, proxy="haproxy", keys=[RouterKey(name="ci", vault_var="v1"),
                                                       RouterKey(name="tight", vault_var="v2", rpm_limit=30)])


def route(**kw: object) -> Route:
    base = {"model": "llama", "targets": [{"tier": "batch", "weight": 3}, {"tier": "hot", "weight": 1}]}
    return Route.model_validate(base | kw)


def render(routes: list[Route], spec: RouterSpec = SPEC, ups: dict[str, list[router.Upstream]] = UPS
           ) -> router_haproxy.HAProxyFiles:
    return router_haproxy.render(spec, routes, ups, bind="10.77.0.11", port=4000, directory="/etc/gridready/router")


def servers(cfg: str) -> list[str]:
    return [ln.strip() for ln in cfg.splitlines() if ln.strip().startswith("server ")]


def test_weights_follow_the_route_and_fallbacks_are_backups() -> None:
    cfg = render([route(fallback=["spare"])]).config
    assert servers(cfg) == ["server batch-0 10.77.0.11:8000 weight 36", "server hot-0 10.77.0.12:8001 weight 12",
                            "server fallback-spare-0 10.77.0.13:8000 backup"]
    assert "    balance roundrobin" in cfg and "    option redispatch" in cfg and "    retries 1" in cfg


def test_weights_are_scaled_into_haproxys_range_keeping_the_ratio() -> None:
    canary = router.with_canary(route(), "spare", 5)  # 950 parts current, 50 the canary
    weights = {s.split()[1]: int(s.split()[-1]) for s in servers(render([canary]).config)}
    assert max(weights.values()) <= router_haproxy.MAX_WEIGHT and min(weights.values()) >= 1
    total = sum(weights.values())
    assert weights["spare-0"] / total == pytest.approx(0.05, abs=0.005)
    assert weights["batch-0"] / weights["hot-0"] == pytest.approx(3, rel=0.02)


def test_replicas_share_their_tier_weight_and_a_zero_weight_tier_gets_no_server() -> None:
    ups = dict(UPS, hot=[router.Upstream("hot", f"http://10.77.0.{i}:8001/v1", "llama") for i in (20, 21, 22)])
    r = route(targets=[{"tier": "batch", "weight": 3}, {"tier": "hot", "weight": 1}, {"tier": "spare", "weight": 0}])
    assert servers(render([r], ups=ups).config) == [
        "server batch-0 10.77.0.11:8000 weight 36", "server hot-0 10.77.0.20:8001 weight 4",
        "server hot-1 10.77.0.21:8001 weight 4", "server hot-2 10.77.0.22:8001 weight 4"]


def test_models_map_and_list_name_every_route() -> None:
    ups = dict(UPS, qwen=[router.Upstream("qwen", "http://10.77.0.14:8000/v1", "qwen-7b")])
    files = render([route(), Route(model="qwen-7b", targets=[RouteTarget(tier="qwen")])], ups=ups)
    assert files.models_map == "llama route_0\nqwen-7b route_1\n"
    assert [m["id"] for m in json.loads(files.models_json)["data"]] == ["llama", "qwen-7b"]
    assert "backend route_1  # model qwen-7b" in files.config
    assert servers(files.config)[-1] == "server qwen-0 10.77.0.14:8000 weight 12"


def test_the_upstream_gets_the_tiers_key_from_the_environment_never_the_clients() -> None:
    cfg = render([route()]).config
    assert '    http-request set-header Authorization "Bearer %[env(GRIDREADY_TIER_BATCH_API_KEY)]"' in cfg
    front = cfg.split("frontend api")[1].split("backend route_0")[0]
    assert "http-request del-header Authorization" in front  # the client's key ends at the router
    unkeyed = render([Route(model="llama", targets=[RouteTarget(tier="hot")])]).config
    assert "set-header Authorization" not in unkeyed and "    http-request del-header Authorization" in unkeyed


def test_keys_are_checked_by_digest_and_limits_rendered_per_key() -> None:
    cfg = render([route()]).config
    assert "sha2(256),hex,lower,map(/etc/gridready/router/keys.map)" in cfg
    assert re.search(r"return status 401 .*unless \{ var\(txn\.client\) -m found \}", cfg)
    limits = [ln for ln in cfg.splitlines() if "status 429" in ln]
    assert len(limits) == 1 and "{ var(txn.client) -m str tight } { sc_http_req_rate(0) gt 30 }" in limits[0]
    # every answer of its own is OpenAI's error shape
    for line in (ln for ln in cfg.splitlines() if "string '" in ln):
        body = json.loads(line.split("string '", 1)[1].split("'", 1)[0])
        assert set(body["error"]) == {"message", "type", "param", "code"}


def test_order_of_the_frontend_rules() -> None:
    """Unknown paths first, then keys before limits before anything is answered or routed; metrics only behind a
    key."""
    front = render([route()]).config.split("frontend api")[1]
    marks = ["no such route", "status 401", "track-sc0", "status 429", "prometheus-exporter", "status 413",
             "json_query", "model_not_found", "use_backend"]
    at = [front.index(m) for m in marks]
    assert at == sorted(at)


def test_the_body_limit_sets_the_buffer_and_the_413() -> None:
    spec = SPEC.model_copy(update={"haproxy": HAProxySettings(max_body_kib=256)})
    cfg = render([route()], spec=spec).config
    assert "    tune.bufsize 263168" in cfg  # 256 KiB + 1 KiB of tune.maxrewrite
    assert "gt 262144 }" in cfg
    assert "option http-buffer-request" in cfg


def test_a_route_named_unlike_its_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="tier batch serves llama; HAProxy passes the request body on unchanged"):
        render([route(model="chat")])


def test_a_tier_without_an_endpoint_is_named() -> None:
    with pytest.raises(ValueError, match="route llama: tier hot has no OpenAI-compatible endpoint"):
        render([route()], ups={"batch": UPS["batch"]})
    with pytest.raises(ValueError, match="fallback tier gone"):
        render([route(fallback=["gone"])])


def test_no_secret_and_no_request_log_in_the_config() -> None:
    cfg = render([route()]).config
    assert not re.search(r"^\s*log\s", cfg, re.M)
    assert "sk-" not in cfg


def test_keys_map_is_sha256_of_each_key() -> None:
    text = router_haproxy.keys_map({"tight": "sk-b", "ci": "sk-a"})
    assert text == (f"{hashlib.sha256(b'sk-a').hexdigest()} ci\n{hashlib.sha256(b'sk-b').hexdigest()} tight\n")


def test_health_checks_ask_the_engines_own_path() -> None:
    assert "    option httpchk GET /health\n" in render([route()]).config
    triton = {"trt": [router.Upstream("trt", "http://10.77.0.14:9000/v1", "llama", None, "/health/ready")]}
    cfg = render([Route(model="llama", targets=[RouteTarget(tier="trt")])], ups=triton).config
    assert "    option httpchk GET /health/ready\n" in cfg
    with pytest.raises(ValueError, match="different paths"):
        render([route(fallback=["trt"])], ups=UPS | triton)


def test_a_failing_server_is_marked_down_and_back_after_about_the_cooldown() -> None:
    spec = SPEC.model_copy(update={"allowed_fails": 3, "cooldown_s": 30, "health_check_interval_s": 5})
    line = next(ln for ln in render([route()], spec=spec).config.splitlines() if "default-server" in ln)
    assert line.split() == ["default-server", "check", "inter", "5s", "fastinter", "1s", "downinter", "15s",
                            "fall", "2", "rise", "2", "observe", "layer7", "error-limit", "3", "on-error",
                            "mark-down"]


def test_only_the_routers_own_routes_pass_every_other_path_is_404() -> None:
    """vLLM's server answers /invocations (and more) without checking its key: the router forwards only the OpenAI
    routes it serves, so no other path of an engine is reachable through it, with or without a client key."""
    front = render([route()]).config.split("frontend api")[1]
    (line,) = [ln for ln in front.splitlines() if "no such route" in ln]
    allowed = line.split("unless { path ", 1)[1].rstrip(" }").split()
    assert sorted(allowed) == sorted([*router_haproxy.ROUTES, router_haproxy.LIVE_PATH])
    assert "/invocations" not in allowed and not any(p.startswith("/vllm") for p in allowed)
