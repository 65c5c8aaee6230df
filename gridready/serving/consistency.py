"""Cross-object checks of a rendered manifest set: what no schema can see, and what leaves a deployment Pending,
unreachable or unscraped although every object validates on its own.

- every Service with a selector selects at least one pod template of its namespace, counting the labels the
  controllers add to their pods (KubeRay: ray.io/node-type and, on pods with a healthy Serve proxy,
  ray.io/serve=true; LeaderWorkerSet: leaderworkerset.sigs.k8s.io/name and worker-index, "0" on the leader);
- every ServiceMonitor endpoint port is a port name of a Service it selects; every PodMonitor port is a container
  port name of a pod template it selects;
- every custom resource kind of a known operator (CONTROLLERS) has its controller: a Helm release of the
  platform stack, or a controller the caller declares as provided outside gridready;
- every Secret, ConfigMap and PersistentVolumeClaim a pod template names (env valueFrom, envFrom, volumes) is in
  the set;
- every pod template that requests GPUs tolerates the GPU pool's taint (nvidia.com/gpu:NoSchedule) and selects
  certified nodes (nodeSelector gridready.io/certified=true);
- a hostPath DirectoryOrCreate (made root-owned 0755 by the kubelet) that a non-root container mounts writable is
  handed to that user first by a root init container that chowns it (the Ray images run as uid 1000);
- Pulumi waits for every Deployment, StatefulSet and Job of a tier at least as long as its pods' startup probe
  allows the model to load (annotation pulumi.com/timeoutSeconds; its default, 10 minutes, is not enough);
- no HTTPRoute matches a header only the Gateway API Inference Extension's body-based routing sets
  (X-Gateway-Model-Name) unless the caller declares that extension installed;
- a RayService tier's Serve port (Ray Serve LLM checks no API key) admits no peer but the tier's own pods and the
  authenticating router's pods (app.kubernetes.io/name=gridready-router);
- every serving tier's pod template (label gridready.io/tier) is selected by an Ingress NetworkPolicy of its
  namespace, and no rule of those policies admits a peer beyond the tier's own pods to every port, to Ray's GCS,
  client or worker ports, or to the Ray dashboard ports unless the peer is the KubeRay operator's namespace;
- (given the monitoring namespaces) every port a PodMonitor or ServiceMonitor scrapes on a tier's pods is admitted
  from those namespaces by a NetworkPolicy selecting the pods, and every RayService's pods admit the KubeRay
  operator's namespace to the Serve proxy (8000), whose health check decides whether the head serves.

One line per problem: `<Kind>/<name>: <path>: <message>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LWS_NAME = "leaderworkerset.sigs.k8s.io/name"  # kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go
LWS_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
# API group -> the Helm chart (last path element) whose controller serves it
CONTROLLERS = {
    "ray.io": "kuberay-operator",
    "leaderworkerset.x-k8s.io": "lws",
    "nvidia.com": "gpu-operator",
    "monitoring.coreos.com": "kube-prometheus-stack",
}
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")
TIER_LABEL = "gridready.io/tier"
CERTIFIED_LABEL = "gridready.io/certified"
GPU_RESOURCE = "nvidia.com/gpu"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
# Ray's ports that must stay inside a tier (Ray "Configuring Ray", ports; roles/gridready_ray_node defaults):
# GCS, client server, worker range; the dashboard and its agent only for the KubeRay operator
RAY_CLOSED_PORTS = {6379: "Ray's GCS", 10001: "the Ray client server"}
RAY_WORKER_PORTS = range(10002, 20000)  # Ray's default worker port range (min/max-worker-port)
RAY_OPERATOR_PORTS = {8265: "the Ray dashboard", 52365: "the Ray dashboard agent"}


@dataclass(frozen=True)
class PodTemplate:
    owner: str  # Kind/name of the object holding it
    path: str
    namespace: str
    labels: Mapping[str, str]  # the template's labels plus those its controller adds
    spec: Mapping[str, Any]


def _where(doc: Mapping[str, Any]) -> str:
    return f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def _ns(doc: Mapping[str, Any]) -> str:
    return doc.get("metadata", {}).get("namespace") or "default"


def _template(owner: Mapping[str, Any], path: str, tmpl: Mapping[str, Any] | None,
              added: Mapping[str, str]) -> list[PodTemplate]:
    if not tmpl:
        return []
    labels = {**(tmpl.get("metadata", {}).get("labels") or {}), **added}
    return [PodTemplate(_where(owner), path, _ns(owner), labels, tmpl.get("spec") or {})]


def pod_templates(docs: Iterable[Mapping[str, Any]]) -> list[PodTemplate]:
    """Every pod template of the set, with the labels its controller puts on the pods."""
    out: list[PodTemplate] = []
    for doc in docs:
        kind, spec = doc.get("kind"), doc.get("spec") or {}
        if kind in WORKLOADS:
            out += _template(doc, "spec.template", spec.get("template"), {})
        elif kind in ("RayService", "RayCluster"):
            rc = spec.get("rayClusterConfig", {}) if kind == "RayService" else spec
            # KubeRay labels head and worker pods ray.io/node-type, and ray.io/serve=true where Serve's proxy is
            # healthy (ray-operator/controllers/ray/utils/constant.go, rayservice_controller.go)
            served = {"ray.io/serve": "true"} if kind == "RayService" else {}
            head = rc.get("headGroupSpec", {})
            out += _template(doc, "spec.rayClusterConfig.headGroupSpec.template", head.get("template"),
                             {"ray.io/node-type": "head", **served})
            for i, group in enumerate(rc.get("workerGroupSpecs") or []):
                out += _template(doc, f"spec.rayClusterConfig.workerGroupSpecs[{i}].template", group.get("template"),
                                 {"ray.io/node-type": "worker", "ray.io/group": str(group.get("groupName")), **served})
        elif kind == "LeaderWorkerSet":
            lwt = spec.get("leaderWorkerTemplate") or {}
            name = doc.get("metadata", {}).get("name", "")
            leader = lwt.get("leaderTemplate") or lwt.get("workerTemplate")
            out += _template(doc, "spec.leaderWorkerTemplate.leaderTemplate", leader,
                             {LWS_NAME: name, LWS_INDEX: "0"})
            if int(lwt.get("size") or 1) > 1:
                out += _template(doc, "spec.leaderWorkerTemplate.workerTemplate", lwt.get("workerTemplate"),
                                 {LWS_NAME: name, LWS_INDEX: "1"})
    return out


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # a LabelSelector (matchLabels and/or matchExpressions, either may be absent) or a Service's plain label map
    structured = "matchLabels" in selector or "matchExpressions" in selector
    match = selector.get("matchLabels") if structured else selector
    if any(labels.get(k) != v for k, v in (match or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) or (
                op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def _service_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate]) -> list[str]:
    errors = []
    for svc in (d for d in docs if d.get("kind") == "Service"):
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            continue  # selector-less Services have hand-made Endpoints
        if not any(p.namespace == _ns(svc) and _selects(selector, p.labels) for p in pods):
            errors.append(f"{_where(svc)}: spec.selector: {selector} selects no pod template in namespace "
                          f"{_ns(svc)}")
    return errors


def _monitor_namespaces(mon: Mapping[str, Any]) -> set[str] | None:
    sel = (mon.get("spec") or {}).get("namespaceSelector") or {}
    if sel.get("any"):
        return None
    return set(sel.get("matchNames") or [_ns(mon)])


def _monitor_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate], helm_namespaces: set[str]) -> list[str]:
    errors = []
    services = [d for d in docs if d.get("kind") == "Service"]
    for mon in (d for d in docs if d.get("kind") in ("ServiceMonitor", "PodMonitor")):
        spec, namespaces = mon.get("spec") or {}, _monitor_namespaces(mon)
        if namespaces and namespaces <= helm_namespaces:
            continue  # its targets are made by a Helm chart (the GPU Operator's exporter), not rendered here
        selector = spec.get("selector") or {}

        def in_scope(ns: str, namespaces: set[str] | None = namespaces) -> bool:
            return namespaces is None or ns in namespaces

        if mon["kind"] == "ServiceMonitor":
            targets = [s for s in services if in_scope(_ns(s)) and _selects(selector, s["metadata"].get("labels")
                                                                             or {})]
            ports = {p.get("name") for s in targets for p in (s.get("spec") or {}).get("ports") or []}
            wanted = [(i, e.get("port")) for i, e in enumerate(spec.get("endpoints") or [])]
            what = "Service"
        else:
            selected = [p for p in pods if in_scope(p.namespace) and _selects(selector, p.labels)]
            targets = selected
            ports = {cp.get("name") for p in selected for c in p.spec.get("containers") or []
                     for cp in c.get("ports") or []}
            wanted = [(i, e.get("port")) for i, e in enumerate(spec.get("podMetricsEndpoints") or [])]
            what = "pod template"
        if not targets:
            errors.append(f"{_where(mon)}: spec.selector: selects no {what}")
            continue
        key = "endpoints" if mon["kind"] == "ServiceMonitor" else "podMetricsEndpoints"
        for i, port in wanted:
            if mon["kind"] == "PodMonitor" and port in ports:
                # every selected pod is scraped: a template without the port leaves its pods out (Ray workers)
                for p in selected:
                    if port not in {cp.get("name") for c in p.spec.get("containers") or []
                                    for cp in c.get("ports") or []}:
                        errors.append(f"{_where(mon)}: spec.{key}[{i}].port: {port!r} is no container port of "
                                      f"{p.owner} {p.path}: its pods are not scraped")
            if port not in ports:
                errors.append(f"{_where(mon)}: spec.{key}[{i}].port: {port!r} is no port of the selected "
                              f"{what}s (they have {sorted(p for p in ports if p)})")
    return errors


def _controller_errors(docs: list[Mapping[str, Any]], releases: list[Mapping[str, Any]],
                       external: Mapping[str, str]) -> list[str]:
    charts = {str(r.get("chart", "")).rstrip("/").rsplit("/", 1)[-1] for r in releases}
    errors, seen = [], set()
    for doc in docs:
        group = str(doc.get("apiVersion", "")).rpartition("/")[0]
        chart = CONTROLLERS.get(group)
        if chart is None or group in external or (group, doc.get("kind")) in seen:
            continue  # built-in kinds, groups another module owns, or already reported
        seen.add((group, doc.get("kind")))
        if chart not in charts:
            errors.append(f"{_where(doc)}: apiVersion: {group} needs the {chart} controller, which no platform Helm "
                          f"release installs (releases: {sorted(charts)})")
    return errors


def _ref_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate]) -> list[str]:
    have = {(d.get("kind"), _ns(d), d.get("metadata", {}).get("name")) for d in docs}
    errors = []

    def need(kind: str, ns: str, name: str | None, optional: bool, where: str) -> None:
        if name and not optional and (kind, ns, name) not in have:
            errors.append(f"{where}: {kind} {name!r} is not rendered in namespace {ns}")

    for p in pods:
        for c_i, c in enumerate([*(p.spec.get("initContainers") or []), *(p.spec.get("containers") or [])]):
            at = f"{p.owner}: {p.path}.spec.containers[{c.get('name', c_i)}]"
            for e in c.get("env") or []:
                src = e.get("valueFrom") or {}
                for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                    if key in src:
                        need(kind, p.namespace, src[key].get("name"), bool(src[key].get("optional")),
                             f"{at}.env[{e.get('name')}]")
            for e in c.get("envFrom") or []:
                for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                    if key in e:
                        need(kind, p.namespace, e[key].get("name"), bool(e[key].get("optional")), f"{at}.envFrom")
        for v in p.spec.get("volumes") or []:
            at = f"{p.owner}: {p.path}.spec.volumes[{v.get('name')}]"
            if "configMap" in v:
                need("ConfigMap", p.namespace, v["configMap"].get("name"), bool(v["configMap"].get("optional")), at)
            if "secret" in v:
                need("Secret", p.namespace, v["secret"].get("secretName"), bool(v["secret"].get("optional")), at)
            if "persistentVolumeClaim" in v:
                need("PersistentVolumeClaim", p.namespace, v["persistentVolumeClaim"].get("claimName"), False, at)
    return errors


def _gpu_requested(spec: Mapping[str, Any]) -> bool:
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        amounts = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        if str(amounts.get(GPU_RESOURCE, "0")) not in ("0", ""):
            return True
    return False


def _tolerates_gpu_taint(spec: Mapping[str, Any]) -> bool:
    for t in spec.get("tolerations") or []:
        if t.get("effect") not in (None, "", "NoSchedule"):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", GPU_RESOURCE):
            return True
        if t.get("key") == GPU_RESOURCE:
            return True
    return False


def _gpu_pod_errors(pods: list[PodTemplate]) -> list[str]:
    """GPU pods land on certified GPU nodes only, and those nodes' pool taint does not leave them Pending."""
    errors = []
    for p in pods:
        if not _gpu_requested(p.spec):
            continue
        if not _tolerates_gpu_taint(p.spec):
            errors.append(f"{p.owner}: {p.path}.spec.tolerations: requests GPUs but does not tolerate the GPU "
                          f"pool's taint {GPU_RESOURCE}:NoSchedule (Pending on tainted GPU pools)")
        if (p.spec.get("nodeSelector") or {}).get(CERTIFIED_LABEL) != "true":
            errors.append(f"{p.owner}: {p.path}.spec.nodeSelector: requests GPUs but does not select certified "
                          f"nodes ({CERTIFIED_LABEL}: 'true'): it may land on a quarantined or uncertified node")
    return errors


