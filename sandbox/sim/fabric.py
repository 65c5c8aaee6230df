"""The simulated fabric: `gridready-sim-fabric` (a per-host agent) and `mpirun` (a launcher that asks the agents).

Agent: a stdlib TCP service on the host's own 10.77.0.x address, port 18515. `GET /profile` answers the host's
profile (re-read on every request, so an injected fault shows at once) with `"gridready_simulated": true`;
a line of JSON `{"op": "perftest", ...}` is answered as an ib_write_bw server would (see ib.py).

mpirun: `mpirun [-np N] [-H|--host h1[:slots],h2 | --hostfile f] [-N n] [-x VAR[=val]] ... prog args`. It fetches
every participant's profile from its agent, then runs `prog` once, here, as rank 0, with GRIDREADY_SIM_WORLD
holding all of them; the simulated nccl-tests bound busbw by the worst participant. Only 10.77.0.x and loopback
addresses are contacted. GRIDREADY_SIM_FABRIC_MAP='{"host": "addr:port"}' overrides name resolution (tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import urllib.request
from http import HTTPStatus
from pathlib import Path
from typing import Any

from . import ib, simcore

ORTE_BAR = "-" * 74


def allowed(addr: str) -> bool:
    return addr.startswith("10.77.0.") or addr.startswith("127.")


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        path = getattr(self.server, "profile", None) or simcore.profile_path()
        first = self.rfile.readline(65536).decode(errors="replace")
        if first.startswith("{"):
            req = json.loads(first)
            host = simcore.load(path)
            reply = ib.peer_info(host, req.get("dev"))
            self.wfile.write((json.dumps(reply) + "\n").encode())
            return
        while self.rfile.readline(65536).strip():  # drain the HTTP headers
            pass
        parts = first.split()
        url = parts[1] if len(parts) > 1 else "/"
        if url == "/profile":
            data = json.loads(path.read_text())
            body, status = json.dumps({"gridready_simulated": True, "profile": data}), HTTPStatus.OK
        elif url == "/health":
            body, status = json.dumps({"gridready_simulated": True, "ok": True}), HTTPStatus.OK
        else:
            body, status = json.dumps({"error": "not found"}), HTTPStatus.NOT_FOUND
        raw = body.encode()
        head = (
            f"HTTP/1.0 {status.value} {status.phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n"
        )
        self.wfile.write(head.encode() + raw)


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    profile: Path | None = None  # default: $GRIDREADY_SIM_PROFILE or /etc/gridready-sim/profile.json

    def server_bind(self) -> None:
        # IP_FREEBIND: bind the 10.77.0.x address even before the container's network has brought it up
        self.socket.setsockopt(socket.SOL_IP, getattr(socket, "IP_FREEBIND", 15), 1)
        super().server_bind()


def serve(bind: str, port: int) -> None:
    if not allowed(bind):
        raise SystemExit(f"gridready-sim-fabric: refusing to bind {bind}: sandbox (10.77.0.x) or loopback only")
    with _Server((bind, port), _Handler) as srv:
        sys.stderr.write(f"gridready-sim-fabric: listening on {bind}:{port} (simulated fabric agent)\n")
        srv.serve_forever()


def agent_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gridready-sim-fabric", description="simulated fabric agent")
    ap.add_argument("--bind", default=None, help="address (default: the profile's 10.77.0.x address)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("GRIDREADY_SIM_FABRIC_PORT", simcore.FABRIC_PORT)))
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    bind = a.bind or simcore.load().address
    if not bind:
        sys.stderr.write("gridready-sim-fabric: the profile has no address; pass --bind\n")
        return 2
    serve(bind, a.port)
    return 0


# ---- mpirun ----------------------------------------------------------------------------------------------------

VALUE_FLAGS = {
    "-np", "-n", "-c", "--np", "-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile", "-machinefile",
    "-N", "--npernode", "-npernode", "--map-by", "--bind-to", "--rank-by", "-wdir", "--wdir", "--prefix",
    "--output-filename", "-x", "--launch-agent", "--display", "-e", "--env",
}  # fmt: skip


def parse_mpirun(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """(options, program argv)."""
    opts: dict[str, Any] = {"hosts": [], "np": None, "per_node": None, "env": {}}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in {"--mca", "-mca", "--gmca"}:
            i += 3
            continue
        if not a.startswith("-"):
            return opts, argv[i:]
        val = argv[i + 1] if a in VALUE_FLAGS and i + 1 < len(argv) else None
        if a in {"-np", "-n", "-c", "--np"}:
            opts["np"] = int(val or 1)
        elif a in {"-H", "--host", "-host"}:
            opts["hosts"] += [h for h in (val or "").split(",") if h]
        elif a in {"--hostfile", "-hostfile", "--machinefile", "-machinefile"}:
            for line in Path(val or "").read_text().splitlines():
                words = line.split("#")[0].split()
                if words:
                    slots = next((w.split("=")[1] for w in words[1:] if w.startswith(("slots=", "max_slots="))), "")
                    opts["hosts"].append(words[0] + (f":{slots}" if slots else ""))
        elif a in {"-N", "--npernode", "-npernode"}:
            opts["per_node"] = int(val or 1)
        elif a == "--map-by" and val and val.startswith("ppr:"):
            opts["per_node"] = int(val.split(":")[1])
        elif a in {"-x", "-e", "--env"}:
            name, _, value = (val or "").partition("=")
            opts["env"][name] = value if _ else os.environ.get(name, "")
        i += 2 if val is not None else 1
    return opts, []


def fetch_profile(name: str, local: dict[str, Any]) -> dict[str, Any]:
    """The profile of host `name` from its fabric agent (the local profile for this host)."""
    if name in {"localhost", "127.0.0.1", socket.gethostname(), local.get("host"), local.get("address")}:
        return local
    mapping = json.loads(os.environ.get("GRIDREADY_SIM_FABRIC_MAP") or "{}")
    if name in mapping:
        addr, _, port = mapping[name].partition(":")
    else:
        addr, port = socket.gethostbyname(name), str(simcore.FABRIC_PORT)
    if not allowed(addr):
        raise RuntimeError(f"{name} resolves to {addr}, outside the sandbox (10.77.0.x)")
    with urllib.request.urlopen(f"http://{addr}:{port or simcore.FABRIC_PORT}/profile", timeout=5) as r:
        return json.loads(r.read())["profile"]


def mpirun_main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args or "-V" in args:
        sys.stdout.write("mpirun (Open MPI) 4.1.4 (gridready-sim launcher)\n")
        return 0
    opts, prog = parse_mpirun(args)
    if not prog:
        sys.stderr.write("mpirun: no executable given (gridready-sim)\n")
        return 1
    local = json.loads(simcore.profile_path().read_text())
    names = [h.split(":")[0] for h in opts["hosts"]] or [local.get("host", "localhost")]
    slots = [int(h.split(":")[1]) for h in opts["hosts"] if ":" in h and h.split(":")[1].isdigit()]
    profiles = []
    for name in dict.fromkeys(names):
        try:
            profiles.append(fetch_profile(name, local))
        except (OSError, RuntimeError, ValueError, KeyError) as e:
            sys.stderr.write(
                f"{ORTE_BAR}\nORTE was unable to reliably start one or more daemons.\n"
                f"  host: {name}\n  reason: gridready-sim fabric agent unreachable ({e})\n{ORTE_BAR}\n"
            )
            return 1
    per_host = opts["per_node"] or (opts["np"] // len(profiles) if opts["np"] else (slots[0] if slots else 1))
    env = {**os.environ, **opts["env"]}
    env["GRIDREADY_SIM_WORLD"] = json.dumps(
        {"profiles": profiles, "ranks_per_host": max(1, per_host), "pid": 4000 + os.getpid() % 50000}
    )
    exe = shutil.which(prog[0], path=env.get("PATH")) or prog[0]
    return subprocess.call([exe, *prog[1:]], env=env)


if __name__ == "__main__":
    sys.exit(mpirun_main())
