"""The goodput measurement runs in a fresh interpreter (issue 46): ansible-core replaces `sys.intern` in a process
that imported it, and torch._dynamo (reached by fused AdamW and SDPA) then fails to import with `substitute_in_graph
expects a function`; `pytest -m gpu` runs the whole GPU suite in one process (benchmarks/gpu_machine_run.sh)."""

from __future__ import annotations

import sys

import pytest

from gridready.probe import goodput


def test_a_patched_sys_intern_does_not_reach_the_fresh_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "intern", lambda s: s)  # what a process that imported ansible-core holds
    assert goodput._intern_is_builtin() is False
    assert goodput.isolated("_intern_is_builtin", timeout_s=120) is True


def test_a_failing_child_is_an_error_naming_it() -> None:
    with pytest.raises(RuntimeError, match=r"(?s)no_such_step in a fresh interpreter exited 1: .*AttributeError"):
        goodput.isolated("no_such_step", timeout_s=120)


def test_the_arguments_reach_the_child_as_integers() -> None:
    """`_intern_is_builtin` takes none: the child's TypeError is the error, after the arguments were passed."""
    with pytest.raises(RuntimeError, match=r"(?s)_intern_is_builtin in a fresh interpreter exited 1: .*TypeError"):
        goodput.isolated("_intern_is_builtin", 3, timeout_s=120)


def test_run_all_trains_each_gpu_in_a_fresh_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import types

    calls: list[tuple[object, ...]] = []
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(device_count=lambda: 1))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(goodput, "train", lambda *a, **k: pytest.fail("trained in the calling process"))
    monkeypatch.setattr(goodput, "isolated", lambda *a, **k: calls.append(a) or {"index": a[1]})
    errors: list[dict[str, str]] = []
    doc = json.loads(goodput.run_all({"goodput_steps": 7}, errors))
    assert calls == [("train", 0, 7)] and doc["gpus"] == [{"index": 0}] and errors == []
