"""What tasks.py calls: resolve the inventory, run a stage, print, and turn outcomes into exit codes."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from gridready import console, matrix, secretscan, vault
from gridready.artifacts import RUN_ID, RunContext, customer_lock, new_run_id, validate_run_id, write_atomic
from gridready.errors import GridreadyError, InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, display_path, load, project_root

T = TypeVar("T")


class CommandExit(SystemExit):
    """Carries an exit code and an already-printed message up to invoke."""


@functools.cache
def _raw_run_id() -> str:
    """One run id for the whole command line (every stage of `invoke provision certify serve`), made on first use."""
    return os.environ.get("GRIDREADY_RUN_ID") or new_run_id()


def artifacts_root() -> Path:
    return Path(os.environ.get("GRIDREADY_ARTIFACTS") or project_root() / "artifacts")


MAX_LOCK_WAIT_S = 86400.0  # a day: a CI job waiting longer for the lock is stuck, not patient


@functools.cache
def inventory(name: str) -> Inventory:
    """The validated inventory whose software pins are a supported row of the version matrix (exit 2 otherwise:
    `inventories/<c>/cluster.yml: software.<key>: ...`), whose vault opens with the password file and defines
    what the plain files reference, in an environment whose GRIDREADY_* settings are sound; every task,
    `validate` first, goes through here."""
    if not isinstance(name, str) or not name or any(c in name for c in "\0\n\r"):
        raise InvalidInput("gridready.inventory: (invoke configuration): must be an inventory name or path "
                           "(GRIDREADY_INVENTORY or gridready.inventory in invoke.yaml)")
    check_environment()
    inv = load(name)
    matrix.require_supported(inv.spec, display_path(inv.path / "cluster.yml"))
    lines = vault.check(inv.customer, inv.path, inv.vault_refs, display_path)
    if lines:
        raise InvalidInput(lines)
    return inv


def check_environment() -> None:
    """The GRIDREADY_* variables a run reads, checked before anything runs (exit 2 naming the variable)."""
    run_id()
    lock_wait_s()
    if os.environ.get(vault.ENV):
        vault.read_password(Path(os.environ[vault.ENV]))
    for name in ("GRIDREADY_HOME", "GRIDREADY_ARTIFACTS", "GRIDREADY_STATE"):
        raw = os.environ.get(name)
        if not raw:
            continue
        path = Path(raw)
        if any(c in raw for c in "\0\n\r") or (path.exists() and not path.is_dir()) or \
                (name == "GRIDREADY_HOME" and not path.is_dir()):
            raise InvalidInput(f"{name}: (environment): must name a directory"
                               f"{' that exists' if name == 'GRIDREADY_HOME' else ' (made when absent)'}")


def lock_wait_s() -> float:
    """GRIDREADY_LOCK_WAIT_S: finite seconds, 0 to a day (nan and inf would wait forever)."""
    raw = os.environ.get("GRIDREADY_LOCK_WAIT_S") or "0"
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= MAX_LOCK_WAIT_S:
        raise InvalidInput(f"GRIDREADY_LOCK_WAIT_S: (environment): must be a number of seconds from 0 to "
                           f"{MAX_LOCK_WAIT_S:.0f}")
    return value


def check_limit(inv: Inventory, limit: str | None) -> None:
    """--limit must select at least one host of hosts.yml, resolved by Ansible's own pattern rules (groups,
    wildcards, `~regex`, `!` and `&`); a pattern that selects none would run nothing and report success."""
    if limit is None:
        return
    if not limit.strip() or any(c in limit for c in "\0\n\r"):
        raise InvalidInput("--limit: (command line): must be an Ansible host pattern")
    from ansible import constants as C  # noqa: N812 (ansible's own spelling)
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.utils.display import Display

    display = Display()
    quiet, enabled = display.warning, C.INVENTORY_ENABLED
    display.warning = lambda *a, **k: None  # type: ignore[method-assign]
    C.INVENTORY_ENABLED = ["yaml"]  # hosts.yml read as YAML only: never run as an inventory script
    try:
        hosts = InventoryManager(loader=DataLoader(), sources=[str(inv.hosts_file)]).list_hosts(limit)
    except Exception:  # an unparsable pattern is a usage error like an empty one
        hosts = []
    finally:
        display.warning = quiet  # type: ignore[method-assign]
        C.INVENTORY_ENABLED = enabled
    if not hosts:
        raise InvalidInput(f"--limit: (command line): the pattern {limit!r} matches no host of "
                           f"{display_path(inv.hosts_file)}")


def run_id() -> str:
    """This command line's run id; exit 2 when GRIDREADY_RUN_ID is not a slug."""
    return validate_run_id(_raw_run_id())


def context(inv: Inventory, **flags: Any) -> RunContext:
    """Where a stage writes. A template inventory (a folder starting with `_`) is validated, never run: its
    customer could be anyone's."""
    if inv.name.startswith("_"):
        raise InvalidInput(f"{display_path(inv.path)}: (directory name): a template inventory (name starting with "
                           "'_') is only validated; copy it to inventories/<customer>/ to run stages")
    check_limit(inv, flags.get("limit"))
    return RunContext(customer=inv.customer, run_id=run_id(), root=artifacts_root(), **flags)


