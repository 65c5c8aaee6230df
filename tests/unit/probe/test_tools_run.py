"""gridready.probe.tools: where sysfs and proc are read, and what `run` records for a real tiny command (sh, true):
exit codes, both streams, the environment, a timeout, a missing or unrunnable binary; `read_text`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gridready.probe import tools
from gridready.probe.tools import proc_root, read_text, run, sysfs_root, which
from tests.unit.probe.fake_node import Clock


def test_sysfs_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GRIDREADY_SYSFS_ROOT", raising=False)
    assert sysfs_root() == "/sys"
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", "")
    assert sysfs_root() == "/sys"
    monkeypatch.setenv("GRIDREADY_SYSFS_ROOT", str(tmp_path))
    assert sysfs_root() == str(tmp_path)  # the sysfs tree itself
    (tmp_path / "sys").mkdir()
    assert sysfs_root() == str(tmp_path / "sys")  # a root holding sys/
    (tmp_path / "sys").rmdir()
    (tmp_path / "sys").write_text("a file, not the tree")
    assert sysfs_root() == str(tmp_path)


def test_proc_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRIDREADY_PROC_ROOT", raising=False)
    assert proc_root() == "/proc"
    monkeypatch.setenv("GRIDREADY_PROC_ROOT", "/tmp/fake-proc")
    assert proc_root() == "/tmp/fake-proc"


def test_which() -> None:
    assert which("sh") is not None and os.path.basename(which("sh") or "") == "sh"
    assert which("gridready-no-such-tool") is None


def test_run_records_exit_code_and_both_streams() -> None:
    res = run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=20)
    wall = res.pop("wall_s")
    assert res == {"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"], "rc": 3, "stdout": "out\n",
                   "stderr": "err\n", "absent": False, "timed_out": False}
    assert isinstance(wall, float) and 0 <= wall < 20


def test_run_true_and_false() -> None:
    assert run(["true"])["rc"] == 0
    assert run(["false"])["rc"] == 1
    assert run(["true"])["stdout"] == "" and run(["true"])["timed_out"] is False


def test_run_absent_binary() -> None:
    assert run(["gridready-no-such-tool", "-x"]) == {
        "argv": ["gridready-no-such-tool", "-x"], "rc": None, "stdout": "", "stderr": "", "wall_s": 0.0,
        "absent": True, "timed_out": False}


def test_run_absolute_path(tmp_path: Path) -> None:
    sh = which("sh")
    assert sh is not None
    assert run([sh, "-c", "echo abs"])["stdout"] == "abs\n"
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho from-script\n")
    script.chmod(0o644)  # not executable: not run
    assert run([str(script)])["absent"] is True
    script.chmod(0o755)
    assert run([str(script)])["stdout"] == "from-script\n"


def test_run_absolute_directory_is_unrunnable_not_absent(tmp_path: Path) -> None:
    # os.access(dir, X_OK) is true, so the path is run as given and fails (EACCES); shutil.which would skip it
    res = run([str(tmp_path)])
    assert (res["absent"], res["rc"]) == (False, 127)
    assert res["stderr"].startswith("[Errno 13] Permission denied")


def test_run_merges_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GR_KEEP", "kept")
    monkeypatch.setenv("GR_OVER", "old")
    res = run(["sh", "-c", 'echo "$GR_KEEP $GR_OVER $GR_NEW"'], env={"GR_OVER": "new", "GR_NEW": "added"})
    assert res["stdout"] == "kept new added\n"
    assert run(["sh", "-c", 'echo "$GR_KEEP"'])["stdout"] == "kept\n"  # no env: the probe's own


def test_run_replaces_undecodable_bytes() -> None:
    res = run(["sh", "-c", r"printf 'a\377b'"])
    assert res["stdout"] == "a\ufffdb" and res["rc"] == 0


def test_run_timeout_keeps_the_partial_output() -> None:
    # a command that would end by itself 2 s later, so that a run without the timeout fails here, not hangs
    res = run(["sh", "-c", r"printf 'early\377\n'; exec sleep 2"], timeout_s=0.3)
    assert res["timed_out"] is True and res["rc"] is None
    assert res["stdout"] == "early\ufffd\n"  # bytes on a timeout, decoded as the run's text is
    assert 0.3 <= res["wall_s"] < 2


def test_run_timeout_without_output() -> None:
    res = run(["sh", "-c", "exec sleep 2"], timeout_s=0.2)
    assert (res["timed_out"], res["rc"], res["stdout"], res["stderr"]) == (True, None, "", "")


def test_run_unrunnable_binary(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x7fELF\x00garbage")
    bad.chmod(0o755)
    res = run([str(bad)])
    assert res["rc"] == 127 and res["absent"] is False and res["timed_out"] is False
    assert res["stderr"].startswith("[Errno 8] Exec format error")


def test_run_wall_time_to_the_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "time", Clock(5.0, 7.12345))
    assert run(["true"])["wall_s"] == 2.123


def test_read_text(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes("é\n".encode() + b"\xff")
    assert read_text(str(f)) == "é\n\ufffd"
    assert read_text(str(tmp_path / "absent")) is None
    assert read_text(str(tmp_path)) is None
