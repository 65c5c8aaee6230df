"""Package sources for the sandbox hosts, shared by every fleet and bound to the bridge address only.

- apt-cacher-ng on 10.77.0.1:3142 for Debian packages (the hosts' apt proxy; a warm cache makes reruns offline):
  unpacked from its .deb (`apt-get download` + `dpkg-deb -x`) into the cache dir, never installed.
- a static HTTP server on 10.77.0.1:8088 serving `nvidia/`, the flat repository of simulated NVIDIA packages that
  `sandbox.packages.build_repo(out_dir)` builds (an empty repository until that module exists), signed
  with a sandbox-only gpg key made once per cache dir and served at `keys/gridready-sandbox-archive-keyring.gpg`
  (binary) and `.asc` (armored, the form Docker's documentation installs as /etc/apt/keyrings/docker.asc);
  beside it `docker/`, the flat repository of the simulated Docker Engine (`sandbox.packages.build_docker_repo`,
  signed with the same key), and `v2/`, the sandbox's container registry (`sandbox.images`: the SIMULATED Triton
  images under their real references, Registry HTTP API V2 layout), and `pypi/simple/`, the hosts'
  Python package index (sandbox/pypi.py).
The first fleet starts them, the last one down stops them (saved PIDs, under the allocator lock).
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gridready.errors import GridreadyError
from sandbox import images, packages, paths, proc, pypi
from sandbox.proc import run

ACNG_DEBS = ("apt-cacher-ng", "libevent-pthreads-2.1-7", "libc-ares2", "libwrap0")
KEY_UID = "gridready sandbox repository (SIMULATED packages) <sandbox@gridready.invalid>"
KEYRING_NAME = "gridready-sandbox-archive-keyring.gpg"
ARMORED_KEY_NAME = "gridready-sandbox-archive-keyring.asc"


def _www() -> Path:
    return paths.RUN_ROOT / "www"


# ---- process management ------------------------------------------------------------------------------------


def _spawn(name: str, cmd: list[str], env: dict[str, str] | None = None) -> dict[str, int]:
    """Start a detached daemon that writes its own PID; returns {pid, start}."""
    logdir = paths.RUN_ROOT / "log"
    logdir.mkdir(parents=True, exist_ok=True)
    pidfile = paths.RUN_ROOT / f"{name}.pid"
    pidfile.unlink(missing_ok=True)
    script = 'echo $$ > "$0" && exec "$@"'
    with open(logdir / f"{name}.log", "ab") as log:
        subprocess.run(["setsid", "-f", "sh", "-c", script, str(pidfile), *cmd], stdin=subprocess.DEVNULL,
                       stdout=log, stderr=log, env=env, check=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if text and proc.start_time(int(text)) is not None:
            return {"pid": int(text), "start": proc.start_time(int(text)) or 0}
        time.sleep(0.01)
    raise GridreadyError(f"sandbox: {name} did not start; see {logdir / name}.log")


def _wait_port(port: int, name: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((paths.BRIDGE_ADDR, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise GridreadyError(f"sandbox: {name} is not listening on {paths.BRIDGE_ADDR}:{port}; "
                         f"see {paths.RUN_ROOT / 'log' / name}.log")


def running(services: dict[str, Any]) -> bool:
    return all(proc.alive(s.get("pid"), s.get("start")) for s in (services.get("acng", {}),
                                                                  services.get("repo", {})))


def start(services: dict[str, Any]) -> None:
    """Start whichever service is not running (the bridge must be up). Caller holds the allocator lock.

    Call refresh_repo() first, outside that lock (a repository build can take seconds)."""
    if not (_www() / "nvidia").exists() or not (_www() / "pypi").exists():
        refresh_repo()
    if not proc.alive(services.get("acng", {}).get("pid"), services.get("acng", {}).get("start")):
        services["acng"] = _start_acng()
        _wait_port(paths.ACNG_PORT, "apt-cacher-ng")
    if not proc.alive(services.get("repo", {}).get("pid"), services.get("repo", {}).get("start")):
        services["repo"] = _spawn("repo-http", [
            sys.executable, "-m", "http.server", str(paths.REPO_PORT), "--bind", paths.BRIDGE_ADDR,
            "--directory", str(_www()),
        ])
        _wait_port(paths.REPO_PORT, "repo-http")


def stop(services: dict[str, Any]) -> None:
    for name in ("repo", "acng"):
        s = services.pop(name, {})
        if proc.kill_saved(s.get("pid"), s.get("start"), signal.SIGTERM) and not proc.wait_gone(
                s.get("pid"), s.get("start"), timeout=5):
            proc.kill_saved(s.get("pid"), s.get("start"))
            proc.wait_gone(s.get("pid"), s.get("start"), timeout=5)


# ---- apt-cacher-ng -----------------------------------------------------------------------------------------


def _acng_root() -> Path:
    """apt-cacher-ng and the libraries a stock Debian 12 lacks, unpacked (not installed) into the cache."""
    base = paths.cache_dir() / "acng"
    root = base / "root"
    if (root / "usr/sbin/apt-cacher-ng").exists():
        return root
    debs = base / "debs"
    shutil.rmtree(debs, ignore_errors=True)
    debs.mkdir(parents=True)
    res = subprocess.run(["apt-get", "download", "-q", *ACNG_DEBS], cwd=debs, capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        raise GridreadyError(f"sandbox: apt-get download apt-cacher-ng failed: {res.stderr.strip()[-300:]}")
    tmp = base / "root.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in sorted(debs.glob("*.deb")):
        run(["dpkg-deb", "-x", str(deb), str(tmp)], what=f"dpkg-deb -x {deb.name}")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    return root


def _start_acng() -> dict[str, int]:
    root = _acng_root()
    base = paths.cache_dir() / "acng"
    conf = paths.RUN_ROOT / "acng-conf"
    conf.mkdir(parents=True, exist_ok=True)
    for d in ("cache", "log"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (conf / "acng.conf").write_text(
        f"CacheDir: {base / 'cache'}\nLogDir: {base / 'log'}\nSupportDir: {root / 'usr/lib/apt-cacher-ng'}\n"
        f"Port: {paths.ACNG_PORT}\nBindAddress: {paths.BRIDGE_ADDR}\n"
        f"SocketPath: {paths.RUN_ROOT / 'acng.socket'}\nPidFile: {paths.RUN_ROOT / 'acng.daemon.pid'}\n"
        "ForeGround: 1\nExThreshold: 4\nVerboseLog: 0\n"
    )
    libdirs = ":".join(str(p) for p in (root / "usr/lib/x86_64-linux-gnu", root / "lib/x86_64-linux-gnu"))
    env = {**os.environ, "LD_LIBRARY_PATH": libdirs}
    return _spawn("apt-cacher-ng", [str(root / "usr/sbin/apt-cacher-ng"), "-c", str(conf)], env=env)


# ---- the simulated NVIDIA repository -----------------------------------------------------------------------


def _sources_hash() -> str:
    """Hash of what the repository is built from (packages.py and the simulator), to rebuild on change."""
    pkg = Path(__file__).parent
    files = [pkg / "packages.py", pkg / "images.py", pkg / "image_tools.py", *sorted((pkg / "sim").rglob("*")),
             *sorted((pkg / "engine").glob("*.py")), *sorted((pkg / "data").glob("*")),
             pkg.parent / "gridready" / "data" / "triton_versions.yml"]
    h = hashlib.sha256(b"repo-v3")
    for f in files:
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(pkg.parent)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def refresh_repo() -> Path:
    """Build (when its sources changed), sign and publish the repository under www/nvidia (atomic symlink).

    Serialised by its own lock, not the allocator's: other fleets go on while it builds."""
    lockfile = paths.cache_dir() / "repo" / ".lock"
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        repo = _refresh_repo()
        try:
            pypi.refresh(_www())
        except (OSError, subprocess.CalledProcessError) as err:
            raise GridreadyError(f"sandbox: building the hosts' Python package index failed ({err}); the "
                                 "controller's pip must reach PyPI once to mirror Ray") from err
        return repo