def _own_pods_only(peer: Mapping[str, Any], tier: str) -> bool:
    """A peer that admits only pods of the tier (a podSelector of this namespace requiring the tier label)."""
    sel = peer.get("podSelector")
    return set(peer) == {"podSelector"} and isinstance(sel, Mapping) and \
        (sel.get("matchLabels") or {}).get(TIER_LABEL) == tier


def _operator_only(peers: list[Mapping[str, Any]], operator_namespaces: set[str]) -> bool:
    return bool(peers) and all(
        set(p) == {"namespaceSelector"} and
        (p["namespaceSelector"].get("matchLabels") or {}).get(NAMESPACE_LABEL) in operator_namespaces
        for p in peers)


def _rule_errors(where: str, rule: Mapping[str, Any], tier: str, operator_namespaces: set[str]) -> list[str]:
    peers = list(rule.get("from") or [])
    if peers and all(_own_pods_only(p, tier) for p in peers):
        return []
    if not peers:
        return [f"{where}: admits every source (no from): only the tier's own pods may reach all its ports"]
    ports = rule.get("ports")
    if not ports:
        return [f"{where}: admits peers beyond tier {tier!r} to every port, Ray's included: name the serving ports"]
    errors = []
    for p in ports:
        port = p.get("port")
        if not isinstance(port, int):
            continue
        end = p.get("endPort") or port
        closed = [q for q in RAY_CLOSED_PORTS if port <= q <= end]
        if closed:
            errors.append(f"{where}: opens {RAY_CLOSED_PORTS[closed[0]]} ({closed[0]}) beyond the tier")
        elif port in RAY_OPERATOR_PORTS and not _operator_only(peers, operator_namespaces):
            errors.append(f"{where}: opens {RAY_OPERATOR_PORTS[port]} ({port}) to peers other than the KubeRay "
                          f"operator's namespace (job submission there is remote code execution)")
        elif end > port and range(max(port, RAY_WORKER_PORTS.start), min(end, RAY_WORKER_PORTS.stop - 1) + 1):
            errors.append(f"{where}: opens Ray's worker ports ({port}-{end}) beyond the tier")
    return errors


