"""Rules over a validated cluster.yml that no single field can state: patterns on every free-text value that
reaches a file, a systemd unit or a command line, and the constraints between tiers.

Each rule yields (key path, message); inventory.load turns them into `<file>: <key.path>: <message>` lines.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any

from gridready.spec.cluster import ClusterSpec

# Linux dev_valid_name() (net/core/dev.c): 1-15 bytes (IFNAMSIZ 16 with the NUL), not "." or "..", no '/',
# ':' or whitespace; the character set is narrowed further to what NCCL/Gloo and systemd units take verbatim.
IFNAME = re.compile(r"^(?!\.{1,2}$)[A-Za-z0-9_.@-]{1,15}$")
# huggingface_hub validate_repo_id: namespace/name of letters, digits, '-', '_', '.', no leading '-' or '.',
# no '--' or '..', at most 96 characters each.
HF_ID = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,127}$")  # a commit sha, tag or branch; never a flag
SERVED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$")
ABS_PATH = re.compile(r"^/[A-Za-z0-9_.@+/-]{0,4095}$")
# Ray Serve LLM's LoraConfig on Kubernetes: adapters in object storage (s3/gs; abfss/azure in newer Ray)
OBJECT_URI = re.compile(r"^(s3|gs|abfss|azure)://[A-Za-z0-9][A-Za-z0-9_.@-]{0,254}(/[A-Za-z0-9_.@+=-]{1,1024}){0,64}/?$")
ENGINE_ARG = re.compile(r"^[a-z][a-z0-9_]{0,63}$")  # vLLM's engine argument names (snake_case)
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_VALIDITY_HOURS = 24 * 366
# An apt source URI (sources.list(5)): a scheme apt ships a method for, then no whitespace (a space would start
# the suite field of the one-line format).
MIRROR_URL = re.compile(r"^(https?|file):/{1,3}[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]+$")
# Ray's fixed ports on every node of a tier (roles/gridready_ray_node/defaults/main.yml; Ray's "Configuring
# Ray" port list): an engine port equal to one of these cannot bind, or would expose Ray's.
RAY_PORTS = {8265: "the Ray dashboard", 10001: "the Ray client server", 6380: "Ray's node manager",
             6381: "Ray's object manager", 6382: "Ray's runtime env agent", 6383: "Ray's dashboard agent (gRPC)",
             52365: "Ray's dashboard agent", 8080: "Ray's metrics export"}
RAY_WORKER_PORTS = range(11000, 12000)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def one_line(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """No value of cluster.yml may carry a newline or another control character: each one ends up in an
    environment file, a unit, a manifest or an argument list, where a newline starts a new entry."""
    for path, text in _strings(spec.model_dump(mode="json"), ""):
        if CONTROL.search(text):
            yield path, "must be one line without control characters"


def _match(pattern: re.Pattern[str], value: str | None, path: str, what: str) -> Iterator[tuple[str, str]]:
    if value is not None and not pattern.match(value):
        yield path, f"must be {what} (pattern {pattern.pattern})"


def field_patterns(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    iface = "a Linux interface name"
    for i, group in enumerate(spec.node_groups):
        yield from _match(IFNAME, group.mgmt_interface, f"node_groups[{i}].mgmt_interface", iface)
        for j, nic in enumerate(group.nics):
            yield from _match(IFNAME, nic.netdev, f"node_groups[{i}].nics[{j}].netdev", iface)
    serving = spec.serving
    yield from _match(IFNAME, serving.socket_ifname, "serving.socket_ifname", iface)
    yield from _match(IFNAME, serving.kubernetes.socket_ifname, "serving.kubernetes.socket_ifname", iface)
    for i, client in enumerate(serving.firewall_clients):
        try:
            ipaddress.ip_network(client, strict=True)
        except ValueError:
            yield f"serving.firewall_clients[{i}]", "must be a CIDR network such as 192.0.2.0/24 (no host bits set)"
    yield from mirror_trust(spec)
    yield from python_index_trust(spec)
    if spec.certification.validity_hours > MAX_VALIDITY_HOURS:
        yield "certification.validity_hours", f"must be at most {MAX_VALIDITY_HOURS} (a year)"
    for i, tier in enumerate(serving.tiers):
        key = f"serving.tiers[{i}]"
        yield from _match(SERVED_NAME, tier.served_name, f"{key}.served_name", "a model name")
        yield from _match(HF_ID, tier.model.hf_id, f"{key}.model.hf_id", "a Hugging Face repo id (namespace/name)")
        yield from _match(REVISION, tier.model.revision, f"{key}.model.revision", "a commit, tag or branch")
        yield from _match(ABS_PATH, tier.model.local_path, f"{key}.model.local_path", "an absolute path")
        for j, adapter in enumerate(tier.lora_adapters):
            remote = serving.target == "kubernetes" and OBJECT_URI.match(adapter.path)
            if not (ABS_PATH.match(adapter.path) or HF_ID.match(adapter.path) or remote):
                yield f"{key}.lora_adapters[{j}].path", ("must be an absolute path or a Hugging Face repo id" +
                                                        (", or on Kubernetes an s3://, gs://, abfss:// or azure:// "
                                                         "URI" if serving.target == "kubernetes" else ""))
        for arg, value in tier.extra_engine_args.items():
            if not ENGINE_ARG.match(arg):
                yield f"{key}.extra_engine_args.{arg}", f"must be a vLLM engine argument name ({ENGINE_ARG.pattern})"
            elif isinstance(value, str) and value.startswith("-"):
                yield f"{key}.extra_engine_args.{arg}", "value must not start with '-' (it would read as a flag)"


def mirror_trust(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """A plain-http mirror needs a pinned key fingerprint. apt verifies the Release signature with the keyring
    (apt-secure(8), https://manpages.debian.org/bookworm/apt/apt-secure.8.en.html), but the provision role
    downloads that keyring from the mirror itself: over http, whoever can change the packages can change the key
    too. The pin is checked on every node against the downloaded key (library/gridready_openpgp_key.py)."""
    pins = spec.software
    url = pins.package_mirror
    if url is None:
        return
    if not MIRROR_URL.match(url):
        yield "software.package_mirror", "must be an http, https or file URL without whitespace"
    elif url.lower().startswith("http://") and not pins.package_mirror_key_fingerprint:
        yield ("software.package_mirror", "a plain-http mirror needs software.package_mirror_key_fingerprint "
               "(its signing key would come over the same unauthenticated connection)")


PYTHON_INDEX_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~/%+-]*)?")


def python_index_trust(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """pip ignores a plain-http index unless its host is trusted (pip's `--trusted-host`), and then nothing
    authenticates the packages: the opt-in is named. No credentials in the URL: they would reach the nodes' argv
    and the job events (a mirror that needs them takes them from the nodes' netrc, outside gridready)."""
    url = spec.software.python_index
    if url is None:
        return
    if not PYTHON_INDEX_URL.fullmatch(url):
        yield "software.python_index", "must be an http(s) URL without credentials, query or whitespace"
    elif url.lower().startswith("http://") and not spec.software.python_index_plain_http:
        yield ("software.python_index", "a plain-http index needs software.python_index_plain_http: true "
               "(pip would otherwise ignore it, and nothing authenticates its packages)")


def tier_ports(tier: Any) -> list[tuple[str, int]]:
    """(key, port) of every listener a tier's clients reach: its API port and, for Triton, the server's own."""
    ports = [("port", tier.port)]
    triton = getattr(tier, "triton", None)
    # Triton's own listeners; trtllm-serve has only the API port (gridready/bench/endpoint.py for_tier)
    if tier.engine == "triton-trtllm" and triton is not None and getattr(triton, "frontend", None) != "trtllm-serve":
        ports += [(f"triton.{name}", getattr(triton, name)) for name in ("http_port", "grpc_port", "metrics_port")
                  if getattr(triton, name, None) is not None]
    embedding = getattr(tier, "embedding", None)
    if tier.engine == "triton-embedding" and embedding is not None:  # port: Triton's HTTP (KServe v2)
        ports += [(f"embedding.{name}", getattr(embedding, name)) for name in ("grpc_port", "metrics_port")]
    return ports


def _ray_clash(port: int, ray_port: int) -> str | None:
    if port == ray_port:
        return f"{port} is the Ray GCS port (serving.ray_port)"
    if port in RAY_PORTS:
        return f"{port} is {RAY_PORTS[port]}'s port"
    if port in RAY_WORKER_PORTS:
        return f"{port} is in Ray's worker port range {RAY_WORKER_PORTS.start}-{RAY_WORKER_PORTS.stop - 1}"
    return None


def cross_tier(spec: ClusterSpec, nodes: dict[str, int]) -> Iterator[tuple[str, str]]:
    """Ports that collide and GPU demand beyond the node group.

    `nodes`: node group -> hosts in hosts.yml. A tier's API port is how clients, the router and the firewall
    name it, so no two tiers share one; a Triton tier's own ports (HTTP, gRPC, metrics) must differ from
    each other and from its API port. No port may be one of Ray's on the tier's nodes."""
    serving = spec.serving
    api_ports: dict[int, str] = {}
    for i, tier in enumerate(serving.tiers):
        if tier.engine == "triton-embedding" and serving.target == "kubernetes":
            yield f"serving.tiers[{i}].engine", "triton-embedding runs on target hosts only (no Kubernetes component)"
        own: dict[int, str] = {}
        for name, port in tier_ports(tier):
            key = f"serving.tiers[{i}].{name}"
            clash = _ray_clash(port, serving.ray_port)
            if clash:
                yield key, clash
            elif port in own:
                yield key, f"{port} is already this tier's {own[port]}"
            elif name == "port" and port in api_ports:
                yield key, f"{port} is already the port of {api_ports[port]}"
            own.setdefault(port, name)
        api_ports.setdefault(tier.port, f"serving.tiers[{i}] ({tier.name})")
    demand: dict[str, int] = {}
    for tier in serving.tiers:
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        tp, pp = tier.tensor_parallel, tier.pipeline_parallel
        if group is not None and isinstance(tp, int) and isinstance(pp, int):
            demand[group.name] = demand.get(group.name, 0) + tp * pp * tier.replicas
    for name, need in demand.items():
        group = spec.group(name)
        assert group is not None
        have = nodes.get(name, 0) * group.gpus_per_node
        if need > have and len([t for t in serving.tiers if (t.node_group or spec.node_groups[0].name) == name]) > 1:
            yield "serving.tiers", f"the tiers on {name} need {need} GPUs together, more than it has ({have})"


def check(spec: ClusterSpec, nodes: dict[str, int]) -> list[tuple[str, str]]:
    return [*one_line(spec), *field_patterns(spec), *cross_tier(spec, nodes)]
