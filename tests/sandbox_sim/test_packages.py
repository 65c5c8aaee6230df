"""The simulated NVIDIA apt repository: names, versions, units, determinism, the nccl-tests tarball."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from sandbox import packages

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not installed")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(cache))
    yield packages.build_repo(tmp_path_factory.mktemp("repo"))
    mp.undo()


def info(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "-I", str(deb)], capture_output=True, text=True, check=True).stdout


def contents(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout


# The debian12 repository (the sandbox hosts are Debian 12): Debian's driver names, no Ubuntu archive packages.
EXPECTED = {
    "nvidia-driver-cuda": "580.159.04-1",
    "nvidia-kernel-open-dkms": "580.159.04-1",
    "nvidia-kernel-dkms": "580.159.04-1",
    "nvidia-driver": "580.159.04-1",
    "nvidia-open": "580.159.04-1",
    "cuda-drivers": "580.159.04-1",
    "cuda-drivers-580": "580.159.04-1",
    "nvidia-persistenced": "580.159.04-1",
    "nvidia-driver-pinning-580": "580.159.04-1",
    "nvidia-fabricmanager": "580.159.04-1",
    "libnvidia-nscq": "580.159.04-1",
    "cuda-drivers-fabricmanager-580": "580.159.04-1",
    "cuda-keyring": "1.1-1",
    "datacenter-gpu-manager": "1:3.3.9",
    "datacenter-gpu-manager-config": "1:3.3.9",
    "datacenter-gpu-manager-4-core": "1:4.5.0-1",
    "datacenter-gpu-manager-4-cuda13": "1:4.5.0-1",
    "datacenter-gpu-manager-4-proprietary-cuda13": "1:4.5.0-1",
    "libnccl2": "2.28.9-1+cuda13.0",
    "libnccl-dev": "2.28.9-1+cuda13.0",
    "nvidia-container-toolkit": "1.18.0-1",
    "nvidia-container-toolkit-base": "1.18.0-1",
    "gridready-sim-common": "0.1.0-1",
    "gridready-sim-rdma": "0.1.0-1",
}


def test_index_lists_every_package_with_checksums(repo):
    text = gzip.decompress((repo / "Packages.gz").read_bytes()).decode()
    assert text == (repo / "Packages").read_text()
    every = text.strip().split("\n\n")
    versions: dict[str, set[str]] = {}
    for s in every:
        versions.setdefault(s.split("\n")[0].split(": ")[1], set()).add(s.split("Version: ")[1].split("\n")[0])
    # the newest release of each package as EXPECTED; the driver's packages also at the branch's previous release
    previous = f"{packages.V['driver_previous']}-1"
    assert {n: max(v, key=lambda x: x != previous) for n, v in versions.items()} == EXPECTED
    older = {n for n, v in versions.items() if len(v) > 1}
    assert older == {n for n, v in EXPECTED.items() if v == packages.DRIVER}, older
    assert all(versions[n] == {packages.DRIVER, previous} for n in older)
    for s in every:
        deb = repo / s.split("Filename: ./")[1].split("\n")[0]
        data = deb.read_bytes()
        assert f"Size: {len(data)}\n" in s and f"SHA256: {hashlib.sha256(data).hexdigest()}\n" in s
        assert "SIMULATED" in s
    release = (repo / "Release").read_text()
    assert hashlib.sha256((repo / "Packages.gz").read_bytes()).hexdigest() in release


@pytest.mark.parametrize(
    ("pkg", "paths"),
    [
        ("nvidia-driver-cuda", ["./usr/bin/nvidia-smi"]),
        ("nvidia-kernel-open-dkms", ["./usr/share/gridready-sim/kernel-module"]),
        ("nvidia-persistenced", ["./usr/bin/nvidia-persistenced", "./lib/systemd/system/nvidia-persistenced.service"]),
        ("datacenter-gpu-manager-4-core", ["./usr/bin/dcgmi", "./usr/bin/nv-hostengine",
                                           "./lib/systemd/system/nvidia-dcgm.service"]),
        ("nvidia-fabricmanager", ["./usr/bin/nv-fabricmanager", "./lib/systemd/system/nvidia-fabricmanager.service",
                                  "./usr/share/gridready-sim/fabricmanager-version"]),
        ("gridready-sim-rdma", ["./usr/local/bin/ibstat", "./usr/local/bin/ib_write_bw", "./usr/local/bin/mpirun",
                                "./lib/systemd/system/gridready-sim-fabric.service"]),
        ("gridready-sim-common", ["./usr/lib/gridready-sim/gridready_sim/simcore.py", "./usr/bin/gridready-sim-sysfs",
                                  "./usr/lib/gridready-sim/gridready_sim/skus.json", "./usr/local/bin/dmesg",
                                  "./usr/local/sbin/modprobe"]),
        ("libnccl-dev", ["./usr/include/nccl.h"]),
    ],
)  # fmt: skip
def test_package_contents_are_root_owned(repo, pkg, paths):
    deb = next(repo.glob(f"{pkg}_*.deb"))
    listing = contents(deb)
    for p in paths:
        assert p in listing
    assert all(" root/root " in line for line in listing.splitlines())
    head = info(deb)
    assert f"Package: {pkg}" in head and "SIMULATED" in head


def test_maintainer_scripts_are_idempotent_shell(repo):
    head = info(next(repo.glob("gridready-sim-rdma_*.deb")))
    assert "postinst" in head and "prerm" in head
    for name, script in packages._maint_scripts(packages.packages()[-1]).items():
        assert script.startswith("#!/bin/sh\nset -e\n") and "|| true" in script, name
        subprocess.run(["sh", "-n"], input=script, text=True, check=True)


def test_build_is_deterministic_and_cached(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-cache"))
    again = packages.build_repo(tmp_path / "again")
    for f in repo.iterdir():
        assert (again / f.name).read_bytes() == f.read_bytes(), f.name


def test_manifest_and_nccl_tests_tarball(repo, tmp_path):
    manifest = json.loads((repo / "gridready-sim-manifest.json").read_text())
    tarball = repo / manifest["nccl_tests"]["filename"]
    assert tarball.name == "nccl-tests-2.17.6.tar.gz" and manifest["gridready_simulated"] is True
    assert hashlib.sha256(tarball.read_bytes()).hexdigest() == manifest["nccl_tests"]["sha256"]
    with tarfile.open(tarball) as tar:
        tar.extractall(tmp_path, filter="data")
    src = tmp_path / "nccl-tests-2.17.6"
    (tmp_path / "inc/include").mkdir(parents=True)
    (tmp_path / "inc/include/nccl.h").write_text("")
    bad = subprocess.run(
        ["make", "-C", str(src), "NCCL_HOME=/nonexistent"], capture_output=True, text=True, check=False
    )
    assert bad.returncode != 0
    ok = subprocess.run(["make", "-C", str(src), "MPI=1", f"NCCL_HOME={tmp_path / 'inc'}"], capture_output=True,
                        text=True, check=False)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (src / "build/all_reduce_perf").stat().st_mode & 0o111
