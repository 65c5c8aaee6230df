"""The local apt repository of SIMULATED NVIDIA packages: real package names and versions, simulated contents.

`build_repo(out_dir)` writes a flat repository (`deb [...] <url> ./`): the .debs (dpkg-deb --root-owner-group,
fixed mtimes: the same sources give the same bytes), Packages, Packages.gz, Release (the fleet signs it),
`nccl-tests-<ver>.tar.gz` (a simulated source tree whose Makefile "builds" the simulated binaries) and
`gridready-sim-manifest.json` (versions, file names, sha256). Built packages are cached by a hash of their
sources, so a repeated call only copies files. docs/simulator.md lists the packages and what they install.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from sandbox.sim import hardware

SIM_DIR = Path(__file__).resolve().parent / "sim"
LIB = "/usr/lib/gridready-sim"  # the stdlib-only simulator, importable as `gridready_sim`
EPOCH = 1767225600  # 2026-01-01T00:00:00Z: every mtime in the repository (reproducible builds)
BUILDER_VERSION = "1"
MAINTAINER = "gridready sandbox <sandbox@gridready.invalid>"
SIM_NOTE = " .\n SIMULATED by gridready's sandbox: no NVIDIA software inside; the tools print simulated output."

V = json.loads((SIM_DIR / "versions.json").read_text())
DRIVER = f"{V['driver']}-1"
# NVIDIA's repository keeps every release of a branch: an earlier one is served beside the current one, so version
# pins (`=<version>-*`) and apt's choice of the newest are exercised as on a real host.
DRIVER_PREVIOUS = V["driver_previous"]
DCGM = f"1:{V['dcgm']}-1"
NCCL = f"{V['nccl']}-1+cuda{V['cuda']}"
CTK = f"{V['container_toolkit']}-1"
SIM = f"{V['sim']}-1"
BRANCH = V["driver_branch"]
REPO_OSES = ("debian12", "ubuntu2204", "ubuntu2404")  # NVIDIA's CUDA repository names
UBUNTU_DRIVER = f"{V['driver']}-0ubuntu0.24.04.1"  # the Ubuntu archive's build of the same release
DCGM3 = "1:3.3.9"
CUDA_MAJOR = V["cuda"].split(".")[0]


def _arch() -> str:
    try:
        return subprocess.run(
            ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


ARCH = _arch()
MULTIARCH = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}.get(ARCH, f"{ARCH}-linux-gnu")


@dataclass
class Pkg:
    name: str
    version: str
    summary: str
    depends: list[str] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # absolute path -> content
    modes: dict[str, int] = field(default_factory=dict)  # path -> mode (default 0644)
    links: dict[str, str] = field(default_factory=dict)  # path -> symlink target
    units: dict[str, str] = field(default_factory=dict)  # unit file name -> text
    start_units: list[str] = field(default_factory=list)  # enabled and started by postinst (sim infrastructure)
    arch: str = "all"
    section: str = "multiverse/devel"
    conflicts: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    recommends: list[str] = field(default_factory=list)
    postinst_extra: str = ""  # shell run by postinst on configure (must be idempotent)


def _wrapper(tool: str, module: str, func: str = "main", prog: bool = False) -> bytes:
    call = f"{func}(sys.argv[1:], prog={tool!r})" if prog else f"{func}(sys.argv[1:])"
    return (
        "#!/usr/bin/python3\n"
        f"# gridready-sim: SIMULATED {tool} (package gridready-sim-common, {LIB})\n"
        "import sys\n\n"
        f"sys.path.insert(0, {LIB!r})\n"
        f"from gridready_sim.{module} import {func}\n\n"
        f"sys.exit({call})\n"
    ).encode()


def _exe(pkg: Pkg, path: str, data: bytes) -> None:
    pkg.files[path] = data
    pkg.modes[path] = 0o755


FM_PIDFILE = "/var/run/nvidia-fabricmanager/nv-fabricmanager.pid"


def _unit(desc: str, exec_start: str, *, kind: str = "simple", after: str = "network.target", extra: str = "") -> str:
    return (
        f"[Unit]\nDescription={desc} (gridready-sim: SIMULATED)\nAfter={after}\n"
        "ConditionPathExists=/etc/gridready-sim/profile.json\nStartLimitIntervalSec=0\n\n"
        f"[Service]\nType={kind}\nExecStart={exec_start}\n{extra}"
        + {"simple": "Restart=on-failure\nRestartSec=2\n", "oneshot": "RemainAfterExit=yes\n"}.get(kind, "")
        + "\n[Install]\nWantedBy=multi-user.target\n"
    )


def _sim_library() -> dict[str, bytes]:
    files = {f"{LIB}/gridready_sim/{p.name}": p.read_bytes() for p in sorted(SIM_DIR.iterdir()) if p.is_file()}
    skus = hardware.skus()
    files[f"{LIB}/gridready_sim/skus.json"] = (json.dumps(skus, indent=1, sort_keys=True) + "\n").encode()
    return files


def _persistenced(pkg: Pkg) -> None:
    _exe(pkg, "/usr/bin/nvidia-persistenced", _wrapper("nvidia-persistenced", "daemons", prog=True))
    pkg.units["nvidia-persistenced.service"] = _unit(
        "NVIDIA Persistence Daemon",
        # the distribution's unit starts the daemon without persistence mode (Ubuntu nvidia-graphics-drivers
        # packaging, debian/nvidia-persistenced.service); NVIDIA's own Ansible role overrides ExecStart
        "/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose",
        after="syslog.target", kind="forking",
        extra="PIDFile=/run/nvidia-persistenced/nvidia-persistenced.pid\n"
              "ExecStopPost=/bin/rm -rf /run/nvidia-persistenced\n",
    )


def _at_release(p: Pkg, release: str) -> Pkg:
    """`p` as built for another driver release of the same branch: every mention of the current release swapped."""
    cur = V["driver"]

    def sw(text: str) -> str:
        return text.replace(cur, release)

    return replace(
        p, version=sw(p.version), depends=[sw(d) for d in p.depends], conflicts=[sw(c) for c in p.conflicts],
        provides=[sw(x) for x in p.provides], recommends=[sw(r) for r in p.recommends],
        files={sw(k): v.replace(cur.encode(), release.encode()) for k, v in p.files.items()},
        modes={sw(k): v for k, v in p.modes.items()}, links={sw(k): sw(v) for k, v in p.links.items()},
        units={k: sw(v) for k, v in p.units.items()}, postinst_extra=sw(p.postinst_extra),
    )


def _ubuntu_driver(dep_common: str) -> list[Pkg]:
    """The driver as NVIDIA's CUDA repository for Ubuntu names it (Ubuntu's packaging, branch in every name) and
    the Ubuntu archive's -server kernel common package that its fabric manager drags in.

    Compute-only: nvidia-headless-<branch>[-open] (= nvidia-dkms-<branch>[-open], the kernel module, plus
    nvidia-headless-no-dkms-<branch>[-open]: libnvidia-compute, nvidia-compute-utils with nvidia-persistenced).
    nvidia-smi is in nvidia-utils-<branch>, which the headless set does not pull in. nvidia-driver-<branch>[-open]
    is the desktop set (GL, video decode/encode, the X driver). Sources: packages.ubuntu.com, noble-updates:
    nvidia-headless-580-open, nvidia-headless-no-dkms-580-open, nvidia-driver-580-open (depends), the virtual
    package nvidia-smi (provided by nvidia-utils-580 only) and the file list of nvidia-utils-580-server
    (/usr/bin/nvidia-smi); NVIDIA Driver Installation Guide, "Ubuntu 590 and later packages" (the same names
    without the branch from 590 on), https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
    """
    eq = f"(= {DRIVER})"
    libcompute = Pkg(f"libnvidia-compute-{BRANCH}", DRIVER, "NVIDIA libcompute package", [dep_common], arch=ARCH,
                     section="libs")  # fmt: skip
    libcompute.files["/usr/share/gridready-sim/libnvidia-compute"] = b"SIMULATED (no libcuda inside)\n"
    utils = Pkg(f"nvidia-utils-{BRANCH}", DRIVER, "NVIDIA driver support binaries (nvidia-smi)",
                [f"libnvidia-compute-{BRANCH} {eq}", dep_common], arch=ARCH, provides=["nvidia-smi"])  # fmt: skip
    _exe(utils, "/usr/bin/nvidia-smi", _wrapper("nvidia-smi", "nvidia_smi"))
    compute_utils = Pkg(f"nvidia-compute-utils-{BRANCH}", DRIVER, "NVIDIA compute utilities (persistenced, MPS)",
                        [f"libnvidia-compute-{BRANCH} {eq}", dep_common], arch=ARCH)  # fmt: skip
    _persistenced(compute_utils)

    # The kernel-side common files: nvidia-dkms-<branch>[-open] depends on nvidia-kernel-common-<branch>, and the
    # -server flavour of the Ubuntu archive ships the same files, so the two conflict. Sources: "nvidia-dkms-580"
    # (dep: nvidia-kernel-common-580), https://packages.ubuntu.com/noble-updates/nvidia-dkms-580, and
    # "nvidia-fabricmanager-580" (dep: nvidia-kernel-common-580-server-<version>, a virtual package provided by
    # nvidia-kernel-common-580-server), https://packages.ubuntu.com/noble-updates/nvidia-fabricmanager-580.
    kcommon = Pkg(f"nvidia-kernel-common-{BRANCH}", DRIVER, "Shared files used with the kernel module", [dep_common],
                  arch=ARCH, conflicts=[f"nvidia-kernel-common-{BRANCH}-server"],
                  provides=[f"nvidia-kernel-common-{BRANCH}-{V['driver']}"])  # fmt: skip
    kcommon.files["/usr/share/gridready-sim/kernel-common"] = b"open\n"
    kcommon_server = Pkg(f"nvidia-kernel-common-{BRANCH}-server", UBUNTU_DRIVER,
                         "Shared files used with the kernel module (Ubuntu archive, -server flavour)", [dep_common],
                         arch=ARCH, conflicts=[f"nvidia-kernel-common-{BRANCH}"],
                         provides=[f"nvidia-kernel-common-{BRANCH}-server-{V['driver']}"])  # fmt: skip
    kcommon_server.files["/usr/share/gridready-sim/kernel-common"] = b"server\n"

    # Desktop-only libraries: what nvidia-driver-<branch>[-open] adds to the compute set.
    desktop = [Pkg(f"{name}-{BRANCH}", DRIVER, f"{summary} (desktop component)", [dep_common], arch=ARCH)
               for name, summary in (("libnvidia-gl", "NVIDIA OpenGL/GLX/EGL/GLES GLVND libraries and Vulkan ICD"),
                                     ("libnvidia-decode", "NVIDIA Video Decoding runtime libraries"),
                                     ("libnvidia-encode", "NVENC Video Encoding runtime library"),
                                     ("xserver-xorg-video-nvidia", "NVIDIA binary Xorg driver"))]  # fmt: skip
    for d in desktop:
        d.files[f"/usr/share/gridready-sim/desktop/{d.name}"] = b"desktop component (not wanted on a compute node)\n"

    out = [libcompute, utils, compute_utils, kcommon, kcommon_server, *desktop]
    for suffix, flavour, other in (("-open", "open", ""), ("", "proprietary", "-open")):
        dkms = Pkg(f"nvidia-dkms-{BRANCH}{suffix}", DRIVER, f"NVIDIA DKMS package ({flavour} kernel module)",
                   [f"nvidia-kernel-common-{BRANCH} {eq}", dep_common], arch=ARCH,
                   conflicts=[f"nvidia-dkms-{BRANCH}{other}"], provides=["nvidia-dkms-kernel"])  # fmt: skip
        dkms.files["/usr/share/gridready-sim/kernel-module"] = f"{flavour}\n".encode()
        dkms.files["/usr/share/gridready-sim/driver-version"] = f"{V['driver']}\n".encode()
        no_dkms = Pkg(f"nvidia-headless-no-dkms-{BRANCH}{suffix}", DRIVER, "NVIDIA headless metapackage - no DKMS",
                      [f"libnvidia-compute-{BRANCH} {eq}", f"nvidia-compute-utils-{BRANCH} {eq}",
                       f"nvidia-kernel-common-{BRANCH} {eq}"], arch=ARCH)  # fmt: skip
        headless = Pkg(f"nvidia-headless-{BRANCH}{suffix}", DRIVER, "NVIDIA headless metapackage",
                       [f"nvidia-dkms-{BRANCH}{suffix} {eq}", f"nvidia-headless-no-dkms-{BRANCH}{suffix} {eq}"],
                       arch=ARCH)  # fmt: skip
        driver = Pkg(f"nvidia-driver-{BRANCH}{suffix}", DRIVER, f"NVIDIA driver metapackage ({flavour} kernel module, "
                     "desktop and compute)",
                     [f"nvidia-dkms-{BRANCH}{suffix} {eq}", f"nvidia-headless-no-dkms-{BRANCH}{suffix} {eq}",
                      f"nvidia-utils-{BRANCH} {eq}", *(f"{d.name} {eq}" for d in desktop)],
                     arch=ARCH, conflicts=[f"nvidia-driver-{BRANCH}{other}"])  # fmt: skip
        out += [dkms, no_dkms, headless, driver]
    dep_driver = f"nvidia-driver-{BRANCH}-open (= {DRIVER})"
    out += [
        Pkg(f"nvidia-open-{BRANCH}", DRIVER, "NVIDIA open driver metapackage (CUDA repository name)", [dep_driver]),
        Pkg(f"cuda-drivers-{BRANCH}", DRIVER, "CUDA driver metapackage for branch " + BRANCH, [dep_driver]),
    ]
    return out


def _debian_driver(dep_common: str) -> list[Pkg]:
    """The driver as NVIDIA's CUDA repository for Debian 12 names it: Debian's packaging, no branch in the names
    (the branch is held by nvidia-driver-pinning-<branch>). Compute-only (headless) install:
    `nvidia-driver-cuda nvidia-kernel-open-dkms` (open modules) or `nvidia-driver-cuda nvidia-kernel-dkms`
    (proprietary); `nvidia-open` / `cuda-drivers` are the full installs that add the desktop `nvidia-driver`, and the
    two kernel module flavours exclude each other. Sources: NVIDIA Driver Installation Guide, "Debian",
    https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/debian.html, and "Compute-only and Desktop
    Installation", https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/compute-only-and-desktop-installation.html
    """
    cuda = Pkg("nvidia-driver-cuda", DRIVER, "NVIDIA driver CUDA integration components (compute-only, nvidia-smi)",
               [dep_common], arch=ARCH, recommends=[f"nvidia-persistenced (= {DRIVER})"])  # fmt: skip
    _exe(cuda, "/usr/bin/nvidia-smi", _wrapper("nvidia-smi", "nvidia_smi"))
    kmods = []
    for name, flavour, other in (("nvidia-kernel-open-dkms", "open", "nvidia-kernel-dkms"),
                                 ("nvidia-kernel-dkms", "proprietary", "nvidia-kernel-open-dkms")):  # fmt: skip
        k = Pkg(name, DRIVER, f"NVIDIA kernel module DKMS source ({flavour})", [dep_common], arch=ARCH,
                conflicts=[other], provides=[f"nvidia-kernel-{V['driver']}"])  # fmt: skip
        k.files["/usr/share/gridready-sim/kernel-module"] = f"{flavour}\n".encode()
        k.files["/usr/share/gridready-sim/driver-version"] = f"{V['driver']}\n".encode()
        kmods.append(k)
    desktop = Pkg("nvidia-driver", DRIVER, "NVIDIA driver metapackage (desktop: X/Wayland drivers and libraries)",
                  [dep_common], arch=ARCH)  # fmt: skip
    desktop.files["/usr/share/gridready-sim/desktop-driver"] = b"desktop components (not wanted on a compute node)\n"
    full = [f"nvidia-driver (= {DRIVER})", f"nvidia-driver-cuda (= {DRIVER})"]
    metas = [
        Pkg("nvidia-open", DRIVER, "NVIDIA driver, open kernel modules, desktop and compute",
            [*full, f"nvidia-kernel-open-dkms (= {DRIVER})"], arch=ARCH),
        Pkg("cuda-drivers", DRIVER, "NVIDIA driver, proprietary kernel modules, desktop and compute",
            [*full, f"nvidia-kernel-dkms (= {DRIVER})"], arch=ARCH),
        Pkg(f"cuda-drivers-{BRANCH}", DRIVER, "CUDA driver metapackage for branch " + BRANCH,
            [f"cuda-drivers (= {DRIVER})"], arch=ARCH),
    ]
    return [cuda, *kmods, desktop, *metas]


NCCL_TESTS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv",
              "gather", "scatter", "hypercube")  # fmt: skip


def packages(repo_os: str = "debian12") -> list[Pkg]:
    """Every package of the repository as NVIDIA's CUDA repository for `repo_os` (debian12, ubuntu2204,
    ubuntu2404) names it; the sandbox hosts are Debian 12 and get the debian12 set."""
    if repo_os not in REPO_OSES:
        raise ValueError(f"unknown repository OS {repo_os!r} (known: {', '.join(REPO_OSES)})")
    common = Pkg(
        "gridready-sim-common",
        SIM,
        "gridready sandbox: simulated NVIDIA hardware (library, sysfs, dmesg)",
        depends=["python3 (>= 3.11)"],
        files=_sim_library(),
        start_units=["gridready-sim-sysfs.service"],
    )
    _exe(common, "/usr/bin/gridready-sim-sysfs", _wrapper("gridready-sim-sysfs", "sysfs"))
    _exe(common, "/usr/local/bin/dmesg", _wrapper("dmesg", "dmesg"))  # shadows util-linux dmesg in PATH
    # shadows pciutils' lspci in PATH: the profile's PCIe tree, not the controller's devices the container sees
    _exe(common, "/usr/local/bin/lspci", _wrapper("lspci", "lspci"))
    # shadows kmod's modprobe in PATH: decides nvidia-peermem (sim/modprobe.py), passes every other module on
    _exe(common, "/usr/local/sbin/modprobe", _wrapper("modprobe", "modprobe"))
    common.postinst_extra = "[ -f /etc/gridready-sim/profile.json ] && /usr/bin/gridready-sim-sysfs >/dev/null || true"
    common.units["gridready-sim-sysfs.service"] = _unit(
        "Write the simulated sysfs tree", "/usr/bin/gridready-sim-sysfs", kind="oneshot", after="local-fs.target"
    )
    dep_common = f"gridready-sim-common (>= {SIM})"

    persist = Pkg("nvidia-persistenced", DRIVER, "daemon to maintain persistent software state in the NVIDIA driver",
                  [dep_common], arch=ARCH)  # fmt: skip
    _persistenced(persist)

    # Debian 12: nvidia-persistenced is a package of its own; Ubuntu: a part of nvidia-compute-utils-<branch>
    drivers = [*_debian_driver(dep_common), persist] if repo_os == "debian12" else _ubuntu_driver(dep_common)
    # NVIDIA's version lock for Debian/Ubuntu: an apt preferences file that keeps every driver package on the
    # branch. NVIDIA Driver Installation Guide, "Version locking" / "Ubuntu",
    # https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/version-locking.html
    pinning = Pkg(f"nvidia-driver-pinning-{BRANCH}", DRIVER, f"apt preferences locking the driver to branch {BRANCH}")
    pinning.files[f"/etc/apt/preferences.d/nvidia-driver-pinning-{BRANCH}"] = (
        f"# gridready-sim: SIMULATED version lock of driver branch {BRANCH}\n"
        f"Package: *nvidia* *cuda-drivers* libnvidia-nscq\nPin: version {BRANCH}.*\nPin-Priority: 1000\n"
    ).encode()

    # Fabric manager and NSCQ: from branch 580 on NVIDIA's CUDA repository names them without the branch suffix
    # (nvidia-fabricmanager, libnvidia-nscq; up to 575: nvidia-fabricmanager-<branch>, libnvidia-nscq-<branch>),
    # version = the driver's. Source: NVIDIA gpu-driver-container, ubuntu22.04/install.sh (fabricmanager_install,
    # nscq_install: "-ge 580"), https://github.com/NVIDIA/gpu-driver-container/blob/main/ubuntu22.04/install.sh;
    # Fabric Manager User Guide ("the FM package version must match the driver version"),
    # https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html
    fm = Pkg("nvidia-fabricmanager", DRIVER, "Fabric Manager for NVSwitch based systems", [dep_common], arch=ARCH)
    _exe(fm, "/usr/bin/nv-fabricmanager", _wrapper("nv-fabricmanager", "daemons", prog=True))
    fm.files["/usr/share/nvidia/nvswitch/fabricmanager.cfg"] = (
        b"# gridready-sim: SIMULATED fabric manager configuration\nLOG_LEVEL=4\n"
        b"LOG_FILE_NAME=/var/log/fabricmanager.log\n"
        b"DAEMONIZE=1\nFABRIC_MODE=0\n"
    )
    fm.files["/usr/share/gridready-sim/fabricmanager-version"] = f"{V['driver']}\n".encode()
    # The package's unit: Type=forking with a PID file (DAEMONIZE=1 in fabricmanager.cfg), so `systemctl start` and
    # `restart` wait for the parent and fail when it exits 1 (a driver/FM version mismatch). Fabric Manager User
    # Guide, "Starting Fabric Manager" / "Fabric Manager Config Options" (DAEMONIZE, default 1), and the
    # nvidia-fabricmanager.service of NVIDIA's packages (Type=forking, PIDFile=/var/run/nvidia-fabricmanager/
    # nv-fabricmanager.pid), https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html
    fm.units["nvidia-fabricmanager.service"] = _unit(
        "NVIDIA fabric manager service", "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg",
        kind="forking", extra=f"PIDFile={FM_PIDFILE}\nTimeoutStartSec=240\n",
    )
    nscq = Pkg("libnvidia-nscq", DRIVER, "NVSwitch Configuration and Query library (used by DCGM on NVSwitch)",
               [dep_common], arch=ARCH, section="libs")  # fmt: skip
    nscq.files[f"/usr/lib/{MULTIARCH}/libnvidia-nscq.so.{V['driver']}"] = b"gridready-sim: SIMULATED libnvidia-nscq\n"
    fm_meta = Pkg(f"cuda-drivers-fabricmanager-{BRANCH}", DRIVER, "Meta-package for FM and Driver",
                  [f"nvidia-fabricmanager (= {DRIVER})", f"cuda-drivers-{BRANCH} (= {DRIVER})"])  # fmt: skip
    # The Ubuntu archive's fabric manager (source fabric-manager-580) keeps the suffixed name and depends on the
    # -server kernel common package, which conflicts with the open driver's (above).
    fm_ubuntu = Pkg(f"nvidia-fabricmanager-{BRANCH}", UBUNTU_DRIVER, "Fabric Manager for NVSwitch based systems "
                    "(Ubuntu archive)", [f"nvidia-kernel-common-{BRANCH}-server-{V['driver']}"], arch=ARCH)  # fmt: skip
    fm_ubuntu.files["/usr/share/doc/gridready-sim/fabricmanager-ubuntu-archive"] = b"Ubuntu archive build\n"

    # What a host may already carry: cuda-keyring (NVIDIA's keyring package writes its own source for the CUDA
    # repository, signed-by its keyring): CUDA Installation Guide for Linux, "Network Repository Installation",
    # https://docs.nvidia.com/cuda/cuda-installation-guide-linux/#network-repo-installation-for-ubuntu
    keyring = Pkg("cuda-keyring", "1.1-1", "GPG keyring for the CUDA repository")
    keyring.files["/usr/share/keyrings/cuda-archive-keyring.gpg"] = b"gridready-sim: SIMULATED keyring\n"
    keyring.files["/usr/share/gridready-sim/cuda-keyring.list.in"] = (
        b"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] @REPO@ /\n"
    )
    # DCGM 3.x: datacenter-gpu-manager ships the same programs and unit as DCGM 4's core package, so dpkg refuses
    # to unpack one over the other; the DCGM guide purges 3.x (and -config) before installing DCGM 4.
    # DCGM User Guide, "Installation", https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html
    dcgm3 = Pkg("datacenter-gpu-manager", DCGM3, "NVIDIA Datacenter GPU Management Tools (DCGM 3)", [dep_common],
                arch=ARCH, section="devel")  # fmt: skip
    _exe(dcgm3, "/usr/bin/dcgmi", _wrapper("dcgmi", "dcgmi"))
    _exe(dcgm3, "/usr/bin/nv-hostengine", _wrapper("nv-hostengine", "daemons", prog=True))
    dcgm3.units["nvidia-dcgm.service"] = _unit(
        "NVIDIA DCGM service", "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm"
    )
    dcgm3_config = Pkg("datacenter-gpu-manager-config", DCGM3, "DCGM 3 configuration files", arch="all")
    dcgm3_config.files["/etc/datacenter-gpu-manager/README.gridready-sim"] = b"DCGM 3 configuration (SIMULATED)\n"

    dcgm = Pkg("datacenter-gpu-manager-4-core", DCGM, "NVIDIA Datacenter GPU Management Tools (DCGM 4, core)",
               [dep_common], arch=ARCH, section="devel")  # fmt: skip
    _exe(dcgm, "/usr/bin/dcgmi", _wrapper("dcgmi", "dcgmi"))
    _exe(dcgm, "/usr/bin/nv-hostengine", _wrapper("nv-hostengine", "daemons", prog=True))
    dcgm.units["nvidia-dcgm.service"] = _unit(
        "NVIDIA DCGM service", "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm"
    )
    # The diagnostic plugins come with the proprietary package, a Recommends of -cuda<N>: the guide installs with
    # --install-recommends (DCGM User Guide, "Installation", link above).
    dcgm_cuda = Pkg(f"datacenter-gpu-manager-4-cuda{CUDA_MAJOR}", DCGM, f"DCGM 4 CUDA {CUDA_MAJOR} diagnostics",
                    [f"datacenter-gpu-manager-4-core (= {DCGM})"], arch=ARCH, section="devel",
                    recommends=[f"datacenter-gpu-manager-4-proprietary-cuda{CUDA_MAJOR} (= {DCGM})"])  # fmt: skip
    dcgm_prop = Pkg(f"datacenter-gpu-manager-4-proprietary-cuda{CUDA_MAJOR}", DCGM,
                    f"DCGM 4 proprietary diagnostic plugins (CUDA {CUDA_MAJOR})",
                    [f"datacenter-gpu-manager-4-core (= {DCGM})"], arch=ARCH, section="devel")  # fmt: skip
    dcgm_prop.files["/usr/share/gridready-sim/dcgm-diag-plugins"] = b"present\n"
    dcgm_cuda.files[f"/usr/libexec/datacenter-gpu-manager-4/plugins/cuda{CUDA_MAJOR}/README.gridready-sim"] = (
        b"gridready-sim: SIMULATED DCGM diagnostic plugins (dcgmi diag is simulated)\n"
    )

    lib = f"/usr/lib/{MULTIARCH}"
    nccl = Pkg("libnccl2", NCCL, "NVIDIA Collective Communication Library (NCCL) Runtime", [dep_common], arch=ARCH,
               section="libs")  # fmt: skip
    nccl.files[f"{lib}/libnccl.so.{V['nccl']}"] = b"gridready-sim: SIMULATED libnccl (not a shared object)\n"
    nccl.links[f"{lib}/libnccl.so.2"] = f"libnccl.so.{V['nccl']}"
    major, minor, patch = (int(x) for x in V["nccl"].split("."))
    nccl_dev = Pkg("libnccl-dev", NCCL, "NVIDIA Collective Communication Library (NCCL) Development Files",
                   [f"libnccl2 (= {NCCL})"], arch=ARCH, section="libdevel")  # fmt: skip
    nccl_dev.files["/usr/include/nccl.h"] = (
        "/* gridready-sim: SIMULATED NCCL header (version macros only) */\n#ifndef NCCL_H_\n#define NCCL_H_\n"
        f'#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n#define NCCL_PATCH {patch}\n#define NCCL_SUFFIX ""\n'
        f"#define NCCL_VERSION_CODE {major * 10000 + minor * 100 + patch}\n"
        "#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : \\\n"
        "  (X) * 10000 + (Y) * 100 + (Z))\n"
        "#endif\n"
    ).encode()
    nccl_dev.links[f"{lib}/libnccl.so"] = "libnccl.so.2"

    ctk_base = Pkg("nvidia-container-toolkit-base", CTK, "NVIDIA Container Toolkit Base (nvidia-ctk)", [dep_common],
                   arch=ARCH, section="utils")  # fmt: skip
    _exe(ctk_base, "/usr/bin/nvidia-ctk", _wrapper("nvidia-ctk", "daemons", prog=True))
    ctk = Pkg("nvidia-container-toolkit", CTK, "NVIDIA Container toolkit",
              [f"nvidia-container-toolkit-base (= {CTK})"], arch=ARCH, section="utils")  # fmt: skip

    rdma = Pkg("gridready-sim-rdma", SIM, "gridready sandbox: simulated ibstat, ibv_devinfo, ib_write_bw, mpirun "
               "and the fabric agent", [dep_common], start_units=["gridready-sim-fabric.service"])  # fmt: skip
    for tool in ("ibstat", "ibv_devinfo", "ib_write_bw"):
        _exe(rdma, f"/usr/local/bin/{tool}", _wrapper(tool, "ib", prog=True))  # /usr/local/bin wins in PATH
    _exe(rdma, "/usr/local/bin/mpirun", _wrapper("mpirun", "fabric", "mpirun_main"))
    _exe(rdma, "/usr/bin/gridready-sim-fabric", _wrapper("gridready-sim-fabric", "fabric", "agent_main"))
    rdma.units["gridready-sim-fabric.service"] = _unit(
        "gridready simulated fabric agent (port 18515 on the host's 10.77.0.x address)",
        "/usr/bin/gridready-sim-fabric",
        after="network-online.target",
        extra="RestartPreventExitStatus=2\n",
    )

    ubuntu_only = [fm_ubuntu] if repo_os != "debian12" else []
    release_bound = [*drivers, pinning, fm, nscq, fm_meta]  # everything built at the driver's version
    previous = [_at_release(p, DRIVER_PREVIOUS) for p in release_bound if p.version == DRIVER]
    return [common, *release_bound, *previous, *ubuntu_only, keyring, dcgm3, dcgm3_config, dcgm,
            dcgm_cuda, dcgm_prop, nccl, nccl_dev, ctk_base, ctk, rdma]


# ---- building ----------------------------------------------------------------------------------------------------


def _maint_scripts(p: Pkg) -> dict[str, str]:
    """postinst/prerm/postrm: daemon-reload when systemd runs; start only the simulator's own units. Idempotent."""
    if not p.units:
        return {}
    running = "if [ -d /run/systemd/system ]; then"
    post = ["#!/bin/sh", "set -e", f"{running} systemctl daemon-reload >/dev/null 2>&1 || true; fi"]
    for u in p.start_units:
        post += [
            'if [ "$1" = "configure" ]; then',
            f"  systemctl enable {u} >/dev/null 2>&1 || true",
            f"  {running} systemctl restart {u} >/dev/null 2>&1 || true; fi",
            "fi",
        ]
    if p.postinst_extra:
        post += ['if [ "$1" = "configure" ]; then', f"  {p.postinst_extra}", "fi"]
    units = " ".join(p.units)
    prerm = ["#!/bin/sh", "set -e", 'if [ "$1" = "remove" ] && [ -d /run/systemd/system ]; then',
             f"  systemctl stop {units} >/dev/null 2>&1 || true", "fi"]  # fmt: skip
    postrm = ["#!/bin/sh", "set -e", 'if [ "$1" = "purge" ] || [ "$1" = "remove" ]; then',
              f"  for u in {units}; do systemctl disable \"$u\" >/dev/null 2>&1 || true; done",
              f"  {running} systemctl daemon-reload >/dev/null 2>&1 || true; fi", "fi"]  # fmt: skip
    return {"postinst": "\n".join(post) + "\n", "prerm": "\n".join(prerm) + "\n", "postrm": "\n".join(postrm) + "\n"}


