"""Per-task, per-module and per-role wall time of a playbook run, written as JSON to $GRIDREADY_TIMING_OUT.

ansible-core ships no profiling callback (profile_tasks/profile_roles live in the ansible.posix collection, which
the venv does not carry); this one records what the no-op benchmark needs. Enabled only by
benchmarks/provision_noop.py through ANSIBLE_CALLBACK_PLUGINS and ANSIBLE_CALLBACKS_ENABLED.
Callback API: https://docs.ansible.com/ansible/latest/dev_guide/developing_plugins.html#callback-plugins
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gridready_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._task: Any = None
        self._start = 0.0
        self._per_task: list[dict[str, Any]] = []
        self._per_host_results: dict[str, int] = defaultdict(int)

    def _close(self) -> None:
        if self._task is not None:
            role = self._task._role.get_name() if self._task._role else ""
            self._per_task.append({"name": self._task.get_name(), "action": self._task.action, "role": role,
                                   "seconds": time.monotonic() - self._start})
        self._task = None

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._close()
        self._task, self._start = task, time.monotonic()

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self.v2_playbook_on_task_start(task, False)

    def _count(self, result: Any) -> None:
        self._per_host_results[result._host.get_name()] += 1

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_skipped = v2_runner_on_unreachable = (
        lambda self, result, *a, **k: self._count(result))

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close()
        by_action: dict[str, float] = defaultdict(float)
        by_role: dict[str, float] = defaultdict(float)
        for t in self._per_task:
            by_action[t["action"]] += t["seconds"]
            by_role[t["role"] or "(play)"] += t["seconds"]
        out = os.environ.get("GRIDREADY_TIMING_OUT")
        if out:
            with open(out, "w", encoding="utf-8") as fh:
                json.dump({"tasks": self._per_task, "by_action": by_action, "by_role": by_role,
                           "results_per_host": self._per_host_results}, fh)
