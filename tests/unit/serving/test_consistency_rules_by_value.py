"""Each cross-object rule of gridready/serving/consistency.py on small hand-written manifests: the exact line each
problem gives, and the edges where a rule stops applying (a boundary port, an optional reference, a probe's
defaults, a selector's operators), so that a changed comparison, key or message fails a test."""

from __future__ import annotations

from typing import Any

from gridready.serving import consistency as c

NS = "serve"
TIER = "gridready.io/tier"


def meta(name: str, ns: str | None = NS, **labels: str) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if ns is not None:
        m["namespace"] = ns
    return m


def pod(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {}}, "spec": spec}


def deployment(name: str, template: dict[str, Any] | None, ns: str | None = NS, kind: str = "Deployment",
               annotations: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    m = meta(name, ns, **labels)
    if annotations is not None:
        m["annotations"] = annotations
    return {"kind": kind, "metadata": m, "spec": {"template": template} if template is not None else {}}


def policy(name: str, selector: dict[str, Any], ingress: list[dict[str, Any]],
           types: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": selector, "ingress": ingress}
    if types is not None:
        spec["policyTypes"] = types
    return {"kind": "NetworkPolicy", "metadata": meta(name), "spec": spec}


def ns_peer(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {c.NAMESPACE_LABEL: name}}}


def tier_peer(tier: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": {TIER: tier}}}


# --- pod templates and the labels controllers add ---------------------------------------------------------------

def test_workload_templates_keep_their_labels_and_default_namespace() -> None:
    docs = [deployment("web", pod({"app": "web"}, containers=[{"name": "a"}]), ns=None),
            deployment("job", pod({"app": "job"}), kind="Job"),
            deployment("ds", pod({"app": "ds"}), kind="DaemonSet"),
            deployment("rs", pod({"app": "rs"}), kind="ReplicaSet"),
            deployment("sts", pod({"app": "sts"}), kind="StatefulSet"),
            deployment("empty", None),
            {"kind": "Pod", "metadata": meta("bare"), "spec": {"containers": []}}]
    got = c.pod_templates(docs)
    assert [(p.owner, p.path, p.namespace, dict(p.labels)) for p in got] == [
        ("Deployment/web", "spec.template", "default", {"app": "web"}),
        ("Job/job", "spec.template", NS, {"app": "job"}),
        ("DaemonSet/ds", "spec.template", NS, {"app": "ds"}),
        ("ReplicaSet/rs", "spec.template", NS, {"app": "rs"}),
        ("StatefulSet/sts", "spec.template", NS, {"app": "sts"})]
    assert got[0].spec == {"containers": [{"name": "a"}]}
    assert got[1].spec == {}


def test_a_template_without_spec_or_labels_still_counts() -> None:
    (p,) = c.pod_templates([deployment("d", {"metadata": {}})])
    assert (dict(p.labels), dict(p.spec)) == ({}, {})


def test_rayservice_head_and_workers_get_kuberays_labels() -> None:
    rs = {"kind": "RayService", "metadata": meta("llm"), "spec": {"rayClusterConfig": {
        "headGroupSpec": {"template": pod({TIER: "t"})},
        "workerGroupSpecs": [{"groupName": "gpu", "template": pod({TIER: "t", "x": "1"})},
                             {"groupName": "cpu", "template": pod({TIER: "t"})}]}}}
    got = [(p.owner, p.path, dict(p.labels)) for p in c.pod_templates([rs])]
    assert got == [
        ("RayService/llm", "spec.rayClusterConfig.headGroupSpec.template",
         {TIER: "t", "ray.io/node-type": "head", "ray.io/serve": "true"}),
        ("RayService/llm", "spec.rayClusterConfig.workerGroupSpecs[0].template",
         {TIER: "t", "x": "1", "ray.io/node-type": "worker", "ray.io/group": "gpu", "ray.io/serve": "true"}),
        ("RayService/llm", "spec.rayClusterConfig.workerGroupSpecs[1].template",
         {TIER: "t", "ray.io/node-type": "worker", "ray.io/group": "cpu", "ray.io/serve": "true"})]


def test_raycluster_reads_its_own_spec_and_gets_no_serve_label() -> None:
    rc = {"kind": "RayCluster", "metadata": meta("rc"), "spec": {
        "headGroupSpec": {"template": pod()}, "workerGroupSpecs": [{"template": pod()}]}}
    got = [dict(p.labels) for p in c.pod_templates([rc])]
    assert got == [{"ray.io/node-type": "head"}, {"ray.io/node-type": "worker", "ray.io/group": "None"}]


def test_leaderworkerset_leader_index_0_and_workers_index_1_only_above_size_1() -> None:
    def lws(size: Any, leader: bool = True) -> dict[str, Any]:
        lwt: dict[str, Any] = {"workerTemplate": pod({"role": "worker"})}
        if leader:
            lwt["leaderTemplate"] = pod({"role": "leader"})
        if size is not None:
            lwt["size"] = size
        return {"kind": "LeaderWorkerSet", "metadata": meta("trt"), "spec": {"leaderWorkerTemplate": lwt}}

    two = [(p.path, dict(p.labels)) for p in c.pod_templates([lws(2)])]
    assert two == [
        ("spec.leaderWorkerTemplate.leaderTemplate", {"role": "leader", c.LWS_NAME: "trt", c.LWS_INDEX: "0"}),
        ("spec.leaderWorkerTemplate.workerTemplate", {"role": "worker", c.LWS_NAME: "trt", c.LWS_INDEX: "1"})]
    assert [p.path for p in c.pod_templates([lws(1)])] == ["spec.leaderWorkerTemplate.leaderTemplate"]
    assert [p.path for p in c.pod_templates([lws(None)])] == ["spec.leaderWorkerTemplate.leaderTemplate"]
    # without a leaderTemplate the leader runs the worker template (LWS API: leaderTemplate is optional)
    (leader,) = c.pod_templates([lws(1, leader=False)])
    assert dict(leader.labels) == {"role": "worker", c.LWS_NAME: "trt", c.LWS_INDEX: "0"}


# --- label selectors (metav1.LabelSelector and a Service's plain map) --------------------------------------------

def test_selectors_plain_map_match_labels_and_every_operator() -> None:
    labels = {"app": "a", "tier": "t"}
    assert c._selects({}, labels)
    assert c._selects({"app": "a"}, labels)
    assert not c._selects({"app": "b"}, labels)
    assert not c._selects({"app": "a", "other": "x"}, labels)
    assert c._selects({"matchLabels": {"app": "a"}}, labels)
    assert not c._selects({"matchLabels": {"app": "z"}}, labels)

    def expr(op: str, key: str = "app", values: list[str] | None = None) -> dict[str, Any]:
        e: dict[str, Any] = {"key": key, "operator": op}
        if values is not None:
            e["values"] = values
        return {"matchLabels": {}, "matchExpressions": [e]}

    assert c._selects(expr("In", values=["a", "b"]), labels)
    assert not c._selects(expr("In", values=["b"]), labels)
    assert not c._selects(expr("In"), labels)
    assert c._selects(expr("NotIn", values=["b"]), labels)
    assert not c._selects(expr("NotIn", values=["a"]), labels)
    assert c._selects(expr("Exists"), labels)
    assert not c._selects(expr("Exists", key="zone"), labels)
    assert c._selects(expr("DoesNotExist", key="zone"), labels)
    assert not c._selects(expr("DoesNotExist"), labels)
    both = {"matchLabels": {"tier": "t"}, "matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]}
    assert not c._selects(both, labels)


# --- Services and monitors ----------------------------------------------------------------------------------------

def test_a_service_selecting_only_pods_of_another_namespace_is_reported() -> None:
    docs = [deployment("web", pod({"app": "web"}), ns="other"),
            {"kind": "Service", "metadata": meta("web"), "spec": {"selector": {"app": "web"}}},
            {"kind": "Service", "metadata": meta("manual"), "spec": {}},
            {"kind": "Service", "metadata": meta("web2", ns="other"), "spec": {"selector": {"app": "web"}}}]
    pods = c.pod_templates(docs)
    assert c._service_errors(docs, pods) == [
        "Service/web: spec.selector: {'app': 'web'} selects no pod template in namespace serve"]


def _svc(name: str, ports: list[dict[str, Any]], selector: dict[str, str], ns: str = NS,
         **labels: str) -> dict[str, Any]:
    return {"kind": "Service", "metadata": meta(name, ns, **labels), "spec": {"selector": selector, "ports": ports}}


def _mon(kind: str, name: str, selector: dict[str, Any], ports: list[Any], ns: str = NS,
         namespaces: dict[str, Any] | None = None) -> dict[str, Any]:
    key = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
    spec: dict[str, Any] = {"selector": selector, key: [{"port": p} for p in ports]}
    if namespaces is not None:
        spec["namespaceSelector"] = namespaces
    return {"kind": kind, "metadata": meta(name, ns), "spec": spec}


def test_monitor_namespaces_any_names_or_its_own() -> None:
    assert c._monitor_namespaces(_mon("PodMonitor", "m", {}, [], namespaces={"any": True})) is None
    assert c._monitor_namespaces(_mon("PodMonitor", "m", {}, [], namespaces={"matchNames": ["a", "b"]})) == {"a", "b"}
    assert c._monitor_namespaces(_mon("PodMonitor", "m", {}, [], ns="mon")) == {"mon"}
    assert c._monitor_namespaces({"kind": "PodMonitor", "metadata": {"name": "m"}}) == {"default"}


def test_service_monitor_ports_and_missing_targets() -> None:
    docs: list[dict[str, Any]] = [
        deployment("web", pod({"app": "web"})),
        _svc("web", [{"name": "http", "port": 80}, {"port": 81}], {"app": "web"}, app="web"),
        _mon("ServiceMonitor", "ok", {"matchLabels": {"app": "web"}}, ["http"]),
        _mon("ServiceMonitor", "bad", {"matchLabels": {"app": "web"}}, ["http", "metrics"]),
        _mon("ServiceMonitor", "none", {"matchLabels": {"app": "nothing"}}, ["http"]),
        _mon("ServiceMonitor", "elsewhere", {"matchLabels": {"app": "web"}}, ["http"], ns="mon"),
        _mon("ServiceMonitor", "anywhere", {"matchLabels": {"app": "web"}}, ["http"], ns="mon",
             namespaces={"any": True}),
        _mon("ServiceMonitor", "helm", {"matchLabels": {"app": "nothing"}}, ["x"], ns="gpu-operator")]
    assert c._monitor_errors(docs, c.pod_templates(docs), {"gpu-operator"}) == [
        "ServiceMonitor/bad: spec.endpoints[1].port: 'metrics' is no port of the selected Services (they have "
        "['http'])",
        "ServiceMonitor/none: spec.selector: selects no Service",
        "ServiceMonitor/elsewhere: spec.selector: selects no Service"]


def test_pod_monitor_port_missing_on_one_of_the_selected_templates() -> None:
    with_port = pod({"app": "ray"}, containers=[{"name": "c", "ports": [{"name": "metrics", "containerPort": 8080}]}])
    without = pod({"app": "ray"}, containers=[{"name": "c", "ports": [{"containerPort": 9}]}])
    docs: list[dict[str, Any]] = [
        deployment("head", with_port), deployment("worker", without),
        _mon("PodMonitor", "ray", {"matchLabels": {"app": "ray"}}, ["metrics", "nope"]),
        _mon("PodMonitor", "lost", {"matchLabels": {"app": "none"}}, ["metrics"])]
    assert c._monitor_errors(docs, c.pod_templates(docs), set()) == [
        "PodMonitor/ray: spec.podMetricsEndpoints[0].port: 'metrics' is no container port of Deployment/worker "
        "spec.template: its pods are not scraped",
        "PodMonitor/ray: spec.podMetricsEndpoints[1].port: 'nope' is no port of the selected pod templates "
        "(they have ['metrics'])",
        "PodMonitor/lost: spec.selector: selects no pod template"]


def test_a_monitor_whose_namespaces_are_partly_helm_ones_is_checked() -> None:
    docs: list[dict[str, Any]] = [
        _mon("PodMonitor", "m", {"matchLabels": {"app": "none"}}, ["x"], namespaces={"matchNames": ["gpu", NS]})]
    assert c._monitor_errors(docs, [], {"gpu"}) == ["PodMonitor/m: spec.selector: selects no pod template"]
    assert c._monitor_errors(docs, [], {"gpu", NS}) == []


# --- controllers --------------------------------------------------------------------------------------------------

def test_each_operator_kind_is_reported_once_without_its_chart() -> None:
    docs = [{"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta("a")},
            {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta("b")},
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta("c")},
            {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta("l")},
            {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": meta("p")},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("d")},
            {"apiVersion": "v1", "kind": "Service", "metadata": meta("s")}]
    releases = [{"chart": "oci://ghcr.io/x/charts/lws/"}, {"chart": "gpu-operator"}]
    assert c._controller_errors(docs, releases, {"monitoring.coreos.com": "customer"}) == [
        "RayService/a: apiVersion: ray.io needs the kuberay-operator controller, which no platform Helm release "
        "installs (releases: ['gpu-operator', 'lws'])",
        "RayCluster/c: apiVersion: ray.io needs the kuberay-operator controller, which no platform Helm release "
        "installs (releases: ['gpu-operator', 'lws'])"]
    assert c._controller_errors(docs, [{"chart": "kuberay/kuberay-operator"}, {"chart": "lws"}],
                                {"monitoring.coreos.com": "customer"}) == []


# --- references ---------------------------------------------------------------------------------------------------

def test_every_missing_secret_configmap_and_claim_is_named_with_where() -> None:
    spec = {
        "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "s-init"}},
                                                        {"configMapRef": {"name": "cm-opt", "optional": True}}]}],
        "containers": [{"env": [
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s-a", "key": "k"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cm-b", "key": "k"}}},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "s-c", "key": "k", "optional": True}}},
            {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "E", "valueFrom": {"secretKeyRef": {"name": "have", "key": "k"}}},
            {"name": "F", "value": "x"}],
            "envFrom": [{"configMapRef": {"name": "cm-from"}}]}],
        "volumes": [{"name": "v1", "configMap": {"name": "cm-v"}},
                    {"name": "v2", "secret": {"secretName": "s-v"}},
                    {"name": "v3", "secret": {"secretName": "s-opt", "optional": True}},
                    {"name": "v4", "persistentVolumeClaim": {"claimName": "pvc"}},
                    {"name": "v5", "configMap": {"name": "have-cm"}},
                    {"name": "v6", "emptyDir": {}}]}
    docs = [deployment("app", {"spec": spec}),
            {"kind": "Secret", "metadata": meta("have")}, {"kind": "ConfigMap", "metadata": meta("have-cm")},
            {"kind": "Secret", "metadata": meta("s-v", ns="other")}]
    at = "Deployment/app: spec.template.spec"
    assert c._ref_errors(docs, c.pod_templates(docs)) == [
        f"{at}.containers[init].envFrom: Secret 's-init' is not rendered in namespace serve",
        f"{at}.containers[1].env[A]: Secret 's-a' is not rendered in namespace serve",
        f"{at}.containers[1].env[B]: ConfigMap 'cm-b' is not rendered in namespace serve",
        f"{at}.containers[1].envFrom: ConfigMap 'cm-from' is not rendered in namespace serve",
        f"{at}.volumes[v1]: ConfigMap 'cm-v' is not rendered in namespace serve",
        f"{at}.volumes[v2]: Secret 's-v' is not rendered in namespace serve",
        f"{at}.volumes[v4]: PersistentVolumeClaim 'pvc' is not rendered in namespace serve"]


