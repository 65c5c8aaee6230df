"""gridready's tasks: `gridready -i <customer> provision certify serve` (gridready/program.py, README.md). A shell:
no logic here.

The inventory is named for the whole line: `gridready -i <c> ...`, else GRIDREADY_INVENTORY; there is no default
(a stage without one lists the inventories there are and exits 2). The tasks ship with the package, so the command
line works from any folder. An installed distribution may add a task collection and a hook run before each stage
that reaches hosts (entry point groups below): the rehearsal fleet brings itself up that way; the product names
none.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from invoke import Collection, Context, Task
from invoke import task as invoke_task

from gridready import cli, usage
from gridready.artifacts import RunContext
from gridready.contracts import StageSummary
from gridready.errors import StageFailed

StageRun = Callable[[cli.Inventory, RunContext], StageSummary]
usage.install_usage_errors()  # unknown flags, bad flag values and a broken -f file: exit 2 with one line

HELP = {
    "check": "Ansible check mode (--check --diff): report what would change, change nothing",
    "limit": "Ansible host pattern to restrict the stage to",
    "tags": "Ansible tags to run",
    "json": "print the stage summary as JSON on stdout",
}


COLLECTIONS_GROUP = "gridready.collections"  # entry points: name -> an invoke Collection added to the tasks
BEFORE_STAGE_GROUP = "gridready.before_stage"  # entry points: callables given the inventory folder before a stage
# Short flags as ansible-playbook spells them; every other flag of a task is long only (one meaning per letter)
SHORT_FLAGS = {"limit": "l", "tags": "t", "check": "C"}


class GridreadyTask(Task):  # type: ignore[misc]  # invoke's Task is generic only in its stubs
    """A task whose only short flags are Ansible's (-l, -t, -C): invoke would give `check` -c (Ansible's
    connection), `force` -f (Ansible's forks) and `down` -d (the program's debug)."""

    def __init__(self, body: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(body, auto_shortflags=False, **kwargs)

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts: dict[str, Any] = super().arg_opts(name, default, taken_names)
        short = SHORT_FLAGS.get(name)
        if short and short not in taken_names:
            opts["names"] = [*opts["names"], short]
        return opts


def task(*args: Any, **kwargs: Any) -> Any:
    """invoke's @task, making a GridreadyTask."""
    return invoke_task(*args, klass=GridreadyTask, **kwargs)


def _pick(*names: str) -> dict[str, str]:
    return {n: HELP[n] for n in names}


def _inv(c: Context) -> cli.Inventory:
    return cli.inventory(cli.chosen_inventory(c.config.gridready.inventory))


@task
@cli.guarded
def validate(c: Context) -> None:
    """Load and cross-check the inventory; one line per problem, exit 2 when invalid."""
    inv = _inv(c)
    cli.run_id()
    from gridready.stages import fanout

    fanout.refuse_unmet(inv)  # a certification.parallel this controller cannot hold: one line, exit 2
    cli.console.info(f"inventory {inv.name}: valid ({len(inv.gpu_hosts())} GPU nodes, "
                     f"{len(inv.spec.serving.tiers)} serving tiers)")
    for line in usage.gated_model_warnings(inv):
        cli.console.warn(line)


def _before_stage(inv: cli.Inventory) -> None:
    """The hooks installed distributions declare (BEFORE_STAGE_GROUP), given the inventory folder: a rehearsal
    inventory's fleet comes up first; the product itself knows no such fleet."""
    for hook in sorted(entry_points(group=BEFORE_STAGE_GROUP), key=lambda ep: ep.name):
        hook.load()(inv.path)


def _stage(c: Context, run: StageRun, check_usage: Callable[[RunContext], None] | None = None,
           **flags: object) -> None:
    """Run a stage. Each task imports its own stage, so that a machine without one stage's dependencies (Pulumi on a
    lent GPU machine: docs/device.md) still runs the others. `check_usage` judges the stage's own flags before
    anything is written or booted."""
    inv = _inv(c)
    as_json = bool(flags.pop("json", False)) or bool(c.config.gridready.json)
    flags["check"] = bool(flags.get("check")) or bool(c.config.gridready.check)
    ctx = cli.context(inv, json=as_json, **flags)  # type: ignore[arg-type]
    if check_usage is not None:
        check_usage(ctx)
    if not flags.get("render"):  # a render reads the inventory alone: it never boots anything
        _before_stage(inv)
    cli.finish(cli.run_stage(inv, ctx, run), as_json)


