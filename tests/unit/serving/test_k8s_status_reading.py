"""k8s_status to the value: the exact verdict and detail read from real-shaped controller statuses (KubeRay v1.7.0
RayService, LWS v0.10.0 LeaderWorkerSet, apps/v1 Deployment, Gateway API v1 Gateway and HTTPRoute), each boundary
of a replica count and generation, and which rendered manifests are waited for with which budget."""

from __future__ import annotations

import pytest

from gridready.serving import k8s_status
from gridready.serving.k8s_status import State, Watch
from tests.unit.serving.fake_k8s_api import condition


def test_durations_in_seconds_minutes_hours_or_bare():
    assert [k8s_status.duration_s(t) for t in ("30m", "2h", "900s", "900", " 45m\n", "0s")] == [
        1800, 7200, 900, 900, 2700, 0]
    for bad in ("30 m", "1d", "m", "", "1.5h", "-5m", "30mm"):
        with pytest.raises(ValueError, match="not a duration"):
            k8s_status.duration_s(bad)


def _doc(kind: str, api: str, name: str, labels: dict[str, str] | None = None,
         notes: dict[str, str] | None = None, namespace: str | None = "ns") -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if notes is not None:
        meta["annotations"] = notes
    return {"apiVersion": api, "kind": kind, "metadata": meta}


def test_watches_pick_the_workloads_of_a_tier_or_the_router_with_their_budgets():
    docs = [
        _doc("RayService", "ray.io/v1", "z-tier", {"gridready.io/tier": "b"}, {"ray.io/initializing-timeout": "2h"}),
        # the timeout annotation wins over the initializing timeout
        _doc("RayService", "ray.io/v1", "a-tier", {"gridready.io/tier": "b"},
             {"ray.io/initializing-timeout": "2h", "pulumi.com/timeoutSeconds": "1234"}),
        _doc("LeaderWorkerSet", "leaderworkerset.x-k8s.io/v1", "trt", {"gridready.io/tier": "a"}),
        # the router: no tier label, its app name instead; no namespace: default
        _doc("Deployment", "apps/v1", "gridready-router", {"app.kubernetes.io/name": "router"}, namespace=None),
        # the tier label wins over the app name
        _doc("Deployment", "apps/v1", "emb", {"gridready.io/tier": "c", "app.kubernetes.io/name": "x"},
             {"ray.io/initializing-timeout": "10m"}),
        _doc("Deployment", "apps/v1", "unlabelled", {"other": "x"}),
        _doc("Deployment", "apps/v1", "no-labels"),
        _doc("Deployment", "apps/v1beta1", "old", {"gridready.io/tier": "a"}),  # not a served version
        _doc("RayCluster", "ray.io/v1", "rc", {"gridready.io/tier": "a"}),  # not a workload waited for
        _doc("Service", "v1", "svc", {"gridready.io/tier": "a"}),
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": None},  # no metadata at all: no tier
    ]
    assert k8s_status.watches(docs, 777) == [
        Watch("a", "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "ns", "trt", 777),
        Watch("b", "ray.io/v1", "RayService", "ns", "a-tier", 1234),
        Watch("b", "ray.io/v1", "RayService", "ns", "z-tier", 7200 + 300),
        Watch("c", "apps/v1", "Deployment", "ns", "emb", 600 + 300),
        Watch("router", "apps/v1", "Deployment", "default", "gridready-router", 777),
    ]
    assert k8s_status.RAYSERVICE_MARGIN_S == 300
    assert Watch("a", "apps/v1", "Deployment", "ns", "d", 1).ref == "Deployment ns/d"


def test_watches_sort_by_tier_then_kind_then_name():
    docs = [_doc("ConfigMap", "v1", "first", {"gridready.io/tier": "t"}),  # skipped, and the rest still read
            _doc("Deployment", "apps/v1", "no-tier", {"other": "x"}),
            _doc("Deployment", "apps/v1", "b", {"gridready.io/tier": "t"}),
            _doc("Deployment", "apps/v1", "a", {"gridready.io/tier": "t"}),
            _doc("RayService", "ray.io/v1", "0", {"gridready.io/tier": "t"})]
    assert [w.name for w in k8s_status.watches(docs, 1)] == ["a", "b", "0"]


# a RayService's status as KubeRay v1.7.0 publishes it (ray-operator/apis/ray/v1/rayservice_types.go)
def _rayservice(ready: str | None, reason: str = "", message: str = "", apps: dict | None = None,
                service_status: str | None = None, extra: list | None = None) -> dict:
    conds = list(extra or [])
    if ready is not None:
        conds.append(condition("Ready", ready, reason, message))
    status: dict = {"conditions": conds, "numServeEndpoints": 1 if ready == "True" else 0,
                    "observedGeneration": 1}
    if apps is not None:
        status["activeServiceStatus"] = {"applicationStatuses": apps, "rayClusterName": "llama70b-rayc"}
    if service_status is not None:
        status["serviceStatus"] = service_status
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "llama70b"}, "status": status}


