"""What the tasks (gridready/commands.py) call: resolve the inventory, run a stage, print, and turn outcomes
into exit codes."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from gridready import console, envvars, matrix, secretscan, usage, vault
from gridready.artifacts import RUN_ID, RunContext, customer_lock, new_run_id, validate_run_id, write_atomic
from gridready.errors import GridreadyError, InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, available_line, display_path, load, project_root

T = TypeVar("T")


class CommandExit(SystemExit):
    """Carries an exit code and an already-printed message up to invoke."""


@functools.cache
def _raw_run_id() -> str:
    """One run id for the whole command line (every stage of `invoke provision certify serve`), made on first use."""
    return os.environ.get("GRIDREADY_RUN_ID") or new_run_id()


def artifacts_root() -> Path:
    return Path(os.environ.get("GRIDREADY_ARTIFACTS") or project_root() / "artifacts")


def chosen_inventory(flag: str | None) -> str:
    """The inventory of this command line: `-i` (gridready.inventory of the configuration), else
    GRIDREADY_INVENTORY. There is no default: one could boot a fleet the operator did not name."""
    name = flag or os.environ.get("GRIDREADY_INVENTORY")
    if not name:
        raise InvalidInput(f"-i/--inventory: (command line): name the inventory (gridready -i <customer> ..., or "
                           f"GRIDREADY_INVENTORY); {available_line()}")
    return name


@functools.cache
def inventory(name: str) -> Inventory:
    """The validated inventory whose software pins are a supported row of the version matrix (exit 2 otherwise:
    `inventories/<c>/cluster.yml: software.<key>: ...`), whose vault opens with the password file and defines
    what the plain files reference, in an environment whose GRIDREADY_* settings are sound; every task,
    `validate` first, goes through here."""
    if not isinstance(name, str) or not name or any(c in name for c in "\0\n\r"):
        raise InvalidInput("-i/--inventory: (command line): must be an inventory name or path (or "
                           "GRIDREADY_INVENTORY)")
    usage.check_environment(run_id)
    inv = load(name)
    envvars.check(inv, artifacts_root())
    matrix.require_supported(inv.spec, display_path(inv.path / "cluster.yml"))
    lines = vault.check(inv.customer, inv.path, vault.needed(inv), display_path)
    if lines:
        raise InvalidInput(lines)
    return inv


def run_id() -> str:
    """This command line's run id; exit 2 when GRIDREADY_RUN_ID is not a slug."""
    return validate_run_id(_raw_run_id())


def context(inv: Inventory, **flags: Any) -> RunContext:
    """Where a stage writes. A template inventory (a folder starting with `_`) is validated, never run: its
    customer could be anyone's."""
    if inv.name.startswith("_"):
        raise InvalidInput(f"{display_path(inv.path)}: (directory name): a template inventory (name starting with "
                           "'_') is only validated; copy it to inventories/<customer>/ to run stages")
    usage.check_limit(inv, flags.get("limit"))
    return RunContext(customer=inv.customer, run_id=run_id(), root=artifacts_root(), **flags)


@contextlib.contextmanager
def stage_lock(ctx: RunContext, stage: str) -> Iterator[None]:
    """Hold the customer's lock and claim this run's `stage` folder (exit 2 when either is taken)."""
    wait_s = usage.lock_wait_s()
    holder = f"run {ctx.run_id} stage {stage} (pid {os.getpid()})"
    with customer_lock(ctx.root, ctx.customer, holder, wait_s):
        ctx.claim_stage(stage)
        yield


@contextlib.contextmanager
def customer_held(ctx: RunContext, what: str) -> Iterator[None]:
    """Hold the customer's lock without claiming a stage folder (prune, watch)."""
    try:
        wait_s = float(os.environ.get("GRIDREADY_LOCK_WAIT_S") or 0)
    except ValueError:
        raise InvalidInput("GRIDREADY_LOCK_WAIT_S: (environment): must be a number of seconds") from None
    with customer_lock(ctx.root, ctx.customer, f"{what} (pid {os.getpid()})", wait_s):
        yield


def run_stage(inv: Inventory, ctx: RunContext, run: Callable[[Inventory, RunContext], T]) -> T:
    """Run one stage (gridready.stages.<stage>.run) under the customer's lock, in a stage folder no earlier run
    of this id has used."""
    with stage_lock(ctx, run.__module__.rsplit(".", 1)[-1]):
        return run(inv, ctx)


def confirm(action: str, yes: bool) -> None:
    """A destructive step goes on with --yes, or when the operator answers `yes` on a terminal; without a terminal
    and without --yes it is a usage error (exit 2), so that a script never takes anything down by accident."""
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise InvalidInput(f"--yes: (command line): {action}? there is no terminal to ask; pass --yes to confirm")
    sys.stderr.write(f"{action}? type 'yes' to go on: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() != "yes":
        raise InvalidInput("--down: (command line): not confirmed; nothing was done")


def guarded(fn: Callable[..., T]) -> Callable[..., T]:
    """User errors print one line per problem and exit with their code; bugs exit 1 with the trace on disk."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except GridreadyError as err:
            for line in err.lines if isinstance(err, InvalidInput) else str(err).splitlines():
                console.error(secretscan.redact(line))
            raise CommandExit(int(err.code)) from None
        except (CommandExit, KeyboardInterrupt):
            raise
        except Exception as err:  # a bug: keep the trace out of the terminal, on disk for the report
            raw = _raw_run_id()
            path = artifacts_root() / "internal-errors" / f"{raw if RUN_ID.fullmatch(raw) else new_run_id()}.txt"
            write_atomic(path, traceback.format_exc())
            console.error(f"internal error: {type(err).__name__}: {err} (trace in {path})")
            raise CommandExit(int(ExitCode.INTERNAL)) from None

    return wrapper


def finish(summary: Any, as_json: bool) -> None:
    """Print the stage summary (JSON on stdout with --json) and stop the line on a non-zero exit code."""
    if as_json:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    hosts = ", ".join(f"{h}={o.status}" for h, o in sorted(summary.hosts.items())) or "no hosts"
    console.info(f"{summary.stage}: {summary.status} (exit {summary.exit_code}) in {summary.seconds}s: {hosts}")
    for msg in summary.messages:
        console.info(f"  {msg}")
    stage_dir = artifacts_root() / summary.customer / summary.run_id / summary.stage
    reports = getattr(summary, "reports", None) or {}
    if reports.get("report_html"):
        console.info(f"  report: {stage_dir / reports['report_html']}")
    warnings = sum(1 for m in summary.messages if m.lower().startswith("warning"))
    console.info(f"  artifacts: {stage_dir}" + (f" ({warnings} warning{'s' if warnings != 1 else ''} above)"
                                                if warnings else ""))
    if summary.exit_code:
        raise CommandExit(summary.exit_code)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def finish_verify(result: dict[str, Any], as_json: bool) -> None:
    """`invoke evidence verify`: one line (or the JSON), then its exit code."""
    if as_json:
        print_json(result)
    who = f"{result['subject']} (run {result['run_id']}, certified={result['certified']})" if result["subject"] else ""
    console.info(f"evidence {result['bundle']}: {'valid' if result['valid'] else 'INVALID'} {who}".rstrip())
    for line in result["problems"]:
        console.error(line)
    if result["exit_code"]:
        raise CommandExit(result["exit_code"])


def print_tables(renderables: list[Any]) -> None:
    """Tables on stdout (what `invoke status` prints), plain where stdout is not a terminal."""
    out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 160)
    for item in renderables:
        out.print(item)
