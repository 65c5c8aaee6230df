"""Rules over a validated cluster.yml that no single field can state: patterns on every free-text value that
reaches a file, a systemd unit or a command line, and the constraints between tiers.

Each rule yields (key path, message); inventory.load turns them into `<file>: <key.path>: <message>` lines.
Patterns are applied with `fullmatch` (Python's `$` also matches before a final newline), never `match`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from gridready.spec import engine_options
from gridready.spec.cluster import ClusterSpec
from gridready.spec.parallel import resolve
from gridready.spec.router import ROUTER_PYTHON, router_python
from gridready.spec.serving import VLLM_VERSION
from gridready.spec.target_rules import kubernetes, lora

# Linux dev_valid_name() (net/core/dev.c): 1-15 bytes (IFNAMSIZ 16 with the NUL), not "." or "..", no '/',
# ':' or whitespace; the character set is narrowed further to what NCCL/Gloo and systemd units take verbatim.
IFNAME = re.compile(r"(?!\.{1,2}\Z)[A-Za-z0-9_.@-]{1,15}")
# huggingface_hub validate_repo_id: namespace/name of letters, digits, '-', '_', '.', no leading '-' or '.',
# no '--' or '..', at most 96 characters each.
HF_ID = re.compile(r"(?!.*(--|\.\.))[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
# A pinned commit of the repository (the spec promises one): a branch or tag moves under the fleet.
REVISION = re.compile(r"[0-9a-f]{40}")
# The OpenAI `model` name: one path segment (it names unit files, metric labels and routes; no '/')
SERVED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
ABS_PATH = re.compile(r"/[A-Za-z0-9_.@+/-]{0,4095}")
# Ray Serve LLM's LoraConfig on Kubernetes: adapters in object storage (s3/gs; abfss/azure in newer Ray)
OBJECT_URI = re.compile(r"(s3|gs|abfss|azure)://[A-Za-z0-9][A-Za-z0-9_.@-]{0,254}(/[A-Za-z0-9_.@+=-]{1,1024}){0,64}/?")
ENGINE_ARG = re.compile(r"[a-z][a-z0-9_-]{0,63}")  # an engine option's name, '_' or '-' between its words
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Jinja's delimiters (variable, statement, comment): no value of cluster.yml is a template, and one reaching
# Ansible would run on the controller (lookups included)
TEMPLATE = re.compile(r"\{\{|\{%|\{#")  # openings only: JSON values such as {"a": {"b": 1}} close with }}
# firewall_clients broader than these take in the internet, or most of it (serving.firewall_clients_any)
MIN_CLIENT_PREFIX = {4: 8, 6: 16}
MAX_VALIDITY_HOURS = 24 * 366
# An apt source URI (sources.list(5)): a scheme apt ships a method for, then no whitespace (a space would start
# the suite field of the one-line format).
MIRROR_URL = re.compile(r"(https?|file):/{1,3}[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]+")
# Ray's fixed ports on every node of a tier (roles/gridready_ray_node/defaults/main.yml; Ray's "Configuring
# Ray" port list): an engine port equal to one of these cannot bind, or would expose Ray's.
RAY_PORTS = {8265: "the Ray dashboard", 10001: "the Ray client server", 6380: "Ray's node manager",
             6381: "Ray's object manager", 6382: "Ray's runtime env agent", 6383: "Ray's dashboard agent (gRPC)",
             52365: "Ray's dashboard agent", 8080: "Ray's metrics export"}
RAY_WORKER_PORTS = range(11000, 12000)
# vault variables the engines and the model download read (gridready.vault); a router client key is another
ENGINE_VAULT_VARS = {"vault_gridready_vllm_api_key": "the engines' API key",
                     "vault_gridready_hf_token": "the Hugging Face token",
                     "vault_gridready_router_master_key": "the router's master key"}


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
    """No value of cluster.yml may carry a newline or another control character (each one ends up in an
    environment file, a unit, a manifest or an argument list, where a newline starts a new entry), nor a template
    delimiter: the values are data, and Ansible would render a template on the controller."""
    for path, text in _strings(spec.model_dump(mode="json"), ""):
        if CONTROL.search(text):
            yield path, "must be one line without control characters"
        elif TEMPLATE.search(text):
            yield path, "must not hold a template delimiter ({{, {%, {#): values of cluster.yml are data"


def _match(pattern: re.Pattern[str], value: str | None, path: str, what: str) -> Iterator[tuple[str, str]]:
    if value is not None and not pattern.fullmatch(value):
        yield path, f"must be {what} (pattern ^{pattern.pattern}$)"


def _traverses(path: str) -> bool:
    """A `..` or `.` component (a path that leaves, or hides in, the folder it names)."""
    return any(part in ("..", ".") for part in path.split("/"))


def _no_traversal(value: str | None, path: str) -> Iterator[tuple[str, str]]:
    if value is not None and _traverses(value):
        yield path, "must not contain a '.' or '..' path component"


def firewall(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """CIDR networks; one that takes in the internet (or most of it) only with serving.firewall_clients_any."""
    serving = spec.serving
    for i, client in enumerate(serving.firewall_clients):
        try:
            net = ipaddress.ip_network(client, strict=True)
        except ValueError:
            yield f"serving.firewall_clients[{i}]", "must be a CIDR network such as 192.0.2.0/24 (no host bits set)"
            continue
        if net.prefixlen < MIN_CLIENT_PREFIX[net.version] and not serving.firewall_clients_any:
            yield (f"serving.firewall_clients[{i}]", f"/{net.prefixlen} opens every tier's API and metrics ports "
                   f"(Triton's have no authentication) to {net.num_addresses} addresses; narrow it, or set "
                   "serving.firewall_clients_any: true to mean it")


def engine_args(key: str, args: dict[str, Any], engine: str = "vllm",
                version: str = VLLM_VERSION) -> Iterator[tuple[str, str]]:
    """extra_engine_args: option names resolved by the pinned engine's own parser (spec.engine_options), values
    that cannot read as a flag, nothing gridready owns, loads or cannot check."""
    label = "a vLLM engine argument name" if engine == "vllm" else f"an {engine_options.LABEL.get(engine, engine)} " \
        "server argument name"
    for arg, value in args.items():
        where = f"{key}.extra_engine_args.{arg}"
        if not ENGINE_ARG.fullmatch(arg):
            yield where, f"must be {label} (^{ENGINE_ARG.pattern}$)" + _name_hint(engine, version, arg)
        elif owner := engine_options.owner_problem(engine, version, arg):
            yield where, owner
        elif isinstance(value, str) and value.startswith("-"):
            yield where, "value must not start with '-' (it would read as a flag)"
        elif isinstance(value, str) and _traverses(value) and "/" in value:
            yield where, "must not contain a '.' or '..' path component"
        elif problem := engine_options.problems(engine, version, arg, value):
            yield where, problem


def _name_hint(engine: str, version: str, arg: str) -> str:
    """What a key that is no option name (`--trust-remote-code`, `tp_size=2`, `-O3`) would be as one."""
    if engine == "vllm" and arg.startswith("-O"):
        return "; vLLM's -O<n> is --optimization-level <n> (optimization_level: <n>)"
    bare = arg.lstrip("-").split("=", 1)[0]
    owned = engine_options.owned_option(engine, version, bare) if ENGINE_ARG.fullmatch(bare) else None
    return f"; as an option it is {owned[0]}, which gridready owns" if owned else ""


def tier_engine_args(key: str, tier: Any, serving: Any) -> Iterator[tuple[str, str]]:
    """The values gridready renders from the tier's fields and its extra_engine_args, against its engine's pinned
    release; engines that render no extra option refuse them."""
    engine, version = tier.engine, serving.vllm_version
    if engine == "sglang":
        version = (tier.sglang.version if tier.sglang is not None else None) or engine_options.sglang_pin()
    if engine in ("vllm", "sglang"):
        for field, reason in engine_options.rendered_values(engine, version, tier):
            yield f"{key}.{field}", reason
        yield from engine_args(key, tier.extra_engine_args, engine, version)
    elif tier.engine == "triton-trtllm" and tier.extra_engine_args:  # triton-embedding: embedding_problems
        yield (f"{key}.extra_engine_args", "triton-trtllm renders none of them (the Triton and TensorRT-LLM "
               "settings are under the tier's triton); remove them")


def field_patterns(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    iface = "a Linux interface name"
    for i, group in enumerate(spec.node_groups):
        yield from _match(IFNAME, group.mgmt_interface, f"node_groups[{i}].mgmt_interface", iface)
        for j, nic in enumerate(group.nics):
            yield from _match(IFNAME, nic.netdev, f"node_groups[{i}].nics[{j}].netdev", iface)
    serving = spec.serving
    yield from _match(IFNAME, serving.socket_ifname, "serving.socket_ifname", iface)
    yield from _match(IFNAME, serving.kubernetes.socket_ifname, "serving.kubernetes.socket_ifname", iface)
    yield from _no_traversal(serving.kubernetes.model_cache_path, "serving.kubernetes.model_cache_path")
    yield from firewall(spec)
    yield from mirror_trust(spec)
    yield from python_index_trust(spec)
    if spec.certification.validity_hours > MAX_VALIDITY_HOURS:
        yield "certification.validity_hours", f"must be at most {MAX_VALIDITY_HOURS} (a year)"
    for i, tier in enumerate(serving.tiers):
        key = f"serving.tiers[{i}]"
        yield from _match(SERVED_NAME, tier.served_name, f"{key}.served_name", "a model name without '/'")
        yield from _match(HF_ID, tier.model.hf_id, f"{key}.model.hf_id", "a Hugging Face repo id (namespace/name)")
        yield from _match(REVISION, tier.model.revision, f"{key}.model.revision",
                          "a pinned commit (40 hex digits; a branch or tag moves)")
        yield from _match(ABS_PATH, tier.model.local_path, f"{key}.model.local_path", "an absolute path")
        yield from _no_traversal(tier.model.local_path, f"{key}.model.local_path")
        if tier.embedding is not None:
            yield from _no_traversal(tier.embedding.model_file, f"{key}.embedding.model_file")
        for j, adapter in enumerate(tier.lora_adapters):
            where = f"{key}.lora_adapters[{j}].path"
            if serving.target == "kubernetes" and tier.engine == "sglang":
                yield from _sglang_k8s_adapter(adapter.path, where, serving.kubernetes.model_cache_path)
                continue
            remote = serving.target == "kubernetes" and OBJECT_URI.fullmatch(adapter.path)
            if not (ABS_PATH.fullmatch(adapter.path) or HF_ID.fullmatch(adapter.path) or remote):
                yield where, ("must be an absolute path or a Hugging Face repo id" +
                              (", or on Kubernetes an s3://, gs://, abfss:// or azure:// URI"
                               if serving.target == "kubernetes" else ""))
            elif not remote:
                yield from _no_traversal(adapter.path, where)
        yield from tier_engine_args(key, tier, serving)


def _sglang_k8s_adapter(path: str, where: str, cache: str) -> Iterator[tuple[str, str]]:
    """What an SGLang pod can load as a LoRA adapter. SGLang 0.5.19 loads `--lora-paths name=path` from a local
    directory and takes any other path for a Hugging Face repository id (it has no object-storage loader), and its
    pods mount only the node's Hugging Face cache (serving.kubernetes.model_cache_path)."""
    if OBJECT_URI.fullmatch(path):
        yield where, ("SGLang loads no adapter from object storage (a path that is no local directory is taken "
                      "for a Hugging Face repo id): use a Hugging Face repo id, or sync the adapter into "
                      f"serving.kubernetes.model_cache_path ({cache}) on every node and name that directory")
    elif ABS_PATH.fullmatch(path) and not (path.rstrip("/") + "/").startswith(cache.rstrip("/") + "/"):
        yield where, (f"the SGLang pods mount only the node's Hugging Face cache ({cache}, "
                      "serving.kubernetes.model_cache_path): a node-local adapter must lie beneath it")
    elif not (ABS_PATH.fullmatch(path) or HF_ID.fullmatch(path)):
        yield where, "must be a Hugging Face repo id or an absolute path beneath serving.kubernetes.model_cache_path"
    else:
        yield from _no_traversal(path, where)


