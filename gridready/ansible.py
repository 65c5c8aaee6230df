"""ansible-runner wrapper: run_async + an event handler that drives progress; success from per-host stats."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ansible_runner.config.runner import RunnerConfig
from ansible_runner.runner import Runner
from rich.live import Live
from rich.table import Table

from gridready import bastion, console, vault
from gridready.artifacts import make_dirs
from gridready.errors import InvalidInput, StageFailed
from gridready.inventory import Inventory

REPO = Path(__file__).resolve().parent.parent
PLAYBOOKS = REPO / "playbooks"
# The controller environment Ansible is given: ansible-runner seeds its env with all of os.environ and writes it to
# artifacts/<id>/command (ansible_runner/runner.py, Runner.run), which CI uploads; only these names pass.
PASSED_ENV = {"HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ", "SSH_AUTH_SOCK",
              "PYTHONPATH", "VIRTUAL_ENV", "GRIDREADY_PROBE_PYTHON"}
PASSED_ENV_PREFIXES = ("LC_", "ANSIBLE_")
SECRET_ENV_NAME = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|TOKEN|SECRET|CREDENTIAL|_PASS$", re.IGNORECASE | re.ASCII)
KEPT_EVENTS = {"runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped",
               "runner_item_on_ok", "runner_item_on_failed"}


@dataclass
class HostStats:
    ok: int = 0
    changed: int = 0
    failures: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0

    @property
    def failed(self) -> bool:
        return self.failures > 0 or self.unreachable > 0


@dataclass
class PlaybookResult:
    playbook: str
    status: str  # runner status: successful | failed | timeout | canceled
    rc: int
    hosts: dict[str, HostStats]
    events: list[dict[str, Any]] = field(default_factory=list)
    private_data_dir: Path | None = None
    seconds: float = 0.0

    @property
    def changed_hosts(self) -> list[str]:
        return sorted(h for h, s in self.hosts.items() if s.changed)

    @property
    def failed_hosts(self) -> list[str]:
        return sorted(h for h, s in self.hosts.items() if s.failures)

    @property
    def unreachable_hosts(self) -> list[str]:
        return sorted(h for h, s in self.hosts.items() if s.unreachable)

    def task_results(self, host: str, task: str | None = None) -> list[dict[str, Any]]:
        """The `res` of each finished task on `host` (optionally one task by name)."""
        return [
            e["event_data"].get("res", {})
            for e in self.events
            if e["event_data"].get("host") == host and (task is None or e["event_data"].get("task") == task)
        ]


def _stats(runner_stats: dict[str, dict[str, int]] | None) -> dict[str, HostStats]:
    hosts: dict[str, HostStats] = {}
    for key, per_host in (runner_stats or {}).items():
        attr = {"dark": "unreachable"}.get(key, key)
        if attr not in HostStats.__dataclass_fields__:
            continue
        for host, count in per_host.items():
            setattr(hosts.setdefault(host, HostStats()), attr, count)
    return hosts


class _Progress:
    """Per-host task progress: a live table on a terminal, one plain line per task result elsewhere."""

    # a long task (the node probe, an engine build) runs async: Ansible polls it and says nothing until it ends;
    # its polls become a `running` line per host at most this often on plain output (the live table every poll)
    RUNNING_EVERY_S = 30.0

    def __init__(self, title: str, clock: Any = time.monotonic) -> None:
        self.title = title
        self.rows: dict[str, list[Any]] = {}  # host -> [task, ok, changed, failed]
        self.lock = threading.Lock()
        self.clock = clock
        self.running: dict[tuple[str, str], list[float]] = {}  # (host, task) -> [first poll, last line]
        self.live: Live | None = Live(self._table(), console=console.err, transient=True) \
            if console.interactive() else None

    def _table(self) -> Table:
        table = Table(title=self.title, expand=False)
        for col in ("host", "task", "ok", "changed", "failed"):
            table.add_column(col)
        for host, (task, ok, changed, failed) in sorted(self.rows.items()):
            table.add_row(host, task, str(ok), str(changed), f"[red]{failed}[/red]" if failed else "0")
        return table

    def __enter__(self) -> _Progress:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.live.__exit__(None, None, None)

    def event(self, ev: dict[str, Any]) -> None:
        data = ev.get("event_data", {})
        host, task, kind = data.get("host"), data.get("task", ""), ev.get("event", "")
        if host and kind == "runner_on_async_poll":
            self._poll(host, task)
            return
        if not host or kind not in KEPT_EVENTS or kind.startswith("runner_item"):
            return
        with self.lock:
            row = self.rows.setdefault(host, ["", 0, 0, 0])
            row[0] = task
            changed = bool(data.get("res", {}).get("changed"))
            if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
                row[3] += 1
                state = "unreachable" if kind == "runner_on_unreachable" else "failed"
            elif kind == "runner_on_skipped":
                state = "skipped"
            else:
                row[1] += 1
                row[2] += int(changed)
                state = "changed" if changed else "ok"
            if self.live:
                self.live.update(self._table())
            elif state != "skipped":
                console.info(f"[{host}] {state}: {task}")
            if state in ("failed", "unreachable"):
                msg = str(data.get("res", {}).get("msg", ""))[:300]
                if msg and not data.get("res", {}).get("_ansible_no_log"):
                    console.info(f"[{host}] {state}: {task}: {msg}")


    def _poll(self, host: str, task: str) -> None:
        """An async task still running on `host`: its elapsed time, on the live table or as a plain line."""
        now = self.clock()
        with self.lock:
            first, last = self.running.setdefault((host, task), [now, now])
            elapsed = now - first
            if self.live:
                self.rows.setdefault(host, ["", 0, 0, 0])[0] = f"{task} (running {elapsed:.0f} s)"
                self.live.update(self._table())
            elif now - last >= self.RUNNING_EVERY_S:
                self.running[(host, task)][1] = now
                console.info(f"[{host}] running: {task} ({elapsed:.0f} s)")


def scrubbed_env(inherited: dict[str, str], ours: dict[str, str]) -> dict[str, str]:
    """What Ansible runs with: `ours` plus the few inherited names it needs; never a secret-looking name.

    ANSIBLE_* settings pass (they are configuration) unless their name speaks of a password or token and
    the value is not a file path (ANSIBLE_VAULT_PASSWORD_FILE passes, ANSIBLE_BECOME_PASS does not).
    """
    kept = {}
    for name, value in inherited.items():
        wanted = name in PASSED_ENV or name.startswith(PASSED_ENV_PREFIXES)
        secret = SECRET_ENV_NAME.search(name) and not name.endswith("_FILE")
        if wanted and not secret:
            kept[name] = value
    return {**kept, **ours}


def unsafe(value: Any) -> Any:
    """`value` with every string marked as data for Ansible: `{"__ansible_unsafe": s}`, the form ansible-core's
    JSON and YAML loaders turn back into an untrusted string (`_internal/_json/_profiles/_legacy.py`,
    deserialize_unsafe). ansible-runner hands extravars over as JSON (`-e {...}`), where a wrap_var'd string
    would lose its marking; this form keeps it, so a `{{ lookup(...) }}` from the inventory is never rendered,
    whichever way the variables reach ansible-playbook (inline or `-e @file`, which is trusted as a template)."""
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    if isinstance(value, Path):
        return {"__ansible_unsafe": str(value)}
    if isinstance(value, dict):
        return {str(k): unsafe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [unsafe(v) for v in value]
    return value


def playbook_tags(playbook: str) -> list[str]:
    """Every tag a playbook's plays, tasks and included task files (playbooks/tasks/) carry, `always` and
    `never` aside: what --tags and --skip-tags may name."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "tags":
                    found.update([value] if isinstance(value, str) else [t for t in value if isinstance(t, str)])
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    book = PLAYBOOKS / playbook
    walk(yaml.safe_load(book.read_text()))
    for include in sorted((PLAYBOOKS / "tasks").glob(f"{book.stem}-*.yml")):
        walk(yaml.safe_load(include.read_text()))
    return sorted(found - {"always", "never"})


