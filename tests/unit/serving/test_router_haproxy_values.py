"""gridready.serving.router_haproxy by value: the whole haproxy.cfg for a concrete router spec, line by line, with
every number computed here from the spec by the units HAProxy's configuration manual documents
(https://docs.haproxy.org/2.4/configuration.html: 3.2 tune.bufsize in bytes, 4.2 timeouts in seconds with an `s`
suffix, 5.2 server weight 0..256), the weights of a canary split, the boundaries of the limits, and the exact
one-line errors of bad upstreams."""

from __future__ import annotations

import json

import pytest

from gridready.serving import router_haproxy
from gridready.serving.router import Upstream
from gridready.spec.router import HAProxySettings, Route, RouterKey, RouterSpec

DIR = "/etc/gr"
MAX_BODY_KIB, MAXCONN, TIMEOUT_S, RETRIES = 32, 5000, 90, 2
ALLOWED_FAILS, COOLDOWN_S, INTERVAL_S = 3, 20, 7
SPEC = RouterSpec(enabled=True, proxy="haproxy", haproxy=HAProxySettings(max_body_kib=MAX_BODY_KIB, maxconn=MAXCONN),
                  keys=[RouterKey(name="tight", vault_var="v2", rpm_limit=30), RouterKey(name="ci", vault_var="v1"),
                        RouterKey(name="bulk", vault_var="v3", rpm_limit=1)],
                  num_retries=RETRIES, allowed_fails=ALLOWED_FAILS, cooldown_s=COOLDOWN_S,
                  timeout_s=TIMEOUT_S, health_check_interval_s=INTERVAL_S)
UPS = {
    "batch": [Upstream("batch", "http://10.1.0.1:8000/v1", "llama", "GRIDREADY_TIER_BATCH_API_KEY"),
              Upstream("batch", "http://10.1.0.2:8000/v1", "llama", "GRIDREADY_TIER_BATCH_API_KEY")],
    "hot": [Upstream("hot", "http://10.1.0.3:8001/v1", "llama", "GRIDREADY_TIER_HOT_API_KEY")],
    "spare": [Upstream("spare", "http://10.1.0.4:8002/v1", "llama"), Upstream("spare", "http://10.1.0.5:8002/v1",
                                                                               "llama")],
    "qwen": [Upstream("qwen", "http://10.1.0.6:9000/v1", "qwen-7b", None, "/v2/health/ready")],
}


def route(model: str = "llama", targets: object = None, fallback: list[str] | None = None) -> Route:
    targets = targets or [{"tier": "batch", "weight": 3}, {"tier": "hot", "weight": 1}]
    return Route.model_validate({"model": model, "targets": targets, "fallback": fallback or []})


def render(routes: list[Route], spec: RouterSpec = SPEC, ups: dict[str, list[Upstream]] = UPS
           ) -> router_haproxy.HAProxyFiles:
    return router_haproxy.render(spec, routes, ups, bind="10.1.0.9", port=4100, directory=DIR)


def error(status: int, message: str, kind: str, code: str) -> str:
    """OpenAI's error body as `http-request return` sends it (4.2), JSON without spaces."""
    return (f"http-request return status {status} content-type application/json string "
            '\'{"error":{"message":"' + message + '","type":"' + kind + '","param":null,"code":"' + code + '"}}\'')