def _policy_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate], operator_namespaces: set[str]) -> list[str]:
    policies = [d for d in docs if d.get("kind") == "NetworkPolicy"
                and "Ingress" in ((d.get("spec") or {}).get("policyTypes") or ["Ingress"])]
    errors, seen = [], set()
    for p in pods:
        tier = p.labels.get(TIER_LABEL)
        if not tier:
            continue
        mine = [d for d in policies if _ns(d) == p.namespace and _selects(d["spec"].get("podSelector") or {}, p.labels)]
        if not mine:
            errors.append(f"{p.owner}: {p.path}: no Ingress NetworkPolicy of namespace {p.namespace} selects the "
                          f"pods of tier {tier!r}: every port, Ray's included, is open to the cluster")
        for d in mine:
            for i, rule in enumerate(d["spec"].get("ingress") or []):
                if (_where(d), i) not in seen:
                    seen.add((_where(d), i))
                    errors += _rule_errors(f"{_where(d)}: spec.ingress[{i}]", rule, tier, operator_namespaces)
    return errors


# images whose default user is not root, where a container states none (ray-project/ray docker/base-deps)
IMAGE_USERS = {"rayproject/": 1000}


def _uid(c: Mapping[str, Any], pod: Mapping[str, Any]) -> int:
    for sc in (c.get("securityContext") or {}, pod.get("securityContext") or {}):
        if sc.get("runAsUser") is not None:
            return int(sc["runAsUser"])
    image = str(c.get("image", ""))
    return next((u for prefix, u in IMAGE_USERS.items() if image.startswith(prefix)), 0)


