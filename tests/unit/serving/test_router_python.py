"""The router installs on every supported OS's python3 (issue #43, finding 2).

Its LiteLLM venv is installed offline from a hash-pinned lock, which held CPython 3.11 wheels only (Debian 12),
while the reference inventories and `_sample` run Ubuntu 22.04 (3.10) and 24.04 (3.12): the role stopped at serve
time. Now tools/router_locks.py makes one lock per CPython of gridready.spec.router.ROUTER_PYTHON from one input,
the role picks the lock of the host's python3, and validate refuses a serving node group whose OS has none.
Offline: the locks' format, their Python-specific resolution and the role's choice; the wheels themselves were
checked with `pip download --only-binary=:all: --python-version X --require-hashes` for each lock.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from gridready.spec import rules
from gridready.spec.cluster import NodeGroup
from gridready.spec.router import ROUTER_PYTHON, router_python
from tests.unit.spec.test_rule_messages import spec

ROOT = Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gridready_router"
sys.path.insert(0, str(ROOT / "tools"))
import router_locks  # noqa: E402

REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+) \\", re.MULTILINE)
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}( \\)?")


def _os_values() -> tuple[str, ...]:
    return typing.get_args(NodeGroup.model_fields["os"].annotation)


def _pins(minor: str) -> dict[str, str]:
    return dict(REQUIREMENT.findall(router_locks.lock_path(minor).read_text()))


def test_every_os_the_spec_accepts_has_a_router_python_and_its_lock() -> None:
    assert set(_os_values()) <= set(ROUTER_PYTHON)
    # Ubuntu 22.04 / 24.04 (the reference inventories and _sample), Debian 12 / 13 (the sandbox)
    assert {os: router_python(os) for os in ROUTER_PYTHON} == {
        "ubuntu-22.04": "3.10", "ubuntu-24.04": "3.12", "debian-12": "3.11", "debian-13": "3.13"}
    for full in ROUTER_PYTHON.values():
        assert router_locks.lock_path(full.rsplit(".", 1)[0]).is_file()
    assert router_locks.stale() == []  # each made by the tool from the committed input


@pytest.mark.parametrize("full", sorted(set(ROUTER_PYTHON.values())))
def test_each_lock_pins_every_wheel_by_hash_without_markers(full: str) -> None:
    """pip download on the controller evaluates a requirement's marker for the controller's Python, not the
    host's: a lock for one host Python carries no markers, only exact pins, each with its sha256 lines."""
    minor = full.rsplit(".", 1)[0]
    text = router_locks.lock_path(minor).read_text()
    assert text.startswith(f"# LiteLLM's proxy for CPython {full} ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for i, line in enumerate(lines):
        if line.startswith("--hash"):
            assert HASH.fullmatch(line), line
            continue
        assert REQUIREMENT.fullmatch(line), f"{minor}: not an exact pin: {line}"
        assert ";" not in line
        assert lines[i + 1].startswith("--hash=sha256:"), f"{minor}: {line} has no hash"
    pins = _pins(minor)
    assert pins["litellm"] == "1.106.12" == yaml.safe_load(
        (ROLE / "defaults" / "main.yml").read_text())["gridready_router_version"]
    assert "prometheus-client" in pins


def test_each_lock_is_resolved_for_its_own_python() -> None:
    """Markers of the dependency tree, resolved per interpreter: anyio needs exceptiongroup and pydantic-settings'
    tree tomli below 3.11; redis needs async-timeout below 3.11.3 (Debian 12's 3.11.2); NumPy 2.3+ needs 3.11+."""
    p310, p311, p312, p313 = (_pins(m) for m in ("3.10", "3.11", "3.12", "3.13"))
    assert "exceptiongroup" in p310 and "exceptiongroup" not in p311
    assert "async-timeout" in p310 and "async-timeout" in p311
    assert "async-timeout" not in p312 and "async-timeout" not in p313
    assert int(p310["numpy"].split(".")[1]) < 3 <= int(p311["numpy"].split(".")[1])


@pytest.fixture(scope="module", autouse=True)
def _plugins() -> None:
    init_plugin_loader()  # the role's vars read the lock with the file lookup


def _role_vars(stdout: str, **over: object) -> Templar:
    variables: dict[str, typing.Any] = {"role_path": str(ROLE)}
    for part in ("defaults", "vars"):
        for key, value in yaml.safe_load((ROLE / part / "main.yml").read_text()).items():
            variables[key] = trust_as_template(value) if isinstance(value, str) else value
    variables.update({"__gridready_router_python": {"stdout": stdout}, "inventory_hostname": "gpu01",
                      "gridready_router_wheelhouse": "/tmp/wh", **over})
    return Templar(loader=DataLoader(), variables=variables)


def _install_task(name: str) -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    return next(t for t in tasks if t.get("name") == name)


@pytest.mark.parametrize(("stdout", "minor"), [
    ("3.10 cpython-310-x86_64\n", "3.10"), ("3.11 cpython-311-x86_64\n", "3.11"),
    ("3.12 cpython-312-x86_64\n", "3.12"), ("3.13 cpython-313-x86_64\n", "3.13"),
])
def test_the_role_picks_the_lock_of_the_hosts_python(stdout: str, minor: str) -> None:
    templar = _role_vars(stdout)
    lock = templar.template(trust_as_template("{{ __gridready_router_lock }}"))
    assert Path(lock) == router_locks.lock_path(minor)
    assert templar.template(trust_as_template("{{ __gridready_router_wheels }}")).split("/")[-1].startswith(
        f"litellm-1.106.12-cp{minor.replace('.', '')}-")
    check = _install_task("Assert the router has a wheel lock for the host's Python")["ansible.builtin.assert"]
    assert templar.template(trust_as_template("{{ " + check["that"] + " }}")) is True
    download = yaml.safe_load((ROLE / "tasks" / "wheels.yml").read_text())[0]["ansible.builtin.command"]["argv"]
    version = download[download.index("--python-version") + 1]
    assert templar.template(trust_as_template(version)) == minor


def test_a_python_without_a_lock_is_refused_before_any_install() -> None:
    templar = _role_vars("3.9 cpython-39-x86_64\n")
    task = _install_task("Assert the router has a wheel lock for the host's Python")
    assert templar.template(trust_as_template("{{ " + task["ansible.builtin.assert"]["that"] + " }}")) is False
    names = [t.get("name") for t in yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())]
    assert names.index(task["name"]) < names.index("Install the pinned venv")
    message = templar.template(trust_as_template(task["ansible.builtin.assert"]["fail_msg"]))
    assert "CPython 3.9" in message and "litellm-requirements-py3.9.txt" in message