def _all_files(p: Pkg) -> dict[str, bytes]:
    files = dict(p.files)
    for name, text in p.units.items():
        files[f"/lib/systemd/system/{name}"] = text.encode()
    doc = f"/usr/share/doc/{p.name}/README.gridready-sim"
    files[doc] = f"{p.name} {p.version}: SIMULATED by gridready's sandbox (sandbox/packages.py).\n".encode()
    return files


def control(p: Pkg, installed_kib: int) -> str:
    lines = [
        f"Package: {p.name}",
        f"Version: {p.version}",
        f"Architecture: {p.arch}",
        f"Maintainer: {MAINTAINER}",
        f"Installed-Size: {installed_kib}",
    ]
    if p.depends:
        lines.append("Depends: " + ", ".join(p.depends))
    if p.recommends:
        lines.append("Recommends: " + ", ".join(p.recommends))
    if p.conflicts:
        lines.append("Conflicts: " + ", ".join(p.conflicts))
    if p.provides:
        lines.append("Provides: " + ", ".join(p.provides))
    lines += [f"Section: {p.section}", "Priority: optional", f"Description: {p.summary} (SIMULATED)"]
    return "\n".join(lines) + "\n" + SIM_NOTE + "\n"


def deb_name(p: Pkg) -> str:
    return f"{p.name}_{p.version.split(':')[-1]}_{p.arch}.deb"


