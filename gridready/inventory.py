"""Load `inventories/<customer>/` (cluster.yml + hosts.yml + group_vars) and cross-check the parts.

Every problem becomes one line `<file>: <key.path>: <message>`; values are never echoed (they may be secrets).
"""

from __future__ import annotations

import difflib
import glob
import ipaddress
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gridready import charset, inventory_checks, secretscan
from gridready.errors import InvalidInput
from gridready.spec import SLUG, ClusterSpec, rules, target_rules
from gridready.spec.gates import is_known_gate
from gridready.spec.parallel import fit_problems
from gridready.spec.triton import SitePins
from gridready.yamlio import YamlError, is_vault_file, load_yaml

HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,252}")
VAR_DIRS = ("group_vars", "host_vars")
# RFC 1123 host name (what ssh is given; never an option such as -oProxyCommand=...)
DNS_NAME = re.compile(r"(?=.{1,253}\.?\Z)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
# An Ansible group name (ansible-core's TRANSFORM_INVALID_GROUP_CHARS: letters, digits, `_`; `-` still accepted)
GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,127}")
SSH_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}")  # useradd's NAME_REGEX, never an option


SITE_PINS_FILE = "triton_versions.yml"  # the site's Triton image pins (gridready/serving/triton/versions.py)


def connection_problems(hvars: dict[str, Any]) -> list[tuple[str, str]]:
    """(variable, problem) for connection variables that are not what Ansible hands to ssh as they are (each
    under its own name and the older ansible_ssh_* one Ansible still reads)."""
    out: list[tuple[str, str]] = []
    for var in ("ansible_host", "ansible_ssh_host"):
        addr = hvars.get(var)
        if addr is not None and not (isinstance(addr, str) and _is_address(addr)):
            out.append((var, "must be an IP address or a DNS host name (not an option, not a template)"))
    for var in ("ansible_port", "ansible_ssh_port"):
        port = hvars.get(var)
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535):
            out.append((var, "must be a port number 1-65535"))
    out.extend(inventory_checks.controller_command_problems(hvars))
    for var in ("ansible_user", "ansible_ssh_user"):
        user = hvars.get(var)
        if user is not None and not (isinstance(user, str) and SSH_USER.fullmatch(user)):
            out.append((var, f"must be a user name (^{SSH_USER.pattern}$)"))
    return out


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return bool(DNS_NAME.fullmatch(value)) and not re.fullmatch(r"[0-9.]+", value)
    return True


def project_root() -> Path:
    """Where `inventories/` and `artifacts/` live: GRIDREADY_HOME, else the current directory or the nearest folder
    above it that holds `inventories/` (a command line run from a subfolder of the project), else the current
    directory."""
    if os.environ.get("GRIDREADY_HOME"):
        return Path(os.environ["GRIDREADY_HOME"]).resolve()
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if (d / "inventories").is_dir()), here)


def available() -> list[str]:
    """The inventories under <root>/inventories/ (folders holding a cluster.yml), by name."""
    root = project_root() / "inventories"
    try:
        return sorted(d.name for d in root.iterdir() if (d / "cluster.yml").is_file())
    except OSError:
        return []


def available_line() -> str:
    """`inventories here: a, b` (or where none was found), for the lines that ask for an inventory."""
    names = available()
    where = display_path(project_root() / "inventories")
    return f"the inventories under {where}/: {', '.join(names)}" if names else f"no inventory under {where}/"