def mirror_trust(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """A plain-http mirror needs a pinned key fingerprint. apt verifies the Release signature with the keyring
    (apt-secure(8), https://manpages.debian.org/bookworm/apt/apt-secure.8.en.html), but the provision role
    downloads that keyring from the mirror itself: over http, whoever can change the packages can change the key
    too. The pin is checked on every node against the downloaded key (library/gridready_openpgp_key.py).
    Credentials in the URL would reach every node's apt sources and the job events: apt's auth.conf is the place."""
    pins = spec.software
    url = pins.package_mirror
    if url is None:
        return
    if not MIRROR_URL.fullmatch(url):
        yield "software.package_mirror", "must be an http, https or file URL without whitespace"
    elif "@" in urlsplit(url).netloc:
        yield "software.package_mirror", ("must not carry a user or password (they would reach every node's apt "
                                           "sources and the job events); use apt's auth.conf from the vault")
    elif _traverses(urlsplit(url).path.rstrip("/")):
        yield "software.package_mirror", "must not contain a '.' or '..' path component"
    elif url.lower().startswith("http://") and not pins.package_mirror_key_fingerprint:
        yield ("software.package_mirror", "a plain-http mirror needs software.package_mirror_key_fingerprint "
               "(its signing key would come over the same unauthenticated connection)")


PYTHON_INDEX_URL = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~/%+-]*)?")


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


