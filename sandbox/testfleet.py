"""A running test fleet as an object (inventory, ssh_config, addresses, helpers); used by the pytest fixtures
and the benchmark. `start_fleet(n, profiles)` generates an inventory and brings its fleet up.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridready import vault
from sandbox import config, geninv, paths
from sandbox import fleet as fleet_api

VENV_BIN = Path(sys.executable).parent


def as_root(command: str) -> str:
    """A shell line that runs `command` as root through passwordless sudo, for an ssh session of the login user."""
    return f"sudo -n sh -c {shlex.quote(command)}"


@dataclass
class Fleet:
    """A running test fleet: a generated inventory plus what tests need to reach its hosts."""

    name: str
    inventory: Path  # generated inventory dir (cluster.yml, hosts.yml, group_vars/, sandbox.yml)
    ssh_config: Path  # for ssh -F and testinfra's ssh backend
    addresses: dict[str, str] = field(default_factory=dict)  # host -> 10.77.0.x

    @property
    def hosts_file(self) -> Path:
        return self.inventory / "hosts.yml"

    @property
    def names(self) -> list[str]:
        return list(self.addresses)

    def testinfra_hosts(self) -> list[str]:
        return [f"ssh://{h}?sudo=true" for h in self.addresses]

    def host(self, name: str) -> Any:
        """A testinfra Host over ssh with this fleet's ssh_config, as the login user with sudo (root's ssh login
        is refused on the hosts, as a customer's hosts refuse it)."""
        import testinfra

        return testinfra.get_host(f"ssh://{name}", ssh_config=str(self.ssh_config), sudo=True)

    def ssh(self, host: str, command: str, *, check: bool = True, timeout: float = 120,
            input: str | None = None, sudo: bool = True) -> subprocess.CompletedProcess[str]:
        """`command` (a shell line) on `host`: as root through `sudo -n` (sudo's own environment: env_reset,
        secure_path), or with `sudo=False` as the login user of the ssh session."""
        return subprocess.run(["ssh", "-F", str(self.ssh_config), host, as_root(command) if sudo else command],
                              capture_output=True, text=True, check=check, timeout=timeout, input=input)

    def set_faults(self, host: str, faults: list[dict[str, Any]]) -> None:
        """Inject (or, with [], clear) faults on a running host: its /etc/gridready-sim/profile.json rewritten with
        `faults`, validated by sandbox.profile.HardwareProfile first, written beside it and renamed into place (the
        simulated tools read the profile at each call; the simulated sysfs tree is written again). The sandbox's
        own control, not a simulated tool."""
        from sandbox.profile import PROFILE_PATH, Fault, HardwareProfile

        current = HardwareProfile.model_validate_json(self.ssh(host, f"cat {PROFILE_PATH}").stdout)
        data = current.model_dump(mode="json")
        data["faults"] = [Fault(**f).model_dump(mode="json", exclude_none=True) for f in faults]
        text = HardwareProfile.model_validate(data).to_json()
        self.ssh(host, f"cat > {PROFILE_PATH}.new && mv {PROFILE_PATH}.new {PROFILE_PATH} && "
                       "{ test ! -x /usr/bin/gridready-sim-sysfs || /usr/bin/gridready-sim-sysfs >/dev/null; }",
                 input=text)

    def install_ray(self, hosts: list[str]) -> str:
        """Ray (the pin, core only) in /opt/ray/venv on `hosts`, from the sandbox's package index, for tests that
        run Ray by hand; the serving role installs ray[default] the same way. Returns the `ray` executable."""
        from gridready.spec.serving import RAY_VERSION

        index = f"http://{paths.BRIDGE_ADDR}:{paths.REPO_PORT}/pypi/simple/"
        script = ("set -e; test -x /opt/ray/venv/bin/ray && exit 0; "
                  "DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null; "
                  "python3 -m venv /opt/ray/venv; /opt/ray/venv/bin/pip install -q --disable-pip-version-check "
                  f"--index-url {index} --trusted-host {paths.BRIDGE_ADDR} ray=={RAY_VERSION}")
        procs = [subprocess.Popen(["ssh", "-F", str(self.ssh_config), h, as_root(script)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for h in hosts]
        for h, proc in zip(hosts, procs, strict=True):
            out, _ = proc.communicate(timeout=600)
            if proc.returncode:
                raise RuntimeError(f"{h}: installing Ray failed (exit {proc.returncode}): {out[-1500:]}")
        return "/opt/ray/venv/bin/ray"

    def ansible_env(self) -> dict[str, str]:
        """Environment for ansible-playbook/ansible-runner: the repo's ansible.cfg, a fact cache of this fleet
        (host names node1.. repeat across fleets, so a shared fact cache would mix them up)."""
        return {**os.environ, "ANSIBLE_CONFIG": str(paths.repo_root() / "ansible.cfg"),
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(paths.fleet_dir(self.name) / "facts"),
                "ANSIBLE_ROLES_PATH": str(paths.repo_root() / "roles"), "ANSIBLE_NOCOLOR": "1"}

    def ansible_playbook(self, playbook: str | Path, *args: str, check: bool = True,
                         timeout: float = 1200) -> subprocess.CompletedProcess[str]:
        cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.hosts_file), str(playbook), *args]
        pw = vault.password_file(self.inventory)  # the inventory's vault (its Hub token), as gridready.ansible opens it
        if pw is not None:
            cmd[1:1] = ["--vault-id", f"{config.customer_of(self.inventory)}@{pw}"]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.ansible_env(), check=check,
                              timeout=timeout, cwd=paths.repo_root())

    def reboot(self, host: str, *, timeout: float = 180, poll: Callable[[], object] | None = None) -> None:
        """Reboot `host` (`systemctl reboot` over ssh) and wait for its new boot's sshd (sandbox.fleet.reboot)."""
        fleet_api.reboot(self.inventory, host, timeout, poll)

    def status(self) -> fleet_api.FleetStatus:
        return fleet_api.status(self.inventory)

    def down(self) -> None:
        geninv.remove(self.name)


def start_fleet(n: int = 3, profiles: dict[str, dict[str, Any]] | None = None, *, healthy: bool = False,
                prefix: str = "t") -> Fleet:
    """Generate an inventory and bring its fleet up (owned by this process); callers tear it down."""
    name = geninv.new_name(prefix)
    inv = geninv.make(name, n, profiles, healthy=healthy)
    try:
        st = fleet_api.up(inv, owner_pid=os.getpid())
    except BaseException:
        geninv.remove(name)
        raise
    return Fleet(name=name, inventory=inv, ssh_config=Path(st.ssh_config),
                 addresses={h.name: h.address or "" for h in st.hosts})
