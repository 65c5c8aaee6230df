"""library/gridready_fingerprint.py on this machine: what its snapshot sees and how a difference reads. The
module's own functions, loaded from its file (Ansible ships it to the node as a script); the sandbox drift test
(tests/roles/test_drift.py) runs it through Ansible on booted hosts."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

from tests import library_modules


@pytest.fixture(scope="module")
def fp() -> ModuleType:
    return library_modules.load("gridready_fingerprint")


def test_files_see_content_mode_and_links(fp: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("x=1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.rules").write_text("rule\n")
    os.symlink("/etc/hostname", tmp_path / "link")
    before = fp.files([str(tmp_path), str(tmp_path / "missing")])
    assert set(before) == {f"file {tmp_path}/a.conf", f"file {tmp_path}/sub/b.rules", f"file {tmp_path}/link",
                           f"file {tmp_path}/missing"}
    assert before[f"file {tmp_path}/link"] == "link /etc/hostname"
    assert before[f"file {tmp_path}/missing"] == "absent"
    (tmp_path / "sub" / "b.rules").write_text("rule changed\n")
    os.chmod(tmp_path / "a.conf", 0o600)
    diffs = fp.differences(before, fp.files([str(tmp_path), str(tmp_path / "missing")]))
    assert [d.split(":")[0] for d in diffs] == [f"file {tmp_path}/a.conf", f"file {tmp_path}/sub/b.rules"]
    assert diffs[0].startswith(f"file {tmp_path}/a.conf: 644 ") and " -> 600 " in diffs[0]


def test_sysctls_read_the_keys_a_dropin_sets(fp: ModuleType, tmp_path: Path) -> None:
    drop = tmp_path / "90-gridready.conf"
    drop.write_text("# comment\nkernel.pid_max = 4194304\n-net.core.somaxconn=4096\n")
    snap = fp.sysctls([str(tmp_path / "*gridready*.conf")])
    assert set(snap) == {"sysctl kernel.pid_max", "sysctl net.core.somaxconn"}
    assert snap["sysctl kernel.pid_max"] == Path("/proc/sys/kernel/pid_max").read_text().strip()


def test_modules_named_by_a_dropin_are_checked_in_proc_modules(fp: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "gridready-x.conf").write_text("nvidia-peermem\n# nvidia_uvm\n")
    assert fp.kernel_modules([str(tmp_path / "gridready-*.conf")]) == {"module nvidia-peermem": "not loaded"}


def test_differences_name_added_removed_and_changed_items(fp: ModuleType) -> None:
    old = {"package a": "1.0 ii", "package b": "2.0 hi", "unit x.service": "enabled active/running"}
    new = {"package a": "1.1 ii", "package c": "3.0 ii", "unit x.service": "disabled inactive/dead"}
    assert fp.differences(old, new) == ["package a: 1.0 ii -> 1.1 ii", "package b: 2.0 hi -> absent",
                                        "package c: absent -> 3.0 ii",
                                        "unit x.service: enabled active/running -> disabled inactive/dead"]


def test_the_record_leaves_its_folder_traversable(fp: ModuleType, tmp_path: Path) -> None:
    """The first converge now writes the record, and its 0700 /var/lib/gridready locked the engines' user out of
    the Hugging Face cache under /var/lib/gridready/hf (vLLM failed with PermissionError in the sandbox pipeline)."""
    fresh = tmp_path / "fresh" / "converged.json"
    fp.write_state(str(fresh), {"schema": 1})
    assert oct(fresh.parent.stat().st_mode & 0o777) == "0o755" and oct(fresh.stat().st_mode & 0o777) == "0o600"
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    fp.write_state(str(old / "converged.json"), {"schema": 1})
    assert oct(old.stat().st_mode & 0o777) == "0o755"