def test_rayservice_ready_reads_the_ready_condition_only():
    obj = _rayservice("True", "NonZeroServeEndpoints", extra=[condition("UpgradeInProgress", "False", "NoUpgrade")],
                      apps={"llama70b": {"status": "RUNNING", "serveDeploymentStatuses": {}}})
    assert k8s_status.rayservice(obj) == State(True, False, "Ready=True (NonZeroServeEndpoints)")
    # another condition True does not make it ready
    obj = _rayservice("False", "Initializing", extra=[condition("UpgradeInProgress", "True", "Upgrading")])
    assert k8s_status.rayservice(obj) == State(False, False, "Ready=False (Initializing)")


def test_only_the_initializing_timeout_is_terminal():
    gone = _rayservice("False", "InitializingTimeout", "timed out after 30m")
    assert k8s_status.rayservice(gone) == State(False, True, "Ready=False (InitializingTimeout): timed out after 30m")
    assert not k8s_status.rayservice(_rayservice("False", "ZeroServeEndpoints")).failed
    assert not k8s_status.rayservice(_rayservice("Unknown", "InitializingTimeout")).ready


def test_failed_and_unhealthy_applications_are_named_in_name_order_with_200_characters():
    apps = {"b-app": {"status": "UNHEALTHY", "message": "x" * 250},
            "a-app": {"status": "DEPLOY_FAILED", "message": "CUDA out of memory"},
            "c-app": {"status": "RUNNING", "message": "fine"},
            "d-app": {"status": "DEPLOYING"},
            "e-app": {"status": "UNHEALTHY"}}
    got = k8s_status.rayservice(_rayservice("False", "ZeroServeEndpoints", apps=apps))
    assert got == State(False, False, "Ready=False (ZeroServeEndpoints); application a-app DEPLOY_FAILED: CUDA out "
                        "of memory; application b-app UNHEALTHY: " + "x" * 200 + "; application e-app UNHEALTHY: ")
    # a ready service still names an application gone unhealthy
    ready = k8s_status.rayservice(_rayservice("True", "NonZeroServeEndpoints", apps={"a": {"status": "UNHEALTHY",
                                                                                         "message": "m"}}))
    assert ready == State(True, False, "Ready=True (NonZeroServeEndpoints); application a UNHEALTHY: m")


def test_a_long_condition_message_is_cut_at_300_characters():
    got = k8s_status.rayservice(_rayservice("False", "Initializing", "y" * 400))
    assert got.detail == "Ready=False (Initializing): " + "y" * 300
    bare = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}  # no reason, no message
    assert k8s_status.rayservice(bare) == State(False, False, "Ready=False")


def test_the_deprecated_service_status_counts_only_without_any_condition():
    assert k8s_status.rayservice(_rayservice(None, service_status="Running")) == State(
        True, False, "serviceStatus Running")
    # conditions of another type present: the operator is new enough to set Ready, so wait for it
    other = _rayservice(None, service_status="Running", extra=[condition("UpgradeInProgress", "False", "NoUpgrade")])
    assert k8s_status.rayservice(other) == State(False, False, "serviceStatus 'Running', no Ready condition yet")
    assert k8s_status.rayservice(_rayservice(None, service_status="WaitForServeDeploymentReady")) == State(
        False, False, "serviceStatus 'WaitForServeDeploymentReady', no Ready condition yet")
    assert k8s_status.rayservice({"status": None}) == State(False, False, "no status reported yet")
    assert k8s_status.rayservice({}) == State(False, False, "no status reported yet")
    assert k8s_status.rayservice({"status": {"conditions": None}}) == State(False, False, "no status reported yet")