def test_the_whole_configuration_of_a_two_route_router_line_by_line() -> None:
    files = render([route(fallback=["spare"]), route("qwen-7b", [{"tier": "qwen", "weight": 1}])])
    body_bytes = MAX_BODY_KIB * 1024
    # weights: tier weight x 12 shared by its replicas: batch 3*12/2 = 18 each, hot 1*12/1 = 12, qwen 12
    expected = [
        "# gridready router (HAProxy) in front of the serving tiers: written by gridready.serving.router_haproxy",
        "# from serving.router; no secret here (the tiers' key comes from the unit's environment file)",
        "global",
        f"    maxconn {MAXCONN}",
        f"    tune.bufsize {body_bytes + 1024}",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout http-request 30s",
        "    timeout http-keep-alive 60s",
        "    timeout queue 30s",
        f"    timeout client {TIMEOUT_S}s",
        f"    timeout server {TIMEOUT_S}s",
        f"    retries {RETRIES}",
        "    retry-on conn-failure empty-response",
        "    option redispatch",
        "    option http-no-delay",
        "",
        "backend gridready_rpm",
        "    stick-table type string len 64 size 100k expire 2m store http_req_rate(60s)",
        "",
        "frontend api",
        "    bind 10.1.0.9:4100",
        "    monitor-uri /health/liveliness",
        "    option http-buffer-request",
        "    " + error(404, "no such route on this endpoint", "invalid_request_error", "not_found")
        + " unless { path /v1/chat/completions /v1/completions /v1/embeddings /v1/models /metrics /health/liveliness }",
        f"    http-request set-var(txn.client) req.hdr(authorization),bytes(7),sha2(256),hex,lower,map({DIR}/keys.map) "
        'if { req.hdr(authorization) -m beg -i "bearer " }',
        "    " + error(401, "missing or unknown API key", "invalid_request_error", "invalid_api_key")
        + " unless { var(txn.client) -m found }",
        "    http-request track-sc0 var(txn.client) table gridready_rpm",
        # one limit per limited key, sorted by name; `gt` the limit: the limit-th request of a minute still passes
        "    " + error(429, "rate limit: 1 requests per minute for key bulk", "rate_limit_error", "rate_limit_exceeded")
        + " if { var(txn.client) -m str bulk } { sc_http_req_rate(0) gt 1 }",
        "    " + error(429, "rate limit: 30 requests per minute for key tight", "rate_limit_error",
                       "rate_limit_exceeded")
        + " if { var(txn.client) -m str tight } { sc_http_req_rate(0) gt 30 }",
        "    http-request del-header Authorization",
        "    http-request use-service prometheus-exporter if { path /metrics }",
        f"    http-request return status 200 content-type application/json file {DIR}/models.json "
        "if { path /v1/models } { method GET }",
        "    " + error(413, f"request body over {MAX_BODY_KIB} KiB (serving.router.haproxy.max_body_kib)",
                       "invalid_request_error", "request_too_large")
        + f" if {{ req.hdr_val(content-length) gt {body_bytes} }}",
        "    http-request set-var(txn.model) req.body,json_query('$.model') if { method POST }",
        "    " + error(404, "the model does not exist", "invalid_request_error", "model_not_found")
        + f" unless {{ var(txn.model),map({DIR}/models.map) -m found }}",
        f"    use_backend %[var(txn.model),map({DIR}/models.map)]",
        "",
        "backend route_0  # model llama",
        "    balance roundrobin",
        "    option httpchk GET /health",
        "    http-check expect status 200",
        f"    default-server check inter {INTERVAL_S}s fastinter 1s downinter {COOLDOWN_S // 2}s fall 2 rise 2 "
        f"observe layer7 error-limit {ALLOWED_FAILS} on-error mark-down",
        "    http-response set-header X-Gridready-Server %[srv_name]",
        # the first keyed tier by variable name, sorted
        '    http-request set-header Authorization "Bearer %[env(GRIDREADY_TIER_BATCH_API_KEY)]"',
        "    server batch-0 10.1.0.1:8000 weight 18",
        "    server batch-1 10.1.0.2:8000 weight 18",
        "    server hot-0 10.1.0.3:8001 weight 12",
        "    server fallback-spare-0 10.1.0.4:8002 backup",
        "    server fallback-spare-1 10.1.0.5:8002 backup",
        "",
        "backend route_1  # model qwen-7b",
        "    balance roundrobin",
        "    option httpchk GET /v2/health/ready",
        "    http-check expect status 200",
        f"    default-server check inter {INTERVAL_S}s fastinter 1s downinter {COOLDOWN_S // 2}s fall 2 rise 2 "
        f"observe layer7 error-limit {ALLOWED_FAILS} on-error mark-down",
        "    http-response set-header X-Gridready-Server %[srv_name]",
        "    http-request del-header Authorization",
        "    server qwen-0 10.1.0.6:9000 weight 12",
        "",
    ]
    assert files.config.split("\n") == expected
    assert files.models_map == "llama route_0\nqwen-7b route_1\n"
    assert files.models_json == ('{"object":"list","data":[{"id":"llama","object":"model","created":0,'
                                 '"owned_by":"gridready"},{"id":"qwen-7b","object":"model","created":0,'
                                 '"owned_by":"gridready"}]}\n')
    assert json.loads(files.models_json)["data"][1]["id"] == "qwen-7b"