def _refresh_repo() -> Path:
    key = _sources_hash()
    base = paths.cache_dir() / "repo"
    built = base / key
    if not (built / ".published").exists():
        tmp = base / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            repo = _build(tmp)
            _release(repo)
            _checksums(repo)
            _sign(repo)
            docker = packages.build_docker_repo(repo / "docker")
            _sign(docker)
            images.write_registry(repo / "registry")
        except Exception as err:  # a broken simulator build must not stop every fleet: keep the last repo
            shutil.rmtree(tmp, ignore_errors=True)
            log = paths.RUN_ROOT / "log" / "repo-build.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"{time.ctime()}: build_repo failed: {err!r}\n{traceback.format_exc()}")
            print(f"warning: sandbox: building the NVIDIA package repository failed ({err}); serving the "
                  f"previous one; see {log}", file=sys.stderr)
            if (_www() / "nvidia").exists():
                return (_www() / "nvidia").resolve()
            built = base / "empty"
            if not (built / ".published").exists():
                built.mkdir(parents=True, exist_ok=True)
                (built / "Packages").write_text("")
                _release(built)
                _sign(built)
                (built / ".published").write_text(".\n")
        else:
            (tmp / ".published").write_text(str(repo.relative_to(tmp)) + "\n")
            shutil.rmtree(built, ignore_errors=True)
            tmp.rename(built)
    repo = (built / (built / ".published").read_text().strip()).resolve()
    www = _www()
    (www / "keys").mkdir(parents=True, exist_ok=True)
    shutil.copy(_keyring(), www / "keys" / KEYRING_NAME)
    shutil.copy(_armored_keyring(), www / "keys" / ARMORED_KEY_NAME)
    for name, target in (("nvidia", repo), ("docker", repo / "docker"), ("v2", repo / "registry" / "v2")):
        if not target.exists():  # an empty repository (failed first build): no Docker repository, no registry
            continue
        link = www / name
        tmp_link = www / f".{name}-{os.getpid()}"
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(target)
        tmp_link.replace(link)
    return repo