# a LeaderWorkerSet as LWS v0.10.0 publishes it (api/leaderworkerset/v1)
def _lws(replicas: int | None, ready: int | None, *conds: dict) -> dict:
    spec = {} if replicas is None else {"replicas": replicas}
    status: dict = {"conditions": list(conds), "replicas": replicas or 1}
    if ready is not None:
        status["readyReplicas"] = ready
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": spec, "status": status}


def test_leaderworkerset_ready_needs_every_group_and_available_true():
    avail = condition("Available", "True", "AllGroupsReady", "All replicas are ready")
    assert k8s_status.leaderworkerset(_lws(3, 3, avail)) == State(
        True, False, "3/3 groups ready; Available=True (AllGroupsReady): All replicas are ready")
    assert k8s_status.leaderworkerset(_lws(3, 4, avail)).ready  # more than asked (a scale-down under way)
    assert k8s_status.leaderworkerset(_lws(3, 2, avail)) == State(
        False, False, "2/3 groups ready; Available=True (AllGroupsReady): All replicas are ready")
    assert k8s_status.leaderworkerset(_lws(2, 2)) == State(False, False, "2/2 groups ready")
    assert not k8s_status.leaderworkerset(_lws(2, 2, condition("Available", "False", "GroupsNotReady"))).ready


def test_leaderworkerset_replicas_default_to_one_and_ready_to_none():
    avail = condition("Available", "True", "AllGroupsReady")
    assert k8s_status.leaderworkerset(_lws(None, 1, avail)).detail.startswith("1/1 groups ready")
    assert k8s_status.leaderworkerset(_lws(None, 1, avail)).ready
    assert k8s_status.leaderworkerset(_lws(None, None, avail)) == State(
        False, False, "0/1 groups ready; Available=True (AllGroupsReady)")
    assert k8s_status.leaderworkerset(_lws(0, None, avail)).ready  # scaled to zero: nothing to wait for
    assert k8s_status.leaderworkerset({"spec": {"replicas": 0}, "status": None}) == State(
        False, False, "0/0 groups ready")


def test_leaderworkerset_names_progress_with_a_message_only():
    got = k8s_status.leaderworkerset(_lws(
        2, 1, condition("Available", "False", "GroupsNotReady"),
        condition("Progressing", "True", "GroupsProgressing", "Replicas are progressing"),
        condition("UpdateInProgress", "True", "GroupsUpdating", "Rolling Upgrade is in progress")))
    assert got == State(False, False, "1/2 groups ready; Available=False (GroupsNotReady); Progressing=True "
                        "(GroupsProgressing): Replicas are progressing; UpdateInProgress=True (GroupsUpdating): "
                        "Rolling Upgrade is in progress")
    quiet = k8s_status.leaderworkerset(_lws(
        2, 1, condition("Progressing", "False", "Done", "over"), condition("UpdateInProgress", "True", "U")))
    assert quiet.detail == "1/2 groups ready"


def _deployment(generation: int, observed: int | None, want: int | None, available: int | None,
                updated: int | None, *conds: dict) -> dict:
    status: dict = {"conditions": list(conds)}
    for key, value in (("observedGeneration", observed), ("availableReplicas", available),
                       ("updatedReplicas", updated)):
        if value is not None:
            status[key] = value
    spec = {} if want is None else {"replicas": want}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": generation},
            "spec": spec, "status": status}


