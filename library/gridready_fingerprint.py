#!/usr/bin/python
"""gridready_fingerprint: the converged fast path of playbooks/provision.yml (docs/provision.md, "Re-runs").

mode=check (on a node, read-only): a snapshot of the live state the provision roles manage (every installed
  package with its version and dpkg selection, hold included; the content, mode and owner of every file under the
  watched paths; the enablement and activity of the watched units; the live value of each sysctl and the presence
  of each module that the watched drop-ins name) in one call, compared with the snapshot and the per-role input
  digests recorded after the last converged run. Returns `pending` (the roles to run), `differences` (what
  changed, one line each), `reports` (the roles' recorded facts, for the roles that do not run) and `inputs` (the
  digests compared, for mode=record after the roles ran).
mode=record (on a node, after the roles ran): write that record. It is gridready's own bookkeeping, like the
  fact cache, so it never counts as a change; in check mode nothing is written.
Module API: https://docs.ansible.com/ansible/latest/dev_guide/developing_program_flow_modules.html
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import stat

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: gridready_fingerprint
short_description: Record and compare the converged state of the provision roles
description: See the module docstring; docs/provision.md explains the fast path.
options:
  mode: {type: str, required: true, choices: [check, record]}
  inputs: {type: dict, description: "role -> digest of its inputs (code, variables)"}
  roles: {type: list, elements: str, default: [], description: "every role; one missing from inputs is pending"}
  state_file: {type: path, default: /var/lib/gridready/converged.json}
  facts_dir: {type: path, default: /etc/gridready/facts.d}
  packages: {type: list, elements: str, default: ["*"], description: fnmatch patterns of package names}
  paths: {type: list, elements: path, default: [], description: files and directories (walked) to hash}
  units: {type: list, elements: str, default: [], description: systemd unit name patterns}
  sysctl_files: {type: list, elements: str, default: [], description: globs of sysctl.d drop-ins to read live}
  module_files: {type: list, elements: str, default: [], description: globs of modules-load.d drop-ins}
"""

STATE_SCHEMA = 1
LARGE = 1 << 20  # larger files are compared by size and mtime, not content (built binaries, tarballs)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_entry(path: str, st: os.stat_result) -> str:
    meta = f"{stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid}"
    if stat.S_ISLNK(st.st_mode):
        return f"link {os.readlink(path)}"
    if st.st_size > LARGE:
        return f"{meta} size {st.st_size} mtime {int(st.st_mtime)}"
    with open(path, "rb") as fh:
        return f"{meta} sha256 {_sha(fh.read())}"


