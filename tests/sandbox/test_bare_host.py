"""A new sandbox host is a fresh Debian 12 or Debian 13 server: what a stage needs on a node, a role must install.

Allowed before any role ran: Debian's packages of priority required, important and standard (what a server
install has), and openssh-server, python3 and sudo with what they depend on (a server or cloud image's remote
management: sandbox/image.py SERVER_PACKAGES). Nothing from the sandbox's own repositories, no Python packages
beyond the distribution's, and no NVIDIA tool: those appear only once the driver role installed their packages.
"""

from __future__ import annotations

import pytest

from sandbox.image import RELEASES, SERVER_PACKAGES

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]
NOT_YET = ("nvidia-smi", "dcgmi", "nv-fabricmanager", "all_reduce_perf", "ibstat", "docker", "ray", "vllm", "pip3")


@pytest.fixture(scope="module", params=sorted(RELEASES))
def bare(request, make_module_fleet):
    fleet = make_module_fleet(1, healthy=True, profiles={"node1": {"os": request.param}})
    yield fleet
    fleet.down()


def test_installed_packages_are_a_fresh_servers(bare) -> None:
    rows = bare.ssh("node1", "dpkg-query -W -f '${Package} ${Priority} ${db:Status-Abbrev}\\n'").stdout
    installed = {p: prio for p, prio, status in (r.split(maxsplit=2) for r in rows.splitlines())
                 if status.startswith("ii")}
    # a server install: Debian's required, important and standard packages plus SERVER_PACKAGES, and what they
    # depend on (libraries of optional priority among them)
    base = sorted({p for p, prio in installed.items() if prio in ("required", "important", "standard")}
                  | set(SERVER_PACKAGES))
    closure = set(bare.ssh("node1", "apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts "
                                    "--no-breaks --no-replaces --no-enhances --installed "
                                    + " ".join(base) + " | grep -v '^ '").stdout.split())
    extra = sorted(p for p in installed if p.split(":")[0] not in closure)
    assert extra == [], f"installed on a new host beyond a fresh Debian server: {extra}"
    assert {"openssh-server", "python3", "sudo"} <= set(installed)


def test_nothing_from_the_sandbox_sources_or_pypi_is_there(bare) -> None:
    # every installed package is one Debian's archive offers (apt marks the others [installed,local])
    foreign = bare.ssh("node1", "apt list --installed 2>/dev/null | grep -F ',local]' || true")
    assert foreign.stdout.strip() == ""
    for tool in NOT_YET:
        found = bare.ssh("node1", f"command -v {tool} || true").stdout.strip()
        assert found == "", f"{tool} at {found} before any role installed it"
    venv = bare.ssh("node1", "python3 -c 'import ensurepip' 2>&1; ls /opt", check=False)
    assert "No module named 'ensurepip'" in venv.stdout and venv.stdout.strip().endswith("ensurepip'")