def _hostpath_errors(pods: list[PodTemplate]) -> list[str]:
    errors = []
    for p in pods:
        made = {v["name"]: v["hostPath"].get("path") for v in p.spec.get("volumes") or []
                if (v.get("hostPath") or {}).get("type") == "DirectoryOrCreate"}
        for c in p.spec.get("containers") or []:
            uid = _uid(c, p.spec)
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in made or m.get("readOnly") or uid == 0:
                    continue
                fixed = any(_uid(i, p.spec) == 0 and any(im.get("name") == m["name"] for im in i.get("volumeMounts")
                                                          or [])
                            and f"chown {uid}" in " ".join(str(w) for w in [*(i.get("command") or []),
                                                                             *(i.get("args") or [])])
                            for i in p.spec.get("initContainers") or [])
                if not fixed:
                    errors.append(f"{p.owner}: {p.path}.spec.containers[{c.get('name')}].volumeMounts[{m['name']}]: "
                                  f"hostPath {made[m['name']]} (DirectoryOrCreate: root-owned 0755) is not writable "
                                  f"by uid {uid}; a root init container must chown it")
    return errors


PULUMI_TIMEOUT = "pulumi.com/timeoutSeconds"
PULUMI_DEFAULT_S = 600  # pulumi-kubernetes' await default for Deployments and Jobs


