"""The router as HAProxy (`serving.router.proxy: haproxy`): its configuration and the files it reads, from
`serving.router` and the tiers' endpoints. Pure: the role (roles/gridready_router/tasks/haproxy.yml) writes what
this returns; the client keys' digests are written by the role from the vault (`keys_map` is their format).

Only features of HAProxy 2.4 (Ubuntu 22.04's package, the oldest the supported OSes ship) are used; each line cites
the section of HAProxy's configuration manual (https://docs.haproxy.org/2.4/configuration.html) it relies on:
- routing by the body's `model`: `option http-buffer-request` (4.2) holds the body in a buffer of `tune.bufsize`
  (3.2), `req.body` (7.3.6) read by the `json_query` converter (7.3.1), then a map (`map` converter, 7.3.1) from
  model to backend; a body over the buffer is refused with 413 before it is read (never routed by a partial body)
- keys: `sha2(256)` and `hex` converters (7.3.1) over the bearer token, looked up in a map of digest -> client
- answers of its own: `http-request return` (4.2, since 2.2) for /v1/models (a file), 401, 404, 413 and 429, in
  OpenAI's error shape; `monitor-uri` (4.2) for the liveness path
- request limits: a stick table storing `http_req_rate` (4.2 "stick-table", 7.3.3 `sc_http_req_rate`) tracked per
  client by `http-request track-sc0` (4.2)
- weights, fallbacks, health: `server ... weight` (5.2, 0..256), `backup` (5.2), `option httpchk` + `http-check
  expect` (4.2), `observe layer7` + `error-limit` + `on-error mark-down` (5.2), `retries`, `retry-on`,
  `option redispatch` (4.2)
- the tier's API key: `http-request set-header` (4.2) with `env()` (7.3.2) read from the unit's root-only
  environment file: never in this file
- metrics: the built-in Prometheus exporter, `http-request use-service prometheus-exporter` (4.2), behind a key
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from gridready.serving.router import REPLICA_SCALE, Upstream
from gridready.spec.router import Route, RouterSpec

MAX_WEIGHT = 256  # HAProxy's server weight range is 0..256 (manual 5.2 "weight")
LIVE_PATH = "/health/liveliness"  # the same path LiteLLM answers (docs/layer3.md): stages wait on one path
RPM_TABLE = "gridready_rpm"
KEYS_MAP = "keys.map"
MODELS_MAP = "models.map"
MODELS_JSON = "models.json"
# the OpenAI routes the router forwards or answers itself (/v1/models, /metrics): every other path is a 404
ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/metrics")


@dataclass(frozen=True)
class HAProxyFiles:
    """haproxy.cfg and the files it reads besides the keys' map (the role writes them into `directory`)."""

    config: str
    models_map: str  # served model name -> backend
    models_json: str  # GET /v1/models


def _error(status: int, message: str, kind: str, code: str) -> str:
    """An `http-request return` of OpenAI's error body ({"error": {message, type, param, code}})."""
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}},
                      separators=(",", ":"))
    if "'" in body:
        raise ValueError(f"an error body cannot hold a single quote: {body}")
    return f"http-request return status {status} content-type application/json string '{body}'"


def backend_name(index: int) -> str:
    return f"route_{index}"


def _address(up: Upstream) -> str:
    parts = urlsplit(up.base_url)
    if parts.scheme != "http" or not parts.hostname or not parts.port:
        raise ValueError(f"tier {up.tier}: upstream {up.base_url} is not http://<host>:<port>/...")
    return f"{parts.hostname}:{parts.port}"


def _same_model(route: Route, ups: Sequence[Upstream]) -> None:
    """The body goes on unchanged: the route's model must be what each replica serves (LiteLLM rewrites it)."""
    for up in ups:
        if up.served_name != route.model:
            raise ValueError(f"route {route.model}: tier {up.tier} serves {up.served_name}; HAProxy passes the "
                             "request body on unchanged, so the route must be named after it (or proxy: litellm)")


def server_weights(route: Route, upstreams: Mapping[str, Sequence[Upstream]]) -> list[tuple[Upstream, int]]:
    """(replica, HAProxy weight) of the route's targets with a weight: a tier's weight shared by its replicas as
    LiteLLM's deployments share it, scaled into HAProxy's 1..256 when the largest exceeds it."""
    raw: list[tuple[Upstream, float]] = []
    for target in route.targets:
        ups = upstreams.get(target.tier)
        if not ups:
            raise ValueError(f"route {route.model}: tier {target.tier} has no OpenAI-compatible endpoint")
        _same_model(route, ups)
        if target.weight > 0:
            raw += [(up, target.weight * REPLICA_SCALE / len(ups)) for up in ups]
    top = max(w for _, w in raw)
    scale = MAX_WEIGHT / top if top > MAX_WEIGHT else 1.0
    return [(up, max(1, round(w * scale))) for up, w in raw]


