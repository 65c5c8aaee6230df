"""Run the Pulumi programs of gridready/stacks/ (the projects: stacks/<stack>/Pulumi.yaml): for real through the
Automation API, or rendered to YAML under mocks.

- `up()` / `preview()`: Automation API, inline program, local `file://` backend under the artifacts root,
  passphrase secrets provider (GRIDREADY_PULUMI_PASSPHRASE). Needs the `pulumi` CLI (`cli_available()`).
- `render()`: the same program under `pulumi.runtime.set_mocks`; every resource's inputs are recorded (they are
  the provider payload: camelCase, apiVersion/kind filled in), numbers come back as floats and are turned back
  into ints, Helm releases are kept apart (they are not manifests), Secrets are redacted. No CLI, no plugin,
  no network.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml

from gridready.artifacts import write_atomic
from gridready.errors import GridreadyError, StageFailed
from gridready.exitcodes import ExitCode
from gridready.stacks.platform import program as platform_stack
from gridready.stacks.serving import program as serving_stack

PROGRAMS: dict[str, Callable[[], None]] = {"platform": platform_stack.program,
                                               "serving": serving_stack.program}
PROJECTS = {"platform": "gridready-platform", "serving": "gridready-serving"}
SECRET_KEYS = {"platform": ("kubeconfig",), "serving": ("kubeconfig", "hfToken", "vllmApiKey", "mpiSshKeys",
                                                          "routerKeys", "loraBucketEnv")}
REDACTED = "<redacted: set by gridready from the vault at deploy time>"
HELM_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")


def cli_available() -> bool:
    return shutil.which("pulumi") is not None


def load_program(stack: str) -> Callable[[], None]:
    if stack not in PROGRAMS:
        raise GridreadyError(f"unknown Pulumi stack {stack!r}", ExitCode.INTERNAL)
    return PROGRAMS[stack]


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker of a secret value in resource inputs
TOP_KEYS = ("apiVersion", "kind", "metadata")


def _ints(value: Any) -> Any:
    """Struct numbers come back as floats: 8.0 -> 8 (0.9 stays); secrets are unwrapped (then redacted)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return _ints(value.get("value"))
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


@dataclass
class Rendered:
    """What a program declared: Kubernetes objects, Helm releases, and everything else by type."""

    stack: str
    manifests: list[dict[str, Any]] = field(default_factory=list)
    helm_releases: list[dict[str, Any]] = field(default_factory=list)
    resources: list[tuple[str, str]] = field(default_factory=list)  # (type, name) of every resource


class _Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.calls.append((args.typ, args.name, dict(args.inputs)))
        outputs = dict(args.inputs)
        if args.typ in HELM_TYPES:
            outputs["status"] = {"status": "deployed (rendered)"}
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


def _redact(doc: dict[str, Any]) -> dict[str, Any]:
    if doc.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(doc.get(key), dict):
                doc[key] = dict.fromkeys(doc[key], REDACTED)
    return doc


def render(stack: str, config: dict[str, Any], customer: str = "render") -> Rendered:
    """Run the program of `stack` under mocks with `config` (secrets are placeholders); collect what it declares."""
    program = load_program(stack)
    project = PROJECTS[stack]
    recorder = _Recorder()
    # pulumi's test harness runs on the current event loop; an earlier asyncio.run() leaves none behind
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(recorder, project=project, stack=customer, preview=False)
    values = {f"{project}:stack": json.dumps(config)}
    values.update({f"{project}:{k}": REDACTED for k in SECRET_KEYS[stack]})
    pulumi.runtime.set_all_config(values, [f"{project}:{k}" for k in SECRET_KEYS[stack]])

    @pulumi.runtime.test
    def _run() -> None:
        program()

    try:
        _run()
    except Exception as err:
        raise StageFailed(f"render {stack}: the program failed: {err}") from err
    out = Rendered(stack=stack)
    for typ, name, inputs in recorder.calls:
        out.resources.append((typ, name))
        clean = _ints(inputs)
        if typ in HELM_TYPES:
            out.helm_releases.append({"resource": name, "type": typ, **clean})
        elif "apiVersion" in clean and "kind" in clean:
            ordered = {k: clean[k] for k in TOP_KEYS if k in clean}
            ordered.update({k: v for k, v in clean.items() if k not in TOP_KEYS})
            out.manifests.append(_redact(ordered))
    return out


