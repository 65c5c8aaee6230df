"""SIMULATED Docker Engine (packages docker-ce, docker-ce-cli, containerd.io of the sandbox's Docker repository).

What gridready's roles and units call, with Docker's own flags, messages and exit codes:
  docker run --rm --name N --runtime=R --env K=V --network=host --ipc=host --shm-size S --ulimit K=V
             --volume SRC:DST[:ro] IMAGE [CMD...]
  docker rm --force N | docker stop --time T N | docker pull REF | docker image inspect REF | docker version
Sources: Docker CLI reference (https://docs.docker.com/reference/cli/docker/container/run/, .../container/rm/,
.../container/stop/, .../image/pull/, .../image/inspect/) and docker/cli's messages (cli/command/container,
cli/flags: "unknown flag: --x" + "See 'docker run --help'."; `docker run` exits 125 when the error is Docker's
own, "Exit status" in the run reference).

A container here is the image's command run in a private mount namespace (`unshare --mount`), not a chroot: the
image's directories and the --volume binds are mounted at their destinations over the host's tree, the host's
other files stay visible, the network and IPC are the host's (gridready always passes --network=host --ipc=host;
other values are refused as unsupported by the simulation). Images come from the sandbox's registry
(http://10.77.0.1:8088/v2/, the Registry HTTP API V2 layout: /v2/<name>/manifests/<ref>, /v2/<name>/blobs/<digest>)
under their real references: the sandbox has no Internet, so every registry host is answered there. Every line
this tool prints about itself says SIMULATED.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SOCKET = "unix:///var/run/docker.sock"
STATE = Path(os.environ.get("GRIDREADY_SIM_DOCKER_ROOT", "/var/lib/docker/gridready-sim"))
DAEMON_STATE = Path(os.environ.get("GRIDREADY_SIM_DOCKERD_STATE", "/run/gridready-sim/dockerd.json"))
DAEMON_JSON = Path(os.environ.get("GRIDREADY_SIM_DOCKER_CONFIG", "/etc/docker/daemon.json"))
REGISTRY = os.environ.get("GRIDREADY_SIM_REGISTRY", "http://10.77.0.1:8088")
VERSION = "28.5.1"  # the simulated docker-ce release (packages.py DOCKER)
API = "1.51"
MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"

# `docker run` options gridready passes, as docker/cli declares them (cli/command/container/opts.go):
# name -> takes a value. Short forms: -e (--env), -v (--volume), -d, -i, -t.
RUN_FLAGS = {"--rm": False, "--name": True, "--runtime": True, "--env": True, "--network": True, "--net": True,
             "--ipc": True, "--shm-size": True, "--ulimit": True, "--volume": True, "--detach": False,
             "--interactive": False, "--tty": False, "--pull": True, "--entrypoint": True, "--workdir": True,
             "--gpus": True, "--user": True, "--init": False}
SHORT = {"-e": "--env", "-v": "--volume", "-d": "--detach", "-i": "--interactive", "-t": "--tty",
         "-w": "--workdir", "-u": "--user"}
REPEATED = {"--env", "--volume", "--ulimit"}


class DockerError(Exception):
    def __init__(self, msg: str, code: int = 1) -> None:
        super().__init__(msg)
        self.code = code


# ---- references ----------------------------------------------------------------------------------------------


def parse_ref(ref: str) -> tuple[str, str]:
    """(repository, tag or digest) as Docker normalises a reference (distribution/reference): a name without a
    registry host is docker.io/library/<name>; no tag means :latest."""
    name, digest = ([*ref.split("@", 1), ""])[:2]
    tag = ""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    if digest and not (digest.startswith("sha256:") and len(digest) == 71):
        raise DockerError(f'invalid reference format: "{ref}"')
    if not name or name != name.lower():
        raise DockerError(f"invalid reference format: repository name ({name}) must be lowercase")
    first = name.split("/", 1)[0]
    if "/" not in name or not ("." in first or ":" in first or first == "localhost"):
        name = "docker.io/" + (name if "/" in name else "library/" + name)
    return name, digest or tag or "latest"


# ---- the daemon ----------------------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def load_runtimes() -> list[str]:
    """dockerd reads /etc/docker/daemon.json once at start; a file it cannot parse stops it ("unable to configure
    the Docker daemon with file /etc/docker/daemon.json", dockerd reference, "Daemon configuration file",
    https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file). The runtimes it knows are runc and
    those under `runtimes` (what `nvidia-ctk runtime configure --runtime=docker` adds: NVIDIA Container Toolkit
    install guide, "Configuring Docker")."""
    runtimes = {"runc"}
    if DAEMON_JSON.exists():
        try:
            cfg = json.loads(DAEMON_JSON.read_text() or "{}")
        except json.JSONDecodeError as err:
            raise DockerError(f"unable to configure the Docker daemon with file {DAEMON_JSON}: {err}") from None
        runtimes.update(cfg.get("runtimes", {}))
    return sorted(runtimes)


def dockerd(argv: list[str]) -> int:
    try:
        runtimes = load_runtimes()
    except DockerError as err:
        print(err, file=sys.stderr)
        return 1
    DAEMON_STATE.parent.mkdir(parents=True, exist_ok=True)
    tmp = DAEMON_STATE.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "runtimes": runtimes, "version": VERSION}))
    tmp.replace(DAEMON_STATE)
    print(f"SIMULATED dockerd {VERSION} (gridready-sim): API listen on /var/run/docker.sock; runtimes "
          f"{', '.join(runtimes)}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(3600):
        pass
    DAEMON_STATE.unlink(missing_ok=True)
    return 0


def daemon() -> dict:
    """The running daemon's state, or Docker's message when it is not running (docker/cli client: "Cannot
    connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")."""
    try:
        st = json.loads(DAEMON_STATE.read_text())
        if _alive(int(st["pid"])):
            return st
    except (OSError, ValueError, KeyError):
        pass
    raise DockerError(f"Cannot connect to the Docker daemon at {SOCKET}. Is the docker daemon running?")


# ---- images --------------------------------------------------------------------------------------------------


def _refs() -> dict[str, str]:
    try:
        return json.loads((STATE / "refs.json").read_text())
    except (OSError, ValueError):
        return {}


def _image_dir(digest: str) -> Path:
    return STATE / "images" / digest.split(":", 1)[1]


def local_image(ref: str) -> dict | None:
    """The stored image of a reference (by digest, or the digest a tag was pulled at)."""
    name, what = parse_ref(ref)
    digest = what if what.startswith("sha256:") else _refs().get(f"{name}:{what}")
    if not digest:
        return None
    meta = _image_dir(digest) / "image.json"
    if not meta.exists():
        return None
    data = json.loads(meta.read_text())
    return data if data["name"] == name else None


def _fetch(url: str) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read()


def pull(ref: str, quiet: bool = False) -> dict:
    """Registry HTTP API V2: the manifest by tag or digest; a digest reference must match the manifest's sha256
    (the client verifies content it asked for by digest, distribution's "Content Digests"); layers are verified
    against their digests and unpacked."""
    daemon()
    name, what = parse_ref(ref)
    path = name.split("/", 1)[1] if "." in name.split("/", 1)[0] or ":" in name.split("/", 1)[0] else name
    host = name.split("/", 1)[0]
    try:
        body = _fetch(f"{REGISTRY}/v2/{host}/{path}/manifests/{what}")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            raise DockerError(f"Error response from daemon: manifest for {ref} not found: manifest unknown: "
                              "manifest unknown") from None
        raise DockerError(f"Error response from daemon: {err}") from None
    except OSError as err:
        raise DockerError(f"Error response from daemon: Get \"https://{host}/v2/\": {err}") from None
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if what.startswith("sha256:") and digest != what:
        raise DockerError(f"Error response from daemon: manifest verification failed for digest {what}")
    manifest = json.loads(body)
    cfg_digest = manifest["config"]["digest"]
    config = _fetch(f"{REGISTRY}/v2/{host}/{path}/blobs/{cfg_digest}")
    if "sha256:" + hashlib.sha256(config).hexdigest() != cfg_digest:
        raise DockerError(f"Error response from daemon: digest mismatch for blob {cfg_digest}")
    dest = _image_dir(digest)
    if not (dest / "image.json").exists():
        tmp = dest.with_name(dest.name + f".tmp-{os.getpid()}")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
        (tmp / "rootfs").mkdir(parents=True)
        for layer in manifest["layers"]:
            blob = _fetch(f"{REGISTRY}/v2/{host}/{path}/blobs/{layer['digest']}")
            if "sha256:" + hashlib.sha256(blob).hexdigest() != layer["digest"]:
                raise DockerError(f"Error response from daemon: digest mismatch for blob {layer['digest']}")
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
                try:
                    tar.extractall(tmp / "rootfs", filter="tar")
                except TypeError:  # a Python without extraction filters (before 3.11.4)
                    tar.extractall(tmp / "rootfs")
            if not quiet:
                print(f"{layer['digest'][7:19]}: Pull complete")
        (tmp / "image.json").write_text(json.dumps({"name": name, "digest": digest, "config": json.loads(config),
                                                    "id": cfg_digest, "size": sum(x["size"] for x in
                                                                                  manifest["layers"])}))
        subprocess.run(["rm", "-rf", str(dest)], check=False)
        tmp.rename(dest)
    refs = _refs()
    if not what.startswith("sha256:"):
        refs[f"{name}:{what}"] = digest
    refs[f"{name}@{digest}"] = digest
    (STATE / "refs.json").write_text(json.dumps(refs, indent=1, sort_keys=True))
    if not quiet:
        print(f"Digest: {digest}\nStatus: Downloaded newer image for {ref} (SIMULATED image of gridready's sandbox)")
    return json.loads((dest / "image.json").read_text())


def image_inspect(refs: list[str]) -> int:
    daemon()
    out, missing = [], []
    for ref in refs:
        img = local_image(ref)
        if img is None:
            missing.append(ref)
            continue
        out.append({"Id": img["id"], "RepoDigests": [f"{img['name']}@{img['digest']}"], "Config": img["config"]
                    ["config"], "Architecture": img["config"].get("architecture"), "Os": "linux", "Size": img["size"],
                    "Comment": "SIMULATED image of gridready's sandbox"})
    print(json.dumps(out, indent=4))
    for ref in missing:  # docker/cli image inspect: "Error response from daemon: No such image: <ref>", exit 1
        print(f"Error response from daemon: No such image: {ref}", file=sys.stderr)
    return 1 if missing else 0


# ---- containers ----------------------------------------------------------------------------------------------


def _container_file(name: str) -> Path:
    return STATE / "containers" / f"{name}.json"


def _running(name: str) -> dict | None:
    f = _container_file(name)
    try:
        rec = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if _alive(int(rec["pid"])) and rec.get("start") == _start_time(int(rec["pid"])):
        return rec
    f.unlink(missing_ok=True)  # exited: --rm removes it; gridready runs every container with --rm
    return None


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return ""


def parse_run(argv: list[str]) -> tuple[dict[str, list[str]], str, list[str]]:
    """pflag rules: --flag=value or --flag value, options end at the first non-option (the image) or `--`."""
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        flag, eq, value = a.partition("=")
        flag = SHORT.get(flag, flag)
        if flag not in RUN_FLAGS:
            raise DockerError(f"unknown flag: {a.split('=')[0]}\nSee 'docker run --help'.", 125)
        if RUN_FLAGS[flag] and not eq:
            i += 1
            if i >= len(argv):
                raise DockerError(f"flag needs an argument: {a}\nSee 'docker run --help'.", 125)
            value = argv[i]
        elif not RUN_FLAGS[flag]:
            value = value or "true"
        opts.setdefault(flag, []).append(value)
        i += 1
    if i >= len(argv):
        raise DockerError("\"docker run\" requires at least 1 argument.\nSee 'docker run --help'.", 125)
    return opts, argv[i], argv[i + 1:]


def run(argv: list[str]) -> int:
    opts, ref, cmd = parse_run(argv)
    try:
        st = daemon()
    except DockerError as err:  # `docker run` exits 125 when the error is Docker's own
        raise DockerError(str(err), 125) from None
    one = {k: v[-1] for k, v in opts.items() if k not in REPEATED}
    runtime = one.get("--runtime", "runc")
    if runtime not in st["runtimes"]:  # moby daemon: "unknown or invalid runtime name: <name>"
        raise DockerError(f"Error response from daemon: unknown or invalid runtime name: {runtime}", 125)
    for key, allowed in (("--network", "host"), ("--net", "host"), ("--ipc", "host")):
        if key in one and one[key] != allowed:
            raise DockerError(f"SIMULATED docker: {key}={one[key]} is not simulated (only {allowed})", 125)
    if "--detach" in one or "--gpus" in one or "--user" in one:
        raise DockerError("SIMULATED docker: --detach, --gpus and --user are not simulated", 125)
    name = one.get("--name", "")
    if name and _running(name):
        rec = _running(name) or {}
        raise DockerError(f"Error response from daemon: Conflict. The container name \"/{name}\" is already in use "
                          f"by container \"{rec.get('id', '')}\". You have to remove (or rename) that container to "
                          "be able to reuse that name.", 125)
    volumes = []
    for v in opts.get("--volume", []):
        parts = v.split(":")
        if len(parts) not in (2, 3) or not parts[1].startswith("/"):
            raise DockerError(f"Error response from daemon: invalid volume specification: '{v}'", 125)
        mode = parts[2] if len(parts) == 3 else "rw"
        if mode not in ("ro", "rw"):
            raise DockerError(f"Error response from daemon: invalid mode: {mode}", 125)
        if not parts[0].startswith("/"):
            raise DockerError(f"SIMULATED docker: named volumes ({parts[0]}) are not simulated, only bind mounts", 125)
        volumes.append({"src": parts[0], "dst": parts[1], "ro": mode == "ro"})
    img = local_image(ref)
    if img is None:
        if one.get("--pull") == "never":
            raise DockerError(f"Error response from daemon: No such image: {ref}", 125)
        print(f"Unable to find image '{ref}' locally", file=sys.stderr)
        try:
            img = pull(ref)
        except DockerError as err:
            raise DockerError(str(err), 125) from None
    for v in volumes:  # -v creates a missing host path as a directory ("Bind mounts", "Differences between
        if not os.path.exists(v["src"]):  # --volume and --mount", https://docs.docker.com/engine/storage/bind-mounts/)
            os.makedirs(v["src"], exist_ok=True)
    cfg = img["config"]["config"]
    env = dict(e.split("=", 1) for e in cfg.get("Env", []))
    for e in opts.get("--env", []):
        k, eq, val = e.partition("=")
        if eq:
            env[k] = val
        elif k in os.environ:
            env[k] = os.environ[k]
    env["HOSTNAME"] = os.uname().nodename
    argv_c = cmd or cfg.get("Cmd") or []
    if "--entrypoint" in one:
        argv_c = [one["--entrypoint"], *cmd]
    elif cfg.get("Entrypoint"):
        argv_c = [*cfg["Entrypoint"], *argv_c]
    if not argv_c:
        raise DockerError("Error response from daemon: no command specified", 125)
    cid = hashlib.sha256(f"{name}{time.time_ns()}{os.getpid()}".encode()).hexdigest()
    spec = {"id": cid, "name": name, "rootfs": str(_image_dir(img["digest"]) / "rootfs"),
            "paths": img["config"].get("gridready_sim_paths", []), "volumes": volumes, "env": env,
            "workdir": one.get("--workdir", cfg.get("WorkingDir") or "/"), "argv": argv_c,
            "shm_size": one.get("--shm-size", ""), "image": ref}
    spec_file = STATE / "containers" / f"{cid}.spec.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(json.dumps(spec))
    if name:
        _container_file(name).write_text(json.dumps({"id": cid, "pid": os.getpid(), "image": ref, "name": name,
                                                     "start": _start_time(os.getpid())}))
    sys.stdout.flush()
    # the same PID goes on through unshare and the container's init, so `docker stop` signals the command itself
    os.execvp("unshare", ["unshare", "--mount", "--propagation", "private", sys.executable, "-c",
                          "import sys; sys.path.insert(0, sys.argv[1]); from gridready_sim.docker import "
                          "container_init; sys.exit(container_init(sys.argv[2]))",
                          str(Path(__file__).resolve().parent.parent), str(spec_file)])
    return 0  # not reached


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def container_init(spec_file: str) -> int:
    """Inside the private mount namespace: image directories, then volumes at their destinations, then exec."""
    spec = json.loads(Path(spec_file).read_text())
    Path(spec_file).unlink(missing_ok=True)
    rootfs = Path(spec["rootfs"])
    tops = sorted({"/" + v["dst"].strip("/").split("/", 1)[0] for v in spec["volumes"]} - set(spec["paths"]))
    for top in spec["paths"]:  # the image's own trees (e.g. /opt/tritonserver, /app), over the host's
        os.makedirs(top, exist_ok=True)
        _mount("--bind", str(rootfs / top.lstrip("/")), top)
    for top in tops:  # a writable, private layer where volumes are mounted (the container's own files)
        if any(top == p or top.startswith(p + "/") for p in spec["paths"]):
            continue
        os.makedirs(top, exist_ok=True)
        _mount("-t", "tmpfs", "-o", "mode=0755", "gridready-sim-container", top)
    for v in spec["volumes"]:
        if os.path.isdir(v["src"]):
            os.makedirs(v["dst"], exist_ok=True)
        else:
            os.makedirs(os.path.dirname(v["dst"]), exist_ok=True)
            Path(v["dst"]).touch()
        _mount("--bind", v["src"], v["dst"])
        if v["ro"]:
            _mount("-o", "remount,bind,ro", v["dst"])
    os.chdir(spec["workdir"])
    env = {**spec["env"], "GRIDREADY_SIM_CONTAINER": spec["name"] or spec["id"][:12]}
    try:
        os.execvpe(spec["argv"][0], spec["argv"], env)
    except FileNotFoundError:  # runc: exec: "<cmd>": executable file not found in $PATH (exit 127)
        print(f"docker: Error response from daemon: failed to create task for container: OCI runtime create "
              f"failed: exec: \"{spec['argv'][0]}\": executable file not found in $PATH", file=sys.stderr)
        return 127
    return 0


def rm(argv: list[str]) -> int:
    force = any(a in ("--force", "-f") for a in argv)
    names = [a for a in argv if not a.startswith("-")]
    unknown = [a for a in argv if a.startswith("-") and a not in ("--force", "-f")]
    if unknown:
        raise DockerError(f"unknown flag: {unknown[0]}\nSee 'docker rm --help'.")
    if not names:
        raise DockerError("\"docker rm\" requires at least 1 argument.\nSee 'docker rm --help'.")
    daemon()
    code = 0
    for n in names:
        rec = _running(n)
        if rec is None:
            print(f"Error response from daemon: No such container: {n}", file=sys.stderr)
            code = 1
            continue
        if not force:
            print(f"Error response from daemon: cannot remove container \"/{n}\": container is running: stop the "
                  "container before removing or force remove", file=sys.stderr)
            code = 1
            continue
        _kill(int(rec["pid"]), 0)
        _container_file(n).unlink(missing_ok=True)
        print(n)
    return code


def _kill(pid: int, grace: float) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds (`docker stop --time`; `rm --force` kills at once)."""
    try:
        os.kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
    except OSError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def stop(argv: list[str]) -> int:
    grace, names, i = 10.0, [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("--time", "-t", "--timeout"):
            i += 1
            grace = float(argv[i])
        elif a.startswith(("--time=", "-t=", "--timeout=")):
            grace = float(a.split("=", 1)[1])
        elif a.startswith("-"):
            raise DockerError(f"unknown flag: {a}\nSee 'docker stop --help'.")
        else:
            names.append(a)
        i += 1
    daemon()
    code = 0
    for n in names:
        rec = _running(n)
        if rec is None:
            print(f"Error response from daemon: No such container: {n}", file=sys.stderr)
            code = 1
            continue
        _kill(int(rec["pid"]), grace)
        print(n)
    return code


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    name = os.path.basename(prog or sys.argv[0])
    args = list(sys.argv[1:] if argv is None else argv)
    if name == "dockerd":
        return dockerd(args)
    try:
        if not args or args[0] in ("--help", "-h"):
            print("Usage:  docker [OPTIONS] COMMAND (SIMULATED by gridready's sandbox: run, rm, stop, pull, "
                  "image inspect, version)")
            return 0
        if args[0] in ("--version", "-v"):
            print(f"Docker version {VERSION}, build gridready-sim (SIMULATED)")
            return 0
        cmd, rest = args[0], args[1:]
        if cmd == "container" and rest:
            cmd, rest = rest[0], rest[1:]
        if cmd == "image" and rest[:1] == ["inspect"]:
            return image_inspect([a for a in rest[1:] if not a.startswith("-")])
        if cmd == "image" and rest[:1] == ["pull"]:
            cmd, rest = "pull", rest[1:]
        if cmd == "run":
            return run(rest)
        if cmd == "rm":
            return rm(rest)
        if cmd == "stop":
            return stop(rest)
        if cmd == "pull":
            refs = [a for a in rest if not a.startswith("-")]
            bad = [a for a in rest if a.startswith("-") and a not in ("--quiet", "-q")]
            if bad:
                raise DockerError(f"unknown flag: {bad[0]}\nSee 'docker pull --help'.")
            if len(refs) != 1:
                raise DockerError("\"docker pull\" requires exactly 1 argument.\nSee 'docker pull --help'.")
            pull(refs[0], quiet="--quiet" in rest or "-q" in rest)
            return 0
        if cmd == "version":
            st = daemon()
            print(f"Client: Docker Engine - Community (SIMULATED)\n Version: {VERSION}\n API version: {API}\n\n"
                  f"Server: Docker Engine - Community (SIMULATED)\n Engine:\n  Version: {VERSION}\n"
                  f"  Runtimes: {' '.join(st['runtimes'])}")
            return 0
        # docker/cli: `docker: unknown command: docker <x>` (exit 1)
        raise DockerError(f"docker: unknown command: docker {cmd}\n\nRun 'docker --help' for more information")
    except DockerError as err:
        msg = str(err)
        prefix = "docker: " if args and args[0] == "run" and not msg.startswith("docker:") else ""
        print(prefix + msg, file=sys.stderr)
        return err.code


if __name__ == "__main__":
    sys.exit(main())