def _server_name(up: Upstream, replica: int, backup: bool) -> str:
    return f"{'fallback-' if backup else ''}{up.tier}-{replica}"


def _health_path(route: Route, upstreams: Mapping[str, Sequence[Upstream]]) -> str:
    """The one path a route's health checks ask (one `option httpchk` per backend)."""
    tiers = [t.tier for t in route.targets] + list(route.fallback)
    paths = {u.health_path: u.tier for t in tiers for u in upstreams.get(t, [])}
    if len(paths) > 1:
        raise ValueError(f"route {route.model}: its tiers answer health checks on different paths "
                         f"({', '.join(f'{t} {p}' for p, t in sorted(paths.items()))}); HAProxy checks one per route")
    return next(iter(paths), "/health")


def _backend(index: int, route: Route, upstreams: Mapping[str, Sequence[Upstream]], spec: RouterSpec) -> list[str]:
    lines = [f"backend {backend_name(index)}  # model {route.model}",
             "    balance roundrobin",
             # 4.2 option httpchk / http-check expect: the engine's own health route on its OpenAI port
             f"    option httpchk GET {_health_path(route, upstreams)}",
             "    http-check expect status 200",
             # 5.2: a server is marked down after `fall` failed checks or `error-limit` 5xx/timeouts it served,
             # and back after `rise` good checks `downinter` apart: about cooldown_s, as LiteLLM's cooldown;
             # fallbacks serve only while every target is down (5.2 backup)
             f"    default-server check inter {spec.health_check_interval_s}s fastinter 1s "
             f"downinter {max(1, spec.cooldown_s // 2)}s fall 2 rise 2 "
             f"observe layer7 error-limit {spec.allowed_fails} on-error mark-down",
             # 4.2 http-response set-header, 7.3.3 srv_name: which tier replica answered (<tier>-<replica>)
             "    http-response set-header X-Gridready-Server %[srv_name]"]
    tiers = [t.tier for t in route.targets] + list(route.fallback)
    keyed = sorted({u.api_key_env for t in tiers for u in upstreams.get(t, []) if u.api_key_env})
    if keyed:
        # the header is set before a server is picked, so one key serves the whole route: serve.yml gives every
        # keyed tier the serving API key (gridready_vllm_api_key), and a tier without a key ignores the header
        # 4.2 http-request set-header: the upstream gets the tier's key, never the client's
        lines.append(f'    http-request set-header Authorization "Bearer %[env({keyed[0]})]"')
    else:
        lines.append("    http-request del-header Authorization")
    by_tier: dict[str, int] = {}
    for up, weight in server_weights(route, upstreams):
        replica = by_tier[up.tier] = by_tier.get(up.tier, -1) + 1
        lines.append(f"    server {_server_name(up, replica, False)} {_address(up)} weight {weight}")
    for tier in route.fallback:
        ups = upstreams.get(tier)
        if not ups:
            raise ValueError(f"route {route.model}: fallback tier {tier} has no OpenAI-compatible endpoint")
        _same_model(route, ups)
        lines += [f"    server {_server_name(up, i, True)} {_address(up)} backup" for i, up in enumerate(ups)]
    return lines