PROVISION_TAGS = ("one role each: preflight, nvidia_driver, fabricmanager, nccl, dcgm, rdma, container_engine, "
                  "container_toolkit, probe_runtime, host_tuning")


@task(pre=[validate], help={**HELP, "force": "run every role, also on hosts recorded as converged (no fast path)",
                            "tags": f"comma-separated roles to run ({PROVISION_TAGS})",
                            "skip-tags": "comma-separated roles to leave out (the same tags)",
                            "batch": "where nodes serve, roll them this many at a time: N nodes or N% of the serving "
                                     "nodes (default one node or 10%, whichever is larger)",
                            "max-fail": "failed nodes the roll tolerates before it stops: N or N% (default 0: the "
                                        "first failure stops it)"})
@cli.guarded
def provision(c: Context, check: bool = False, limit: str | None = None, tags: str | None = None,
              skip_tags: str | None = None, force: bool = False, json: bool = False, batch: str | None = None,
              max_fail: str | None = None) -> None:
    """Install and pin driver, fabric manager, DCGM, NCCL, RDMA, container toolkit; tune the hosts. Where nodes
    serve, a rolling provision: batches drained, provisioned, rebooted, re-certified and returned."""
    from gridready.stages import provision as stage

    _stage(c, stage.run, stage.check_usage, check=check, limit=limit, tags=tags, skip_tags=skip_tags, force=force,
           json=json, batch=batch, max_fail=max_fail)


@task(pre=[validate], help={**_pick("limit", "json"),
                            "check": "dry run: read-only snapshots and gates only; nothing loads the GPUs or the "
                                     "fabric, nothing is signed, recorded or quarantined",
                            "force": "re-certify nodes whose certification is still valid",
                            "gates": "comma-separated gates to run and judge alone (a diagnostic run: nothing "
                                     "recorded, signed or quarantined), e.g. dcgm,nccl_allreduce",
                            "skip-gates": "every gate but these (a diagnostic run, as --gates)",
                            "accuracy": "probe nothing: judge the corpus of real fault and noise lines and the "
                                        "recorded real healthy runs, print the per-gate accuracy table (exit 5 on a "
                                        "misjudged line or a false fail)"})
@cli.guarded
def certify(c: Context, check: bool = False, limit: str | None = None, force: bool = False,
            json: bool = False, gates: str | None = None, skip_gates: str | None = None,
            accuracy: bool = False) -> None:
    """Probe every node, judge every gate, certify the fabric, quarantine bad nodes, write the reports."""
    if accuracy:
        from gridready.certify import accuracy as table

        return table.print_report(table.REPOSITORY, json)
    from gridready.stages import certify as stage

    _stage(c, stage.run, stage.check_usage, check=check, limit=limit, force=force, json=json, gates=_names(gates),
           skip_gates=_names(skip_gates))


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (value or "").split(",") if n.strip())


@task(pre=[validate], help={**_pick("check", "limit", "json"),
                            "render": "write what the target would run, nothing applied: the Kubernetes manifests, "
                                      "or serve.yml's variables on hosts",
                            "canary": "roll this tier out through the router: split, observe its SLOs, promote or "
                                      "roll back (exit 3)",
                            "weight": "the canary's share of its route in % (1..99, default 10)",
                            "down": "take the tiers down: stop and disable the serving units on the hosts (the "
                                    "firewall stays), or destroy the serving stack on Kubernetes (its weights and "
                                    "engine-cache claims are kept); asks first on a terminal, else needs --yes",
                            "yes": "with --down: take the tiers down without asking",
                            "purge-volumes": "with --down on Kubernetes: delete the kept weights and engine-cache "
                                             "claims too (the next serve downloads and builds again)"})