def check_tags(playbook: str, flag: str, value: str | None) -> None:
    """--tags/--skip-tags name tags the playbook has (Ansible runs nothing for an unknown one, and says nothing)."""
    if value is None:
        return
    known = playbook_tags(playbook)
    names = [t.strip() for t in value.split(",")]
    unknown = [t for t in names if t not in known]
    if not value.strip() or unknown:
        raise InvalidInput(f"{flag}: (command line): unknown tag {', '.join(repr(t) for t in unknown) or repr(value)} "
                           f"(tags of {playbook}: {', '.join(known)})")


def run_playbook(
    inv: Inventory,
    playbook: str,
    stage_dir: Path,
    *,
    check: bool = False,
    limit: str | None = None,
    tags: str | None = None,
    extravars: dict[str, Any] | None = None,
    forks: int = 25,
    skip_tags: str | None = None,
) -> PlaybookResult:
    """Run playbooks/<playbook> against the inventory with a fresh private data dir under stage_dir."""
    book = Path(playbook) if Path(playbook).is_absolute() else PLAYBOOKS / playbook
    name = book.stem
    private = stage_dir / f"ansible-{name}"
    make_dirs(private.parent)
    private.mkdir()  # a fresh folder: an existing one, or a link there, is an error
    # --diff only in check mode, where showing the change is the point; tasks that template a secret carry
    # no_log and diff: false, so their content never reaches job_events or stdout either way
    cmdline = ["--check", "--diff"] if check else []
    vault_file = vault.password_file(inv.path)
    if vault_file:
        cmdline += ["--vault-id", f"{inv.customer}@{vault_file}"]
    cmdline = [shlex.quote(arg) for arg in cmdline]  # ansible-runner splits cmdline with shlex
    ours = {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        # facts are cached per inventory: host names repeat across inventories
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(REPO / ".cache" / "ansible-facts" / inv.name),
        # ansible-runner sets ANSIBLE_HOST_KEY_CHECKING=False when the variable is absent (config/_base.py,
        # prepare_env), overriding ansible.cfg; keep Ansible's default; an inventory may opt out per host.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
    }
    kept: list[dict[str, Any]] = []
    progress = _Progress(f"{name} ({inv.name})")

    def on_event(ev: dict[str, Any]) -> bool:
        progress.event(ev)
        if ev.get("event") in KEPT_EVENTS:
            kept.append({"event": ev["event"], "event_data": {
                k: ev.get("event_data", {}).get(k) for k in ("host", "task", "role", "res", "ignore_errors")
            }})
        return True

    config = RunnerConfig(
        private_data_dir=str(private),
        project_dir=str(REPO),
        playbook=str(book),
        inventory=str(inv.hosts_file.resolve()),
        extravars=unsafe({**(extravars or {}), **bastion.ansible_extravars(inv.spec.bastion, private)}),
        envvars=ours,
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        cmdline=" ".join(cmdline),
        forks=forks,
        quiet=True,
        suppress_env_files=True,
    )
    config.prepare()
    # RunnerConfig + Runner is ansible-runner's documented lower-level interface ("RunnerConfig ... can be used
    # to construct the Runner configuration to be invoked elsewhere", ansible_runner.config docs); it lets the
    # environment be replaced after prepare() seeded it from os.environ.
    runner_set = {k: v for k, v in config.env.items() if os.environ.get(k) != v}
    config.env = scrubbed_env(dict(os.environ), {**runner_set, **ours})
    runner = Runner(config, event_handler=on_event)
    started = time.monotonic()
    with progress:
        thread = threading.Thread(target=runner.run, name=f"ansible-{name}")
        thread.start()
        thread.join()
    return PlaybookResult(
        playbook=playbook,
        status=runner.status,
        rc=runner.rc,
        hosts=_stats(runner.stats),
        events=kept,
        private_data_dir=private,
        seconds=round(time.monotonic() - started, 2),
    )