def write_rendered(rendered: Rendered, out_dir: Path) -> list[Path]:
    """<out_dir>/<stack>/manifests.yaml (multi-document) and helm-releases.yaml; returns the files."""
    folder = out_dir / rendered.stack
    files = []
    path = folder / "manifests.yaml"
    # one order (documents and keys) whatever order the mocks resolved in: a re-render diffs only where the
    # program changed
    docs = sorted(rendered.manifests, key=lambda d: (d.get("kind", ""), d.get("metadata", {}).get("namespace", ""),
                                                     d.get("metadata", {}).get("name", "")))
    write_atomic(path, yaml.safe_dump_all(docs, sort_keys=True))
    files.append(path)
    if rendered.helm_releases:
        path = folder / "helm-releases.yaml"
        releases = sorted(rendered.helm_releases, key=lambda r: str(r.get("name", r.get("resource", ""))))
        write_atomic(path, yaml.safe_dump(releases, sort_keys=True))
        files.append(path)
    return files


def state_dir(customer: str) -> Path:
    """The file:// backend of the customer's stacks: GRIDREADY_STATE/<customer>/pulumi, default state/ in the
    project root. Never under artifacts/: the state holds the encrypted stack secrets, and CI uploads artifacts."""
    from gridready.inventory import project_root

    return Path(os.environ.get("GRIDREADY_STATE") or project_root() / "state") / customer / "pulumi"


def _workspace_stack(stack: str, customer: str, state_dir: Path) -> Any:
    from pulumi import automation as auto

    passphrase = os.environ.get("GRIDREADY_PULUMI_PASSPHRASE")
    if not passphrase:
        raise GridreadyError("set GRIDREADY_PULUMI_PASSPHRASE: it encrypts the stack's secrets in the "
                             "file:// backend", ExitCode.INVALID)
    state_dir.mkdir(parents=True, exist_ok=True)
    project = PROJECTS[stack]
    settings = auto.ProjectSettings(name=project, runtime="python",
                                    backend=auto.ProjectBackend(url=f"file://{state_dir}"))
    opts = auto.LocalWorkspaceOptions(
        project_settings=settings,
        secrets_provider="passphrase",
        env_vars={"PULUMI_CONFIG_PASSPHRASE": passphrase, "PULUMI_SKIP_UPDATE_CHECK": "true"},
    )
    return auto.create_or_select_stack(stack_name=customer, project_name=project,
                                       program=load_program(stack), opts=opts)


def destroy(stack: str, customer: str, state_dir: Path, *, on_output: Callable[[str], None] | None = None) -> None:
    """`pulumi destroy` of stack `stack` of one customer (its resources, not the stack's state). Pulumi errors are
    StageFailed (exit 3)."""
    from pulumi import automation as auto

    ws_stack = _workspace_stack(stack, customer, state_dir)
    try:
        ws_stack.destroy(on_output=on_output, color="never")
    except auto.errors.CommandError as err:
        raise StageFailed(f"pulumi destroy {stack} ({customer}): {str(err).strip().splitlines()[-1][:500]}") from err


def up(
    stack: str, customer: str, config: dict[str, Any], secrets: dict[str, str], state_dir: Path, *,
    preview: bool = False, on_output: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`pulumi up` (or preview) of the program of stack `stack` for one customer; returns the stack outputs (or the
    preview's change summary). Pulumi errors are StageFailed (exit 3)."""
    from pulumi import automation as auto

    missing = [k for k in SECRET_KEYS[stack] if not secrets.get(k)]
    if missing:
        raise GridreadyError(f"pulumi {stack}: missing secrets {', '.join(missing)}", ExitCode.INVALID)
    ws_stack = _workspace_stack(stack, customer, state_dir)
    try:
        ws_stack.set_config("stack", auto.ConfigValue(value=json.dumps(config)))
        for key in SECRET_KEYS[stack]:
            ws_stack.set_config(key, auto.ConfigValue(value=secrets[key], secret=True))
        if preview:
            result = ws_stack.preview(on_output=on_output, color="never")
            return {"change_summary": dict(result.change_summary)}
        result = ws_stack.up(on_output=on_output, color="never")
    except auto.errors.CommandError as err:
        raise StageFailed(f"pulumi {stack} ({customer}): {str(err).strip().splitlines()[-1][:500]}") from err
    return {k: v.value for k, v in result.outputs.items()}