def _walk(root: str) -> list[str]:
    if os.path.islink(root) or os.path.isfile(root):
        return [root]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out += [os.path.join(dirpath, f) for f in sorted(filenames)]
        out += [os.path.join(dirpath, d) for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
    return out


def files(paths: list[str]) -> dict[str, str]:
    snap = {}
    for root in paths:
        if not os.path.lexists(root):
            snap[f"file {root}"] = "absent"
            continue
        for p in _walk(root):
            try:
                snap[f"file {p}"] = _file_entry(p, os.lstat(p))
            except OSError as exc:
                snap[f"file {p}"] = f"unreadable {exc.errno}"
    return snap


def packages(module: AnsibleModule, patterns: list[str]) -> dict[str, str]:
    """dpkg's db:Status-Abbrev: the first letter is the selection (i install, h hold ...), the second the state."""
    rc, out, err = module.run_command(["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\\n"])
    if rc != 0:
        module.fail_json(msg=f"dpkg-query failed: {err.strip()}")
    snap = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and any(fnmatch.fnmatch(parts[0], p) for p in patterns):
            snap[f"package {parts[0]}"] = f"{parts[1]} {parts[2].strip()}"
    return snap


def units(module: AnsibleModule, patterns: list[str]) -> dict[str, str]:
    if not patterns or not os.path.isdir("/run/systemd/system"):
        return {}
    snap: dict[str, str] = {}
    rc, out, _ = module.run_command(["systemctl", "list-unit-files", "--no-legend", "--no-pager", *patterns])
    for line in out.splitlines() if rc == 0 else []:
        parts = line.split()
        if len(parts) >= 2:
            snap[f"unit {parts[0]}"] = parts[1]
    rc, out, _ = module.run_command(["systemctl", "list-units", "--all", "--plain", "--no-legend", "--no-pager",
                                     *patterns])
    for line in out.splitlines() if rc == 0 else []:
        parts = line.split()
        if len(parts) >= 4:
            key = f"unit {parts[0]}"
            snap[key] = f"{snap.get(key, '-')} {parts[2]}/{parts[3]}"
    return snap


def _dropin_lines(patterns: list[str]) -> list[str]:
    lines = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines += [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith(("#", ";"))]
    return lines


def sysctls(patterns: list[str]) -> dict[str, str]:
    """The live value of every key a watched sysctl.d drop-in sets (sysctl.d(5): `key = value`)."""
    snap = {}
    for line in _dropin_lines(patterns):
        key = line.lstrip("-").split("=", 1)[0].strip()
        path = "/proc/sys/" + key.replace(".", "/")
        try:
            with open(path, encoding="utf-8") as fh:
                snap[f"sysctl {key}"] = " ".join(fh.read().split())
        except OSError:
            snap[f"sysctl {key}"] = "unreadable"
    return snap


def kernel_modules(patterns: list[str]) -> dict[str, str]:
    """Whether each module a watched modules-load.d drop-in names is loaded (/proc/modules, `-` and `_` alike)."""
    try:
        with open("/proc/modules", encoding="utf-8") as fh:
            loaded = {ln.split()[0] for ln in fh if ln.strip()}
    except OSError:
        loaded = set()
    return {f"module {m}": "loaded" if m.replace("-", "_") in loaded else "not loaded"
            for m in _dropin_lines(patterns)}


def snapshot(module: AnsibleModule) -> dict[str, str]:
    p = module.params
    snap = {}
    snap.update(packages(module, p["packages"]))
    snap.update(files(p["paths"]))
    snap.update(units(module, p["units"]))
    snap.update(sysctls(p["sysctl_files"]))
    snap.update(kernel_modules(p["module_files"]))
    with open("/proc/sys/kernel/osrelease", encoding="utf-8") as fh:
        snap["kernel release"] = fh.read().strip()
    return snap


def differences(old: dict[str, str], new: dict[str, str]) -> list[str]:
    out = []
    for key in sorted(old.keys() | new.keys()):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {old.get(key, 'absent')} -> {new.get(key, 'absent')}")
    return out


def reports(facts_dir: str, roles: list[str]) -> dict[str, object]:
    out = {}
    for role in roles:
        try:
            with open(os.path.join(facts_dir, f"{role}.json"), encoding="utf-8") as fh:
                out[role] = json.load(fh)
        except (OSError, ValueError):
            out[role] = None
    return out


def write_state(path: str, state: dict[str, object]) -> None:
    """The record, 0600, in a folder others may traverse: /var/lib/gridready also holds what services read (the
    model weights role's Hugging Face cache under hf/, read by the engines' users). A 0700 folder made there by an
    earlier version is opened up to 0755; the record itself stays root's."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    if stat.S_IMODE(os.stat(folder).st_mode) == 0o700:
        os.chmod(folder, 0o755)
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
        json.dump(state, fh, sort_keys=True)
    os.replace(tmp, path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "required": True, "choices": ["check", "record"]},
            "inputs": {"type": "dict", "default": {}},
            "roles": {"type": "list", "elements": "str", "default": []},
            "state_file": {"type": "path", "default": "/var/lib/gridready/converged.json"},
            "facts_dir": {"type": "path", "default": "/etc/gridready/facts.d"},
            "packages": {"type": "list", "elements": "str", "default": ["*"]},
            "paths": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "sysctl_files": {"type": "list", "elements": "str", "default": []},
            "module_files": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    inputs = {k: str(v) for k, v in p["inputs"].items()}
    # A role without a digest is never taken as converged: it runs, and says why.
    unread = [r for r in p["roles"] if r not in inputs]
    inputs.update({r: "unread" for r in unread})
    snap = snapshot(module)
    if p["mode"] == "record":
        if not module.check_mode:
            write_state(p["state_file"], {"schema": STATE_SCHEMA, "inputs": inputs, "live": snap})
        module.exit_json(changed=False, recorded=not module.check_mode, items=len(snap))
    try:
        with open(p["state_file"], encoding="utf-8") as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        state = {}
    if state.get("schema") != STATE_SCHEMA:
        module.exit_json(changed=False, pending=sorted(inputs), differences=["no converged run recorded"],
                         reports={}, inputs=inputs)
    diffs = differences(state.get("live", {}), snap)
    old_inputs = state.get("inputs", {})
    changed_inputs = [r for r in inputs if old_inputs.get(r) != inputs[r]]
    pending = sorted(inputs) if diffs else changed_inputs
    diffs += [f"inputs of {r} changed" for r in changed_inputs]
    diffs += [f"inputs of {r} could not be read" for r in unread]
    pending = sorted(set(pending) | set(unread))
    module.exit_json(changed=False, pending=pending, differences=diffs, inputs=inputs,
                     reports=reports(p["facts_dir"], [r for r in inputs if r not in pending]))


if __name__ == "__main__":
    main()
