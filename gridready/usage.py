"""Usage errors of the command line and the environment: one line, exit 2, before anything runs (README "Exit
codes"). gridready.cli calls these; gridready/commands.py installs the guards on invoke's Program."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

from gridready import charset, secretscan, vault
from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.inventory import Inventory, display_path, invoke_file_problems

MAX_LOCK_WAIT_S = 86400.0  # a day: a CI job waiting longer for the lock is stuck, not patient


def check_environment(run_id: Callable[[], str]) -> None:
    """The GRIDREADY_* variables a run reads, checked before anything runs (exit 2 naming the variable);
    `run_id` is the command line's (gridready.cli.run_id)."""
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
        value = charset.ascii_float(raw)  # float('１０') is 10
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
    if not hosts_matching(inv, limit):
        raise InvalidInput(f"--limit: (command line): the pattern {limit!r} matches no host of "
                           f"{display_path(inv.hosts_file)}")


def hosts_matching(inv: Inventory, limit: str) -> list[str]:
    """The hosts of hosts.yml an Ansible host pattern selects (none for an unparsable pattern)."""
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
    return [h.name for h in hosts]


RUNTIME_SUFFIXES = (".yaml", ".yml")
# invoke's own variables that the plain `invoke` form still reads: the -f file (checked below) and gridready's
# section (INVOKE_GRIDREADY_CHECK=1 as --check); any other INVOKE_* sets invoke's own configuration
INVOKE_ENV_ALLOWED = ("INVOKE_RUNTIME_CONFIG", "INVOKE_GRIDREADY_")


def check_runtime_config(raw: str) -> None:
    """`invoke -f <file>`: a YAML file of at most 1 MiB holding `gridready: {inventory: <name>}` and nothing of
    invoke's own (inventory.invoke_file_problems). invoke itself skips a missing file (another inventory could
    run instead), runs a `.py` one, shows a traceback for a broken one and imports what `tasks.executor_class`
    names; InvalidInput naming the file and key here, before invoke reads it."""
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
    problems = invoke_file_problems(data)
    if problems:
        raise InvalidInput([f"{shown}: {key}: {problem}" for key, problem in problems])


def check_invoke_environment(sealed: bool = False) -> None:
    """An INVOKE_* variable that would set invoke's own configuration is refused; `gridready` (`sealed`: it reads
    no INVOKE_* variable at all) refuses every one rather than ignore it."""
    for name in sorted(os.environ):
        if name.startswith("INVOKE_") and (sealed or not name.startswith(INVOKE_ENV_ALLOWED)):
            use = "the task's flag (--check, --json)" if name.startswith("INVOKE_GRIDREADY_") else \
                "gridready's flags and GRIDREADY_* variables"
            raise InvalidInput(f"{name}: (environment): an invoke setting, which gridready does not read (unset it; "
                               f"use {use})")


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
    steps up on itself when it calls them, after it imported the tasks (gridready/commands.py), so wrapping two
    of them here covers every task's flags and the runtime config file."""
    from invoke.exceptions import Exit, ParseError
    from invoke.program import Program

    if getattr(Program, "_gridready_usage_errors", False):
        return
    parse_tasks, update_config = Program.parse_tasks, Program.update_config

    def fail(line: str) -> Exit:
        return Exit(f"error: {secretscan.redact(line)}", code=int(ExitCode.INVALID))

    def guarded_parse_tasks(self: Program) -> None:
        unparsed = list(self.core.unparsed) if self.core else []
        for i, tok in enumerate(unparsed):  # invoke casts int flags with int(), which reads '１０' as 10
            if charset.has_foreign_digit(tok):
                flag = tok.split("=", 1)[0] if tok.startswith("-") else unparsed[i - 1] if i else "(argument)"
                raise fail(f"{charset.visible(flag)}: (command line): digits must be ASCII 0-9")
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
        try:
            check_invoke_environment(sealed=getattr(self.config, "SEALED", False))
            if raw:
                check_runtime_config(raw)
        except InvalidInput as err:
            raise fail(err.lines[0]) from None
        update_config(self, merge)

    Program.parse_tasks = guarded_parse_tasks  # type: ignore[method-assign]
    Program.update_config = guarded_update_config  # type: ignore[method-assign]
    Program._gridready_usage_errors = True  # type: ignore[attr-defined]


# Hugging Face organisations whose models are gated: the Hub answers 401/403 until the account behind the token has
# accepted the model's licence (huggingface.co/docs/hub/models-gated). Meta's Llama repositories all are; Google's
# Gemma and most of Mistral AI's are too.
GATED_MODELS = re.compile(r"(meta-llama/|google/gemma|mistralai/)", re.IGNORECASE | re.ASCII)


def gated_model_warnings(inv: Inventory) -> list[str]:
    """A warning per tier whose model is gated on the Hub while the vault holds no Hugging Face token: the
    download would fail with 401 at serve time. A warning, not an error: the token may come later, before serve."""
    gated = [(i, t) for i, t in enumerate(inv.spec.serving.tiers)
             if t.model.hf_id and GATED_MODELS.match(t.model.hf_id)]
    if not gated or (vault.vault_path(inv.path).exists() and vault.password_file(inv.path) is not None
                     and vault.hf_token(inv.customer, inv.path)):
        return []
    shown = display_path(inv.path / "cluster.yml")
    return [f"{shown}: serving.tiers[{i}].model.hf_id: {t.model.hf_id} is gated on Hugging Face: put a "
            f"token of an account that accepted its licence in the vault as {vault.HF_TOKEN_VAR} "
            "(docs/getting-started.md), or serve's download fails with 401" for i, t in gated]