def test_no_limited_key_renders_no_429_and_no_route_renders_no_backend() -> None:
    spec = SPEC.model_copy(update={"keys": [RouterKey(name="ci", vault_var="v1")]})
    files = render([], spec=spec)
    assert "status 429" not in files.config and "\nbackend route_" not in files.config
    assert files.config.endswith("    use_backend %[var(txn.model),map(/etc/gr/models.map)]\n")
    assert files.models_map == "\n" and files.models_json == '{"object":"list","data":[]}\n'


def default_server(cfg: str) -> str:
    return next(ln for ln in cfg.splitlines() if ln.startswith("    default-server"))


@pytest.mark.parametrize(("cooldown_s", "downinter"), [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (61, 30)])
def test_downinter_is_half_the_cooldown_in_whole_seconds_and_at_least_one(cooldown_s: int, downinter: int) -> None:
    spec = SPEC.model_copy(update={"cooldown_s": cooldown_s})
    assert f" downinter {downinter}s " in default_server(render([route()], spec=spec).config)


@pytest.mark.parametrize("kib", [16, 17, 65536])
def test_bufsize_holds_the_largest_body_plus_the_rewrite_reserve_in_bytes(kib: int) -> None:
    spec = SPEC.model_copy(update={"haproxy": HAProxySettings(max_body_kib=kib)})
    cfg = render([route()], spec=spec).config.splitlines()
    assert f"    tune.bufsize {kib * 1024 + 1024}" in cfg
    assert cfg[cfg.index("    tune.bufsize " + str(kib * 1024 + 1024)) - 1] == "    maxconn 4096"
    assert sum(f"req.hdr_val(content-length) gt {kib * 1024} }}" in ln for ln in cfg) == 1


def weights(r: Route, ups: dict[str, list[Upstream]]) -> list[tuple[str, int]]:
    return [(up.base_url, w) for up, w in router_haproxy.server_weights(r, ups)]


def test_weights_scaled_down_keep_at_least_one() -> None:
    # 1 x 12 / 12 replicas = 1 each, and a single replica at weight w: w x 12
    many = {"ta": [Upstream("ta", f"http://10.2.0.{i}:8000/v1", "m") for i in range(12)],
            "tb": [Upstream("tb", "http://10.2.1.1:8000/v1", "m")]}
    r = route("m", [{"tier": "ta", "weight": 1}, {"tier": "tb", "weight": 1000}])
    got = weights(r, many)
    # 12000 over 256: scale 256/12000; the replicas' 1 x 0.0213 rounds to 0, kept at HAProxy's least useful 1
    assert got[-1] == ("http://10.2.1.1:8000/v1", 256) and [w for _, w in got[:12]] == [1] * 12
    small = route("m", [{"tier": "ta", "weight": 1}])
    assert [w for _, w in weights(small, many)] == [1] * 12  # exactly 1: never raised to 2


def test_a_largest_weight_of_exactly_256_is_kept_and_one_above_is_scaled() -> None:
    three = {"ta": [Upstream("ta", f"http://10.2.0.{i}:8000/v1", "m") for i in range(3)],
             "tb": [Upstream("tb", "http://10.2.1.1:8000/v1", "m")]}
    # 64 x 12 / 3 = 256 each: HAProxy's largest weight, unscaled; tb 5 x 12 = 60
    exact = route("m", [{"tier": "ta", "weight": 64}, {"tier": "tb", "weight": 5}])
    assert [w for _, w in weights(exact, three)] == [256, 256, 256, 60]
    # 65 x 12 / 3 = 260 each: scaled by 256/260, tb's 60 to round(59.07) = 59
    above = route("m", [{"tier": "ta", "weight": 65}, {"tier": "tb", "weight": 5}])
    assert [w for _, w in weights(above, three)] == [256, 256, 256, round(60 * 256 / 260)]