def ranges(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Bounds that come in pairs, and names that become path components on the nodes."""
    cert = spec.certification
    for key, low, high in (("certification.nccl.min_bytes", cert.nccl.min_bytes, cert.nccl.max_bytes),
                           ("certification.fabric.min_bytes", cert.fabric.min_bytes, cert.fabric.max_bytes),
                           ("certification.fabric.pair_min_bytes", cert.fabric.pair_min_bytes, cert.fabric.max_bytes)):
        if low > high:
            yield key, f"{low} is more than max_bytes ({high}): the sweep would measure nothing"
    for i, group in enumerate(spec.node_groups):
        for j, nic in enumerate(group.nics):
            if nic.name in (".", ".."):  # /sys/class/infiniband/<name>
                yield f"node_groups[{i}].nics[{j}].name", "must not be '.' or '..'"
    for i, tier in enumerate(spec.serving.tiers):
        for j, adapter in enumerate(tier.lora_adapters):
            if adapter.name in (".", ".."):
                yield f"serving.tiers[{i}].lora_adapters[{j}].name", "must not be '.' or '..'"


def hardware(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Settings the node group's hardware cannot honour."""
    no_nvswitch = [g.name for g in spec.node_groups if not _nvswitch(g)]
    if no_nvswitch:
        if spec.certification.nccl.algo == "nvls":
            yield ("certification.nccl.algo", f"nvls needs NVSwitch, which {', '.join(no_nvswitch)} lacks "
                   "(NVLink SHARP runs on the switches); use ring or tree")
        if spec.certification.fabric.algo == "nvls":
            yield ("certification.fabric.algo", f"nvls needs NVSwitch, which {', '.join(no_nvswitch)} lacks; "
                   "use ring or tree")
    for i, tier in enumerate(spec.serving.tiers):
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        if group is None or tier.embedding is None:
            continue
        for j, ig in enumerate(tier.embedding.instance_groups):
            beyond = sorted({g for g in ig.gpus or [] if g >= group.gpus_per_node})
            if beyond:
                yield (f"serving.tiers[{i}].embedding.instance_groups[{j}].gpus",
                       f"GPU index {beyond[0]} is beyond the {group.gpus_per_node} GPUs of {group.name} (0-"
                       f"{group.gpus_per_node - 1})")


def _nvswitch(group: Any) -> bool:
    sku = group.catalog_sku
    shape = sku.shape(group.gpus_per_node, group.platform) if sku.shapes else None
    return bool(shape.nvswitch if shape is not None else sku.nvswitch)


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
    if clash := _ray_clash(serving.ray_port, -1):
        yield "serving.ray_port", clash
    yield from router(spec)
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


def router(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Routes name tiers that exist; the router has a port and keys of its own (it runs on the first tier's
    head, beside the engines and Ray)."""
    serving, rs = spec.serving, spec.serving.router
    tiers = {t.name for t in serving.tiers}
    for i, route in enumerate(rs.routes):
        for j, target in enumerate(route.targets):
            if target.tier not in tiers:
                yield f"serving.router.routes[{i}].targets[{j}].tier", f"no tier named {target.tier!r}"
        for j, name in enumerate(route.fallback):
            if name not in tiers:
                yield f"serving.router.routes[{i}].fallback[{j}]", f"no tier named {name!r}"
    if not rs.enabled:
        return
    if clash := _ray_clash(rs.port, serving.ray_port):
        yield "serving.router.port", clash
    for i, tier in enumerate(serving.tiers):
        for name, port in tier_ports(tier):
            if port == rs.port:
                yield "serving.router.port", f"{port} is already serving.tiers[{i}].{name}"
    seen: dict[str, str] = {}
    for i, key in enumerate(rs.keys):
        if key.vault_var in ENGINE_VAULT_VARS:
            yield (f"serving.router.keys[{i}].vault_var", f"{key.vault_var} is {ENGINE_VAULT_VARS[key.vault_var]}; "
                   "a client key of the router needs a vault variable of its own")
        elif key.vault_var in seen:
            yield f"serving.router.keys[{i}].vault_var", f"already the variable of key {seen[key.vault_var]!r}"
        seen.setdefault(key.vault_var, key.name)
    names = [k.name for k in rs.keys]
    for dupe in sorted({n for n in names if names.count(n) > 1}):
        yield "serving.router.keys", f"duplicate key name {dupe!r}"
    if rs.proxy == "haproxy" and serving.target == "hosts":
        yield from _haproxy_router(spec)


def _haproxy_router(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """HAProxy counts requests, not tokens, and passes the request body on as it came (LiteLLM rewrites its
    model to the tier's served name): docs/layer3.md "HAProxy front"."""
    rs = spec.serving.router
    for i, key in enumerate(rs.keys):
        if key.tpm_limit is not None:
            yield (f"serving.router.keys[{i}].tpm_limit", "proxy haproxy limits requests, not tokens (it never reads "
                   "the answer's usage); drop tpm_limit or set serving.router.proxy: litellm")
    served = {t.name: t.served_name for t in spec.serving.tiers}
    for i, route in enumerate(rs.routes):
        for tier in dict.fromkeys([t.tier for t in route.targets] + route.fallback):
            if tier in served and served[tier] != route.model:
                yield (f"serving.router.routes[{i}].model", f"{route.model} is not what tier {tier} serves "
                       f"({served[tier]}); proxy haproxy passes the request body on unchanged, so name the route "
                       f"{served[tier]} or set serving.router.proxy: litellm")


def placement(spec: ClusterSpec, nodes: dict[str, int]) -> Iterator[tuple[str, str]]:
    """serve's placement (gridready.serving.topology.plan_tiers) on every node of hosts.yml: each tier, in
    spec order, takes whole nodes of its group that no earlier tier took. What cannot be placed with every node
    certified never can."""
    left = dict(nodes)
    for i, tier in enumerate(spec.serving.tiers):
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        if group is None:
            continue
        have = left.get(group.name, 0)
        par = resolve(tier, group)
        need = par.nodes_per_replica * tier.replicas
        if need > have or not have:
            taken = nodes.get(group.name, 0) - have
            yield (f"serving.tiers[{i}]", f"needs {need} whole node(s) of {group.name}; {have} left of "
                   f"{nodes.get(group.name, 0)} after the tiers before it took {taken} (tiers never share a node)")
            continue
        left[group.name] = have - need


def triton_nodes(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """A Triton TRT-LLM tier across nodes needs MPI between containers: on hosts the role runs one node only
    (roles/gridready_triton_trtllm asserts it, after the weights download), and on Kubernetes mpirun reaches the
    LeaderWorkerSet's workers over ssh, which the stock tritonserver image cannot serve (no sshd)."""
    for i, tier in enumerate(spec.serving.tiers):
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        if tier.engine != "triton-trtllm" or group is None:
            continue
        span = resolve(tier, group).nodes_per_replica
        if span <= 1:
            continue
        where = f"serving.tiers[{i}]"
        if spec.serving.target == "hosts":
            yield where, (f"a Triton TRT-LLM replica across {span} nodes runs only on target kubernetes (a "
                          "LeaderWorkerSet): on hosts the role serves one node per replica; lower tensor_parallel x "
                          "pipeline_parallel to one node's GPUs")
        elif spec.serving.kubernetes.triton_mpi_image is None:
            yield where, (f"a Triton TRT-LLM replica across {span} nodes needs serving.kubernetes.triton_mpi_image: "
                          "mpirun starts the workers' ranks over ssh and the stock tritonserver image has no sshd "
                          "(build one with docs/kubernetes.md's recipe)")


def router_os(spec: ClusterSpec) -> Iterator[tuple[str, str]]:
    """Target hosts: the router runs on a serving head from a venv of that host's python3, installed offline from
    the hashed lock for that CPython (roles/gridready_router, ROUTER_PYTHON); a node group serving a tier on an OS
    without one would stop at serve time, after the engines were deployed."""
    serving = spec.serving
    if not serving.router.enabled or serving.target != "hosts" or serving.router.proxy == "haproxy":
        return  # HAProxy comes from the OS's own archive (roles/gridready_router/tasks/haproxy.yml)
    used = {tier.node_group or spec.node_groups[0].name for tier in serving.tiers}
    for i, group in enumerate(spec.node_groups):
        if group.name in used and router_python(group.os) is None:
            yield (f"node_groups[{i}].os", f"{group.os} has no supported router install (a LiteLLM lock exists for "
                   f"{', '.join(sorted(ROUTER_PYTHON))}); serve this group's tiers on one of those, or set "
                   "serving.router.enabled: false")


def check(spec: ClusterSpec, nodes: dict[str, int]) -> list[tuple[str, str]]:
    """Every rule but placement, which inventory.load runs last, once nothing else is wrong (its message
    assumes tiers that each fit their group)."""
    return [*one_line(spec), *field_patterns(spec), *ranges(spec), *hardware(spec), *cross_tier(spec, nodes),
            *kubernetes(spec), *lora(spec), *triton_nodes(spec), *router_os(spec)]