def test_validate_refuses_a_serving_group_whose_os_has_no_router_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OS the spec accepts without a lock (one added to NodeGroup.os before its lock) is refused by validate,
    naming the key; the router off, or a group serving no tier, is not."""
    monkeypatch.delitem(ROUTER_PYTHON, "ubuntu-22.04")
    keys = [{"name": "app", "vault_var": "vault_router_key_app"}]
    on = spec(serving__router={"enabled": True, "keys": keys})
    assert rules.check(on, {"gpu_nodes": 2}) == [(
        "node_groups[0].os", "ubuntu-22.04 has no supported router install (a LiteLLM lock exists for debian-12, "
        "debian-13, ubuntu-24.04); serve this group's tiers on one of those, or set serving.router.enabled: false")]
    assert rules.check(spec(), {"gpu_nodes": 2}) == []
    assert list(rules.router_os(spec(serving__router={"enabled": True, "keys": keys},
                                     node_groups__0__os="ubuntu-24.04"))) == []


def test_inventory_load_names_the_file_the_key_and_the_os(make_inv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2 before anything runs, one line: `<cluster.yml>: node_groups[0].os: ubuntu-22.04 has no ...`."""
    from gridready import inventory
    from gridready.errors import InvalidInput
    from gridready.exitcodes import ExitCode
    from tests.unit.serving.test_serve_router import with_router

    inv = make_inv(2)
    monkeypatch.delitem(ROUTER_PYTHON, "ubuntu-22.04")
    inventory.load(inv.path)  # the router off: nothing to refuse
    with pytest.raises(InvalidInput) as err:
        with_router(inv)
    assert err.value.code == ExitCode.INVALID == 2
    line = next(ln for ln in err.value.lines if "node_groups[0].os" in ln)
    assert line.startswith("inventories/acme/cluster.yml: node_groups[0].os: ubuntu-22.04 has no supported router")
