"""The sandbox hosts' Python package index: a PEP 503 "simple" repository on the bridge (served with the NVIDIA
repository at http://10.77.0.1:8088/pypi/simple/), read by the hosts' pip like any customer's mirror
(`software.python_index` in cluster.yml). The roles install from it exactly what they install on a real host:

- real wheels, mirrored: what the roles pin that runs without a GPU (Ray, with its [default] extras), downloaded
  once by the controller's pip from PyPI for each of the hosts' interpreters (Debian 12: CPython 3.11, Debian 13:
  CPython 3.13, x86_64) and cached;
- SIMULATED wheels under the real names and pinned versions of what needs a GPU: `vllm` (console script
  `vllm = vllm.entrypoints.cli.main:main`, vLLM's own entry point in its setup.py), `sglang` (`python -m
  sglang.launch_server`, docs/advanced_features/server_arguments.md), `huggingface_hub` (console script
  `hf = huggingface_hub.cli.hf:main`, huggingface_hub's setup.py since 1.0) and `torch` (the probe runtime, one
  wheel per release in the version matrix's probe_torch table). Each carries gridready's simulated engine
  (sandbox/engine, stdlib only), Hub client or torch stand-in, says SIMULATED in its metadata, and takes the real
  program's command line.

PEP 503 (https://peps.python.org/pep-0503/): one page per normalized project name, each link to a file with its
`#sha256=` fragment, which pip checks on download.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gridready.serving.sglang import versions as sglang_versions
from gridready.spec.serving import RAY_VERSION, VLLM_VERSION
from sandbox import paths

ENGINE_DIR = Path(__file__).resolve().parent / "engine"
REPO_ROOT = Path(__file__).resolve().parents[1]
INDEX_VERSION = 1  # bump when the layout or a wheel's content rules change
# the hosts' python3 per release (dists/<suite>/main/binary-amd64/Packages: python3 3.11.2-1+b1 in bookworm,
# 3.13.5-1 in trixie): the mirror holds Ray's wheels for each
HOST_PYTHONS = (("3.11", "cp311"), ("3.13", "cp313"))
HOST_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "linux_x86_64")
ZIP_TIME = (2026, 1, 1, 0, 0, 0)  # reproducible wheels: same content, same digest


def hf_pin() -> str:
    """huggingface_hub's pinned version, as the model-weights role pins it (its `huggingface_hub==X` default)."""
    defaults = yaml.safe_load((REPO_ROOT / "roles/gridready_model_weights/defaults/main.yml").read_text())
    spec = str(defaults["gridready_model_weights_pip_spec"])
    return spec.split("==", 1)[1]


def real_requirements() -> list[str]:
    """What the roles pin that runs on a CPU: mirrored from PyPI, not simulated."""
    return [f"ray[default]=={RAY_VERSION}"]


@dataclass
class SimWheel:
    name: str  # distribution name, as the project spells it
    version: str
    package: str  # top-level import package
    modules: dict[str, str] = field(default_factory=dict)  # path inside the package -> source
    entry_points: dict[str, str] = field(default_factory=dict)  # console script -> module:function
    with_engine: bool = True  # carries the simulated engine as <package>/_sim_engine


VLLM_CLI = '''"""SIMULATED `vllm` command (gridready sandbox): `vllm serve <model> [vLLM's flags]` runs gridready's
simulated engine (sandbox/engine/entry.py) with vLLM's arguments."""

import sys

from vllm._sim_engine.entry import vllm_main as main

if __name__ == "__main__":
    sys.exit(main())
'''

SGLANG_LAUNCH = '''"""SIMULATED `python -m sglang.launch_server` (gridready sandbox): gridready's simulated engine in
SGLang's mode."""

import sys

from sglang._sim_engine.entry import sglang_main

if __name__ == "__main__":
    sys.exit(sglang_main())
'''

HF_CLI = '''"""SIMULATED `hf` command (gridready sandbox): `hf download <repo> --revision R --cache-dir D` into
huggingface_hub's cache layout from the simulated Hub (no weights inside)."""

import sys

from huggingface_hub._sim_hub import main as hub_main


def main():
    return hub_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
'''