def _startup_budget_s(spec: Mapping[str, Any]) -> int:
    budget = 0
    for c in spec.get("containers") or []:
        probe = c.get("startupProbe") or {}
        if probe:
            budget = max(budget, int(probe.get("initialDelaySeconds", 0))
                         + int(probe.get("periodSeconds", 10)) * int(probe.get("failureThreshold", 3)))
    return budget


def _timeout_errors(docs: list[Mapping[str, Any]]) -> list[str]:
    errors = []
    for d in docs:
        if d.get("kind") not in ("Deployment", "StatefulSet", "Job"):
            continue
        meta = d.get("metadata") or {}
        tmpl = ((d.get("spec") or {}).get("template") or {})
        if TIER_LABEL not in (meta.get("labels") or {}) and TIER_LABEL not in (
                (tmpl.get("metadata") or {}).get("labels") or {}):
            continue
        raw = (meta.get("annotations") or {}).get(PULUMI_TIMEOUT)
        budget = _startup_budget_s(tmpl.get("spec") or {})
        if raw is None:
            errors.append(f"{_where(d)}: metadata.annotations: no {PULUMI_TIMEOUT}: Pulumi gives up after "
                          f"{PULUMI_DEFAULT_S} s" + (f", the pods' startup probe allows {budget} s" if budget else
                                                     ", less than a model download or an engine build"))
        elif budget and int(raw) < budget:
            errors.append(f"{_where(d)}: metadata.annotations[{PULUMI_TIMEOUT}]: {raw} s is shorter than the "
                          f"pods' startup probe ({budget} s)")
    return errors


