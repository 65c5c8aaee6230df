"""The simulated repository is as strict as NVIDIA's and the distribution's: real apt resolves the roles' package
sets against it (apt-get -s over a throw-away root) and refuses what a real host refuses."""

from __future__ import annotations

import ast
import fnmatch
import shutil
from pathlib import Path

import jinja2
import pytest

from sandbox import packages
from tests.sandbox_sim.aptroot import AptRoot, role_vars, status_stanza

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("apt-get") is None,
                                reason="dpkg-deb/apt-get not installed")  # fmt: skip

# The roles' OS -> the CUDA repository NVIDIA publishes for it (the roles' vars/<OS>.yml name the same).
OSES = {"Debian-12": "debian12", "Ubuntu-22": "ubuntu2204", "Ubuntu-24": "ubuntu2404"}


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    yield {o: packages.build_repo(tmp_path_factory.mktemp(o), o) for o in packages.REPO_OSES}
    mp.undo()


@pytest.fixture
def repo(repos: dict[str, Path]) -> Path:
    return repos["debian12"]  # what the sandbox hosts (Debian 12) get


def apt_for(repos: dict[str, Path], os_name: str, root: Path) -> AptRoot:
    apt = AptRoot.create(root, repos[OSES[os_name]])
    assert apt.update().returncode == 0
    return apt


@pytest.fixture
def apt(repos: dict[str, Path], tmp_path: Path) -> AptRoot:
    return apt_for(repos, "Ubuntu-24", tmp_path / "root")


def driver_packages(os_name: str) -> list[str]:
    v = role_vars("gridready_nvidia_driver", os_name, ansible_kernel="6.1.0-sim")
    return [v["__gridready_nvidia_driver_kmod_package"], *v["__gridready_nvidia_driver_packages"]]


@pytest.mark.parametrize("os_name", OSES)
def test_fabricmanager_role_packages_install_beside_the_open_driver(repos, tmp_path, os_name):
    apt = apt_for(repos, os_name, tmp_path / "root")
    fm = role_vars("gridready_fabricmanager", os_name)["__gridready_fabricmanager_packages"]
    res = apt.simulate(*driver_packages(os_name), *fm)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Inst libnvidia-nscq " in res.stdout  # HGX: DCGM needs NSCQ for the NVSwitches
    assert "Inst nvidia-kernel-common-580-server" not in res.stdout


def _installed(res_stdout: str) -> set[str]:
    return {line.split()[1] for line in res_stdout.splitlines() if line.startswith("Inst ")}


@pytest.mark.parametrize("open_modules", [True, False])
@pytest.mark.parametrize("os_name", OSES)
def test_the_driver_role_installs_the_compute_only_driver_of_each_os(repos, tmp_path, os_name, open_modules):
    """Issue 28, finding 9: the compute-only set brings nvidia-smi (on Ubuntu: nvidia-utils-<branch>, which the
    headless set does not pull in) and no desktop component; fabric manager follows the kernel module package."""
    apt = apt_for(repos, os_name, tmp_path / "root")
    v = role_vars("gridready_nvidia_driver", os_name, ansible_kernel="6.1.0-sim",
                  gridready_nvidia_driver_open_kernel_modules=open_modules)  # fmt: skip
    wanted = [v["__gridready_nvidia_driver_kmod_package"], *v["__gridready_nvidia_driver_packages"]]
    res = apt.apt_get("-s", "install", "--no-install-recommends", *wanted)  # the role: install_recommends false
    assert res.returncode == 0, res.stdout + res.stderr
    files = {p.name: p.files for p in packages.packages(OSES[os_name])}
    installed = _installed(res.stdout)
    assert any("/usr/bin/nvidia-smi" in files[name] for name in installed), sorted(installed)
    assert any("/usr/bin/nvidia-persistenced" in files[name] for name in installed), sorted(installed)
    desktop = {n for n in installed if any(f.startswith("/usr/share/gridready-sim/desktop") for f in files[n])}
    assert not desktop, desktop
    module = {n for n in installed if "/usr/share/gridready-sim/kernel-module" in files[n]}
    assert [files[n]["/usr/share/gridready-sim/kernel-module"] for n in module] == [
        b"open\n" if open_modules else b"proprietary\n"]
    fm_follows = role_vars("gridready_fabricmanager", os_name)["__gridready_fabricmanager_os_driver_packages"]
    assert v["__gridready_nvidia_driver_kmod_package"] in fm_follows[:2]  # the kernel module package's version