# SIMULATED torch: the torch API surface gridready's probe uses (gridready/probe/torch_bench.py), answering as torch
# does on the sandbox host's simulated GPUs (sandbox/torch_sim.py, carried as torch/_sim.py: devices from the host's
# hardware profile, tensors without data, operations that take the time recorded on a real H200).
# torch.version.cuda is the CUDA runtime of the wheel (the matrix's probe_torch row); torch.__config__.show() says
# SIMULATED with the simulator's marker. The real wheel also requires its nvidia-*-cu12 runtime wheels, filelock,
# sympy, networkx, jinja2, fsspec and triton; the stand-in needs none of them.
TORCH_SIM = Path(__file__).resolve().parent / "torch_sim.py"
TORCH_INIT = '''"""SIMULATED torch {version} (gridready sandbox): no GPU compute; the CUDA devices are the host's
simulated GPUs and every operation takes a time modeled on recorded H200 figures (torch/_sim.py)."""

from torch import __config__, cuda, version
from torch._sim import (
    FP8, Device, OutOfMemoryError, Tensor, _scaled_mm, bfloat16, device, dtype, empty, empty_like, float8_e4m3fn,
    float8_e5m2, float16, float32, int64, matmul, mm, randn, tensor, uint8, zeros,
)

__version__ = "{version}"
float = float32  # noqa: A001 - torch.float
half = float16
long = int64
__all__ = ["FP8", "Device", "OutOfMemoryError", "Tensor", "__config__", "_scaled_mm", "bfloat16", "cuda", "device",
           "dtype", "empty", "empty_like", "float", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "half",
           "int64", "long", "matmul", "mm", "randn", "tensor", "uint8", "version", "zeros"]
'''
TORCH_VERSION = '''"""SIMULATED torch.version: the CUDA runtime the real wheel carries."""

__version__ = "{version}"
cuda = "{cuda}"
'''
TORCH_CONFIG = '''"""SIMULATED torch.__config__: show() describes the build and says SIMULATED (gridready-sim
marker)."""

from torch import _sim, version


def show():
    return _sim.config_show(version.__version__, version.cuda)
'''
TORCH_CUDA = '''"""SIMULATED torch.cuda: the host's simulated GPUs (torch/_sim.py)."""

from torch._sim import (
    Event, OutOfMemoryError, can_device_access_peer, current_device, device_count, empty_cache, get_device_name,
    is_available, set_device, synchronize,
)
from torch._sim import device_context as device

__all__ = ["Event", "OutOfMemoryError", "can_device_access_peer", "current_device", "device", "device_count",
           "empty_cache", "get_device_name", "is_available", "set_device", "synchronize"]
'''


def torch_modules(version: str, cuda: str) -> dict[str, str]:
    """The stand-in torch package's files (path inside the package -> source)."""
    return {
        "__init__.py": TORCH_INIT.format(version=version),
        "version.py": TORCH_VERSION.format(version=version, cuda=cuda),
        "__config__.py": TORCH_CONFIG,
        "_sim.py": TORCH_SIM.read_text(),
        "cuda/__init__.py": TORCH_CUDA,
    }


def torch_wheels() -> list[SimWheel]:
    rows = yaml.safe_load((REPO_ROOT / "gridready/data/version_matrix.yml").read_text())["probe_torch"]
    return [SimWheel("torch", version, "torch", torch_modules(version, row["cuda"]), with_engine=False)
            for version, row in rows.items()]


def _init(name: str, version: str) -> str:
    return (f'"""SIMULATED {name} {version}: gridready\'s sandbox stand-in (no GPU, no model weights); it takes the '
            f'real program\'s command line and says SIMULATED in what it serves."""\n\n__version__ = "{version}"\n')


def sim_wheels() -> list[SimWheel]:
    sglang_version = sglang_versions.pin().version
    hf_version = hf_pin()
    return [
        SimWheel("vllm", VLLM_VERSION, "vllm", {
            "__init__.py": _init("vLLM", VLLM_VERSION),
            "entrypoints/__init__.py": "", "entrypoints/cli/__init__.py": "", "entrypoints/cli/main.py": VLLM_CLI,
        }, {"vllm": "vllm.entrypoints.cli.main:main"}),
        SimWheel("sglang", sglang_version, "sglang", {
            "__init__.py": _init("SGLang", sglang_version), "launch_server.py": SGLANG_LAUNCH,
        }),
        SimWheel("huggingface_hub", hf_version, "huggingface_hub", {
            "__init__.py": _init("huggingface_hub", hf_version),
            "_sim_hub.py": (ENGINE_DIR / "hub.py").read_text(),
            "cli/__init__.py": "", "cli/hf.py": HF_CLI,
        }, {"hf": "huggingface_hub.cli.hf:main"}, with_engine=False),
        *torch_wheels(),
    ]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(w: SimWheel, out_dir: Path) -> Path:
    """A py3-none-any wheel (PEP 427: dist-info with METADATA, WHEEL, entry_points.txt and RECORD)."""
    files: dict[str, bytes] = {f"{w.package}/{rel}": src.encode() for rel, src in w.modules.items()}
    if w.with_engine:
        for src in sorted(ENGINE_DIR.glob("*.py")):
            files[f"{w.package}/_sim_engine/{src.name}"] = src.read_bytes()
        flags = REPO_ROOT / "gridready" / "data" / "engine_cli" / f"{w.name}-{w.version}.json"
        if flags.exists():  # the real release's options: the simulated program refuses any other
            files[f"{w.package}/_sim_engine/engine_cli.json"] = flags.read_bytes()
    dist = f"{w.name}-{w.version}.dist-info"
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {w.name}\nVersion: {w.version}\n"
        f"Summary: SIMULATED {w.name} for gridready's sandbox fleet (no GPU compute; sandbox/pypi.py)\n"
        "Requires-Python: >=3.9\n").encode()
    files[f"{dist}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: gridready-sandbox\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    if w.entry_points:
        lines = ["[console_scripts]", *(f"{k} = {v}" for k, v in sorted(w.entry_points.items()))]
        files[f"{dist}/entry_points.txt"] = ("\n".join(lines) + "\n").encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in sorted(files.items())]
    files[f"{dist}/RECORD"] = ("\n".join([*record, f"{dist}/RECORD,,"]) + "\n").encode()
    path = out_dir / f"{w.name}-{w.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_of(filename: str) -> str:
    """The normalized project of a wheel or sdist file name (PEP 427: the name is the part before the version)."""
    return normalize(filename.split("-", 1)[0])