@cli.guarded
def serve(c: Context, check: bool = False, limit: str | None = None, render: bool = False,
          json: bool = False, canary: str | None = None, weight: str | None = None, down: bool = False,
          yes: bool = False, purge_volumes: bool = False) -> None:
    """Deploy the serving tiers on certified nodes, then readiness, smoke, benchmark and SLO gate."""
    from gridready.errors import InvalidInput
    from gridready.stages import serve as stage
    from gridready.stages.serve import rollout as serve_canary

    if yes and not down:
        raise InvalidInput("--yes: (command line): confirms --down only")

    if down:
        from gridready.stages.serve import down as serve_down

        if render or canary or weight:
            raise InvalidInput("--down: (command line): takes no --render, --canary or --weight")
        if not check:
            cli.confirm(f"take the serving tiers of {_inv(c).customer} down", yes)
        _stage(c, serve_down.run, check=check, limit=limit, json=json, purge_volumes=purge_volumes)
        return
    if purge_volumes:
        raise InvalidInput("--purge-volumes: (command line): only with --down")
    pct = serve_canary.check_flags(_inv(c), canary, weight)
    _stage(c, stage.run, check=check, limit=limit, render=render, json=json, canary=canary, canary_weight=pct)


@task(pre=[validate], help=_pick("json"))
@cli.guarded
def bench(c: Context, json: bool = False) -> None:
    """Re-run readiness, smoke, the load benchmark and the SLO gate against the deployed tiers."""
    from gridready.stages import bench as stage

    _stage(c, stage.run, json=json)


@task(pre=[validate], help={"host": "a host of hosts.yml to read", "json": HELP["json"],
                            "group": "node group name (default: the host's group in hosts.yml, else discovered)",
                            "write": "put the node group into cluster.yml, then validate the inventory"})
@cli.guarded
def discover(c: Context, host: str, group: str | None = None, write: bool = False, json: bool = False) -> None:
    """Read a host through Ansible (GPUs, NICs, OS, NVSwitch) and print its node group for cluster.yml."""
    from gridready.stages import discover as stage

    inv = _inv(c)
    _before_stage(inv)
    summary = stage.run(inv, cli.context(inv, json=json), host=host, group=group, write=write)
    cli.finish(summary, json or bool(c.config.gridready.json))


@task(pre=[validate], help={"json": HELP["json"],
                            "offline": "from the inventory alone: no SSH, no fleet (roles per host, gates, tiers)"})
@cli.guarded
def plan(c: Context, json: bool = False, offline: bool = False) -> None:
    """What each stage would do: provision in check mode and the rendered serving manifests."""
    from gridready.stages import plan as planner

    inv = _inv(c)
    ctx = cli.context(inv, check=True, render=True, json=json)
    if not offline:
        _before_stage(inv)
    with cli.stage_lock(ctx, "plan"):
        planner.run(inv, ctx, as_json=json, offline_only=offline)


@task(help={"json": "print the fleet's state as JSON on stdout"})
@cli.guarded
def status(c: Context, json: bool = False) -> None:
    """The fleet from the ledger: node, group, verdict, certified until, failing gates, serving, drained; and what
    changed since the previous state."""
    from gridready.stages import status as stage

    inv = _inv(c)
    doc = stage.run(inv, cli.context(inv))
    if json or bool(c.config.gridready.json):
        cli.print_json(doc)
    else:
        cli.print_tables(stage.table(doc))


@task
@cli.guarded
def schema(c: Context) -> None:
    """Print the JSON Schema of cluster.yml."""
    from gridready.spec import ClusterSpec

    cli.print_json(ClusterSpec.model_json_schema())


@task(help={"bundle": "a statement.dsse.json (or its folder); default: the ledger's evidence of --node",
            "node": "the node the evidence must name (and, without --machine, the machine the ledger certified)",
            "key": "the ed25519 public key (PEM); default GRIDREADY_EVIDENCE_PUBKEY, inventories/<c>/evidence.pub",
            "machine": "a probe.json of the machine to check the evidence against (e.g. from a fresh certify run)",
            "json": HELP["json"]})
@cli.guarded
def evidence_verify(c: Context, bundle: str | None = None, node: str | None = None, key: str | None = None,
                    machine: str | None = None, json: bool = False) -> None:
    """Check a node's signed in-toto evidence: signature, report digests, and which machine it names."""
    from gridready.stages import attest

    inv = _inv(c)
    result = attest.verify(inv, cli.context(inv), bundle=bundle, node=node, key=key, machine=machine)
    cli.finish_verify(result, json or bool(c.config.gridready.json))


@task(help={"keep": "valid runs to keep per stage (default 10)", "dry_run": "list what would be removed",
            "json": HELP["json"]})
