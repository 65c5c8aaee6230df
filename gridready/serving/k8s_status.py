"""What a serving workload's controller reports, read as gridready needs it: ready, still coming, or failed for good.

Pure functions over the objects the Kubernetes API returns; only the status fields the pinned controllers publish
are read:
- RayService (KubeRay v1.7.0, ray-operator/apis/ray/v1/rayservice_types.go; the vendored CRD's status schema):
  `status.conditions[type=Ready]` is True (reason NonZeroServeEndpoints) once Serve answers on at least one pod;
  reason InitializingTimeout is terminal (the operator gives up after `ray.io/initializing-timeout` and never
  retries the RayService); the deprecated `status.serviceStatus` ("Running") only stands in where an older
  operator set no condition at all.
- LeaderWorkerSet (LWS v0.10.0, api/leaderworkerset/v1: `status.readyReplicas`, `status.conditions`): ready when
  every group of `spec.replicas` is ready and condition Available is True.
- Deployment (apps/v1): ready when the controller has seen the latest generation and `status.availableReplicas`
  and `updatedReplicas` reach `spec.replicas`; condition Progressing with reason ProgressDeadlineExceeded is
  terminal.

- Gateway and HTTPRoute (Gateway API v1.6.1, apis/v1: the route serve reaches the router by when the inventory
  names no router_url): a Gateway is ready when condition Programmed is True and `status.addresses` holds one;
  an HTTPRoute when every parent's Accepted is True (`status.parents[].conditions`); Accepted False with a reason
  other than Pending (NotAllowedByListeners, NoMatchingParent, NoMatchingListenerHostname, UnsupportedValue) is
  the Gateway's verdict on the route's configuration, which waiting does not change.

`watches()` reads from the rendered manifests which objects to wait for, for which tier, and how long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TIER_LABEL = "gridready.io/tier"
APP_NAME_LABEL = "app.kubernetes.io/name"
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"  # gridready/stacks/serving/timeouts.py
INITIALIZING_TIMEOUT = "ray.io/initializing-timeout"
# scheduling and image pull before the operator's own clock matters; the wait outlasts the operator's timeout so
# the operator's verdict (InitializingTimeout) is what gets reported
RAYSERVICE_MARGIN_S = 300
WORKLOADS = {("ray.io/v1", "RayService"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
             ("apps/v1", "Deployment")}
_DURATION = re.compile(r"^(\d+)([smh]?)$")


@dataclass(frozen=True)
class Watch:
    """One workload to wait for: its tier (or the router), its object, and the wait's budget."""

    tier: str
    api_version: str
    kind: str
    namespace: str
    name: str
    timeout_s: int

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class State:
    """ready: serving; failed: the controller gave up (waiting longer changes nothing); detail: its last word."""

    ready: bool
    failed: bool
    detail: str


def duration_s(text: str) -> int:
    """KubeRay's initializing timeout as gridready writes it (30m, 2h, 900s or bare seconds)."""
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def watches(docs: Iterable[Mapping[str, Any]], default_timeout_s: int) -> list[Watch]:
    """The serving workloads among rendered manifests: RayServices, LeaderWorkerSets and Deployments of a tier
    (label gridready.io/tier) or of the router; each with its own budget (its timeout annotation, a RayService's
    initializing timeout plus a margin, else `default_timeout_s`)."""
    out = []
    for doc in docs:
        if (doc.get("apiVersion"), doc.get("kind")) not in WORKLOADS:
            continue
        meta = doc.get("metadata") or {}
        labels = meta.get("labels") or {}
        tier = labels.get(TIER_LABEL) or labels.get(APP_NAME_LABEL)
        if not tier:
            continue
        notes = meta.get("annotations") or {}
        if TIMEOUT_ANNOTATION in notes:
            timeout = int(notes[TIMEOUT_ANNOTATION])
        elif INITIALIZING_TIMEOUT in notes:
            timeout = duration_s(notes[INITIALIZING_TIMEOUT]) + RAYSERVICE_MARGIN_S
        else:
            timeout = default_timeout_s
        out.append(Watch(tier, doc["apiVersion"], doc["kind"], meta.get("namespace", "default"), meta["name"],
                         timeout))
    return sorted(out, key=lambda w: (w.tier, w.kind, w.name))


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def _say(cond: Mapping[str, Any] | None) -> str:
    if cond is None:
        return ""
    text = f"{cond.get('type')}={cond.get('status')}"
    if cond.get("reason"):
        text += f" ({cond['reason']})"
    if cond.get("message"):
        text += f": {str(cond['message'])[:300]}"
    return text