def test_external_objects_count_as_rendered() -> None:
    docs = [deployment("app", {"spec": {"volumes": [{"name": "v", "secret": {"secretName": "hand"}}]}})]
    assert c.check(docs, external_objects=[("Secret", NS, "hand")]) == []
    assert c.check(docs, external_objects=[("Secret", "other", "hand")]) == [
        "Deployment/app: spec.template.spec.volumes[v]: Secret 'hand' is not rendered in namespace serve"]


# --- GPU pods -----------------------------------------------------------------------------------------------------

def gpu_container(requests: Any = None, limits: Any = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = {c.GPU_RESOURCE: requests}
    if limits is not None:
        res["limits"] = {c.GPU_RESOURCE: limits}
    return {"name": "g", "resources": res}


def test_gpu_requested_by_request_or_limit_but_not_zero() -> None:
    assert c._gpu_requested({"containers": [gpu_container(limits=1)]})
    assert c._gpu_requested({"containers": [gpu_container(requests="8")]})
    assert not c._gpu_requested({"containers": [gpu_container(limits=0)]})
    assert not c._gpu_requested({"containers": [gpu_container(requests="0")]})
    assert not c._gpu_requested({"containers": [gpu_container(limits="")]})
    assert not c._gpu_requested({"containers": [{"name": "cpu", "resources": {"limits": {"cpu": "4"}}}]})
    # the limit wins where both are given (limits overwrite requests in the merged view)
    assert not c._gpu_requested({"containers": [gpu_container(requests=1, limits=0)]})
    assert c._gpu_requested({"containers": [{"name": "cpu"}, gpu_container(limits=2)]})


def test_gpu_taint_tolerations_by_key_operator_and_effect() -> None:
    def tol(**t: Any) -> dict[str, Any]:
        return {"tolerations": [t]}

    assert c._tolerates_gpu_taint(tol(key=c.GPU_RESOURCE, operator="Exists", effect="NoSchedule"))
    assert c._tolerates_gpu_taint(tol(key=c.GPU_RESOURCE, operator="Equal", value="present"))
    assert c._tolerates_gpu_taint(tol(operator="Exists"))
    assert c._tolerates_gpu_taint(tol(operator="Exists", key="", effect=""))
    assert not c._tolerates_gpu_taint(tol(operator="Exists", key="other"))
    assert not c._tolerates_gpu_taint(tol(key=c.GPU_RESOURCE, operator="Exists", effect="NoExecute"))
    assert not c._tolerates_gpu_taint(tol(key="other", operator="Equal", value="x"))
    assert not c._tolerates_gpu_taint({})
    assert c._tolerates_gpu_taint({"tolerations": [{"key": "x", "effect": "NoExecute"},
                                                   {"key": c.GPU_RESOURCE, "effect": "NoSchedule"}]})


def test_gpu_pods_need_the_toleration_and_the_certified_selector() -> None:
    tol = [{"key": c.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
    docs = [deployment("ok", pod(containers=[gpu_container(limits=1)], tolerations=tol,
                                 nodeSelector={c.CERTIFIED_LABEL: "true"})),
            deployment("bare", pod(containers=[gpu_container(limits=1)])),
            deployment("false", pod(containers=[gpu_container(limits=1)], tolerations=tol,
                                    nodeSelector={c.CERTIFIED_LABEL: "false"})),
            deployment("cpu", pod(containers=[{"name": "c"}]))]
    assert c._gpu_pod_errors(c.pod_templates(docs)) == [
        "Deployment/bare: spec.template.spec.tolerations: requests GPUs but does not tolerate the GPU pool's taint "
        "nvidia.com/gpu:NoSchedule (Pending on tainted GPU pools)",
        "Deployment/bare: spec.template.spec.nodeSelector: requests GPUs but does not select certified nodes "
        "(gridready.io/certified: 'true'): it may land on a quarantined or uncertified node",
        "Deployment/false: spec.template.spec.nodeSelector: requests GPUs but does not select certified nodes "
        "(gridready.io/certified: 'true'): it may land on a quarantined or uncertified node"]


# --- a tier's ingress policies ------------------------------------------------------------------------------------

def test_own_pods_only_and_operator_only_peers() -> None:
    assert c._own_pods_only(tier_peer("t"), "t")
    assert not c._own_pods_only(tier_peer("u"), "t")
    assert not c._own_pods_only({**tier_peer("t"), **ns_peer("x")}, "t")
    assert not c._own_pods_only({"podSelector": None}, "t")
    assert not c._own_pods_only({"podSelector": {}}, "t")
    assert c._operator_only([ns_peer("kuberay")], {"kuberay"})
    assert not c._operator_only([ns_peer("kuberay"), ns_peer("x")], {"kuberay"})
    assert not c._operator_only([], {"kuberay"})
    assert not c._operator_only([{**ns_peer("kuberay"), **tier_peer("t")}], {"kuberay"})
    assert not c._operator_only([{"namespaceSelector": {}}], {"kuberay"})


def rule_errors(rule: dict[str, Any]) -> list[str]:
    return c._rule_errors("W", rule, "t", {"kuberay"})


def test_rules_admitting_only_the_tier_pass_and_open_ones_are_named() -> None:
    assert rule_errors({"from": [tier_peer("t"), tier_peer("t")]}) == []
    assert rule_errors({}) == ["W: admits every source (no from): only the tier's own pods may reach all its ports"]
    assert rule_errors({"from": [tier_peer("t"), ns_peer("x")]}) == [
        "W: admits peers beyond tier 't' to every port, Ray's included: name the serving ports"]
    assert rule_errors({"from": [tier_peer("u")], "ports": [{"port": 8000}, {"port": "http"}]}) == []


def test_ray_closed_ports_inside_a_port_range_at_its_edges() -> None:
    peers = [ns_peer("x")]
    assert rule_errors({"from": peers, "ports": [{"port": 6379}]}) == ["W: opens Ray's GCS (6379) beyond the tier"]
    assert rule_errors({"from": peers, "ports": [{"port": 6000, "endPort": 6379}]}) == [
        "W: opens Ray's GCS (6379) beyond the tier"]
    assert rule_errors({"from": peers, "ports": [{"port": 6380, "endPort": 7000}]}) == []
    assert rule_errors({"from": peers, "ports": [{"port": 6000, "endPort": 6378}]}) == []
    assert rule_errors({"from": peers, "ports": [{"port": 10001}]}) == [
        "W: opens the Ray client server (10001) beyond the tier"]
    # a range holding both closed ports names the first
    assert rule_errors({"from": peers, "ports": [{"port": 6379, "endPort": 10001}]}) == [
        "W: opens Ray's GCS (6379) beyond the tier"]


def test_ray_dashboard_ports_only_for_the_operators_namespace() -> None:
    assert rule_errors({"from": [ns_peer("x")], "ports": [{"port": 8265}]}) == [
        "W: opens the Ray dashboard (8265) to peers other than the KubeRay operator's namespace (job submission "
        "there is remote code execution)"]
    assert rule_errors({"from": [ns_peer("x")], "ports": [{"port": 52365}]}) == [
        "W: opens the Ray dashboard agent (52365) to peers other than the KubeRay operator's namespace (job "
        "submission there is remote code execution)"]
    assert rule_errors({"from": [ns_peer("kuberay")], "ports": [{"port": 8265}, {"port": 52365}]}) == []


def test_ray_worker_port_ranges_at_their_edges() -> None:
    peers = [ns_peer("x")]
    assert rule_errors({"from": peers, "ports": [{"port": 10002, "endPort": 10003}]}) == [
        "W: opens Ray's worker ports (10002-10003) beyond the tier"]
    assert rule_errors({"from": peers, "ports": [{"port": 19999, "endPort": 20005}]}) == [
        "W: opens Ray's worker ports (19999-20005) beyond the tier"]
    assert rule_errors({"from": peers, "ports": [{"port": 20000, "endPort": 20005}]}) == []
    assert rule_errors({"from": peers, "ports": [{"port": 9000, "endPort": 10002}]}) == [
        "W: opens the Ray client server (10001) beyond the tier"]
    assert rule_errors({"from": peers, "ports": [{"port": 9000, "endPort": 10000}]}) == []
    assert rule_errors({"from": peers, "ports": [{"port": 15000}]}) == []


def test_policies_per_tier_pod_each_rule_once() -> None:
    tpl = pod({TIER: "t"})
    docs = [deployment("a", tpl), deployment("b", tpl), deployment("untiered", pod({"x": "y"})),
            policy("p", {"matchLabels": {TIER: "t"}}, [{}, {"from": [tier_peer("t")]}])]
    assert c._policy_errors(docs, c.pod_templates(docs), {"kuberay"}) == [
        "NetworkPolicy/p: spec.ingress[0]: admits every source (no from): only the tier's own pods may reach all "
        "its ports"]


def test_a_tier_without_an_ingress_policy_is_reported() -> None:
    docs = [deployment("a", pod({TIER: "t"})),
            policy("egress", {}, [{}], types=["Egress"]),
            {**policy("elsewhere", {}, []), "metadata": meta("elsewhere", ns="other")},
            policy("wrong", {"matchLabels": {TIER: "u"}}, [])]
    assert c._policy_errors(docs, c.pod_templates(docs), {"kuberay"}) == [
        "Deployment/a: spec.template: no Ingress NetworkPolicy of namespace serve selects the pods of tier 't': "
        "every port, Ray's included, is open to the cluster"]
    docs.append(policy("both", {}, [], types=["Ingress", "Egress"]))
    assert c._policy_errors(docs, c.pod_templates(docs), {"kuberay"}) == []


# --- hostPath ownership -------------------------------------------------------------------------------------------

def test_uid_from_container_then_pod_then_image() -> None:
    assert c._uid({"securityContext": {"runAsUser": 5}}, {"securityContext": {"runAsUser": 7}}) == 5
    assert c._uid({"securityContext": {"runAsUser": 0}, "image": "rayproject/ray"}, {}) == 0
    assert c._uid({"image": "rayproject/ray:2.49"}, {"securityContext": {"runAsUser": 7}}) == 7
    assert c._uid({"image": "rayproject/ray:2.49"}, {}) == 1000
    assert c._uid({"image": "docker.io/rayproject/ray"}, {}) == 0
    assert c._uid({}, {}) == 0


def _hostpath_pod(mount: dict[str, Any], init: list[dict[str, Any]] | None = None,
                  kind: str = "DirectoryOrCreate") -> dict[str, Any]:
    return deployment("ray", pod(
        volumes=[{"name": "cache", "hostPath": {"path": "/var/cache/x", "type": kind}},
                 {"name": "tmp", "emptyDir": {}}],
        containers=[{"name": "ray", "image": "rayproject/ray:2.49", "volumeMounts": [mount]}],
        initContainers=init or []))


def test_hostpath_written_by_a_non_root_user_needs_a_root_chown() -> None:
    err = ("Deployment/ray: spec.template.spec.containers[ray].volumeMounts[cache]: hostPath /var/cache/x "
           "(DirectoryOrCreate: root-owned 0755) is not writable by uid 1000; a root init container must chown it")

    def errors(**kw: Any) -> list[str]:
        return c._hostpath_errors(c.pod_templates([_hostpath_pod(**kw)]))

    mount = {"name": "cache", "mountPath": "/c"}
    assert errors(mount=mount) == [err]
    assert errors(mount={**mount, "readOnly": True}) == []
    assert errors(mount={"name": "tmp", "mountPath": "/t"}) == []
    assert errors(mount=mount, kind="Directory") == []
    fix = {"name": "own", "image": "busybox", "command": ["sh", "-c"], "args": ["chown 1000:1000 /c"],
           "volumeMounts": [{"name": "cache", "mountPath": "/c"}]}
    assert errors(mount=mount, init=[fix]) == []
    assert errors(mount=mount, init=[{**fix, "command": ["chown", "1000", "/c"], "args": []}]) == []
    assert errors(mount=mount, init=[{**fix, "args": ["chown 1001 /c"]}]) == [err]
    assert errors(mount=mount, init=[{**fix, "securityContext": {"runAsUser": 1000}}]) == [err]
    assert errors(mount=mount, init=[{**fix, "volumeMounts": [{"name": "tmp", "mountPath": "/c"}]}]) == [err]


# --- Pulumi's wait against the startup probe ----------------------------------------------------------------------

def test_startup_budget_uses_the_probe_defaults_and_the_longest_container() -> None:
    assert c._startup_budget_s({"containers": [{"name": "a"}]}) == 0
    assert c._startup_budget_s({"containers": [{"startupProbe": {"httpGet": {"port": 8000}}}]}) == 30
    assert c._startup_budget_s({"containers": [
        {"startupProbe": {"initialDelaySeconds": 5, "periodSeconds": 20, "failureThreshold": 90}},
        {"startupProbe": {"failureThreshold": 10}}]}) == 1805


def _tiered(kind: str, timeout: str | None, probe: dict[str, Any] | None, on_template: bool = False) -> dict[str, Any]:
    labels = {TIER: "t"}
    tmpl = pod(labels if on_template else {}, containers=[{"name": "e", **({"startupProbe": probe} if probe else {})}])
    return deployment("e", tmpl, kind=kind, annotations={} if timeout is None else {c.PULUMI_TIMEOUT: timeout},
                      **({} if on_template else labels))


def test_pulumi_timeout_against_the_startup_probe_at_its_edge() -> None:
    probe = {"periodSeconds": 10, "failureThreshold": 120}  # 1200 s
    assert c._timeout_errors([_tiered("Deployment", None, probe)]) == [
        "Deployment/e: metadata.annotations: no pulumi.com/timeoutSeconds: Pulumi gives up after 600 s, the pods' "
        "startup probe allows 1200 s"]
    assert c._timeout_errors([_tiered("StatefulSet", None, None, on_template=True)]) == [
        "StatefulSet/e: metadata.annotations: no pulumi.com/timeoutSeconds: Pulumi gives up after 600 s, less than "
        "a model download or an engine build"]
    assert c._timeout_errors([_tiered("Job", "1199", probe)]) == [
        "Job/e: metadata.annotations[pulumi.com/timeoutSeconds]: 1199 s is shorter than the pods' startup probe "
        "(1200 s)"]
    assert c._timeout_errors([_tiered("Deployment", "1200", probe)]) == []
    assert c._timeout_errors([_tiered("Deployment", "5", None)]) == []
    assert c._timeout_errors([_tiered("DaemonSet", None, probe)]) == []
    assert c._timeout_errors([deployment("plain", pod(containers=[{"startupProbe": probe}]))]) == []


# --- HTTPRoutes ---------------------------------------------------------------------------------------------------

def _route(rules: list[dict[str, Any]], ns: str = NS) -> dict[str, Any]:
    return {"kind": "HTTPRoute", "metadata": meta("r", ns), "spec": {"rules": rules}}


def test_body_routing_header_in_any_case_unless_declared() -> None:
    docs = [_route([{"matches": [{"headers": [{"name": "x-other"}]}]},
                    {"matches": [{"path": {"value": "/"}}, {"headers": [{"name": "X-Gateway-Model-Name"}]}]}])]
    err = ("HTTPRoute/r: spec.rules[1].matches: header X-Gateway-Model-Name is set only by the Inference Extension's "
           "body-based routing, which nothing installs: every request gets 404")
    assert c._header_errors(docs, {}) == [err]
    assert c._header_errors(docs, {c.BODY_ROUTING: "gateway"}) == []
    assert c.check(docs, external_controllers={c.BODY_ROUTING: "gateway"}) == []


def test_route_backends_name_a_rendered_service_and_its_port() -> None:
    docs = [{"kind": "Service", "metadata": meta("svc"), "spec": {"ports": [{"port": 80}, {"port": 8000}]}},
            {"kind": "Service", "metadata": meta("far", ns="other"), "spec": {"ports": [{"port": 9}]}},
            _route([{"backendRefs": [{"name": "svc", "port": 8000}, {"name": "svc", "port": 81},
                                     {"name": "gone", "port": 80}]},
                    {"backendRefs": [{"name": "far", "namespace": "other", "port": 9},
                                     {"name": "far", "port": 9},
                                     {"name": "pool", "group": "inference.networking.x-k8s.io",
                                      "kind": "InferencePool"},
                                     {"name": "pool2", "kind": "InferencePool"},
                                     {"name": "svc", "group": "", "kind": "Service", "port": 80}]}])]
    assert c._route_errors(docs) == [
        "HTTPRoute/r: spec.rules[0].backendRefs[svc]: port 81 is not a port of Service 'svc' ([80, 8000])",
        "HTTPRoute/r: spec.rules[0].backendRefs[gone]: Service 'gone' is not rendered in namespace serve",
        "HTTPRoute/r: spec.rules[1].backendRefs[far]: Service 'far' is not rendered in namespace serve"]


# --- who reaches a tier's ports -----------------------------------------------------------------------------------

def test_container_port_by_number_or_name() -> None:
    spec = {"containers": [{"name": "a"}, {"name": "b", "ports": [{"name": "http", "containerPort": 8000},
                                                                   {"name": "metrics", "containerPort": "8080"}]}]}
    assert c._container_port(spec, 9) == 9
    assert c._container_port(spec, "metrics") == 8080
    assert c._container_port(spec, "http") == 8000
    assert c._container_port(spec, "grpc") is None


def test_admits_by_namespace_and_port() -> None:
    def admits(rule: dict[str, Any], ns: str = "mon", port: int = 8080, name: str | None = None) -> bool:
        return c._admits([{"spec": {"ingress": [rule]}}], ns, port, name)

    assert admits({})
    assert admits({"from": [ns_peer("mon")]})
    assert not admits({"from": [ns_peer("other")]})
    assert admits({"from": [{"namespaceSelector": {}}]})
    assert not admits({"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "prom"}}}]})
    assert admits({"from": [{"namespaceSelector": {}, "podSelector": {}}]})
    assert not admits({"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "namespaceSelector": {}}]})
    assert not admits({"from": [tier_peer("t")]})
    assert admits({"from": [tier_peer("t"), ns_peer("mon")]})
    assert admits({"ports": [{"port": 8080}]})
    assert not admits({"ports": [{"port": 8081}]})
    assert admits({"ports": [{"port": "metrics"}]}, name="metrics")
    assert not admits({"ports": [{"port": "metrics"}]})
    assert admits({"ports": [{"port": 8000, "endPort": 8080}]})
    assert admits({"ports": [{"port": 8080, "endPort": 9000}]})
    assert not admits({"ports": [{"port": 8000, "endPort": 8079}]})
    assert not admits({"ports": [{"port": 8081, "endPort": 9000}]})
    assert not admits({"ports": [{"port": 8000}]}, port=8001)
    assert c._admits([{"spec": {"ingress": [{"ports": [{"port": 1}]}]}}, {"spec": {}},
                      {"spec": {"ingress": [{"ports": [{"port": 8080}]}]}}], "mon", 8080, None)
    assert not c._admits([], "mon", 8080, None)


def test_ingress_policies_of_the_pods_namespace_and_labels() -> None:
    (p,) = c.pod_templates([deployment("a", pod({TIER: "t"}))])
    docs = [policy("yes", {"matchLabels": {TIER: "t"}}, []),
            policy("all", {}, [], types=["Ingress"]),
            policy("egress", {}, [], types=["Egress"]),
            policy("other-tier", {"matchLabels": {TIER: "u"}}, []),
            {**policy("other-ns", {}, []), "metadata": meta("other-ns", ns="other")},
            {"kind": "Service", "metadata": meta("svc"), "spec": {}}]
    assert [d["metadata"]["name"] for d in c._ingress_policies(docs, p)] == ["yes", "all"]


def _scrape_setup(rule: dict[str, Any]) -> list[dict[str, Any]]:
    tpl = pod({TIER: "t", "app": "e"}, containers=[{"name": "e", "ports": [
        {"name": "http", "containerPort": 8000}, {"name": "metrics", "containerPort": 8002}]}])
    return [deployment("e", tpl),
            {"kind": "Service", "metadata": meta("e", app="e"),
             "spec": {"selector": {"app": "e"}, "ports": [{"name": "m", "port": 9002, "targetPort": "metrics"},
                                                          {"name": "web", "port": 8000}]}},
            _mon("ServiceMonitor", "sm", {"matchLabels": {"app": "e"}}, ["m", "absent"]),
            _mon("PodMonitor", "pm", {"matchLabels": {"app": "e"}}, ["http"]),
            policy("p", {"matchLabels": {TIER: "t"}}, [rule])]


def test_scraped_ports_through_services_and_pods() -> None:
    docs = _scrape_setup({})
    pods = c.pod_templates(docs)
    assert [(m, p.owner, port) for m, p, port in c._scraped(docs, pods)] == [
        ("ServiceMonitor/sm", "Deployment/e", "metrics"), ("PodMonitor/pm", "Deployment/e", "http")]
    docs[1]["spec"]["ports"] = [{"name": "m", "port": 9002}]  # no targetPort: the port itself
    assert [port for _, _, port in c._scraped(docs, pods)] == [9002, "http"]
    docs[2]["spec"]["namespaceSelector"] = {"matchNames": ["other"]}
    docs[3]["spec"]["namespaceSelector"] = {"matchNames": ["other"]}
    assert c._scraped(docs, pods) == []
    docs[2]["spec"]["namespaceSelector"] = {"any": True}
    docs[3]["spec"]["namespaceSelector"] = {"any": True}
    assert len(c._scraped(docs, pods)) == 2
    docs[1]["spec"]["selector"] = {}
    assert [m for m, _, _ in c._scraped(docs, pods)] == ["PodMonitor/pm"]


def test_scrapes_blocked_by_the_tiers_policy_are_reported_per_port() -> None:
    only_tier = _scrape_setup({"from": [tier_peer("t")]})
    assert c._scrape_errors(only_tier, c.pod_templates(only_tier), ["mon"]) == [
        "Deployment/e: spec.template: no NetworkPolicy admits the monitoring namespaces ['mon'] to port metrics "
        "(8002), which ServiceMonitor/sm scrapes: Prometheus' scrapes are dropped",
        "Deployment/e: spec.template: no NetworkPolicy admits the monitoring namespaces ['mon'] to port http "
        "(8000), which PodMonitor/pm scrapes: Prometheus' scrapes are dropped"]
    metrics_only = _scrape_setup({"from": [ns_peer("mon")], "ports": [{"port": "metrics"}]})
    assert c._scrape_errors(metrics_only, c.pod_templates(metrics_only), ["other", "mon"]) == [
        "Deployment/e: spec.template: no NetworkPolicy admits the monitoring namespaces ['other', 'mon'] to port "
        "http (8000), which PodMonitor/pm scrapes: Prometheus' scrapes are dropped"]
    by_number = _scrape_setup({"from": [ns_peer("mon")], "ports": [{"port": 8000, "endPort": 8002}]})
    assert c._scrape_errors(by_number, c.pod_templates(by_number), ["mon"]) == []
    assert c.check(by_number, monitoring_namespaces=["elsewhere"])[-2:] == [
        "Deployment/e: spec.template: no NetworkPolicy admits the monitoring namespaces ['elsewhere'] to port "
        "metrics (8002), which ServiceMonitor/sm scrapes: Prometheus' scrapes are dropped",
        "Deployment/e: spec.template: no NetworkPolicy admits the monitoring namespaces ['elsewhere'] to port "
        "http (8000), which PodMonitor/pm scrapes: Prometheus' scrapes are dropped"]
    assert not any("Prometheus" in e for e in c.check(by_number))


def test_scrapes_of_untiered_pods_or_without_policy_are_not_judged() -> None:
    docs = _scrape_setup({"from": [tier_peer("t")]})
    docs[0]["spec"]["template"]["metadata"]["labels"][TIER] = ""
    assert c._scrape_errors(docs, c.pod_templates(docs), ["mon"]) == []
    docs = _scrape_setup({"from": [tier_peer("t")]})[:-1]
    assert c._scrape_errors(docs, c.pod_templates(docs), ["mon"]) == []
    docs = _scrape_setup({"from": [tier_peer("t")]})
    docs[3]["spec"]["podMetricsEndpoints"] = [{"port": "grpc"}]
    assert [e.split(" port ")[1] for e in c._scrape_errors(docs, c.pod_templates(docs), ["mon"])] == [
        "metrics (8002), which ServiceMonitor/sm scrapes: Prometheus' scrapes are dropped"]


# --- RayService: the operator's health check and the unauthenticated Serve port -----------------------------------

def rayservice(name: str = "llm", tier: str = "t") -> dict[str, Any]:
    return {"kind": "RayService", "metadata": meta(name), "spec": {"rayClusterConfig": {
        "headGroupSpec": {"template": pod({TIER: tier})},
        "workerGroupSpecs": [{"groupName": "w", "template": pod({TIER: tier})}]}}}


def test_the_operator_must_reach_the_head_serve_proxy() -> None:
    rs = rayservice()
    blocked = [rs, policy("p", {"matchLabels": {TIER: "t"}}, [{"from": [tier_peer("t")]}])]
    err = ("RayService/llm: spec.rayClusterConfig.headGroupSpec.template: no NetworkPolicy admits the KubeRay "
           "operator's namespace ['a', 'kuberay'] to the Serve proxy (8000): its health check fails and the "
           "RayService never gets Ready")
    assert c._operator_health_errors(blocked, c.pod_templates(blocked), {"kuberay", "a"}) == [err]
    opened = [rs, policy("p", {"matchLabels": {TIER: "t"}},
                         [{"from": [ns_peer("kuberay")], "ports": [{"port": 8000}]}])]
    assert c._operator_health_errors(opened, c.pod_templates(opened), {"kuberay", "a"}) == []
    assert c._operator_health_errors([rs], c.pod_templates([rs]), {"kuberay"}) == []
    lws_like = [deployment("d", pod({TIER: "t"})), blocked[1]]
    assert c._operator_health_errors(lws_like, c.pod_templates(lws_like), {"kuberay"}) == []


def test_operator_namespaces_come_from_the_kuberay_release_or_default() -> None:
    docs = [rayservice(), policy("p", {"matchLabels": {TIER: "t"}},
                                 [{"from": [tier_peer("t")]},
                                  {"from": [ns_peer("ray-ops")], "ports": [{"port": 8000}]}])]
    releases = [{"chart": "kuberay/kuberay-operator/", "namespace": "ray-ops"}, {"chart": "lws", "namespace": "l"}]
    ext = {"ray.io": "x"}
    assert c.check(docs, releases, external_controllers=ext) == []
    assert c.check(docs, external_controllers=ext) == [
        "NetworkPolicy/p: spec.ingress[1]: admits {'namespaceSelector': {'matchLabels': "
        "{'kubernetes.io/metadata.name': 'ray-ops'}}} to the Serve port 8000 of tier 't', which checks no API key: "
        "only the authenticating router may reach it",
        "RayService/llm: spec.rayClusterConfig.headGroupSpec.template: no NetworkPolicy admits the KubeRay "
        "operator's namespace ['kuberay-system'] to the Serve proxy (8000): its health check fails and the "
        "RayService never gets Ready"]


def test_serve_port_admits_only_the_tier_the_router_and_the_operator() -> None:
    def errors(rules: list[dict[str, Any]], selector: dict[str, Any] | None = None) -> list[str]:
        docs = [rayservice(), deployment("other", pod({TIER: "plain"})),
                policy("p", selector or {"matchLabels": {TIER: "t"}}, rules)]
        return c._unauthenticated_errors(docs, c.pod_templates(docs), {"kuberay"})

    router = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "gridready-router", "x": "y"}}}
    assert errors([{"from": [tier_peer("t"), router, ns_peer("kuberay")], "ports": [{"port": 8000}]}]) == []
    assert errors([{"from": [ns_peer("x")], "ports": [{"port": 8001}, {"port": "http"}]}]) == []
    assert errors([{"from": [ns_peer("x")]}]) == [
        "NetworkPolicy/p: spec.ingress[0]: admits {'namespaceSelector': {'matchLabels': "
        "{'kubernetes.io/metadata.name': 'x'}}} to the Serve port 8000 of tier 't', which checks no API key: "
        "only the authenticating router may reach it"]
    assert errors([{"ports": [{"port": 8000}]}]) == [
        "NetworkPolicy/p: spec.ingress[0]: admits every source to the Serve port 8000 of tier 't', which checks no "
        "API key: only the authenticating router may reach it"]
    # one line per rule, for its first offending peer
    two = errors([{"from": [tier_peer("u"), ns_peer("x")], "ports": [{"port": 8000}]},
                  {"from": [{**router, **ns_peer("x")}]}])
    assert [e.split(": admits ")[0] for e in two] == ["NetworkPolicy/p: spec.ingress[0]",
                                                      "NetworkPolicy/p: spec.ingress[1]"]
    assert "'gridready.io/tier': 'u'" in two[0]
    assert errors([{"from": [ns_peer("x")]}], selector={"matchLabels": {TIER: "plain"}}) == []


def test_a_selector_of_match_expressions_alone_selects_by_them() -> None:
    # metav1.LabelSelector: matchLabels and matchExpressions are ANDed, either may be absent
    # (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#resources-that-support-set-based-requirements)
    labels = {"app": "a", TIER: "t"}
    assert c._selects({"matchExpressions": [{"key": TIER, "operator": "Exists"}]}, labels)
    assert c._selects({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}, labels)
    assert not c._selects({"matchExpressions": [{"key": "app", "operator": "In", "values": ["b"]}]}, labels)
    docs = [deployment("a", pod({TIER: "t"})),
            policy("p", {"matchExpressions": [{"key": TIER, "operator": "In", "values": ["t"]}]},
                   [{"from": [tier_peer("t")]}])]
    assert c._policy_errors(docs, c.pod_templates(docs), {"kuberay"}) == []


# --- every item of a list is judged after one a rule skips, and objects without metadata -------------------------

def test_objects_without_metadata() -> None:
    assert (c._where({"kind": "Service"}), c._ns({"kind": "Service"})) == ("Service/None", "default")
    assert c.pod_templates([{"kind": "RayService", "metadata": meta("r"), "spec": {}},
                            {"kind": "RayCluster", "metadata": meta("c"), "spec": {
                                "workerGroupSpecs": [{"groupName": "w", "template": pod()}]}}]) == [
        c.PodTemplate("RayCluster/c", "spec.rayClusterConfig.workerGroupSpecs[0].template", NS,
                      {"ray.io/node-type": "worker", "ray.io/group": "w"}, {})]
    lws = {"kind": "LeaderWorkerSet", "spec": {"leaderWorkerTemplate": {"workerTemplate": pod()}}}
    assert [dict(p.labels) for p in c.pod_templates([lws, {**lws, "metadata": {}}])] == [
        {c.LWS_NAME: "", c.LWS_INDEX: "0"}, {c.LWS_NAME: "", c.LWS_INDEX: "0"}]
    bare = [{"kind": "Namespace"}, {"kind": "Service", "spec": {"ports": [{"port": 1}]}},
            deployment("a", {"spec": {"volumes": [{"name": "v", "configMap": {"name": "cm"}}]}}),
            {"kind": "ConfigMap", "metadata": meta("cm")},
            _route([{"backendRefs": [{"name": "svc", "port": 80}]}])]
    assert c._ref_errors(bare, c.pod_templates(bare)) == []
    assert c._route_errors(bare) == [
        "HTTPRoute/r: spec.rules[0].backendRefs[svc]: Service 'svc' is not rendered in namespace serve"]


def test_templates_of_every_kind_accumulate() -> None:
    rs = {"kind": "RayService", "metadata": meta("r"), "spec": {"rayClusterConfig": {
        "headGroupSpec": {"template": pod()}}}}
    lws = {"kind": "LeaderWorkerSet", "metadata": meta("l"), "spec": {"leaderWorkerTemplate": {
        "leaderTemplate": pod()}}}
    assert [p.owner for p in c.pod_templates([deployment("d", pod()), rs, lws])] == [
        "Deployment/d", "RayService/r", "LeaderWorkerSet/l"]


def test_a_skipped_item_does_not_end_the_check() -> None:
    tol = [{"key": c.GPU_RESOURCE, "operator": "Exists"}]
    gpu = [deployment("cpu", pod(containers=[{"name": "c"}])), deployment("bare", pod(containers=[gpu_container(1)],
                                                                                       tolerations=tol))]
    assert [e.split(":")[0] for e in c._gpu_pod_errors(c.pod_templates(gpu))] == ["Deployment/bare"]
    svc = [{"kind": "Service", "metadata": meta("manual"), "spec": {}},
           {"kind": "Service", "metadata": meta("web"), "spec": {"selector": {"app": "none"}}}]
    assert len(c._service_errors(svc, [])) == 1
    mons = [_mon("PodMonitor", "helm", {"matchLabels": {"app": "x"}}, ["x"], ns="gpu-operator"),
            _mon("PodMonitor", "lost", {"matchLabels": {"app": "x"}}, ["x"])]
    assert c._monitor_errors(mons, [], {"gpu-operator"}) == ["PodMonitor/lost: spec.selector: selects no pod template"]
    tiered = [deployment("plain", pod({"x": "y"})), deployment("a", pod({TIER: "t"}))]
    assert len(c._policy_errors(tiered, c.pod_templates(tiered), {"kuberay"})) == 1
    assert rule_errors({"from": [ns_peer("x")], "ports": [{"port": "http"}, {"port": 6379}]}) == [
        "W: opens Ray's GCS (6379) beyond the tier"]
    probe = {"periodSeconds": 10, "failureThreshold": 120}
    timeouts = [{"kind": "Service", "metadata": meta("s")}, deployment("plain", pod()),
                _tiered("Deployment", None, probe)]
    assert len(c._timeout_errors(timeouts)) == 1
    routes = [_route([{"backendRefs": [{"name": "pool", "kind": "InferencePool"}, {"name": "gone", "port": 1}]}])]
    assert c._route_errors(routes) == [
        "HTTPRoute/r: spec.rules[0].backendRefs[gone]: Service 'gone' is not rendered in namespace serve"]
    health = [deployment("d", pod({TIER: "t"})), rayservice(),
              policy("p", {"matchLabels": {TIER: "t"}}, [{"from": [tier_peer("t")]}])]
    assert len(c._operator_health_errors(health, c.pod_templates(health), {"kuberay"})) == 1


def test_hostpath_mounts_after_a_skipped_one_and_root_containers() -> None:
    p = _hostpath_pod({"name": "cache", "mountPath": "/c"})
    ray = p["spec"]["template"]["spec"]["containers"][0]
    ray["volumeMounts"] = [{"name": "tmp", "mountPath": "/t"}, {"name": "cache", "mountPath": "/c"}]
    assert len(c._hostpath_errors(c.pod_templates([p]))) == 1
    ray["securityContext"] = {"runAsUser": 0}
    assert c._hostpath_errors(c.pod_templates([p])) == []
    ray["securityContext"] = {"runAsUser": 1}
    assert [e.rsplit("by uid ", 1)[1] for e in c._hostpath_errors(c.pod_templates([p]))] == [
        "1; a root init container must chown it"]


def test_optional_configmap_volume_and_a_group_only_backend() -> None:
    docs = [deployment("a", {"spec": {"volumes": [{"name": "v", "configMap": {"name": "cm", "optional": True}}]}})]
    assert c._ref_errors(docs, c.pod_templates(docs)) == []
    route = [_route([{"backendRefs": [{"name": "gone", "group": "example.com", "port": 1}]}])]
    assert c._route_errors(route) == []


def test_dashboard_rules_of_a_policy_judged_against_the_operators_namespace() -> None:
    docs = [deployment("a", pod({TIER: "t"})),
            policy("p", {"matchLabels": {TIER: "t"}}, [{"from": [ns_peer("kuberay")], "ports": [{"port": 8265}]}])]
    assert c._policy_errors(docs, c.pod_templates(docs), {"kuberay"}) == []
    assert len(c._policy_errors(docs, c.pod_templates(docs), {"other"})) == 1


def test_scraped_entries_per_monitor_service_and_pod() -> None:
    docs = _scrape_setup({})
    pm, sm = docs[3], docs[2]
    docs[2:4] = [pm, sm]  # the PodMonitor first
    docs.insert(1, {"kind": "Service", "metadata": meta("other", app="e"),
                    "spec": {"selector": {"app": "nothing"}, "ports": [{"name": "m", "port": 1}]}})
    docs.insert(1, {"kind": "Service", "metadata": meta("unlabelled"), "spec": {"selector": {"app": "e"},
                                                                              "ports": [{"name": "m", "port": 2}]}})
    docs.append(_mon("PodMonitor", "none", {"matchLabels": {"app": "nothing"}}, ["http"]))
    docs.append(deployment("e2", pod({TIER: "t", "app": "e"})))
    got = [(m, p.owner, port) for m, p, port in c._scraped(docs, c.pod_templates(docs))]
    assert got == [("PodMonitor/pm", "Deployment/e", "http"), ("PodMonitor/pm", "Deployment/e2", "http"),
                   ("ServiceMonitor/sm", "Deployment/e", "metrics"), ("ServiceMonitor/sm", "Deployment/e2", "metrics")]


def test_scrape_errors_after_untiered_or_portless_entries() -> None:
    docs = _scrape_setup({"from": [tier_peer("t")]})
    docs.insert(0, deployment("plain", pod({"app": "e"}, containers=[{"name": "e", "ports": [
        {"name": "http", "containerPort": 8000}, {"name": "metrics", "containerPort": 8002}]}])))
    docs[4]["spec"]["podMetricsEndpoints"] = [{"port": "grpc"}, {"port": "http"}]
    assert [e.split(" to port ")[1].split(",")[0] for e in c._scrape_errors(docs, c.pod_templates(docs), ["mon"])] \
        == ["metrics (8002)", "http (8000)"]


def test_serve_port_peers_after_an_admitted_one() -> None:
    def errors(rules: list[dict[str, Any]], selector: dict[str, Any] | None = None) -> list[str]:
        docs = [policy("other", {"matchLabels": {TIER: "plain"}}, [{}]), policy("bare", {}, [{}]), rayservice(),
                policy("p", selector or {"matchLabels": {TIER: "t"}}, rules)]
        return c._unauthenticated_errors(docs, c.pod_templates(docs), {"kuberay"})

    router = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "gridready-router"}}}
    assert errors([{"from": [router], "ports": [{"port": 8000}]}]) == []
    assert len(errors([{"from": [tier_peer("t"), ns_peer("x")]}])) == 1
    assert len(errors([{"from": [ns_peer("kuberay"), ns_peer("x")]}])) == 1
    assert len(errors([{"from": [ns_peer("x")], "ports": [{"port": 9}]}, {"from": [ns_peer("x")]}])) == 1


def test_check_reads_release_namespaces_charts_and_the_default_operator_namespace() -> None:
    mon = _mon("PodMonitor", "dcgm", {"matchLabels": {"app": "dcgm"}}, ["metrics"], ns="gpu-operator")
    ext = {"monitoring.coreos.com": "x"}
    assert c.check([mon], [{"chart": "nvidia/gpu-operator", "namespace": "gpu-operator"}],
                   external_controllers=ext) == []
    rs = {**rayservice(), "apiVersion": "ray.io/v1"}
    docs = [rs, policy("p", {"matchLabels": {TIER: "t"}},
                       [{"from": [tier_peer("t")]},
                        {"from": [ns_peer("ray-ops")], "ports": [{"port": 8000}, {"port": 8265}]}])]
    releases = [{"chart": "oci://ghcr.io/ray-project/helm/kuberay-operator", "namespace": "ray-ops"}]
    assert c.check(docs, releases) == []
    assert c.check(docs, external_controllers={"ray.io": "the customer's operator"})[0] == (
        "NetworkPolicy/p: spec.ingress[1]: admits {'namespaceSelector': {'matchLabels': "
        "{'kubernetes.io/metadata.name': 'ray-ops'}}} to the Serve port 8000 of tier 't', which checks no API key: "
        "only the authenticating router may reach it")
    assert c.check(docs)[0].startswith("RayService/llm: apiVersion: ray.io needs the kuberay-operator controller")
    default = [rs, policy("p", {"matchLabels": {TIER: "t"}},
                          [{"from": [tier_peer("t")]},
                           {"from": [ns_peer("kuberay-system")], "ports": [{"port": 8000}, {"port": 8265}]}])]
    assert c.check(default, external_controllers={"ray.io": "x"}) == []


def test_chart_names_are_the_last_path_element_as_written() -> None:
    docs = [{"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta("a")}]
    assert c._controller_errors(docs, [{"name": "no-chart"}, {"chart": "mirror/gpu-operator-X/"}], {}) == [
        "RayService/a: apiVersion: ray.io needs the kuberay-operator controller, which no platform Helm release "
        "installs (releases: ['', 'gpu-operator-X'])"]
    # a chart named otherwise is not the KubeRay operator: its namespace is not the operator's
    policies = [rayservice(), policy("p", {"matchLabels": {TIER: "t"}},
                                     [{"from": [ns_peer("ray-ops")], "ports": [{"port": 8000}]}])]
    errors = c.check(policies, [{"chart": "mirror/kuberay-operatorX", "namespace": "ray-ops"}])
    assert errors[-1] == (
        "RayService/llm: spec.rayClusterConfig.headGroupSpec.template: no NetworkPolicy admits the KubeRay "
        "operator's namespace ['kuberay-system'] to the Serve proxy (8000): its health check fails and the "
        "RayService never gets Ready")