@pytest.mark.parametrize("args, ready", [
    ((3, 3, 2, 2, 2), True),
    ((3, 4, 2, 2, 2), True),  # observed ahead of the read generation
    ((3, 2, 2, 2, 2), False),  # the latest spec not seen yet
    ((3, 3, 2, 1, 2), False),  # one short of available
    ((3, 3, 2, 2, 1), False),  # one short of updated
    ((3, 3, 2, 3, 3), True),  # a surge pod still up
    ((1, 1, None, 1, 1), True),  # replicas unset: one
    ((1, 1, None, 0, 1), False),
    ((1, 1, 0, None, None), True),  # scaled to zero
    ((2, None, 1, 1, 1), False),  # no observedGeneration yet
    ((1, None, 1, 1, 1), False),  # the first generation, not observed yet
])
def test_deployment_readiness_at_each_edge(args, ready):
    assert k8s_status.deployment(_deployment(*args)).ready is ready


def test_deployment_detail_and_the_deadline_verdict():
    obj = _deployment(2, 2, 3, 1, 2, condition("Available", "False", "MinimumReplicasUnavailable"),
                      condition("Progressing", "True", "ReplicaSetUpdated", 'ReplicaSet "d-5f" is progressing.'))
    assert k8s_status.deployment(obj) == State(False, False, '1/3 replicas available, 2 updated; Progressing=True '
                                               '(ReplicaSetUpdated): ReplicaSet "d-5f" is progressing.')
    stuck = _deployment(2, 2, 3, 0, 3, condition("Progressing", "False", "ProgressDeadlineExceeded",
                                                 'ReplicaSet "d-5f" has timed out progressing.'))
    assert k8s_status.deployment(stuck) == State(False, True, '0/3 replicas available, 3 updated; Progressing=False '
                                                 '(ProgressDeadlineExceeded): ReplicaSet "d-5f" has timed out '
                                                 'progressing.')
    assert k8s_status.deployment({"metadata": None, "spec": None, "status": None}) == State(
        False, False, "0/1 replicas available, 0 updated")
    # no generation written and none observed (an object as rendered, before the API server): nothing unseen
    assert k8s_status.deployment({"metadata": {"name": "d"}, "spec": {"replicas": 1},
                                  "status": {"availableReplicas": 1, "updatedReplicas": 1}}).ready


def _gateway(addresses: list[dict] | None, *conds: dict, listeners: list[dict] | None = None) -> dict:
    status: dict = {"conditions": list(conds)}
    if addresses is not None:
        status["addresses"] = addresses
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": listeners or []}, "status": status}


def test_gateway_ready_needs_an_address_and_programmed_true():
    prog = condition("Programmed", "True", "Programmed")
    two = [{"type": "IPAddress", "value": "203.0.113.7"}, {"type": "Hostname", "value": "gw.example"}]
    assert k8s_status.gateway(_gateway(two, condition("Accepted", "True", "Accepted"), prog)) == State(
        True, False, "addresses 203.0.113.7, gw.example; Programmed=True (Programmed)")
    assert k8s_status.gateway(_gateway([{"type": "IPAddress", "value": ""}], prog)) == State(
        False, False, "no address published; Programmed=True (Programmed)")
    assert k8s_status.gateway(_gateway(two[:1], condition("Programmed", "False", "AddressNotAssigned"))) == State(
        False, False, "addresses 203.0.113.7; Programmed=False (AddressNotAssigned)")
    assert k8s_status.gateway(_gateway(None)) == State(
        False, False, "no address published; no Programmed condition yet")
    assert k8s_status.gateway(_gateway(two[:1])) == State(
        False, False, "addresses 203.0.113.7; no Programmed condition yet")


def _route(*parents: dict) -> dict:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r"},
            "status": {"parents": list(parents)}}


def _parent(name: str | None, *conds: dict) -> dict:
    ref = {} if name is None else {"name": name, "group": "gateway.networking.k8s.io", "kind": "Gateway"}
    return {"parentRef": ref, "controllerName": "example.net/gateway-controller", "conditions": list(conds)}


