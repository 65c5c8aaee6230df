"""Run the tail of playbooks/tasks/provision-converge.yml (from the flush of the handlers to the record) on this
machine, with Ansible itself: the post-state read (playbooks/tasks/provision-verify.yml) over a stand-in sysfs tree
and stand-in tools on PATH, the reboot as a stand-in command, the record as a marker file.

What a host says is what the stand-ins say: the loaded module (<root>/module/nvidia/version), nvidia-smi's answers
(one per call, the last repeated: a fabric that settles), systemctl's, and the wanted kernel arguments against this
machine's own /proc/cmdline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
CONVERGE = REPO / "playbooks" / "tasks" / "provision-converge.yml"
FLUSH = "Run the pending handlers (GRUB, initramfs, services) before any reboot"
INSTALLED = "580.159.04"


@dataclass
class Outcome:
    rc: int
    stdout: str
    recorded: bool
    facts: dict[str, Any]

    @property
    def reasons(self) -> list[str]:
        return list(self.facts.get("gridready_reboot_reasons") or [])


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _tail(marker: Path, rebooted: bool) -> list[dict[str, Any]]:
    """The converge tasks after the handler flush, runnable here: includes by absolute path, the reboot a stand-in
    (changed when `rebooted`), the record a marker file."""
    tasks = yaml.safe_load(CONVERGE.read_text())
    tail = tasks[[t.get("name") for t in tasks].index(FLUSH) + 1:]
    out = []
    for task in tail:
        task = dict(task)
        if "ansible.builtin.include_tasks" in task:
            task["ansible.builtin.include_tasks"] = str(CONVERGE.parent / task["ansible.builtin.include_tasks"])
        if "ansible.builtin.reboot" in task:
            task.pop("ansible.builtin.reboot")
            task["ansible.builtin.command"] = "true"
            task["changed_when"] = rebooted
        if "gridready_fingerprint" in task:
            task.pop("gridready_fingerprint")
            task["ansible.builtin.copy"] = {"content": "x", "dest": str(marker), "mode": "0600"}
        out.append(task)
    facts = marker.with_suffix(".facts")
    out.append({"name": "keep the judged facts", "ansible.builtin.copy": {
        "content": "{{ {'gridready_reboot_reasons': gridready_reboot_reasons | default(none),"
                   " 'problems': __gridready_provision_problems | default(none),"
                   " 'broken': __gridready_provision_driver_broken | default(none)} | to_json }}",
        "dest": str(facts), "mode": "0600"}, "tags": ["always"]})
    return out


def converge_tail(tmp: Path, *, loaded: str | None = INSTALLED, smi: list[str] | None = None,
                  smi_path: str = "", fm_active: bool = True, nvswitch: bool = False, fm_on_node: bool = True,
                  wanted_args: list[str] | None = None, reboot: str = "never", rebooted: bool = False,
                  settle: int = 20, extra_vars: dict[str, Any] | None = None, on_path: bool = True,
                  kmod_package: str = "") -> Outcome:
    """Run the converge tail once against the stand-ins; `smi` is nvidia-smi's successive answers
    (persistence_mode, fabric.state per GPU line), `smi_path` where it lives (on PATH unless `on_path` is false);
    `kmod_package` the dpkg package whose file list dates the driver's install."""
    for stale in ("recorded", "recorded.facts", "smi-calls"):
        (tmp / stale).unlink(missing_ok=True)
    root = tmp / "sysroot"
    (root / "sys" / "module" / "nvidia").mkdir(parents=True, exist_ok=True)
    version = root / "sys" / "module" / "nvidia" / "version"
    version.unlink(missing_ok=True)
    if loaded:
        version.write_text(loaded + "\n")
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    tools = tmp / "tools"
    tools.mkdir(exist_ok=True)
    answers = smi if smi is not None else ["Enabled, Completed"]
    smi_file = Path(smi_path) if smi_path else (bin_dir if on_path else tools) / "nvidia-smi"
    smi_file.parent.mkdir(parents=True, exist_ok=True)
    (tmp / "smi-answers.json").write_text(json.dumps(answers))
    pick = "a = json.load(open(sys.argv[1])); print(a[min(int(sys.argv[2]), len(a) - 1)])"
    _stub(smi_file, f"""n=$(cat {tmp}/smi-calls 2>/dev/null || echo 0); echo $((n + 1)) > {tmp}/smi-calls
python3 -c 'import json, sys; {pick}' {tmp}/smi-answers.json "$n"
""")
    state = "active" if fm_active else "inactive"
    _stub(bin_dir / "systemctl", f'[ "$1" = is-active ] && {{ echo {state}; exit 0; }}\nexit 0\n')
    _stub(bin_dir / "dmesg", 'echo "[   12.5] nvidia: module verification failed: signature and/or required key '
                             'missing - tainting kernel"\n'
                             'echo "[   12.6] Lockdown: modprobe: unsigned module loading is restricted; see man '
                             'kernel_lockdown.7"\n')
    marker = tmp / "recorded"
    driver_report = {"version": f"{INSTALLED}-1", "nvidia_smi": str(smi_file) if not on_path else "",
                     "kernel_module_package": kmod_package}
    tuning = ({"kernel_cmdline": "reboot pending", "kernel_cmdline_wanted": wanted_args} if wanted_args is not None
              else {"kernel_cmdline": "not managed: no GRUB on this host", "kernel_cmdline_wanted": []})
    play_vars: dict[str, Any] = {
        "gridready_fabricmanager_sysfs_root": str(root),
        "gridready_nvidia_driver_report": driver_report,
        "gridready_host_tuning_report": tuning,
        "gridready_nvidia_driver_reboot": reboot,
        "gridready_provision_settle_timeout": settle,
        "__gridready_provision_group": {"gridready_fabricmanager_nvswitch": nvswitch,
                                        "gridready_fabricmanager_on_node": fm_on_node},
        "__gridready_provision_fp": {"inputs": {}, "reports": {}},
        "gridready_provision_watch": {"packages": [], "paths": [], "units": [], "sysctl_files": [], "module_files": []},
        **(extra_vars or {}),
    }
    *tail, keep = _tail(marker, rebooted)
    play = [{"name": "converge tail", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": play_vars, "tasks": [{"name": "the tail", "block": tail, "always": [keep]}]}]
    path = tmp / "play.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(path)],
                         capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                              "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                              # the filters beside playbooks/provision.yml, which Ansible loads for the playbook
                              # that includes these tasks (this play lives elsewhere)
                              "ANSIBLE_FILTER_PLUGINS": str(REPO / "playbooks" / "filter_plugins"),
                              "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    facts_file = marker.with_suffix(".facts")
    facts = json.loads(facts_file.read_text()) if facts_file.exists() else {}
    return Outcome(run.returncode, run.stdout, marker.exists(), facts)


def running_cmdline() -> list[str]:
    return Path("/proc/cmdline").read_text().split()