@contextlib.contextmanager
def stage_lock(ctx: RunContext, stage: str) -> Iterator[None]:
    """Hold the customer's lock and claim this run's `stage` folder (exit 2 when either is taken)."""
    wait_s = lock_wait_s()
    holder = f"run {ctx.run_id} stage {stage} (pid {os.getpid()})"
    with customer_lock(ctx.root, ctx.customer, holder, wait_s):
        ctx.claim_stage(stage)
        yield


def run_stage(inv: Inventory, ctx: RunContext, run: Callable[[Inventory, RunContext], T]) -> T:
    """Run one stage (gridready.stages.<stage>.run) under the customer's lock, in a stage folder no earlier run
    of this id has used."""
    with stage_lock(ctx, run.__module__.rsplit(".", 1)[-1]):
        return run(inv, ctx)


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
    console.info(f"  artifacts: {artifacts_root() / summary.customer / summary.run_id / summary.stage}")
    if summary.exit_code:
        raise CommandExit(summary.exit_code)


def ensure_sandbox(inv: Inventory) -> None:
    """Bring the simulated fleet up when the inventory is a sandbox one and it is not running."""
    if not (inv.path / "sandbox.yml").exists():
        return
    from gridready.sandbox import fleet

    fleet.ensure_up(inv.path)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


RUNTIME_KEYS = {"inventory": str, "check": bool, "json": bool}
RUNTIME_SUFFIXES = (".yaml", ".yml")


def check_runtime_config(raw: str) -> None:
    """`invoke -f <file>`: a YAML file of at most 1 MiB holding `gridready: {inventory: <name>}` (and invoke's own
    sections). invoke itself skips a missing file (the default inventory would run instead), runs a `.py` one
    and shows a traceback for a broken one; InvalidInput naming the file and key here."""
    from gridready.yamlio import YamlError, load_yaml

    path = Path(raw)
    shown = display_path(path)
    if path.suffix not in RUNTIME_SUFFIXES:
        raise InvalidInput(f"{shown}: (file): gridready reads a YAML invoke file (.yaml or .yml)")
    if not path.exists() and not path.is_symlink():
        raise InvalidInput(f"{shown}: (file): missing (invoke -f names the inventory's invoke.yaml)")
    try:
        data = load_yaml(path)
    except YamlError as err:
        raise InvalidInput(f"{shown}: {err.where}: {err}") from None
    section = data.get("gridready") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise InvalidInput(f"{shown}: gridready: must be a mapping with inventory: <name> (e.g. gridready: "
                           "{inventory: acme})")
    for key, value in section.items():
        kind = RUNTIME_KEYS.get(key) if isinstance(key, str) else None
        if kind is None:
            raise InvalidInput(f"{shown}: gridready.{secretscan.redact(str(key))}: unknown key (expected "
                               f"{', '.join(RUNTIME_KEYS)})")
        if not isinstance(value, kind) or (kind is str and not value):
            raise InvalidInput(f"{shown}: gridready.{key}: must be a {'name' if kind is str else 'boolean'}")


def _bad_value_flag(argv: list[str], err: ValueError) -> str:
    """The flag whose value failed its type (invoke casts `--hosts x` with int() and lets the ValueError out)."""
    for i, tok in enumerate(argv):
        if tok.startswith("-") and "=" in tok and f"'{tok.split('=', 1)[1]}'" in str(err):
            return tok.split("=", 1)[0]
        if i and f"'{tok}'" in str(err) and argv[i - 1].startswith("-"):
            return argv[i - 1]
    return "(flag)"


def install_usage_errors() -> None:
    """Usage errors exit 2 with one line, as README's exit codes say: invoke exits 1 on an unknown flag or task,
    shows a traceback for a flag value of the wrong type and for a broken `-f` file. invoke's Program looks its
    steps up on itself when it calls them, after it imported tasks.py, so wrapping two of them here covers every
    task's flags and the runtime config file."""
    from invoke.exceptions import Exit, ParseError
    from invoke.program import Program

    if getattr(Program, "_gridready_usage_errors", False):
        return
    parse_tasks, update_config = Program.parse_tasks, Program.update_config

    def fail(line: str) -> Exit:
        return Exit(f"error: {secretscan.redact(line)}", code=int(ExitCode.INVALID))

    def guarded_parse_tasks(self: Program) -> None:
        try:
            parse_tasks(self)
        except ParseError as err:
            raise fail(f"(command line): {err}") from None
        except ValueError as err:
            flag = _bad_value_flag(list(self.core.unparsed) if self.core else [], err)
            raise fail(f"{flag}: (command line): not a value of the flag's type (a whole number where one "
                       "is asked)") from None

    def guarded_update_config(self: Program, merge: bool = True) -> None:
        raw = self.args.config.value or os.environ.get("INVOKE_RUNTIME_CONFIG")
        if raw:
            try:
                check_runtime_config(raw)
            except InvalidInput as err:
                raise fail(err.lines[0]) from None
        update_config(self, merge)

    Program.parse_tasks = guarded_parse_tasks  # type: ignore[method-assign]
    Program.update_config = guarded_update_config  # type: ignore[method-assign]
    Program._gridready_usage_errors = True  # type: ignore[attr-defined]