def hostvars(inv: Inventory) -> dict[str, dict[str, Any]]:
    """Every host's variables as Ansible itself layers them (group_vars, hosts.yml vars, host vars): the
    `_meta.hostvars` of `ansible-inventory --list` ("--list: Output all hosts info", docs.ansible.com,
    ansible-inventory). Values stay as written (templates unrendered); vault files open with the same password
    file as run_playbook's, so the output holds decrypted vault values: it is read from a pipe and never written
    (ansible_runner.get_inventory kept it, and the whole controller environment in `command`, in a private data
    dir under TMPDIR that nothing removed). The command runs with the playbooks' scrubbed environment."""
    vault_file = vault.password_file(inv.path)
    beside = Path(sys.executable).parent / "ansible-inventory"
    # beside the interpreter (a venv), else on PATH (ansible-core installed with --target, as on the lent GPU
    # machines: docs/device.md)
    found = str(beside) if beside.exists() else shutil.which("ansible-inventory") or str(beside)
    argv = [found, "--list", "-i", str(inv.hosts_file)]
    if vault_file:
        argv += ["--vault-id", f"{inv.customer}@{vault_file}"]
    env = scrubbed_env(dict(os.environ), {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
    })
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise StageFailed(f"ansible-inventory could not read {inv.hosts_file}: {err}") from None
    try:
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise StageFailed(f"ansible-inventory could not read {inv.hosts_file}: "
                          f"{(proc.stderr or proc.stdout).strip()[:300]}")
    return {h: dict(v) for h, v in ((data.get("_meta") or {}).get("hostvars") or {}).items()}