def _build(out: Path) -> Path:
    return Path(packages.build_repo(out))


def _release(repo: Path) -> None:
    """A flat-repository Release file over Packages(.gz), unless the builder wrote one."""
    if (repo / "Release").exists():
        return
    packages = repo / "Packages"
    if not (repo / "Packages.gz").exists() and packages.exists():
        (repo / "Packages.gz").write_bytes(gzip.compress(packages.read_bytes(), mtime=0))
    lines = ["Origin: gridready-sandbox", "Label: gridready sandbox (SIMULATED NVIDIA packages)",
             "Suite: sandbox", "Codename: sandbox", "Architectures: amd64 all",
             "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), "SHA256:"]
    for f in sorted(p for p in repo.iterdir() if p.name.startswith("Packages")):
        data = f.read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {f.name}")
    (repo / "Release").write_text("\n".join(lines) + "\n")


def _checksums(repo: Path) -> None:
    """SHA256SUMS over the published files: get_url takes `checksum: sha256:<url of this file>` (nccl-tests)."""
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}" for f in sorted(repo.iterdir())
             if f.is_file() and not f.name.startswith(".") and f.name not in ("SHA256SUMS", "SHA256SUMS.gpg")]
    (repo / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def _gnupg() -> Path:
    home = paths.cache_dir() / "repo-key" / "gnupg"
    if not (home / "pubring.kbx").exists() or not _keyring().exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True, mode=0o700)
        run(["gpg", "--batch", "--homedir", str(home), "--passphrase", "", "--quick-gen-key", KEY_UID,
             "ed25519", "sign", "never"], what="gpg --quick-gen-key")
        with open(_keyring(), "wb") as out:
            subprocess.run(["gpg", "--batch", "--homedir", str(home), "--export", KEY_UID], stdout=out, check=True)
    return home


def _keyring() -> Path:
    return paths.cache_dir() / "repo-key" / KEYRING_NAME


def _armored_keyring() -> Path:
    """The same public key, ASCII-armored (apt reads a Signed-By file ending in .asc as armored, sources.list(5))."""
    out = paths.cache_dir() / "repo-key" / ARMORED_KEY_NAME
    if not out.exists() or out.stat().st_mtime < _keyring().stat().st_mtime:
        home = _gnupg()
        with open(out, "wb") as fh:
            subprocess.run(["gpg", "--batch", "--homedir", str(home), "--armor", "--export", KEY_UID], stdout=fh,
                           check=True)
        run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)
    return out


def _sign(repo: Path) -> None:
    home = _gnupg()
    try:
        jobs = [("--clearsign", "InRelease", "Release"), ("-abs", "Release.gpg", "Release")]
        if (repo / "SHA256SUMS").exists():
            jobs.append(("-abs", "SHA256SUMS.gpg", "SHA256SUMS"))
        for mode, out, src in jobs:
            (repo / out).unlink(missing_ok=True)
            run(["gpg", "--batch", "--yes", "--homedir", str(home), "--local-user", KEY_UID, mode, "-o",
                 str(repo / out), str(repo / src)], what=f"gpg sign {src}")
    finally:  # gpg leaves an agent running for its homedir: stop it, we start nothing that outlives us
        run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False)
