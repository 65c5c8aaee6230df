#!/usr/bin/python
"""gridready_apt_sources: read-only, which apt source files already serve a repository URL.

A second entry for the same URL with another `Signed-By` makes apt refuse every source ("Conflicting values set
for option Signed-By"; sources.list(5), https://manpages.debian.org/bookworm/apt/sources.list.5.en.html). NVIDIA's
documented installs write their own entries (cuda-keyring's `cuda-<os>-x86_64.list`, DOCA's `doca.list`), so a
role that manages a repository first asks whether another file serves it, and reuses that entry.

Both formats are read: one-line `deb [options] URI suite [components]` (comments and `deb-src` ignored) and
deb822 `.sources` stanzas (`Types:` holding `deb`, `URIs:`, `Enabled: no` skipped). URLs compare without trailing
slashes and case-insensitively in scheme and host.
Module API: https://docs.ansible.com/ansible/latest/dev_guide/developing_program_flow_modules.html
"""

from __future__ import annotations

import glob
import os
import re
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: gridready_apt_sources
short_description: List the apt source files that already serve a repository URL
options:
  url: {type: str, required: true, description: the repository URL}
  exclude: {type: list, elements: path, default: [], description: source files to leave out (the role's own)}
  root: {type: path, default: /, description: the root the apt configuration lives under}
"""

ONE_LINE = re.compile(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)")


def normalize(url: str) -> str:
    parts = urlsplit(url.strip())
    if not parts.scheme:
        return url.rstrip("/")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def one_line_uris(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := ONE_LINE.match(line.split("#", 1)[0]))]


def deb822_uris(text: str) -> list[str]:
    uris: list[str] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            uris += fields.get("uris", "").split()
    return uris


def serving(url: str, root: str = "/", exclude: list[str] | None = None) -> list[str]:
    """The source files under `root` with a `deb` entry for `url`, in apt's reading order."""
    want = normalize(url)
    skip = {os.path.join(root, e.lstrip("/")) for e in exclude or []}
    base = os.path.join(root, "etc/apt")
    files = [os.path.join(base, "sources.list"), *sorted(glob.glob(os.path.join(base, "sources.list.d", "*.list"))),
             *sorted(glob.glob(os.path.join(base, "sources.list.d", "*.sources")))]
    found = []
    for path in files:
        if path in skip or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        uris = deb822_uris(text) if path.endswith(".sources") else one_line_uris(text)
        if any(normalize(u) == want for u in uris):
            found.append("/" + os.path.relpath(path, root) if root != "/" else path)
    return found


def main() -> None:
    module = AnsibleModule(
        argument_spec={"url": {"type": "str", "required": True},
                       "exclude": {"type": "list", "elements": "path", "default": []},
                       "root": {"type": "path", "default": "/"}},
        supports_check_mode=True,
    )
    p = module.params
    module.exit_json(changed=False, files=serving(p["url"], p["root"], p["exclude"]))


if __name__ == "__main__":
    main()
