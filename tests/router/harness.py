"""The real LiteLLM router on loopback in front of simulated engines (router tests and the latency benchmark).

Everything is started as a child process with its own port and torn down by `close()`; nothing leaves loopback.
The engines are gridready's simulated engine (sandbox.engine), the router is LiteLLM's proxy from the
lock of roles/gridready_router, configured by gridready.serving.router exactly as the role configures it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gridready.serving import router
from gridready.spec.router import Route, RouterSpec
from sandbox import litellm_venv, paths

AUTH_HOOK_FILE = paths.repo_root() / "roles" / "gridready_router" / "files" / "gridready_router_auth.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError) as err:
            last = str(err)
        time.sleep(1)
    raise TimeoutError(f"{url} not ready after {timeout_s:.0f} s ({last})")


@dataclass
class Proc:
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@dataclass
class Engine:
    tier: str
    served_name: str
    port: int
    proc: Proc

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@dataclass
class Harness:
    workdir: Path
    engines: dict[str, Engine] = field(default_factory=dict)
    router: Proc | None = None
    router_port: int = 0
    keys: dict[str, str] = field(default_factory=dict)  # name -> key (test-only, generated per harness)
    master_key: str = ""  # LiteLLM's master key (the serving API key on a real head), generated per router

    owns_workdir: bool = False

    @classmethod
    def create(cls, workdir: Path | None = None) -> Harness:
        """In `workdir` (kept, with the logs), or in a temporary folder removed by close()."""
        if workdir is not None:
            return cls(workdir)
        return cls(Path(tempfile.mkdtemp(prefix="gridready-router-")), owns_workdir=True)

    def start_engine(self, tier: str, served_name: str, *flags: str) -> Engine:
        port = free_port()
        log = self.workdir / f"engine-{tier}.log"
        env = {**os.environ, "PYTHONPATH": str(paths.repo_root())}
        cmd = [sys.executable, "-m", "sandbox.engine", "--model", served_name, "--host", "127.0.0.1",
               "--port", str(port), "--hardware-profile", "none", *flags]
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        engine = Engine(tier, served_name, port, Proc(proc, log))
        self.engines[tier] = engine
        wait_http(f"http://127.0.0.1:{port}/v1/models", 60)
        return engine

    def start_router(self, spec: RouterSpec, routes: list[Route], keys: dict[str, int | None],
                     timeout_s: float = 600, upstreams: dict[str, list[router.Upstream]] | None = None) -> None:
        """Start LiteLLM with the role's config, client keys {name: rpm_limit} and a fresh master key; its
        upstreams are the engines, one per tier, unless `upstreams` says otherwise."""
        exe = litellm_venv.ensure_venv()
        self.keys = {name: "sk-" + secrets.token_hex(16) for name in keys}
        (self.workdir / "keys.json").write_text(json.dumps(
            [{"name": n, "sha256": hashlib.sha256(k.encode()).hexdigest(), "rpm_limit": keys[n], "tpm_limit": None}
             for n, k in self.keys.items()]))
        shutil.copy(AUTH_HOOK_FILE, self.workdir / AUTH_HOOK_FILE.name)
        ups = upstreams or {t: [router.Upstream(t, e.base_url, e.served_name)] for t, e in self.engines.items()}
        config = router.litellm_config(spec, routes, ups)
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True))
        self.router_port = free_port()
        self.master_key = "sk-" + secrets.token_hex(24)
        env = {**os.environ, "PYTHONPATH": str(self.workdir), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "GRIDREADY_ROUTER_KEYS_FILE": str(self.workdir / "keys.json"),
               router.MASTER_KEY_ENV: self.master_key}
        log = self.workdir / "router.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([str(exe), "--config", str(self.workdir / "config.yaml"), "--host", "127.0.0.1",
                                     "--port", str(self.router_port), "--num_workers", "1"],
                                    stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir,
                                    start_new_session=True)
        self.router = Proc(proc, log)
        wait_http(f"{self.router_url}/health/liveliness", timeout_s)

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def request(self, path: str, body: dict[str, Any] | None = None, key: str | None = None,
                timeout: float = 60) -> tuple[int, bytes, dict[str, str]]:
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.router_url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as err:
            return err.code, err.read(), dict(err.headers)

    def close(self) -> None:
        if self.router:
            self.router.stop()
        for engine in self.engines.values():
            engine.proc.stop()
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