def render(spec: RouterSpec, routes: Sequence[Route], upstreams: Mapping[str, Sequence[Upstream]], *, bind: str,
           port: int, directory: str) -> HAProxyFiles:
    """HAProxy's configuration for `routes` over each tier's replicas, listening on bind:port and reading its maps
    and models file from `directory`, with spec.keys' request limits. Raises ValueError naming a route's tier that
    has no upstream (or serves another model name)."""
    limits = {k.name: k.rpm_limit for k in spec.keys}
    bufsize = spec.haproxy.max_body_kib * 1024 + 1024  # + tune.maxrewrite's default share of the buffer (3.2)
    keys_map, models_map = f"{directory}/{KEYS_MAP}", f"{directory}/{MODELS_MAP}"
    models_file = f"{directory}/{MODELS_JSON}"
    cfg = [
        "# gridready router (HAProxy) in front of the serving tiers: written by gridready.serving.router_haproxy",
        "# from serving.router; no secret here (the tiers' key comes from the unit's environment file)",
        "global",
        f"    maxconn {spec.haproxy.maxconn}",
        # 3.2 tune.bufsize: a whole request body fits, so its model is read from the body, never from a part of it
        f"    tune.bufsize {bufsize}",
        # no `log` line: requests are not logged (no per-request work, no headers anywhere on disk)
        "",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout http-request 30s",
        "    timeout http-keep-alive 60s",
        "    timeout queue 30s",
        # long enough for a whole streamed (SSE) answer: HAProxy forwards each chunk as it arrives (4.2 timeout)
        f"    timeout client {spec.timeout_s}s",
        f"    timeout server {spec.timeout_s}s",
        # 4.2 retries / retry-on / option redispatch: a refused connection or an empty answer is tried again on
        # another server of the route, never a request the engine has started answering
        f"    retries {spec.num_retries}",
        "    retry-on conn-failure empty-response",
        "    option redispatch",
        "    option http-no-delay",
        "",
        # 4.2 stick-table: one entry per client, its request rate over the last minute
        f"backend {RPM_TABLE}",
        "    stick-table type string len 64 size 100k expire 2m store http_req_rate(60s)",
        "",
        "frontend api",
        f"    bind {bind}:{port}",
        f"    monitor-uri {LIVE_PATH}",
        "    option http-buffer-request",
        # only the routes the router serves: any other path of an engine behind it (vLLM's /invocations and the
        # rest of its server's routes) is answered here, before the key, and never forwarded (4.2 http-request
        # return; 7.3.6 path, exact matches)
        "    " + _error(404, "no such route on this endpoint", "invalid_request_error", "not_found")
        + f" unless {{ path {' '.join(ROUTES)} {LIVE_PATH} }}",
        f"    http-request set-var(txn.client) req.hdr(authorization),bytes(7),sha2(256),hex,lower,map({keys_map}) "
        "if { req.hdr(authorization) -m beg -i \"bearer \" }",
        "    " + _error(401, "missing or unknown API key", "invalid_request_error", "invalid_api_key")
        + " unless { var(txn.client) -m found }",
        f"    http-request track-sc0 var(txn.client) table {RPM_TABLE}",
    ]
    for name, rpm in sorted(limits.items()):
        if rpm:
            cfg.append("    " + _error(429, f"rate limit: {rpm} requests per minute for key {name}",
                                       "rate_limit_error", "rate_limit_exceeded")
                       + f" if {{ var(txn.client) -m str {name} }} {{ sc_http_req_rate(0) gt {rpm} }}")
    limit = spec.haproxy.max_body_kib * 1024
    cfg += [
        "    http-request del-header Authorization",
        "    http-request use-service prometheus-exporter if { path /metrics }",
        f"    http-request return status 200 content-type application/json file {models_file} "
        "if { path /v1/models } { method GET }",
        "    " + _error(413, f"request body over {spec.haproxy.max_body_kib} KiB (serving.router.haproxy.max_body_kib)",
                        "invalid_request_error", "request_too_large")
        + f" if {{ req.hdr_val(content-length) gt {limit} }}",
        "    http-request set-var(txn.model) req.body,json_query('$.model') if { method POST }",
        "    " + _error(404, "the model does not exist", "invalid_request_error", "model_not_found")
        + f" unless {{ var(txn.model),map({models_map}) -m found }}",
        f"    use_backend %[var(txn.model),map({models_map})]",
        "",
    ]
    models_lines, listed = [], []
    for i, route in enumerate(routes):
        cfg += [*_backend(i, route, upstreams, spec), ""]
        models_lines.append(f"{route.model} {backend_name(i)}")
        listed.append({"id": route.model, "object": "model", "created": 0, "owned_by": "gridready"})
    models_json = json.dumps({"object": "list", "data": listed}, separators=(",", ":")) + "\n"
    return HAProxyFiles(config="\n".join(cfg), models_map="\n".join(models_lines) + "\n", models_json=models_json)


def keys_map(keys: Mapping[str, str]) -> str:
    """The keys' map: `<sha256 hex of the key> <client name>` per line ({name: key}); the role's keys.map.j2
    writes the same lines from the vault."""
    for name in keys:
        if not re.fullmatch(r"[a-z0-9][-a-z0-9]*", name):
            raise ValueError(f"client name {name!r} is not a slug")
    return "".join(f"{hashlib.sha256(k.encode()).hexdigest()} {n}\n" for n, k in sorted(keys.items()))
