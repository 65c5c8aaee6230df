"""Simulated NVIDIA daemons for the real systemd units: nvidia-persistenced, nv-hostengine, nv-fabricmanager.

Each runs in the foreground until SIGTERM and logs that it is simulated. nv-hostengine listens on
127.0.0.1:5555 (dcgmi checks it); nv-fabricmanager exits 1 on a host without NVSwitch, as the real one does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from . import simcore

CONTAINERD_DROPIN = Path("/etc/containerd/conf.d/99-nvidia.toml")  # nvidia-ctk 1.18+ for containerd
FM_PIDFILE = "/var/run/nvidia-fabricmanager/nv-fabricmanager.pid"  # the package unit's PIDFile=
FM_VERSION_FILE = Path("/usr/share/gridready-sim/fabricmanager-version")  # written by the fabric manager package


def _log(name: str, msg: str) -> None:
    sys.stderr.write(f"{name}: {msg}\n")
    sys.stderr.flush()


def _wait_forever(name: str, stop: threading.Event) -> int:
    def on_term(signum: int, _frame: object) -> None:
        _log(name, f"received signal {signum}, exiting")
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    while not stop.wait(3600):
        pass
    return 0


def _pidfile(path: str, pid: int | None = None) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(f"{pid or os.getpid()}\n")
    except OSError:
        pass


PERSISTENCED_PIDFILE = "/run/nvidia-persistenced/nvidia-persistenced.pid"  # the distribution unit's PIDFile=


def persistenced(argv: list[str]) -> int:
    """nvidia-persistenced always daemonizes: its parent returns once the child runs, and the packaged unit is
    Type=forking (NVIDIA/nvidia-persistenced, init/systemd/nvidia-persistenced.service.template; Ubuntu's and
    NVIDIA's packages ship the same unit)."""
    if "--version" in argv:
        print(f"nvidia-persistenced:  version {simcore.versions()['driver']}")
        return 0
    host = simcore.load()
    # --no-persistence-mode (the distribution unit's default) leaves persistence mode off: nvidia-persistenced(1),
    # NVIDIA Driver Persistence, https://docs.nvidia.com/deploy/driver-persistence/index.html
    mode = "Disabled" if "--no-persistence-mode" in argv else "Enabled"
    try:  # before the parent returns: a caller of `systemctl start` reads the mode at once
        simcore.PERSISTENCE_STATE.parent.mkdir(parents=True, exist_ok=True)
        simcore.PERSISTENCE_STATE.write_text(mode + "\n")
    except OSError:
        pass
    _log("nvidia-persistenced", f"Started (gridready-sim, {len(host.gpus)} simulated GPUs, persistence mode {mode})")
    pid = os.fork()
    if pid:
        _pidfile(PERSISTENCED_PIDFILE, pid)  # before the parent exits: systemd reads it right after
        return 0
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # a daemon lets go of its parent's terminal and pipes
        os.dup2(null, fd)
    rc = _wait_forever("nvidia-persistenced", threading.Event())
    simcore.PERSISTENCE_STATE.unlink(missing_ok=True)
    return rc


def hostengine(argv: list[str]) -> int:
    v = simcore.versions()
    if "--version" in argv or "-v" in argv:
        print(f"Version : {v['dcgm']}\nBuild ID : gridready-sim")
        return 0
    simcore.load()
    stop = threading.Event()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", simcore.HOSTENGINE_PORT))
    srv.listen(16)
    srv.settimeout(1.0)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    _pidfile("/run/nvhostengine.pid")
    _log("nv-hostengine", f"DCGM {v['dcgm']} (gridready-sim) listening on 127.0.0.1:{simcore.HOSTENGINE_PORT}")
    rc = _wait_forever("nv-hostengine", stop)
    srv.close()
    return rc


def fabricmanager(argv: list[str]) -> int:
    v = simcore.versions()
    if "--version" in argv or "-v" in argv:
        print(f"Fabric Manager version is : {v['driver']}")
        return 0
    host = simcore.load()
    if not host.sku["nvswitch"]:
        _log("nv-fabricmanager", "NVSwitch devices not found (gridready-sim); fabric manager is for NVSwitch systems")
        return 1
    mine = FM_VERSION_FILE.read_text().strip() if FM_VERSION_FILE.exists() else v["driver"]
    if mine != host.running_driver():
        # Fabric manager refuses to start unless its version equals the loaded driver's: Fabric Manager User Guide,
        # "Installing Fabric Manager" (version must match), https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html
        _log("nv-fabricmanager", f"[ERROR] fabric manager {mine} does not match the loaded NVIDIA driver "
             f"{host.running_driver()} (gridready-sim); not starting")
        return 1
    log = Path("/var/log/fabricmanager.log")
    stamp = time.strftime("[%b %d %Y %H:%M:%S]")
    try:
        with log.open("a") as f:
            f.write(
                f"{stamp} [INFO] [tid {os.getpid()}] Fabric Manager version {v['driver']} is running "
                f"(gridready-sim, {len(host.gpus)} simulated GPUs)\n"
            )
    except OSError:
        pass
    _log("nv-fabricmanager", f"Fabric Manager {v['driver']} started (gridready-sim); NVLink training completed")
    if _config(argv).get("DAEMONIZE", "1") != "0":
        # DAEMONIZE=1 (the default): the parent returns once the daemon runs, which writes the unit's PID file
        if os.fork():
            return 0
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # a daemon lets go of its parent's terminal and pipes
            os.dup2(null, fd)
        _pidfile(FM_PIDFILE)
    return _wait_forever("nv-fabricmanager", threading.Event())


def _config(argv: list[str]) -> dict[str, str]:
    """KEY=VALUE lines of the file `-c` names (fabricmanager.cfg)."""
    path = simcore.option(argv, "-c") or "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.lstrip().startswith("#"))


def ctk(argv: list[str]) -> int:
    """nvidia-ctk: --version, runtime configure, cdi generate (what the container toolkit role calls)."""
    v = simcore.versions()
    if not argv or "--version" in argv or argv[0] == "-v":
        print(f"NVIDIA Container Toolkit CLI version {v['container_toolkit']}\ncommit: gridready-sim")
        return 0
    if argv[:2] == ["runtime", "configure"]:
        runtime = simcore.option(argv, "--runtime") or "docker"
        default_runtime = "--set-as-default" in argv
        default = {"docker": "/etc/docker/daemon.json", "containerd": "/etc/containerd/config.toml"}
        path = Path(simcore.option(argv, "--config") or default.get(runtime, f"/etc/{runtime}/config"))
        block = (f"# nvidia runtime configured by nvidia-ctk (gridready-sim) for {runtime}\n"
                 'BinaryName = "/usr/bin/nvidia-container-runtime"\n')
        if runtime == "containerd":
            # Toolkit 1.18+: the runtime goes into a drop-in that config.toml imports; config.toml keeps only the
            # imports line. NVIDIA Container Toolkit v1.18.0 release notes ("containerd drop-in config"),
            # https://github.com/NVIDIA/nvidia-container-toolkit/releases/tag/v1.18.0
            imports = 'imports = ["/etc/containerd/conf.d/*.toml"]\n'
            text = path.read_text() if path.exists() else ""
            if imports not in text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(imports + text)
            path = CONTAINERD_DROPIN
        if runtime == "docker":
            # Docker: a JSON merge of runtimes.nvidia into daemon.json, the file dockerd reads at start ({"runtimes":
            # {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}: NVIDIA Container Toolkit install guide,
            # "Configuring Docker", https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/
            # install-guide.html); a file that is not JSON is refused as the real tool does.
            try:
                cfg = json.loads(path.read_text() or "{}") if path.exists() else {}
            except ValueError as err:
                sys.stderr.write(f"ERRO[0000] unable to load config: {path}: {err}\n")
                return 1
            cfg.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
            if default_runtime:
                cfg["default-runtime"] = "nvidia"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cfg, indent=4) + "\n")
        else:
            text = path.read_text() if path.exists() else ""
            if block not in text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text + block)
        print(
            f"INFO[0000] Wrote updated config to {path}\n"
            f"INFO[0000] It is recommended that {runtime} daemon be restarted."
        )
        return 0
    if argv[:2] == ["cdi", "generate"]:
        out = simcore.option(argv, "--output")
        host = simcore.load()
        spec = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n# gridready-sim: simulated\ndevices:\n" + "".join(
            f'- name: "{g.index}"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia{g.index}\n'
            for g in host.gpus
        )
        if out:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_text(spec)
        else:
            sys.stdout.write(spec)
        return 0
    sys.stderr.write(f"nvidia-ctk: unsupported in gridready-sim: {' '.join(argv)}\n")
    return 2


TOOLS = {
    "nvidia-persistenced": persistenced,
    "nv-hostengine": hostengine,
    "nv-fabricmanager": fabricmanager,
    "nvidia-ctk": ctk,
}


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    name = os.path.basename(prog or sys.argv[0])
    return TOOLS[name](list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