def _pinned(apt: AptRoot, spec: str) -> str:
    """`name=<glob>` as the apt module resolves it (the first offered version the glob matches); else unchanged."""
    name, _, glob = spec.partition("=")
    if not glob:
        return spec
    matching = [v for v in apt.versions(name) if fnmatch.fnmatch(v, glob)]
    assert matching, f"{name}: no offered version matches {glob} ({apt.versions(name)})"
    return f"{name}={matching[0]}"


def _render_into(apt: AptRoot, template: str, dest: str, variables: dict) -> None:
    text = (Path(packages.__file__).resolve().parents[1] / "roles/gridready_nvidia_driver/templates" / template)
    (apt.root / dest.lstrip("/")).write_text(jinja2.Template(text.read_text()).render(ansible_managed="test",
                                                                                       **variables))


@pytest.mark.parametrize("with_release_pin", [True, False])
@pytest.mark.parametrize("os_name", OSES)
@pytest.mark.parametrize("release", ["", packages.V["driver_previous"], packages.V["driver"]])
def test_a_pinned_driver_release_resolves_for_every_driver_package(repos, tmp_path, os_name, release,
                                                                    with_release_pin):
    """The repository serves two releases of the branch, as NVIDIA's keeps every one: the role's `=<release>-*` pin
    and the role's release preference take that release for the module and every driver package (without the
    preference, Ubuntu's metapackages at the older release cannot be installed); no pin takes the newest; fabric
    manager at the installed driver's version installs beside it."""
    apt = apt_for(repos, os_name, tmp_path / "root")
    v = role_vars("gridready_nvidia_driver", os_name, ansible_kernel="6.1.0-sim",
                  gridready_nvidia_driver_version=release)
    if release and with_release_pin:
        _render_into(apt, "nvidia-driver-release-pin.j2", v["__gridready_nvidia_driver_release_pin_file"], v)
    pin = f"={release}-*" if release else ""
    wanted = [_pinned(apt, n + pin) for n in (v["__gridready_nvidia_driver_kmod_package"],
                                               *v["__gridready_nvidia_driver_packages"])]  # fmt: skip
    fm = role_vars("gridready_fabricmanager", os_name)["__gridready_fabricmanager_packages"]
    got = release or packages.V["driver"]
    res = apt.apt_get("-s", "install", "--no-install-recommends", *wanted, *(f"{n}={got}-1" for n in fm))
    if not with_release_pin and release == packages.V["driver_previous"] and os_name != "Debian-12":
        # the metapackages at =<release> alone: apt takes the newest libraries they need at exactly <release>
        assert res.returncode != 0 and "but 580.159.04-1 is to be installed" in res.stdout, res.stdout
        return
    assert res.returncode == 0, res.stdout + res.stderr
    versions = {line.split()[1]: line.split("(")[1].split()[0] for line in res.stdout.splitlines()
                if line.startswith("Inst ")}  # fmt: skip
    bound = {n: ver for n, ver in versions.items() if n != "gridready-sim-common"}
    assert bound and set(bound.values()) == {f"{got}-1"}, bound


def test_the_ubuntu_desktop_driver_is_what_the_compute_set_avoids(apt):
    res = apt.simulate("nvidia-driver-580-open")
    assert res.returncode == 0, res.stdout + res.stderr
    assert {"libnvidia-decode-580", "libnvidia-encode-580", "nvidia-utils-580"} <= _installed(res.stdout)


def test_debian_kernel_module_flavours_exclude_each_other(repos, tmp_path):
    res = apt_for(repos, "Debian-12", tmp_path / "root").simulate("nvidia-kernel-open-dkms", "nvidia-kernel-dkms")
    assert res.returncode != 0
    assert "nvidia-kernel-dkms" in res.stdout + res.stderr


def test_debian12_repository_has_no_ubuntu_driver_names(repos, tmp_path):
    res = apt_for(repos, "Debian-12", tmp_path / "root").simulate("nvidia-driver-580-open")
    assert res.returncode != 0
    assert "Unable to locate package nvidia-driver-580-open" in res.stderr


def test_the_ubuntu_archive_fabricmanager_clashes_with_the_open_driver(apt):
    res = apt.simulate("nvidia-driver-580-open", "nvidia-fabricmanager-580")
    assert res.returncode != 0
    assert "nvidia-kernel-common-580-server" in res.stdout + res.stderr


def test_dcgm4_pulls_the_diagnostic_plugins_only_with_recommends(apt):
    assert "Inst datacenter-gpu-manager-4-proprietary-cuda13" in apt.simulate("datacenter-gpu-manager-4-cuda13").stdout
    res = apt.apt_get("-s", "install", "--no-install-recommends", "datacenter-gpu-manager-4-cuda13")
    assert res.returncode == 0 and "Inst datacenter-gpu-manager-4-proprietary-cuda13" not in res.stdout


