"""The router's offline install refuses a host whose Python is not the wheel lock's, with a message (issue #29,
finding 7): the lock holds CPython 3.11 wheels, the serving roles also support Ubuntu 22.04 (3.10) and 24.04 (3.12)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

ROLE = Path(__file__).resolve().parents[3] / "roles" / "gridready_router"


def _assert_task() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    names = [t.get("name") for t in tasks]
    read = names.index("Read the host's interpreter tag")
    task = tasks[read + 1]
    assert "ansible.builtin.assert" in task, "the interpreter check must follow the read, before any install"
    return task


def _holds(tag: str, version: str) -> bool:
    expr = _assert_task()["ansible.builtin.assert"]["that"]
    env = jinja2.Environment()
    return env.compile_expression(expr)(__gridready_router_python={"stdout": tag + "\n"},
                                        gridready_router_python_version=version)


def test_the_lock_python_passes_and_others_are_refused() -> None:
    version = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["gridready_router_python_version"]
    assert _holds("cpython-311-x86_64", version)
    assert not _holds("cpython-310-x86_64", version)  # Ubuntu 22.04
    assert not _holds("cpython-312-x86_64", version)  # Ubuntu 24.04
    assert "wheel lock" in _assert_task()["ansible.builtin.assert"]["fail_msg"]