BODY_ROUTING_HEADER = "x-gateway-model-name"  # set by the Inference Extension's body-based router only
BODY_ROUTING = "body-based-routing"  # external_controllers key that declares it installed
ROUTER_POD = {"app.kubernetes.io/name": "gridready-router"}
RAY_SERVE_PORT = 8000


def _header_errors(docs: list[Mapping[str, Any]], external: Mapping[str, str]) -> list[str]:
    if BODY_ROUTING in external:
        return []
    errors = []
    for route in (d for d in docs if d.get("kind") == "HTTPRoute"):
        for r_i, rule in enumerate((route.get("spec") or {}).get("rules") or []):
            for m in rule.get("matches") or []:
                for h in m.get("headers") or []:
                    if str(h.get("name", "")).lower() == BODY_ROUTING_HEADER:
                        errors.append(f"{_where(route)}: spec.rules[{r_i}].matches: header {h.get('name')} is set "
                                      f"only by the Inference Extension's body-based routing, which nothing "
                                      f"installs: every request gets 404")
    return errors


def _container_port(spec: Mapping[str, Any], port: Any) -> int | None:
    """A named or numbered port of a pod template, as a number (None: the template has no such port)."""
    if isinstance(port, int):
        return port
    for c in spec.get("containers") or []:
        for cp in c.get("ports") or []:
            if cp.get("name") == port:
                return int(cp["containerPort"])
    return None


def _admits(policies: list[Mapping[str, Any]], namespace: str, port: int, name: str | None) -> bool:
    """Whether one ingress rule of `policies` lets pods of `namespace` reach `port` (named `name` in the pod)."""
    for d in policies:
        for rule in (d.get("spec") or {}).get("ingress") or []:
            peers = rule.get("from")
            from_ns = not peers or any(
                "ipBlock" not in peer and not ((peer.get("podSelector") or {}).get("matchLabels"))
                and "namespaceSelector" in peer
                and _selects(peer["namespaceSelector"], {NAMESPACE_LABEL: namespace}) for peer in peers)
            ports = rule.get("ports")
            on_port = not ports or any(p.get("port") in (port, name) or
                                       (isinstance(p.get("port"), int) and p["port"] <= port <= (p.get("endPort")
                                                                                                 or p["port"]))
                                       for p in ports)
            if from_ns and on_port:
                return True
    return False


def _ingress_policies(docs: list[Mapping[str, Any]], pod: PodTemplate) -> list[Mapping[str, Any]]:
    return [d for d in docs if d.get("kind") == "NetworkPolicy" and _ns(d) == pod.namespace
            and "Ingress" in ((d.get("spec") or {}).get("policyTypes") or ["Ingress"])
            and _selects((d.get("spec") or {}).get("podSelector") or {}, pod.labels)]