def test_scaling_keeps_the_ratio_rounded_half_to_even() -> None:
    ups = {"ta": [Upstream("ta", "http://10.2.0.1:8000/v1", "m")],
           "tb": [Upstream("tb", "http://10.2.0.2:8000/v1", "m")]}
    # ta: 25 x 12 = 300 > 256: scale 256/300; tb: 5 x 12 = 60 -> 51.2 -> 51
    assert [w for _, w in weights(route("m", [{"tier": "ta", "weight": 25}, {"tier": "tb", "weight": 5}]), ups)] == [
        256, round(60 * 256 / 300)]
    # 21 x 12 = 252 <= 256: no scaling at all
    assert [w for _, w in weights(route("m", [{"tier": "ta", "weight": 21}, {"tier": "tb", "weight": 1}]), ups)] == [
        252, 12]


def test_a_target_without_upstream_or_serving_another_model_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^route llama: tier gone has no OpenAI-compatible endpoint$"):
        render([route(targets=[{"tier": "gone", "weight": 1}])])
    with pytest.raises(ValueError, match=r"^route llama: fallback tier gone has no OpenAI-compatible endpoint$"):
        render([route(fallback=["gone"])])
    ups = dict(UPS, spare=[Upstream("spare", "http://10.1.0.4:8002/v1", "mistral")])
    with pytest.raises(ValueError, match=r"^route llama: tier spare serves mistral; HAProxy passes the request body "
                                         r"on unchanged, so the route must be named after it \(or proxy: litellm\)$"):
        render([route(fallback=["spare"])], ups=ups)


@pytest.mark.parametrize("url", ["http://10.1.0.1/v1", "https://10.1.0.1:8000/v1", "http://:8000/v1",
                                 "https://10.1.0.1/v1"])
def test_an_upstream_that_is_not_plain_http_host_and_port_is_refused(url: str) -> None:
    ups = {"xt": [Upstream("xt", url, "m")]}
    with pytest.raises(ValueError) as err:
        render([route("m", [{"tier": "xt", "weight": 1}])], ups=ups)
    assert str(err.value) == f"tier xt: upstream {url} is not http://<host>:<port>/..."


def test_tiers_with_different_health_paths_are_refused_naming_each() -> None:
    ups = dict(UPS, spare=[Upstream("spare", "http://10.1.0.4:8002/v1", "llama", None, "/ready")],
               hot=[Upstream("hot", "http://10.1.0.3:8001/v1", "llama", None, "/v2/health/ready")])
    with pytest.raises(ValueError) as err:
        render([route(fallback=["spare"])], ups=ups)
    assert str(err.value) == ("route llama: its tiers answer health checks on different paths (batch /health, "
                              "spare /ready, hot /v2/health/ready); HAProxy checks one per route")


def test_a_route_without_upstreams_checks_the_engines_default_health_path() -> None:
    assert router_haproxy._health_path(route(), {}) == "/health"


def test_an_error_body_with_a_single_quote_is_refused() -> None:
    with pytest.raises(ValueError) as err:
        router_haproxy._error(400, "it's", "invalid_request_error", "bad")
    body = '{"error":{"message":"it\'s","type":"invalid_request_error","param":null,"code":"bad"}}'
    assert str(err.value) == f"an error body cannot hold a single quote: {body}"


def test_keys_map_lists_each_keys_sha256_sorted_by_client() -> None:
    # SHA-256 of "abc" (FIPS 180-2, appendix B.1) and of the empty string
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert router_haproxy.keys_map({"zeta": "", "a1": "abc"}) == f"{abc} a1\n{empty} zeta\n"
    assert router_haproxy.keys_map({}) == ""


@pytest.mark.parametrize("name", ["Ops", "-ops", "ops team", "", "ops_1"])
def test_a_client_name_that_is_not_a_slug_is_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError) as err:
        router_haproxy.keys_map({"ok": "k1", name: "k2"})
    assert str(err.value) == f"client name {name!r} is not a slug"
