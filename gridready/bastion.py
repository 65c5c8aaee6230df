"""The cluster's bastion (cluster.yml `bastion:`) as OpenSSH options: a ProxyJump to a Host block of an ssh_config
gridready writes, whose known_hosts holds only the bastion's pinned key with StrictHostKeyChecking on.

ssh hands its `-F` file to the ssh it starts for the jump (ssh(1), -J: "configuration directives supplied on the
command-line generally apply to the destination host and not any specified jump hosts"; ssh.c passes -F on), so
the jump host's key is checked against the pinned one, never trusted on first use."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gridready.errors import InvalidInput
from gridready.spec.bastion import Bastion

ALIAS = "gridready-bastion"
# ssh puts the -F path unquoted into the jump's command line, which /bin/sh runs, and expands %-tokens in
# UserKnownHostsFile: both paths must be plain
PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+-]+", re.ASCII)


def known_hosts_line(bastion: Bastion) -> str:
    host = bastion.host if bastion.port == 22 else f"[{bastion.host}]:{bastion.port}"
    return f"{host} {bastion.host_key}\n"


def ssh_config(bastion: Bastion, known_hosts: Path) -> str:
    return "\n".join([
        f"Host {ALIAS}",
        f"  HostName {bastion.host}",
        f"  Port {bastion.port}",
        f"  User {bastion.user}",
        f"  UserKnownHostsFile \"{known_hosts}\"",
        "  GlobalKnownHostsFile none",
        "  StrictHostKeyChecking yes",
        "  BatchMode yes",
        "",
    ])


def write(bastion: Bastion, folder: Path) -> list[str]:
    """Write the ssh_config and known_hosts into `folder` (public facts only); the ssh arguments that use them."""
    if not PLAIN_PATH.fullmatch(str(folder.resolve())):
        raise InvalidInput(f"{folder}: (artifacts folder): with a bastion the path may hold only letters, digits and "
                           "_./+- (ssh hands it to a shell); set GRIDREADY_ARTIFACTS to such a folder")
    folder.mkdir(parents=True, exist_ok=True)
    known = folder / "bastion_known_hosts"
    known.write_text(known_hosts_line(bastion))
    config = folder / "bastion_ssh_config"
    config.write_text(ssh_config(bastion, known.resolve()))
    return ["-F", str(config.resolve()), "-o", f"ProxyJump={ALIAS}"]


def ansible_extravars(bastion: Bastion | None, folder: Path) -> dict[str, str]:
    """`ansible_ssh_extra_args` for every host (extra vars win over the inventory's), or nothing without one."""
    if bastion is None:
        return {}
    return {"ansible_ssh_extra_args": shlex.join(write(bastion, folder))}