def _scraped(docs: list[Mapping[str, Any]], pods: list[PodTemplate]) -> list[tuple[str, PodTemplate, Any]]:
    """(monitor, pod template, container port name or number) for every port a monitor scrapes on a tier's pods."""
    out = []
    for mon in (d for d in docs if d.get("kind") in ("ServiceMonitor", "PodMonitor")):
        spec, namespaces = mon.get("spec") or {}, _monitor_namespaces(mon)
        selector = spec.get("selector") or {}
        if mon["kind"] == "PodMonitor":
            for p in pods:
                if (namespaces is None or p.namespace in namespaces) and _selects(selector, p.labels):
                    out += [(_where(mon), p, e.get("port")) for e in spec.get("podMetricsEndpoints") or []]
            continue
        for svc in (d for d in docs if d.get("kind") == "Service"):
            if not ((namespaces is None or _ns(svc) in namespaces)
                    and _selects(selector, svc["metadata"].get("labels") or {})):
                continue
            svc_spec = svc.get("spec") or {}
            by_name = {sp.get("name"): sp.get("targetPort", sp.get("port")) for sp in svc_spec.get("ports") or []}
            for p in pods:
                if p.namespace == _ns(svc) and svc_spec.get("selector") and \
                        _selects({"matchLabels": svc_spec["selector"]}, p.labels):
                    out += [(_where(mon), p, by_name[e.get("port")]) for e in spec.get("endpoints") or []
                            if e.get("port") in by_name]
    return out


def _scrape_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate], monitoring: list[str]) -> list[str]:
    """Prometheus (in `monitoring`) reaches every port its monitors scrape on a tier's pods."""
    errors = []
    for mon, pod, port in _scraped(docs, pods):
        if not pod.labels.get(TIER_LABEL):
            continue
        number = _container_port(pod.spec, port)
        policies = _ingress_policies(docs, pod)
        if number is None or not policies:
            continue  # a missing port or policy has its own error
        if not any(_admits(policies, ns, number, port if isinstance(port, str) else None) for ns in monitoring):
            errors.append(f"{pod.owner}: {pod.path}: no NetworkPolicy admits the monitoring namespaces "
                          f"{monitoring} to port {port} ({number}), which {mon} scrapes: Prometheus' scrapes are "
                          f"dropped")
    return errors


def _operator_health_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate], operators: set[str]) -> list[str]:
    """The KubeRay operator asks each RayService head's Serve proxy (8000) for its health."""
    errors = []
    for pod in pods:
        if not pod.owner.startswith("RayService/") or "headGroupSpec" not in pod.path:
            continue
        policies = _ingress_policies(docs, pod)
        if policies and not any(_admits(policies, ns, RAY_SERVE_PORT, None) for ns in operators):
            errors.append(f"{pod.owner}: {pod.path}: no NetworkPolicy admits the KubeRay operator's namespace "
                          f"{sorted(operators)} to the Serve proxy ({RAY_SERVE_PORT}): its health check fails and the "
                          "RayService never gets Ready")
    return errors


def _unauthenticated_errors(docs: list[Mapping[str, Any]], pods: list[PodTemplate],
                            operators: set[str]) -> list[str]:
    """Ray Serve LLM's ingress checks no key (ray-project/ray#55369): only the tier and the router reach it."""
    errors = []
    tiers = {p.labels.get(TIER_LABEL) for p in pods if p.owner.startswith("RayService/")} - {None}
    for d in docs:
        if d.get("kind") != "NetworkPolicy":
            continue
        tier = ((d.get("spec") or {}).get("podSelector") or {}).get("matchLabels", {}).get(TIER_LABEL)
        if tier not in tiers:
            continue
        for i, rule in enumerate(d["spec"].get("ingress") or []):
            ports = [p.get("port") for p in rule.get("ports") or []]
            if ports and RAY_SERVE_PORT not in ports:
                continue
            for peer in rule.get("from") or [{}]:
                sel = (peer.get("podSelector") or {}).get("matchLabels") or {}
                if set(peer) == {"podSelector"} and (sel.get(TIER_LABEL) == tier or ROUTER_POD.items() <= sel.items()):
                    continue
                if _operator_only([peer], operators):
                    continue  # the KubeRay operator's health check of the Serve proxy
                errors.append(f"{_where(d)}: spec.ingress[{i}]: admits {peer or 'every source'} to the Serve port "
                              f"{RAY_SERVE_PORT} of tier {tier!r}, which checks no API key: only the authenticating "
                              f"router may reach it")
                break
    return errors