@cli.guarded
def prune(c: Context, keep: int = 10, dry_run: bool = False, json: bool = False) -> None:
    """Artifacts retention: keep the last N valid runs per stage and every run the ledger points to."""
    from gridready.stages import prune as stage

    inv = _inv(c)
    ctx = cli.context(inv)
    with cli.customer_held(ctx, "prune"):
        result = stage.run(inv, ctx, keep, dry_run)
    if json or bool(c.config.gridready.json):
        cli.print_json(result)
    verb = "would remove" if dry_run else "removed"
    cli.console.info(f"prune {inv.customer}: {verb} {len(result['removed'])} run(s): "
                     f"{', '.join(result['removed']) or 'none'}; kept every run the ledger points to")


@task(help={"once": "one pass (what the systemd timer runs)", "signals": "read signals from this JSON file "
            "instead of the nodes", "max_drain_share": "circuit breaker: at most this share of a pool drained "
            "(default 0.5)", "recertify_days": "re-certify nodes whose verdict is older (default 7)",
            "json": HELP["json"]})
@cli.guarded
def watch(c: Context, once: bool = False, signals: str | None = None, max_drain_share: float | None = None,
          recertify_days: float | None = None, json: bool = False) -> None:
    """Passive health: read Xid, DCGM health and engine health; drain, re-certify, return or quarantine."""
    from gridready.stages import certify as certify_stage
    from gridready.stages import watch as stage

    inv = _inv(c)
    if not once:
        raise cli.InvalidInput("--once: (flag): the watcher runs one pass per call; schedule it with the systemd "
                               "timer of docs/fleet-lifecycle.md")
    policy = stage.load_policy(max_drain_share, recertify_days)
    ctx = cli.context(inv)
    _before_stage(inv)
    with cli.customer_held(ctx, "watch"):
        result = stage.run(inv, ctx, signals, policy, certify_stage.run)
    if json or bool(c.config.gridready.json):
        cli.print_json(result)
    for a in result["actions"]:
        cli.console.info(f"watch: {a['kind']} {a['node']}: {a['reason']}"
                         + (f" (gates: {', '.join(a['gates'])})" if a["gates"] else ""))
    cli.console.info(f"watch: {len(result['signals'])} signal(s), {len(result['actions'])} action(s); "
                     "`invoke status` shows the fleet")


@task(pre=[validate], help={"slurm": "apply the ledger's verdicts to Slurm: drain what may not serve, resume what "
                                     "gridready drained and may serve again (scontrol on this machine)",
                            "check": "print the scontrol commands, run none", "json": HELP["json"]})
@cli.guarded
def quarantine(c: Context, slurm: bool = False, check: bool = False, json: bool = False) -> None:
    """Apply the quarantine to the scheduler: Slurm drains and resumes of gridready's own, from the ledger."""
    from gridready.errors import InvalidInput
    from gridready.stages import slurm_sync

    if not slurm:
        raise InvalidInput("quarantine: (command line): name the scheduler: --slurm (Kubernetes nodes get their "
                           "label and taint from `invoke serve`)")
    inv = _inv(c)
    ctx = cli.context(inv, check=check)
    with cli.customer_held(ctx, "quarantine"):
        result = slurm_sync.run(inv, ctx)
    if json or bool(c.config.gridready.json):
        cli.print_json(result)
    for d in result["commands"]:
        cli.console.info(("would run: " if not d["ran"] else f"ran (exit {d['rc']}): ") + d["command"])
    for note in result["notes"]:
        cli.console.info(f"left alone: {note}")
    if result["failed"]:
        raise StageFailed(f"quarantine: {len(result['failed'])} scontrol command(s) failed: "
                          + "; ".join(result["failed"]))


evidence = Collection("evidence")
evidence.add_task(evidence_verify, "verify")



def _installed_collections() -> list[Collection]:
    """The task collections installed distributions declare (COLLECTIONS_GROUP), by entry point name."""
    return [ep.load() for ep in sorted(entry_points(group=COLLECTIONS_GROUP), key=lambda ep: ep.name)]


ns = Collection(validate, provision, certify, serve, bench, discover, plan, status, watch, quarantine, prune, schema,
                evidence, *_installed_collections())
ns.configure({
    "gridready": {
        "inventory": None,  # -i, else GRIDREADY_INVENTORY (gridready.cli.chosen_inventory)
        "check": False,
        "json": False,
    },
    "run": {"echo": True},
})