def _stamp(root: Path) -> None:
    for path in [*sorted(root.rglob("*"), reverse=True), root]:
        os.utime(path, (EPOCH, EPOCH), follow_symlinks=False)


def build_deb(p: Pkg, out_dir: Path) -> tuple[Path, str]:
    """Build one .deb with dpkg-deb; returns (path, control text as built)."""
    files = _all_files(p)
    size = sum(len(b) for b in files.values())
    text = control(p, max(1, (size + 1023) // 1024))
    with tempfile.TemporaryDirectory(prefix="gridready-deb-") as tmp:
        root = Path(tmp) / "root"
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN/control").write_text(text)
        for name, script in _maint_scripts(p).items():
            (root / "DEBIAN" / name).write_text(script)
            (root / "DEBIAN" / name).chmod(0o755)
        for path, data in files.items():
            dest = root / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            dest.chmod(p.modes.get(path, 0o644))
        for path, target in p.links.items():
            dest = root / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(target)
        for d in [root, *root.rglob("*")]:
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o755)
        _stamp(root)
        deb = out_dir / deb_name(p)
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(EPOCH)}
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(deb)],
            check=True, capture_output=True, env=env,
        )  # fmt: skip
    return deb, text


def nccl_tests_tarball(out_dir: Path) -> Path:
    """A simulated nccl-tests source tree: `make MPI=1 ...` writes the simulated binaries into ./build."""
    ver = V["nccl_tests"]
    top = f"nccl-tests-{ver}"
    names = " ".join(f"{n}_perf" for n in NCCL_TESTS)
    makefile = f"""# gridready-sim: SIMULATED nccl-tests {ver} (real upstream version number; contents simulated)
# Variables as upstream: CUDA_HOME, NCCL_HOME, MPI, MPI_HOME, BUILDDIR. No compiler is needed.
BUILDDIR ?= build
NCCL_HOME ?= /usr
MPI ?= 0
BINS := {names}

.PHONY: all build clean
all: build
build:
\t@test -f $(NCCL_HOME)/include/nccl.h || {{ echo "no $(NCCL_HOME)/include/nccl.h: install libnccl-dev"; exit 2; }}
\t@test "$(MPI)" = "0" || command -v mpirun >/dev/null || echo "warning: MPI=1, no mpirun in PATH"
\t@mkdir -p $(BUILDDIR)
\t@for b in $(BINS); do sed "s/@PROG@/$$b/" src/wrapper.in > $(BUILDDIR)/$$b && chmod 755 $(BUILDDIR)/$$b; done
\t@echo "gridready-sim: built simulated $(BINS) in $(BUILDDIR) (MPI=$(MPI))"
clean:
\trm -rf $(BUILDDIR)
"""
    wrapper = (
        "#!/usr/bin/python3\n# gridready-sim: SIMULATED nccl-tests binary @PROG@ (needs gridready-sim-common)\n"
        f"import sys\n\nsys.path.insert(0, {LIB!r})\nfrom gridready_sim.nccl_tests import main\n\n"
        'sys.exit(main(sys.argv[1:], prog="@PROG@"))\n'
    )
    readme = f"nccl-tests {ver} (SIMULATED by gridready's sandbox). `make MPI=1 MPI_HOME=... NCCL_HOME=...`\n"
    members = {"Makefile": makefile, "src/wrapper.in": wrapper, "README.gridready-sim": readme, "LICENSE.txt": "BSD\n"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for d in (top, f"{top}/src"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            tar.addfile(info)
        for name, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime, info.uname, info.gname = len(data), 0o644, EPOCH, "root", "root"
            tar.addfile(info, io.BytesIO(data))
    path = out_dir / f"{top}.tar.gz"
    with path.open("wb") as f, gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
        gz.write(buf.getvalue())
    return path


def _digests(data: bytes) -> dict[str, str]:
    return {"MD5sum": hashlib.md5(data).hexdigest(), "SHA1": hashlib.sha1(data).hexdigest(),
            "SHA256": hashlib.sha256(data).hexdigest()}  # fmt: skip


# Release Origin/Label as the real repositories publish them, which apt preferences match: NVIDIA's CUDA
# repository is "NVIDIA"/"NVIDIA CUDA" (cuda-keyring's /etc/apt/preferences.d/cuda-repository-pin-600 pins
# `release l=NVIDIA CUDA` at 600); Docker's is "Docker"/"Docker CE" (download.docker.com/linux/debian/dists/*/Release)
NVIDIA_RELEASE = ("NVIDIA", "NVIDIA CUDA")
DOCKER_RELEASE = ("Docker", "Docker CE")


def write_index(out_dir: Path, built: list[tuple[Path, str]], release_of: tuple[str, str] = NVIDIA_RELEASE) -> None:
    """Packages, Packages.gz and Release of a flat repository, from the control files we wrote."""
    stanzas = []
    for deb, text in sorted(built, key=lambda b: b[0].name):
        data = deb.read_bytes()
        head, _, desc = text.partition("Description:")
        fields = head + f"Filename: ./{deb.name}\nSize: {len(data)}\n"
        fields += "".join(f"{k}: {v}\n" for k, v in _digests(data).items())
        stanzas.append(fields + "Description:" + desc.rstrip("\n"))
    packages = ("\n\n".join(stanzas) + "\n").encode()
    (out_dir / "Packages").write_bytes(packages)
    (out_dir / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    release = [
        f"Origin: {release_of[0]}",
        f"Label: {release_of[1]}",
        "Suite: sandbox",
        "Codename: sandbox",
        f"Architectures: {ARCH} all",
        "Date: Thu, 01 Jan 2026 00:00:00 UTC",
        "Description: SIMULATED NVIDIA driver/DCGM/NCCL stack for the gridready sandbox fleet",
    ]
    for algo in ("MD5Sum", "SHA1", "SHA256"):
        release.append(f"{algo}:")
        for name in ("Packages", "Packages.gz"):
            data = (out_dir / name).read_bytes()
            digest = {"MD5Sum": hashlib.md5, "SHA1": hashlib.sha1, "SHA256": hashlib.sha256}[algo](data).hexdigest()
            release.append(f" {digest} {len(data):>16} {name}")
    (out_dir / "Release").write_text("\n".join(release) + "\n")


def sources_hash(repo_os: str = "debian12") -> str:
    """Hash of everything a build depends on (package specs, simulator files and their hardware facts)."""
    h = hashlib.sha256(f"builder-{BUILDER_VERSION}/{ARCH}/{repo_os}".encode())
    for p in packages(repo_os):
        spec = (p.name, p.version, p.depends, p.units, p.links, p.modes, p.start_units, p.arch, p.postinst_extra,
                p.conflicts, p.provides, p.recommends)
        h.update(repr(spec).encode())
        for path, data in sorted(p.files.items()):
            h.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gridready-sim-repo"


def build_repo(out_dir: Path, repo_os: str = "debian12") -> Path:
    """Build (or copy from the cache) the flat repository of `repo_os` into out_dir; returns out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = sources_hash(repo_os)
    pkgs = packages(repo_os)
    cache = _cache_root() / key[:24]
    if not (cache / ".complete").exists():
        tmp = cache.with_name(cache.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        built = [build_deb(p, tmp) for p in pkgs]
        write_index(tmp, built)
        tarball = nccl_tests_tarball(tmp)
        manifest = {
            "gridready_simulated": True,
            "sources_hash": key,
            "repo_os": repo_os,
            "versions": V,
            "arch": ARCH,
            "apt_line": "deb [signed-by=<keyring>] http://10.77.0.1:8088/nvidia ./",
            "packages": [
                {
                    "name": p.name,
                    "version": p.version,
                    "filename": deb.name,
                    "sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
                    "units": sorted(p.units),
                }
                for p, (deb, _) in zip(pkgs, built, strict=True)
            ],
            "nccl_tests": {
                "version": V["nccl_tests"],
                "filename": tarball.name,
                "sha256": hashlib.sha256(tarball.read_bytes()).hexdigest(),
                "build": "make MPI=1 MPI_HOME=/usr NCCL_HOME=/usr CUDA_HOME=/usr/local/cuda",
            },
        }
        (tmp / "gridready-sim-manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (tmp / ".complete").write_text(key + "\n")
        shutil.rmtree(cache, ignore_errors=True)
        tmp.rename(cache)
    for f in cache.iterdir():
        if f.name != ".complete":
            shutil.copy2(f, out_dir / f.name)
    return out_dir


# ---- the simulated Docker Engine repository (download.docker.com/linux/<distro> under the sandbox) ---------------

# Docker's packages of the Debian/Ubuntu repository: docker-ce, docker-ce-cli, containerd.io ("Install using the apt
# repository", https://docs.docker.com/engine/install/debian/); versions carry Docker's epoch 5 and the distro suffix.
DOCKER = f"5:{V['docker']}-1~debian.12~bookworm"
CONTAINERD = f"{V['containerd']}-1~debian.12~bookworm"
DOCKER_NOTE = "SIMULATED by gridready's sandbox: no Docker Engine inside; containers are the image's command in a " \
              "private mount namespace"


DOCKER_LIB = "/usr/lib/gridready-sim-docker"  # shipped once, by docker-ce-cli (docker-ce depends on it)


def _docker_wrapper(tool: str) -> bytes:
    return (
        "#!/usr/bin/python3\n"
        f"# gridready-sim: SIMULATED {tool} (package docker-ce-cli, {DOCKER_LIB})\n"
        "import sys\n\n"
        f"sys.path.insert(0, {DOCKER_LIB!r})\n"
        "from gridready_sim.docker import main\n\n"
        f"sys.exit(main(sys.argv[1:], prog={tool!r}))\n"
    ).encode()


CONTAINERD_SCRIPT = b"""#!/usr/bin/python3
# gridready-sim: SIMULATED containerd (package containerd.io): the simulated dockerd needs nothing from it; it runs
# so that its unit is active, as docker.service expects.
import signal
import sys
import threading

if "--version" in sys.argv[1:] or sys.argv[1:2] == ["-v"]:
    print("containerd containerd.io 1.7.28 gridready-sim (SIMULATED)")
    sys.exit(0)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
print("SIMULATED containerd (gridready-sim): serving nothing", flush=True)
while not stop.wait(3600):
    pass
"""


def docker_packages() -> list[Pkg]:
    containerd = Pkg("containerd.io", CONTAINERD, "An open and reliable container runtime", arch=ARCH,
                     section="devel", provides=["containerd", "runc"], conflicts=["containerd", "runc"],
                     start_units=["containerd.service"])  # fmt: skip
    _exe(containerd, "/usr/bin/containerd", CONTAINERD_SCRIPT)
    containerd.units["containerd.service"] = _unit("containerd container runtime", "/usr/bin/containerd",
                                                   after="network.target local-fs.target")
    cli = Pkg("docker-ce-cli", DOCKER, "Docker CLI: the open-source application container engine", arch=ARCH,
              section="admin", conflicts=["docker.io"])  # fmt: skip
    for n in ("__init__.py", "docker.py"):
        cli.files[f"{DOCKER_LIB}/gridready_sim/{n}"] = (SIM_DIR / n).read_bytes()
    _exe(cli, "/usr/bin/docker", _docker_wrapper("docker"))
    ce = Pkg("docker-ce", DOCKER, "Docker: the open-source application container engine",
             [f"containerd.io (>= {V['containerd']})", f"docker-ce-cli (= {DOCKER})"], arch=ARCH, section="admin",
             conflicts=["docker.io"], start_units=["docker.service"])  # fmt: skip
    _exe(ce, "/usr/bin/dockerd", _docker_wrapper("dockerd"))
    # (the real docker-ce also depends on iptables for its bridge network; the simulated dockerd makes none)
    # docker-ce's docker.service: dockerd -H fd:// --containerd=/run/containerd/containerd.sock, after containerd
    # (moby contrib/init/systemd/docker.service)
    ce.units["docker.service"] = _unit(
        "Docker Application Container Engine",
        "/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock",
        after="network-online.target containerd.service", extra="ExecReload=/bin/kill -s HUP $MAINPID\n")
    return [containerd, cli, ce]


def build_docker_repo(out_dir: Path) -> Path:
    """The flat repository of the simulated Docker packages (Packages, Release) in out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built = [build_deb(p, out_dir) for p in docker_packages()]
    write_index(out_dir, built, DOCKER_RELEASE)
    text = (out_dir / "Release").read_text()
    text = text.replace("SIMULATED NVIDIA driver/DCGM/NCCL stack", "SIMULATED Docker Engine (docker-ce)")
    (out_dir / "Release").write_text(text)
    return out_dir