def rayservice(obj: Mapping[str, Any]) -> State:
    status = obj.get("status") or {}
    ready = _condition(obj, "Ready")
    if ready is None:
        legacy = status.get("serviceStatus") or ""
        if not status.get("conditions") and legacy == "Running":
            return State(True, False, "serviceStatus Running")
        return State(False, False, f"serviceStatus {legacy!r}, no Ready condition yet" if legacy
                     else "no status reported yet")
    detail = _say(ready)
    apps = (status.get("activeServiceStatus") or {}).get("applicationStatuses") or {}
    unhealthy = [f"application {name} {app.get('status')}: {str(app.get('message', ''))[:200]}"
                 for name, app in sorted(apps.items()) if app.get("status") in ("DEPLOY_FAILED", "UNHEALTHY")]
    if unhealthy:
        detail += "; " + "; ".join(unhealthy)
    if ready.get("status") == "True":
        return State(True, False, detail)
    return State(False, ready.get("reason") == "InitializingTimeout", detail)


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def leaderworkerset(obj: Mapping[str, Any]) -> State:
    status = obj.get("status") or {}
    want, have = _replicas(obj), int(status.get("readyReplicas") or 0)
    available = _condition(obj, "Available")
    detail = f"{have}/{want} groups ready" + (f"; {_say(available)}" if available else "")
    for kind in ("Progressing", "UpdateInProgress"):
        cond = _condition(obj, kind)
        if cond is not None and cond.get("status") == "True" and cond.get("message"):
            detail += f"; {_say(cond)}"
    return State(have >= want and available is not None and available.get("status") == "True", False, detail)


def deployment(obj: Mapping[str, Any]) -> State:
    status = obj.get("status") or {}
    want = _replicas(obj)
    available, updated = int(status.get("availableReplicas") or 0), int(status.get("updatedReplicas") or 0)
    seen = int(status.get("observedGeneration") or 0) >= int((obj.get("metadata") or {}).get("generation") or 0)
    progressing = _condition(obj, "Progressing")
    detail = f"{available}/{want} replicas available, {updated} updated"
    if progressing is not None:
        detail += f"; {_say(progressing)}"
    stuck = progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded"
    return State(seen and available >= want and updated >= want, stuck, detail)


def gateway(obj: Mapping[str, Any]) -> State:
    status = obj.get("status") or {}
    programmed = _condition(obj, "Programmed")
    addresses = [a.get("value") for a in status.get("addresses") or [] if a.get("value")]
    detail = (f"addresses {', '.join(addresses)}" if addresses else "no address published") + (
        f"; {_say(programmed)}" if programmed else "; no Programmed condition yet")
    return State(bool(addresses) and programmed is not None and programmed.get("status") == "True", False, detail)


def httproute(obj: Mapping[str, Any]) -> State:
    parents = (obj.get("status") or {}).get("parents") or []
    if not parents:
        return State(False, False, "no Gateway has reported on the route yet")
    said, accepted, refused = [], True, False
    for parent in parents:
        cond = next((c for c in parent.get("conditions") or [] if c.get("type") == "Accepted"), None)
        said.append(f"{(parent.get('parentRef') or {}).get('name', '?')}: {_say(cond) or 'no Accepted condition'}")
        accepted = accepted and cond is not None and cond.get("status") == "True"
        refused = refused or (cond is not None and cond.get("status") == "False" and cond.get("reason") != "Pending")
    return State(accepted, refused, "; ".join(said))


def gateway_url(obj: Mapping[str, Any]) -> str | None:
    """http(s)://<address>:<port> of a Gateway's first HTTP or HTTPS listener and its first published address
    (a listener's own hostname where it names one without a wildcard); None when it publishes none."""
    addresses = [a.get("value") for a in (obj.get("status") or {}).get("addresses") or [] if a.get("value")]
    listener = next((x for x in (obj.get("spec") or {}).get("listeners") or []
                     if x.get("protocol") in ("HTTP", "HTTPS") and x.get("port")), None)
    if not addresses or listener is None:
        return None
    host = listener.get("hostname") if listener.get("hostname") and "*" not in listener["hostname"] else addresses[0]
    host = f"[{host}]" if ":" in str(host) else host  # an IPv6 address in a URL
    return f"{listener['protocol'].lower()}://{host}:{int(listener['port'])}"


READERS = {"RayService": rayservice, "LeaderWorkerSet": leaderworkerset, "Deployment": deployment,
           "Gateway": gateway, "HTTPRoute": httproute}


def state(kind: str, obj: Mapping[str, Any] | None) -> State:
    """The state of one workload object (None: the API has no such object)."""
    if obj is None:
        return State(False, False, "not found in the cluster")
    return READERS[kind](obj)