def _route_errors(docs: list[Mapping[str, Any]]) -> list[str]:
    """Every backendRef of an HTTPRoute names a rendered Service with that port (a Service backend is `group: ""`,
    `kind: Service`, in the route's namespace unless given: BackendRef,
    https://gateway-api.sigs.k8s.io/reference/spec/#backendref)."""
    ports = {(_ns(d), d.get("metadata", {}).get("name")):
             {p.get("port") for p in (d.get("spec") or {}).get("ports") or []}
             for d in docs if d.get("kind") == "Service"}
    errors = []
    for route in (d for d in docs if d.get("kind") == "HTTPRoute"):
        for r_i, rule in enumerate((route.get("spec") or {}).get("rules") or []):
            for ref in rule.get("backendRefs") or []:
                if ref.get("group", "") != "" or ref.get("kind", "Service") != "Service":
                    continue  # another kind of backend (an InferencePool, say) is checked by its own controller
                ns, name = ref.get("namespace") or _ns(route), ref.get("name")
                at = f"{_where(route)}: spec.rules[{r_i}].backendRefs[{name}]"
                if (ns, name) not in ports:
                    errors.append(f"{at}: Service {name!r} is not rendered in namespace {ns}")
                elif ref.get("port") not in ports[(ns, name)]:
                    errors.append(f"{at}: port {ref.get('port')} is not a port of Service {name!r} "
                                  f"({sorted(ports[(ns, name)])})")
    return errors


def check(docs: Iterable[Mapping[str, Any]], helm_releases: Iterable[Mapping[str, Any]] = (), *,
          external_controllers: Mapping[str, str] | None = None,
          external_objects: Iterable[tuple[str, str, str]] = (),
          monitoring_namespaces: Iterable[str] | None = None) -> list[str]:
    """Problems of one deployment's objects (platform and serving together) and the platform's Helm releases.

    external_controllers: API group -> who provides its controller outside gridready (e.g. the customer's
    kube-prometheus-stack); external_objects: (kind, namespace, name) made outside the stacks (a Secret the
    operator creates by hand, say); monitoring_namespaces: where Prometheus runs (None: scrapes not checked)."""
    docs = list(docs)
    docs += [{"kind": k, "metadata": {"namespace": ns, "name": n}} for k, ns, n in external_objects]
    releases = list(helm_releases)
    pods = pod_templates(docs)
    helm_namespaces = {str(r.get("namespace")) for r in releases}
    operators = {str(r.get("namespace")) for r in releases
                 if str(r.get("chart", "")).rstrip("/").rsplit("/", 1)[-1] == CONTROLLERS["ray.io"]}
    return (_service_errors(docs, pods) + _monitor_errors(docs, pods, helm_namespaces)
            + _controller_errors(docs, releases, external_controllers or {})
            + _ref_errors(docs, pods) + _gpu_pod_errors(pods) + _hostpath_errors(pods) + _timeout_errors(docs)
            + _route_errors(docs) + _header_errors(docs, external_controllers or {})
            + _unauthenticated_errors(docs, pods, operators or {"kuberay-system"})
            + _policy_errors(docs, pods, operators or {"kuberay-system"})
            + _operator_health_errors(docs, pods, operators or {"kuberay-system"})
            + (_scrape_errors(docs, pods, list(monitoring_namespaces)) if monitoring_namespaces is not None else []))
