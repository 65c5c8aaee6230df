"""What the steps of `serve` hand each other: one context for the run, and one typed result per step.

The stage (gridready/stages/serve/__init__.py) calls its steps in order, each with the result of the one before:

    plan -> Planned -> render -> Rendered -> deploy -> Deployed -> verify -> Verified
         -> redeploy -> Redeployed -> rollout -> RolledOut -> record -> ServeSummary

Each result extends the one before it, so a step reads everything decided upstream by name and nothing downstream
exists yet. `ServeContext` is the run's ledger of outcomes (status, exit code, per-host outcomes, messages, the
summary's data): a step that fails says so there, and every later step sees `proceeds` turn false.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, Self

from gridready.artifacts import RunContext
from gridready.contracts import HostOutcome
from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory
from gridready.serving.k8s_status import Watch
from gridready.serving.topology import Certification, TierPlan
from gridready.stages.common import Timer

STAGE = "serve"
# the status a stage reports for an error's exit code; any other code is a failed deployment
STATUS_OF = {ExitCode.NOT_CERTIFIED: "not-certified", ExitCode.INVALID: "error"}
# serve deploys without readiness, smoke, benchmark and SLO gate (gridready.envvars FLAGS)
SKIP_ENV = "GRIDREADY_SERVE_SKIP_BENCH"


@dataclass
class ServeContext:
    """One run of the stage: the inventory and the command line's flags, and what has come out so far."""

    inv: Inventory
    run: RunContext
    timer: Timer = field(default_factory=Timer)
    status: str = "success"
    code: ExitCode = ExitCode.OK
    hosts: dict[str, HostOutcome] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == ExitCode.OK

    def outcome(self, status: str, code: ExitCode) -> None:
        self.status, self.code = status, code

    @contextmanager
    def failing_on(self, *errors: type[GridreadyError]) -> Iterator[None]:
        """An error of these kinds ends the run here: its status and exit code, its lines among the messages."""
        try:
            yield
        except errors as err:
            self.outcome(STATUS_OF.get(err.code, "failed"), err.code)
            self.messages += str(err).splitlines()


@dataclass
class Planned:
    """plan: the certification read fail closed and the tiers sized on it; cert is None when the run was refused."""

    ctx: ServeContext
    cert: Certification | None
    plans: list[TierPlan]

    @classmethod
    def after(cls, previous: Planned, **added: Any) -> Self:
        """This step's result: everything of `previous`, and what this step adds."""
        return cls(**{f.name: getattr(previous, f.name) for f in fields(previous)}, **added)

    @property
    def on_hosts(self) -> bool:
        """Systemd units on the hosts (target hosts, not --render); otherwise the Kubernetes stacks."""
        return self.ctx.inv.spec.serving.target == "hosts" and not self.ctx.run.render

    @property
    def proceeds(self) -> bool:
        """Whether there is something to serve and nothing failed so far."""
        return self.ctx.ok and self.cert is not None and bool(self.plans)

    @property
    def certification(self) -> Certification:
        assert self.cert is not None, "a step after a refused plan ran"
        return self.cert


@dataclass
class Rendered(Planned):
    """render: target hosts: serve.yml's variables and one unit per Triton replica (hosts, role variables, summary
    entry); target kubernetes: both stacks' config, their manifests rendered and validated."""

    extravars: dict[str, Any] = field(default_factory=dict)
    triton_units: list[tuple[list[str], dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    stack_configs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class RouterReach:
    """Kubernetes: how this machine reaches the router (gridready/stages/serve/k8s_verify.py): a URL the inventory
    names, or the Gateway and the router's HTTPRoute whose published address decides it; `routes`: tier -> (the
    route's model it is checked by, the other tiers that route also sends to)."""

    how: str
    url: str | None = None
    gateway: list[Watch] = field(default_factory=list)
    routes: dict[str, tuple[str, list[str]]] = field(default_factory=dict)


@dataclass
class KubernetesServed:
    """Kubernetes, after the controllers' wait: the router's URL, how it was found, the status reader and the
    workloads waited for (the not-ready report reads their controllers' last word)."""

    reach: RouterReach
    url: str
    read: Callable[[Watch], Mapping[str, Any] | None]
    watches: list[Watch]


@dataclass
class Deployed(Rendered):
    """deploy: the playbook runs or the stacks applied (their outcomes are in the context); on Kubernetes, what
    verify needs to reach the tiers through the router (None: nothing applied, or the checks skipped)."""

    k8s: KubernetesServed | None = None


@dataclass
class Verified(Deployed):
    """verify: readiness, smoke, benchmark, SLO gate and the router's overhead; `swept`: the fixed-cost tiers whose
    queue delay the sweep changed, to be put back on their own setting."""

    swept: list[TierPlan] = field(default_factory=list)


@dataclass
class Redeployed(Verified):
    """redeploy: every swept tier serves its configured queue delay again."""


@dataclass
class RolledOut(Redeployed):
    """rollout: the canary split, observed, promoted or rolled back (`serve --canary`)."""
