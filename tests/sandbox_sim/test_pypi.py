"""The sandbox's Python package index (sandbox/pypi.py): SIMULATED wheels under the real names, pinned versions
and console scripts, installed by pip from a PEP 503 index as a role installs them on a host."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gridready.serving.sglang import versions as sglang_versions
from gridready.spec.serving import VLLM_VERSION
from sandbox import pypi


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pypi")
    (out / "files").mkdir()
    for w in pypi.sim_wheels():
        pypi.build_wheel(w, out / "files")
    pypi.write_index(out / "files", out / "simple")
    return out


@pytest.fixture(scope="module")
def venv(index, tmp_path_factory) -> Path:
    """A venv with the three simulated packages, installed by pip from the index (file://, no network)."""
    env = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    specs = [f"vllm=={VLLM_VERSION}", sglang_versions.pin().pip_spec, f"huggingface_hub=={pypi.hf_pin()}"]
    subprocess.run([str(env / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", "--index-url", (index / "simple").as_uri(), *specs], check=True,
                   capture_output=True)
    return env


def test_wheels_are_reproducible_and_the_index_carries_their_digests(index, tmp_path):
    again = tmp_path / "again"
    again.mkdir()
    for w in pypi.sim_wheels():
        first = index / "files" / pypi.build_wheel(w, again).name
        assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256((again / first.name).read_bytes()).digest()
    page = (index / "simple" / "huggingface-hub" / "index.html").read_text()  # PEP 503 normalized name
    (link,) = re.findall(r'href="([^"]+)"', page)
    name, digest = link.rsplit("/", 1)[1].split("#sha256=")
    assert hashlib.sha256((index / "files" / name).read_bytes()).hexdigest() == digest


def test_every_wheel_says_it_is_simulated_and_records_its_files(index):
    for whl in sorted((index / "files").glob("*.whl")):
        with zipfile.ZipFile(whl) as zf:
            dist = next(n.split("/")[0] for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            assert "Summary: SIMULATED" in zf.read(f"{dist}/METADATA").decode()
            recorded = {line.split(",")[0] for line in zf.read(f"{dist}/RECORD").decode().splitlines()}
            assert recorded == set(zf.namelist())


def test_pip_installs_the_pinned_versions_with_the_real_console_scripts(venv):
    out = subprocess.run([str(venv / "bin/python"), "-c", "import importlib.metadata as m; "
                          "print(m.version('vllm'), m.version('sglang'), m.version('huggingface_hub'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [VLLM_VERSION, sglang_versions.pin().version, pypi.hf_pin()]
    assert (venv / "bin/vllm").exists() and (venv / "bin/hf").exists()


def test_vllm_refuses_what_is_not_serve_as_its_argparse_does(venv):
    res = subprocess.run([str(venv / "bin/vllm"), "server", "m"], capture_output=True, text=True)
    assert res.returncode == 2 and "invalid choice: 'server'" in res.stderr


def test_sglang_launch_server_runs_as_a_module(venv):
    res = subprocess.run([str(venv / "bin/python"), "-m", "sglang.launch_server", "--help"],
                         capture_output=True, text=True)
    assert res.returncode == 0 and "SIMULATED" in res.stdout


def test_hf_downloads_into_the_hub_cache_layout(venv, tmp_path):
    repo, rev = "meta-llama/Llama-3.1-8B-Instruct", "0e9e39f249a16976918f6564b8830bc894c89659"
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "hf_" + "x" * 34}
    res = subprocess.run([str(venv / "bin/hf"), "download", repo, "--revision", rev, "--cache-dir", str(tmp_path)],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "models--meta-llama--Llama-3.1-8B-Instruct" / "snapshots" / rev).is_dir()
    denied = subprocess.run([str(venv / "bin/hf"), "download", repo, "--revision", rev, "--cache-dir",
                             str(tmp_path / "other")], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert denied.returncode != 0 and "GatedRepoError" in denied.stderr  # gated without a token, as the Hub