def write_index(files_dir: Path, simple_dir: Path) -> None:
    projects: dict[str, list[Path]] = {}
    for f in sorted(files_dir.iterdir()):
        if f.suffix == ".whl" or f.name.endswith(".tar.gz"):
            projects.setdefault(project_of(f.name), []).append(f)
    simple_dir.mkdir(parents=True, exist_ok=True)
    root = ["<!DOCTYPE html><html><body>"]
    for project, found in sorted(projects.items()):
        root.append(f'<a href="{project}/">{project}</a><br>')
        links = [f'<a href="../../files/{html.escape(f.name)}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
                 f"{html.escape(f.name)}</a><br>" for f in found]
        (simple_dir / project).mkdir(exist_ok=True)
        (simple_dir / project / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (simple_dir / "index.html").write_text("\n".join([*root, "</body></html>"]) + "\n")


def sources_hash() -> str:
    h = hashlib.sha256(f"pypi-v{INDEX_VERSION}".encode())
    for w in sim_wheels():
        h.update(f"{w.name}={w.version}".encode())
    for f in [Path(__file__), TORCH_SIM, REPO_ROOT / "gridready/data/version_matrix.yml",
              *sorted(ENGINE_DIR.glob("*.py")),
              *sorted((REPO_ROOT / "gridready/data/engine_cli").glob("*.json"))]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update("\n".join(real_requirements()).encode())
    h.update(repr(HOST_PYTHONS).encode())
    return h.hexdigest()[:16]


def download_real(dest: Path) -> None:
    """The real wheels the hosts need, for each of their interpreters (HOST_PYTHONS), by the controller's pip
    (cached per interpreter and requirements); a pure wheel two interpreters share is linked once."""
    for python in HOST_PYTHONS:
        for f in _download_for(python).iterdir():
            if not f.name.startswith(".") and not (dest / f.name).exists():
                os.link(f, dest / f.name) if f.stat().st_dev == dest.stat().st_dev else shutil.copy(f, dest / f.name)


def _download_for(python: tuple[str, str]) -> Path:
    key = hashlib.sha256("\n".join([*real_requirements(), *python, *HOST_PLATFORMS]).encode()).hexdigest()[:16]
    cache = paths.cache_dir() / "pypi-real" / key
    if not (cache / ".complete").exists():
        tmp = cache.with_name(f"{key}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        platforms = [a for p in HOST_PLATFORMS for a in ("--platform", p)]
        res = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                              "--only-binary=:all:", "--python-version", python[0], "--implementation", "cp",
                              "--abi", python[1], *platforms, "-d", str(tmp), *real_requirements()],
                             check=False, capture_output=True, text=True)
        if res.returncode:
            tail = [line for line in res.stderr.splitlines() if "is ignored" not in line][-3:]
            raise OSError(f"pip download {' '.join(real_requirements())}: exit {res.returncode}: {' | '.join(tail)}")
        (tmp / ".complete").write_text("\n".join(real_requirements()) + "\n")
        shutil.rmtree(cache, ignore_errors=True)
        tmp.rename(cache)
    return cache


def build_index(out: Path) -> Path:
    """`out/files/*` and `out/simple/**/index.html`; returns `out`."""
    files = out / "files"
    files.mkdir(parents=True, exist_ok=True)
    download_real(files)
    for w in sim_wheels():
        build_wheel(w, files)
    write_index(files, out / "simple")
    return out


def refresh(www: Path) -> Path:
    """Build the index for the current sources once (cached by their hash) and publish it as www/pypi."""
    key = sources_hash()
    base = paths.cache_dir() / "pypi"
    built = base / key
    if not (built / ".published").exists():
        tmp = base / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        build_index(tmp)
        (tmp / ".published").write_text(".\n")
        shutil.rmtree(built, ignore_errors=True)
        tmp.rename(built)
    www.mkdir(parents=True, exist_ok=True)
    link = www / "pypi"
    tmp_link = www / f".pypi-{os.getpid()}"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(built)
    tmp_link.replace(link)
    return built
