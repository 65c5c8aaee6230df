"""A throw-away apt root over the simulated repository: real apt resolves the real dependency rules (Depends,
Conflicts, Provides, Recommends) of the simulated packages, with no host and no dpkg run (`apt-get -s`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class AptRoot:
    root: Path

    @classmethod
    def create(cls, root: Path, repo: Path, installed: list[str] | None = None) -> AptRoot:
        """An apt root whose only source is the flat repository `repo`; `installed` are dpkg status stanzas."""
        for d in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial",
                  "var/cache/apt/archives/partial", "var/lib/dpkg"):  # fmt: skip
            (root / d).mkdir(parents=True, exist_ok=True)
        base = [status_stanza("python3", "3.11.2-1+b1")]  # what every sandbox host has (Debian 12)
        (root / "var/lib/dpkg/status").write_text("\n".join(base + (installed or [])))
        (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
        (root / "apt.conf").write_text(
            f'Dir "{root}/";\nDir::State::status "{root}/var/lib/dpkg/status";\nDebug::NoLocking "true";\n'
            'APT::Architecture "amd64";\nAPT::Install-Recommends "true";\nAcquire::Languages "none";\n'
        )
        return cls(root)

    def add_source(self, name: str, line: str) -> None:
        (self.root / "etc/apt/sources.list.d" / name).write_text(line + "\n")

    def apt_get(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "APT_CONFIG": str(self.root / "apt.conf"), "LC_ALL": "C"}
        return subprocess.run(["apt-get", *args], capture_output=True, text=True, env=env, check=False)

    def apt_cache(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "APT_CONFIG": str(self.root / "apt.conf"), "LC_ALL": "C"}
        return subprocess.run(["apt-cache", *args], capture_output=True, text=True, env=env, check=False)

    def versions(self, name: str) -> list[str]:
        """Every version the sources offer for `name` (apt-cache madison), newest first."""
        return [line.split("|")[1].strip() for line in self.apt_cache("madison", name).stdout.splitlines()]

    def update(self) -> subprocess.CompletedProcess[str]:
        return self.apt_get("update")

    def simulate(self, *packages: str) -> subprocess.CompletedProcess[str]:
        return self.apt_get("-s", "install", *packages)


def status_stanza(name: str, version: str, arch: str = "amd64", fields: str = "") -> str:
    """A dpkg status stanza of an installed package; `fields`: more control lines (Depends, Recommends ...)."""
    return (f"Package: {name}\nStatus: install ok installed\nPriority: optional\nSection: devel\n"
            f"Maintainer: test\nArchitecture: {arch}\nVersion: {version}\n{fields}"
            "Description: preinstalled\n")  # fmt: skip


def role_vars(role: str, os_name: str, **overrides: Any) -> dict[str, Any]:
    """A role's defaults, vars/main.yml and vars/<os>.yml rendered with plain Jinja2 (what apt is asked for)."""
    base = REPO_ROOT / "roles" / role
    raw: dict[str, Any] = {}
    for f in (base / "defaults/main.yml", base / "vars/main.yml", base / f"vars/{os_name}.yml"):
        raw.update(yaml.safe_load(f.read_text()) or {})
    raw.update(overrides)
    env = jinja2.Environment(undefined=jinja2.ChainableUndefined)  # facts the test does not give stay empty
    env.filters.update(CoreFilters().filters())
    for plugin in sorted((REPO_ROOT / "playbooks" / "filter_plugins").glob("*.py")):  # the project's own filters
        spec = importlib.util.spec_from_file_location(f"_filters_{plugin.stem}", plugin)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        env.filters.update(module.FilterModule().filters())

    def render(value: Any, ctx: dict[str, Any]) -> Any:
        if isinstance(value, str) and "{{" in value:
            return env.from_string(value).render(ctx).strip()
        if isinstance(value, list):
            return [render(v, ctx) for v in value]
        return value

    ctx = dict(raw)
    for _ in range(5):  # nested references resolve in a few passes
        ctx = {k: render(v, ctx) for k, v in raw.items()} | {k: v for k, v in overrides.items()}
        raw = {**raw, **ctx}
    return ctx