def _display(path: Path) -> str:
    """The path as the user knows it (relative to the current directory; a symlink is not followed)."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def display_path(path: Path) -> str:
    """A path as error lines show it: relative to the working directory when below it."""
    return _display(path)


def render_loc(loc: tuple[int | str, ...]) -> str:
    """('serving', 'tiers', 0, 'tensor_parallel') -> serving.tiers[0].tensor_parallel"""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


# The spec's models are strict: YAML 1.1 reads on/off/yes/no as booleans, which pydantic's lax mode would take as
# 1 and 0 where a number is asked, and it would take the strings "yes" or "1" where a boolean is. What was given
# instead is named by its type, never echoed.
_BOOLEAN_WORDS = "YAML reads on, off, yes, no, true and false as booleans"
_STRICT = {
    ("int_type", bool): f"Input should be a valid integer, not a boolean ({_BOOLEAN_WORDS})",
    ("float_type", bool): f"Input should be a valid number, not a boolean ({_BOOLEAN_WORDS})",
    ("int_type", str): "Input should be a valid integer, unable to parse string as an integer",
    ("float_type", str): "Input should be a valid number, unable to parse string as a number",
    ("bool_type", str): "Input should be a valid boolean (true or false), not a string",
    ("bool_type", int): "Input should be a valid boolean (true or false), not a number",
    ("bool_type", float): "Input should be a valid boolean (true or false), not a number",
}


def _message(e: Any) -> str:
    value = e.get("input")
    msg = _STRICT.get((e["type"], type(value)), e["msg"])
    if isinstance(value, str) and e["type"] in ("int_type", "float_type") and _is_number(value):
        msg = f"Input should be a valid {'integer' if e['type'] == 'int_type' else 'number'}, not a quoted " \
              "string (write the number without quotes)"
    return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _is_number(text: str) -> bool:
    try:
        charset.ascii_float(text)
    except ValueError:
        return False
    return True


def pydantic_lines(file: str, err: ValidationError) -> list[str]:
    """One `file: key: message` line per error of a validated inventory file; inputs are never shown."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = _message(e)
        if e["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            msg = f"{msg} (unknown key{_did_you_mean(loc[-1], _known_keys(ClusterSpec, loc[:-1]))})"
        lines.append(f"{file}: {render_loc(loc)}: {msg}")
    return lines


def _did_you_mean(word: str, choices: set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def _known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> set[str]:
    """The keys a mapping at `loc` below `model` may hold (every model a union there could be)."""
    models = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        found: list[type[BaseModel]] = []
        for m in models:
            field = next((f for n, f in m.model_fields.items() if part in (n, f.alias)), None)
            found += _models(field.annotation) if field is not None else []
        models = found or models  # a dict key (a tier's name, a tag) keeps the models of its values
    return {f.alias or n for m in models for n, f in m.model_fields.items()}


@dataclass
class Inventory:
    """A loaded and cross-checked customer inventory."""

    name: str
    path: Path
    spec: ClusterSpec
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> merged host vars
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> hosts (children included)
    vault_refs: dict[str, str] = field(default_factory=dict)  # vault variable -> `file: key` of a plain file using it

    @property
    def hosts_file(self) -> Path:
        return self.path / "hosts.yml"

    @property
    def customer(self) -> str:
        return self.spec.customer

    def node_group_of(self, host: str) -> str | None:
        for group in self.spec.node_groups:
            if host in self.groups.get(group.name, []):
                return group.name
        return None

    def gpu_hosts(self) -> list[str]:
        seen: list[str] = []
        for group in self.spec.node_groups:
            seen.extend(h for h in self.groups.get(group.name, []) if h not in seen)
        return seen


def resolve(name_or_path: str | os.PathLike[str]) -> Path:
    """An inventory directory from a path or a name under <root>/inventories/."""
    candidate = Path(name_or_path)
    if (candidate / "cluster.yml").exists() or candidate.is_absolute() or len(candidate.parts) > 1:
        return candidate
    return project_root() / "inventories" / str(name_or_path)


def _walk_groups(
    file: str, name: str, body: Any, groups: dict[str, list[str]], hostvars: dict[str, dict[str, Any]],
    errors: list[str], path: str,
) -> list[str]:
    """Collect hosts of `name` and its children; returns the hosts of this group."""
    if not GROUP_NAME.fullmatch(name):
        errors.append(f"{file}: {path}: not a valid group name (^{GROUP_NAME.pattern}$)")
        return []
    if body is None:
        body = {}
    if not isinstance(body, dict):
        errors.append(f"{file}: {path}: must be a mapping with hosts, children or vars")
        return []
    for key in body:
        if key not in ("hosts", "children", "vars"):
            errors.append(f"{file}: {path}.{key}: unknown key (expected hosts, children or vars)")
    if isinstance(body.get("vars"), dict):
        errors.extend(f"{file}: {path}.vars.{var}: {problem}"
                      for var, problem in connection_problems(body["vars"]) if var != "ansible_host")
    members: list[str] = []
    hosts = body.get("hosts") or {}
    if not isinstance(hosts, dict):
        errors.append(f"{file}: {path}.hosts: must be a mapping of host names")
        hosts = {}
    for host, hvars in hosts.items():
        if not isinstance(host, str) or not HOST_NAME.fullmatch(host):
            errors.append(f"{file}: {path}.hosts.{host}: not a valid host name")
            continue
        if hvars is not None and not isinstance(hvars, dict):
            errors.append(f"{file}: {path}.hosts.{host}: host vars must be a mapping")
            continue
        hvars = hvars or {}
        for var, problem in connection_problems(hvars):
            errors.append(f"{file}: {path}.hosts.{host}.{var}: {problem}")
        known = hostvars.get(host, {}).get("ansible_host")
        if known is not None and hvars.get("ansible_host") not in (None, known):
            errors.append(f"{file}: {path}.hosts.{host}.ansible_host: the host already has another address "
                          "in this file; one host, one address")
        hostvars.setdefault(host, {}).update(hvars)
        members.append(host)
    children = body.get("children") or {}
    if not isinstance(children, dict):
        errors.append(f"{file}: {path}.children: must be a mapping of groups")
        children = {}
    for child, child_body in children.items():
        members.extend(
            _walk_groups(file, str(child), child_body, groups, hostvars, errors, f"{path}.children.{child}")
        )
    unique = list(dict.fromkeys(members))
    groups[name] = list(dict.fromkeys(groups.get(name, []) + unique))
    return unique


def _load_hosts(path: Path, errors: list[str], refs: dict[str, str]
                ) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """hosts.yml of the inventory `path` is in, read beneath it."""
    file = _display(path)
    groups: dict[str, list[str]] = {}
    hostvars: dict[str, dict[str, Any]] = {}
    if not path.exists() and not path.is_symlink():
        errors.append(f"{file}: (file): missing; an Ansible YAML inventory is required")
        return groups, hostvars
    try:
        data = load_yaml(path, root=path.parent)
    except YamlError as err:
        errors.append(f"{file}: {err.where}: {err}")
        return groups, hostvars
    if not isinstance(data, dict) or not data:
        errors.append(f"{file}: (top level): must be a mapping of groups (e.g. all:)")
        return groups, hostvars
    errors.extend(_secret_lines(file, data, refs=refs))
    for name, body in data.items():
        _walk_groups(file, str(name), body, groups, hostvars, errors, str(name))
    _add_new(errors, file, inventory_checks.hosts_file_problems(data, hostvars))
    return groups, hostvars


def _add_new(errors: list[str], file: str, problems: Any) -> None:
    """`file: key: problem` lines for keys no line names yet: one line per key."""
    for where, problem in problems:
        if not any(e.startswith(f"{file}: {where}: ") for e in errors):
            errors.append(f"{file}: {where}: {problem}")


def _secret_lines(file: str, data: Any, path: str = "", refs: dict[str, str] | None = None) -> list[str]:
    """Plain-text secrets of one file's data; `refs` collects the vault variables its values reference."""
    if refs is not None:
        for var, where in secretscan.vault_references(data, path):
            refs.setdefault(var, f"{file}: {where}")
    return [f"{file}: {where}: {what}" for where, what in secretscan.find(data, path)]


def _var_files(inv_dir: Path, errors: list[str]) -> list[Path]:
    """The files under group_vars/ and host_vars/, walked without following links: a link that leaves the
    inventory (to `/`, a device, another customer's folder) is refused, never walked or read."""
    home = inv_dir.resolve()
    found: list[Path] = []
    for sub in VAR_DIRS:
        top = inv_dir / sub
        if not top.exists() and not top.is_symlink():
            continue
        if top.is_symlink() and not top.resolve().is_relative_to(home):
            errors.append(f"{_display(top)}: (file): a symbolic link out of the inventory directory")
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                if path.is_symlink() and not path.resolve().is_relative_to(home):
                    errors.append(f"{_display(path)}: (file): a symbolic link out of the inventory directory")
                elif name in filenames:
                    found.append(path)
        if top.exists() and not top.is_dir():
            found.append(top)
    return sorted(set(found))


def _check_var_files(inv_dir: Path, errors: list[str], refs: dict[str, str]) -> None:
    """group_vars/ and host_vars/, every file whatever its extension: they must parse, hold a mapping, and
    keep secrets in ansible-vault files only (vault files are never read here)."""
    for path in _var_files(inv_dir, errors):
        file = _display(path)
        try:
            if is_vault_file(path, root=inv_dir):
                continue
            if inventory_checks.vault_named(path.relative_to(inv_dir)):
                errors.append(f"{file}: (file): named like a vault but not encrypted; encrypt it with "
                              "ansible-vault (vault id = the customer) or rename it")
                continue
            data = load_yaml(path, root=inv_dir)
        except YamlError as err:
            errors.append(f"{file}: {err.where}: {err}")
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            errors.append(f"{file}: (top level): must be a mapping of variables")
            continue
        errors.extend(_secret_lines(file, data, refs=refs))
        errors.extend(f"{file}: {var}: {problem}" for var, problem in connection_problems(data))
        _add_new(errors, file, inventory_checks.template_problems(data))


def _cross_check(file: str, spec: ClusterSpec, groups: dict[str, list[str]], hosts_file: str) -> list[str]:
    errors: list[str] = []
    owner: dict[str, str] = {}
    for i, group in enumerate(spec.node_groups):
        members = groups.get(group.name)
        if members is None:
            errors.append(f"{file}: node_groups[{i}].name: group {group.name!r} is not in {hosts_file}")
            continue
        if not members:
            errors.append(f"{hosts_file}: {group.name}: group has no hosts")
        for host in members:
            if host in owner:
                errors.append(
                    f"{hosts_file}: {group.name}.hosts.{host}: host is also in node group {owner[host]!r}"
                )
            owner[host] = group.name
    for i, tier in enumerate(spec.serving.tiers):
        key = f"serving.tiers[{i}]"
        group = spec.group(tier.node_group) if tier.node_group else spec.node_groups[0]
        if group is None:
            errors.append(f"{file}: {key}.node_group: no node group named {tier.node_group!r}")
            continue
        for sub, problem in fit_problems(tier, group, len(groups.get(group.name, []))):
            errors.append(f"{file}: {key}{'.' + sub if sub else ''}: {problem}")
    errors.extend(_router_host_lines(file, spec, groups, owner, hosts_file))
    names = [t.name for t in spec.serving.tiers]
    for dupe in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"{file}: serving.tiers: duplicate tier name {dupe!r}")
    if spec.serving.target == "kubernetes" and not spec.serving.kubeconfig:
        errors.append(f"{file}: serving.kubeconfig: required when serving.target is kubernetes")
    cert = spec.certification
    if cert.runner == "kubernetes-job":
        if not cert.jobs.image:
            errors.append(f"{file}: certification.jobs.image: required when certification.runner is kubernetes-job")
        if not spec.serving.kubeconfig:
            errors.append(f"{file}: serving.kubeconfig: required when certification.runner is kubernetes-job (the "
                          "cluster the probe Jobs run on)")
    for key in ("waive", "not_applicable"):
        for i, gate in enumerate(getattr(cert, key)):
            if not is_known_gate(gate):
                errors.append(f"{file}: certification.{key}[{i}]: unknown gate {gate!r}")
            elif gate == "probe":  # its error means no output at all: waived, a node nothing is known of certifies
                errors.append(f"{file}: certification.{key}[{i}]: the probe gate cannot be set aside: without the "
                              "probe's output nothing about the node is known")
    if cert.min_certified_nodes > len(owner) and owner:
        errors.append(
            f"{file}: certification.min_certified_nodes: {cert.min_certified_nodes} is more than the "
            f"{len(owner)} GPU nodes in {hosts_file}"
        )
    return errors


def _router_host_lines(file: str, spec: ClusterSpec, groups: dict[str, list[str]], owner: dict[str, str],
                       hosts_file: str) -> list[str]:
    """serving.router.hosts: hosts of hosts.yml outside every node group (a roll never drains or reboots them),
    on target hosts only."""
    declared = spec.serving.router.hosts
    if declared and spec.serving.target != "hosts":
        return [f"{file}: serving.router.hosts: only for serving.target hosts (on Kubernetes the router runs as a "
                "Deployment behind the Gateway)"]
    known = {h for members in groups.values() for h in members}
    lines = []
    for i, host in enumerate(declared):
        key = f"{file}: serving.router.hosts[{i}]"
        if host not in known:
            lines.append(f"{key}: host {host!r} is not in {hosts_file}")
        elif host in owner:
            lines.append(f"{key}: host {host!r} is in node group {owner[host]!r}: a router host serves no GPU work "
                         "(a rolling provision would drain and reboot it under the router); put it in a group of "
                         "its own, e.g. routers")
    return lines


def _node_name_lines(inv_dir: Path, spec: ClusterSpec, groups: dict[str, list[str]],
                     hostvars: dict[str, dict[str, Any]]) -> list[str]:
    """On target kubernetes each GPU host is a Node (its name, or gridready_k8s_node_name): a name the API
    server would refuse is refused here. A host whose host_vars may rename it is judged by hosts.yml's name only
    when it sets one."""
    if spec.serving.target != "kubernetes":
        return []
    lines = []
    for group in spec.node_groups:
        for host in groups.get(group.name, []):
            given = hostvars.get(host, {}).get("gridready_k8s_node_name")
            key = f"{group.name}.hosts.{host}" + (".gridready_k8s_node_name" if given is not None else "")
            if given is None and any((inv_dir / "host_vars").glob(f"{glob.escape(host)}*")):
                continue
            if bad := target_rules.node_name_problem(str(given if given is not None else host)):
                lines.append(f"{_display(inv_dir / 'hosts.yml')}: {key}: {bad}")
    return list(dict.fromkeys(lines))


def site_pins(inventory_dir: Path) -> SitePins | None:
    """The inventory's optional Triton pins file, read like every inventory file (size, depth, duplicate keys) and
    validated; InvalidInput names the file and key, one line each. None without one."""
    path = Path(inventory_dir) / SITE_PINS_FILE
    if not path.exists() and not path.is_symlink():  # a dangling link or a FIFO: read_capped says why
        return None
    shown = _display(path)
    try:
        raw = load_yaml(path, root=Path(inventory_dir))
    except YamlError as err:
        raise InvalidInput(f"{shown}: {err.where}: {err}") from None
    if raw is not None and not isinstance(raw, dict):
        raise InvalidInput(f"{shown}: (top level): must be a mapping (lines:, fixed_cost:)")
    try:
        return SitePins.model_validate(raw or {})
    except ValidationError as err:
        raise InvalidInput(pydantic_lines(shown, err)) from None


def _site_pin_lines(inv_dir: Path) -> list[str]:
    """triton_versions.yml is an inventory file too: its problems show at validate, not first at serve."""
    try:
        site_pins(inv_dir)
    except InvalidInput as err:
        return list(err.lines)
    return []


INVOKE_FILE = "invoke.yaml"  # the older `invoke -f inventories/<c>/invoke.yaml` form's file
INVOKE_FILE_KEYS: dict[str, type] = {"inventory": str, "check": bool, "json": bool}


def invoke_file_problems(data: Any) -> list[tuple[str, str]]:
    """(key, problem) of an invoke configuration file as gridready allows one: `gridready:` with the keys of
    INVOKE_FILE_KEYS and nothing else. Every other section is invoke's own configuration (`tasks.executor_class`
    makes invoke import the module it names): an inventory is data and selects gridready settings only."""
    if not isinstance(data, dict):
        return [("gridready", "must be a mapping with inventory: <name> (e.g. gridready: {inventory: acme})")]
    out = [(secretscan.redact(str(key)), "an invoke setting: an inventory file may set gridready's own settings "
                                         "only (name the inventory with gridready -i <customer>)")
           for key in data if key != "gridready"]
    section = data.get("gridready")
    if not isinstance(section, dict):
        return out or [("gridready", "must be a mapping with inventory: <name> (e.g. gridready: {inventory: acme})")]
    for key, value in section.items():
        kind = INVOKE_FILE_KEYS.get(key) if isinstance(key, str) else None
        if kind is None:
            out.append((f"gridready.{secretscan.redact(str(key))}", "unknown key (expected "
                        f"{', '.join(INVOKE_FILE_KEYS)}{_did_you_mean(str(key), set(INVOKE_FILE_KEYS))})"))
        elif not isinstance(value, kind) or (kind is str and not value):
            out.append((f"gridready.{key}", f"must be a {'name' if kind is str else 'boolean'}"))
    return out


# What a plain `invoke` run in the inventory's folder would load as code or as its own configuration: a task
# module or package, and invoke's project configuration in its other forms (invoke.py is Python)
INVOKE_CODE = ("tasks.py", "tasks", "invoke.py", "invoke.yml", "invoke.json")


def _invoke_file_lines(inv_dir: Path) -> list[str]:
    """An inventory's invoke.yaml is read as data (safe YAML, hardened loader) and holds gridready settings only;
    gridready's command line never gives it to invoke. A task module or another invoke configuration file is
    refused outright: an inventory is data."""
    lines = [f"{_display(inv_dir / name)}: (file): an inventory holds data only; invoke would load this "
             f"{'module' if name.startswith('tasks') or name.endswith('.py') else 'configuration'} when run in "
             "this folder (remove it; gridready -i <customer> names the inventory)"
             for name in INVOKE_CODE if (inv_dir / name).exists() or (inv_dir / name).is_symlink()]
    path = inv_dir / INVOKE_FILE
    if not path.exists() and not path.is_symlink():
        return lines
    shown = _display(path)
    try:
        data = load_yaml(path)
    except YamlError as err:
        return [*lines, f"{shown}: {err.where}: {err}"]
    return [*lines, *(f"{shown}: {key}: {problem}" for key, problem in invoke_file_problems(data))]


def load(name_or_path: str | os.PathLike[str]) -> Inventory:
    """Load and validate; raises InvalidInput listing every problem found (nothing is run or written)."""
    inv_dir = resolve(name_or_path)
    shown = _display(inv_dir)
    if not inv_dir.is_dir():
        raise InvalidInput(f"{shown}: (inventory): no such inventory directory ({available_line()})")
    name = inv_dir.name
    errors: list[str] = []
    if not re.fullmatch(SLUG.strip("^$"), name.removeprefix("_")):
        errors.append(f"{shown}: (directory name): must match {SLUG}")
    cluster = inv_dir / "cluster.yml"
    file = _display(cluster)
    spec: ClusterSpec | None = None
    if not cluster.exists() and not cluster.is_symlink():  # a dangling or looping link: read_capped says why
        errors.append(f"{file}: (file): missing")
    else:
        try:
            raw = load_yaml(cluster, root=inv_dir)
        except YamlError as err:
            errors.append(f"{file}: {err.where}: {err}")
        else:
            if not isinstance(raw, dict):
                errors.append(f"{file}: (top level): must be a mapping")
            elif leaks := _secret_lines(file, raw):
                errors.extend(leaks)
            else:
                try:
                    spec = ClusterSpec.model_validate(raw)
                except ValidationError as err:
                    errors.extend(pydantic_lines(file, err))
    refs: dict[str, str] = {}
    groups, hostvars = _load_hosts(inv_dir / "hosts.yml", errors, refs)
    _check_var_files(inv_dir, errors, refs)
    errors.extend(_site_pin_lines(inv_dir))
    errors.extend(_invoke_file_lines(inv_dir))
    if spec is not None:
        if not name.startswith("_") and spec.customer != name:
            errors.append(f"{file}: customer: must equal the inventory directory name ({name!r})")
        if groups:
            errors.extend(_cross_check(file, spec, groups, _display(inv_dir / "hosts.yml")))
            errors.extend(_node_name_lines(inv_dir, spec, groups, hostvars))
        nodes = {g.name: len(groups.get(g.name, [])) for g in spec.node_groups}
        errors.extend(f"{file}: {where}: {what}" for where, what in rules.check(spec, nodes))
        if not errors:
            errors.extend(f"{file}: {where}: {what}" for where, what in rules.placement(spec, nodes))
    if errors or spec is None:
        # a check may name a key, and a key can be a secret: credential shapes never reach a line
        raise InvalidInput([secretscan.redact(e) for e in errors] or [f"{file}: (file): could not be loaded"])
    return Inventory(name=name, path=inv_dir, spec=spec, hosts=hostvars, groups=groups, vault_refs=refs)