def test_a_second_source_for_the_same_repository_with_another_key_stops_apt(repo, tmp_path):
    # apt refuses to read any source when two entries for one URL name different Signed-By keys (apt 2.x:
    # "Conflicting values set for option Signed-By"); cuda-keyring's own entry plus a second one do exactly that.
    root = AptRoot.create(tmp_path / "root", repo)
    (root.root / "etc/apt/sources.list").write_text("")
    root.add_source("cuda-keyring.list", f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] file:{repo} ./")
    root.add_source("gridready-nvidia.list", f"deb [signed-by=/usr/share/keyrings/gridready-nvidia.asc] file:{repo} ./")
    res = root.update()
    assert res.returncode != 0
    assert "Conflicting values set for option Signed-By" in res.stderr


def test_dcgm3_installed_is_visible_to_apt(repo, tmp_path):
    root = AptRoot.create(tmp_path / "root", repo, [status_stanza("datacenter-gpu-manager", "1:3.3.9")])
    assert root.update().returncode == 0
    res = root.apt_get("-s", "purge", "datacenter-gpu-manager")
    assert "Purg datacenter-gpu-manager" in res.stdout


def test_dcgm_role_installs_the_plugins_on_a_host_that_has_dcgm4_without_them(repo, tmp_path):
    # a host that got -cuda13 with --no-install-recommends: apt honours Recommends only for newly installed
    # packages, so only naming the plugins package brings it (and with it `dcgmi diag`)
    dcgm = packages.DCGM
    root = AptRoot.create(tmp_path / "root", repo, [status_stanza("gridready-sim-common", packages.SIM),
                                                   status_stanza("datacenter-gpu-manager-4-core", dcgm),
                                                   status_stanza("datacenter-gpu-manager-4-cuda13", dcgm, fields=(
                                                       f"Depends: datacenter-gpu-manager-4-core (= {dcgm})\n"
                                                       "Recommends: datacenter-gpu-manager-4-proprietary-cuda13 "
                                                       f"(= {dcgm})\n"))])
    assert root.update().returncode == 0
    assert "Inst datacenter-gpu-manager-4-proprietary" not in root.simulate("datacenter-gpu-manager-4-cuda13").stdout
    wanted = ast.literal_eval(role_vars("gridready_dcgm", "Debian-12")["__gridready_dcgm_packages"])
    res = root.simulate(*wanted)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Inst datacenter-gpu-manager-4-proprietary-cuda13 " in res.stdout


def _archive_with_a_higher_driver(tmp_path: Path, name: str, version: str) -> Path:
    """A flat repository standing in for Ubuntu's archive: the same driver name at a higher version (no Release
    label, priority 500)."""
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "Packages").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: test\nPriority: optional\n"
        f"Section: restricted/libs\nFilename: ./{name}_{version}_amd64.deb\nSize: 1\n"
        "Description: the distribution archive's build\n")
    return archive


@pytest.mark.parametrize("pinned", [False, True])
def test_the_role_pin_makes_apt_take_nvidias_driver_over_a_higher_archive_one(repos, tmp_path, pinned):
    """Issue 28, finding 6: with Ubuntu's archive carrying nvidia-driver-580-open at a higher version, apt takes the
    archive's; the driver role's preference (as cuda-keyring's cuda-repository-pin-600) makes it take NVIDIA's."""
    apt = AptRoot.create(tmp_path / "root", repos["ubuntu2404"])
    (apt.root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repos['ubuntu2404']} ./\n")
    ours = role_vars("gridready_nvidia_driver", "Ubuntu-24", ansible_kernel="6.8.0-sim")
    name = ours["__gridready_nvidia_driver_kmod_package"]
    archive = _archive_with_a_higher_driver(tmp_path, name, "999.1-0ubuntu1")
    apt.add_source("archive.list", f"deb [trusted=yes] file:{archive} ./")
    if pinned:
        template = (Path(packages.__file__).resolve().parents[1] / "roles/gridready_nvidia_driver/templates"
                    / "nvidia-repository-pin.j2").read_text()
        text = jinja2.Template(template).render(ansible_managed="test", **ours)
        (apt.root / "etc/apt/preferences.d/gridready-nvidia-repository").write_text(text)
    assert apt.update().returncode == 0
    res = apt.simulate(name)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("999.1-0ubuntu1" in res.stdout) is not pinned, res.stdout