def test_httproute_accepted_by_every_parent():
    yes = condition("Accepted", "True", "Accepted")
    assert k8s_status.httproute(_route(_parent("a", condition("ResolvedRefs", "True", "ResolvedRefs"), yes),
                                       _parent("b", yes))) == State(
        True, False, "a: Accepted=True (Accepted); b: Accepted=True (Accepted)")
    # one parent still pending: not ready, not refused
    assert k8s_status.httproute(_route(_parent("a", yes), _parent("b", condition("Accepted", "False", "Pending")))) \
        == State(False, False, "a: Accepted=True (Accepted); b: Accepted=False (Pending)")
    # one parent refusing: a verdict waiting does not change, whatever the other says
    assert k8s_status.httproute(_route(_parent("a", condition("Accepted", "False", "NotAllowedByListeners")),
                                       _parent("b", yes))) == State(
        False, True, "a: Accepted=False (NotAllowedByListeners); b: Accepted=True (Accepted)")
    assert k8s_status.httproute(_route(_parent("a", yes), _parent("b", condition("Accepted", "False",
                                                                                 "NoMatchingParent")))).failed
    # a parent without an Accepted condition (or without a name) yet
    assert k8s_status.httproute(_route(_parent(None, condition("ResolvedRefs", "True", "R")), _parent("b", yes))) \
        == State(False, False, "?: no Accepted condition; b: Accepted=True (Accepted)")
    assert k8s_status.httproute(_route(_parent("a", condition("Accepted", "Unknown", "Pending")))) == State(
        False, False, "a: Accepted=Unknown (Pending)")
    assert k8s_status.httproute(_route()) == State(False, False, "no Gateway has reported on the route yet")
    assert k8s_status.httproute({"status": None}) == State(False, False, "no Gateway has reported on the route yet")


def test_gateway_url_from_the_first_http_listener_and_address():
    addrs = [{"type": "IPAddress", "value": "203.0.113.7"}, {"type": "IPAddress", "value": "203.0.113.8"}]
    listeners = [{"name": "tls", "protocol": "TLS", "port": 8443},
                 {"name": "noport", "protocol": "HTTP", "port": 0},
                 {"name": "http", "protocol": "HTTP", "port": 80},
                 {"name": "https", "protocol": "HTTPS", "port": 443}]
    assert k8s_status.gateway_url(_gateway(addrs, listeners=listeners)) == "http://203.0.113.7:80"
    assert k8s_status.gateway_url(_gateway(addrs, listeners=listeners[3:])) == "https://203.0.113.7:443"
    named = [{"name": "h", "protocol": "HTTPS", "port": 443, "hostname": "llm.example.com"}]
    assert k8s_status.gateway_url(_gateway(addrs, listeners=named)) == "https://llm.example.com:443"
    wild = [{"name": "h", "protocol": "HTTP", "port": 8080, "hostname": "*.example.com"}]
    assert k8s_status.gateway_url(_gateway(addrs, listeners=wild)) == "http://203.0.113.7:8080"
    six = [{"type": "IPAddress", "value": "2001:db8::7"}]
    assert k8s_status.gateway_url(_gateway(six, listeners=listeners[2:3])) == "http://[2001:db8::7]:80"
    assert k8s_status.gateway_url(_gateway([{"value": ""}, *addrs[1:]], listeners=listeners)) == \
        "http://203.0.113.8:80"
    assert k8s_status.gateway_url(_gateway([], listeners=listeners)) is None
    assert k8s_status.gateway_url(_gateway(addrs, listeners=listeners[:2])) is None
    assert k8s_status.gateway_url({"spec": None, "status": None}) is None


def test_state_reads_each_kind_with_its_reader_and_a_missing_object():
    assert k8s_status.state("RayService", None) == State(False, False, "not found in the cluster")
    assert k8s_status.state("Deployment", _deployment(1, 1, 1, 1, 1)).ready
    assert k8s_status.state("LeaderWorkerSet", _lws(1, 1, condition("Available", "True", "A"))).ready
    assert k8s_status.state("RayService", _rayservice("True", "NonZeroServeEndpoints")).ready
    assert k8s_status.state("Gateway", _gateway([{"value": "10.0.0.1"}], condition("Programmed", "True", "P"))).ready
    assert k8s_status.state("HTTPRoute", _route(_parent("g", condition("Accepted", "True", "Accepted")))).ready
    with pytest.raises(KeyError):
        k8s_status.state("StatefulSet", {})
