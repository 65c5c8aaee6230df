"""The real routers on loopback in front of simulated engines (router tests and the latency benchmark): LiteLLM's
proxy from the role's lock, and HAProxy from the OS's package (`haproxy` on PATH).

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

from gridready.serving import router, router_haproxy
from gridready.spec.router import Route, RouterKey, RouterSpec
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
        wait_http(f"http://127.0.0.1:{port}/health", 60)  # public: an engine with --api-key answers it too
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


HAPROXY = shutil.which("haproxy") or ""


@dataclass
class HAProxyRouter:
    """HAProxy from the OS's package with gridready's configuration (gridready.serving.router_haproxy), in
    master-worker mode as the role's unit runs it: `reload` re-renders and signals the master (USR2)."""

    workdir: Path
    port: int
    proc: Proc
    spec: RouterSpec
    upstreams: dict[str, list[router.Upstream]]
    env: dict[str, str]
    routes: list[Route] = field(default_factory=list)  # as last written

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write(self, routes: list[Route]) -> None:
        files = router_haproxy.render(self.spec, routes, self.upstreams, bind="127.0.0.1", port=self.port,
                                      directory=str(self.workdir))
        self.routes = list(routes)
        (self.workdir / router_haproxy.MODELS_MAP).write_text(files.models_map)
        (self.workdir / router_haproxy.MODELS_JSON).write_text(files.models_json)
        (self.workdir / "haproxy.cfg").write_text(files.config)
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", str(self.workdir / "haproxy.cfg")],
                               capture_output=True, text=True, env=self.env)
        if check.returncode:
            raise RuntimeError(f"haproxy -c: {check.stdout}{check.stderr}")

    def reload(self, routes: list[Route]) -> None:
        """Re-render and reload hitlessly: the master starts new workers, the old ones finish their requests."""
        self.write(routes)
        os.kill(self.proc.proc.pid, signal.SIGUSR2)


def start_haproxy(h: Harness, spec: RouterSpec, routes: list[Route], keys: dict[str, int | None],
                  upstreams: dict[str, list[router.Upstream]] | None = None,
                  env: dict[str, str] | None = None) -> HAProxyRouter:
    """HAProxy in front of the harness' engines (one upstream per tier unless `upstreams` says otherwise), client
    keys {name: rpm_limit} generated into h.keys; `env` holds the tiers' API keys as the unit's environment file."""
    h.keys = {name: "sk-" + secrets.token_hex(16) for name in keys}
    workdir = h.workdir / "haproxy"
    workdir.mkdir(exist_ok=True)
    (workdir / router_haproxy.KEYS_MAP).write_text(router_haproxy.keys_map(h.keys))
    spec = spec.model_copy(update={"keys": [RouterKey(name=n, vault_var="v", rpm_limit=r) for n, r in keys.items()]})
    ups = upstreams or {t: [router.Upstream(t, e.base_url, e.served_name)] for t, e in h.engines.items()}
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})}
    hap = HAProxyRouter(workdir, free_port(), None, spec, ups, run_env)  # type: ignore[arg-type]
    hap.write(routes)
    log = workdir / "haproxy.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([HAPROXY, "-W", "-db", "-f", str(workdir / "haproxy.cfg")], stdout=out,
                                stderr=subprocess.STDOUT, env=run_env, start_new_session=True)
    hap.proc = Proc(proc, log)
    h.router, h.router_port = hap.proc, hap.port
    wait_http(f"{hap.url}{router_haproxy.LIVE_PATH}", 30)
    return hap
