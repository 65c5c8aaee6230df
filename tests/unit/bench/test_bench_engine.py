"""The simulated engine: OpenAI and Triton endpoints, simulation markers, metric names, Ray join, copy-and-run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.unit.bench.conftest import REPO, start_engine, triton_repository


def call(url: str, path: str, body: dict | None = None) -> tuple[int, dict[str, str], bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def sse(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]


FAST = ("--ttft-ms", "5", "--itl-ms", "2", "--prefill-us-per-token", "0")


def test_openai_endpoints_and_simulation_markers(engine_factory):
    e = engine_factory("--model", "llama", "--served-model-name", "llama", "llama-alias", *FAST)
    status, headers, _ = call(e.url, "/health")
    assert status == 200 and headers["x-gridready-simulated"] == "1"
    models = json.loads(call(e.url, "/v1/models")[2])
    assert [m["id"] for m in models["data"]] == ["llama", "llama-alias"]

    body = {"model": "llama", "messages": [{"role": "user", "content": "one two three four"}], "max_tokens": 5}
    status, headers, raw = call(e.url, "/v1/chat/completions", body)
    out = json.loads(raw)
    assert status == 200 and headers["x-gridready-simulated"] == "1"
    assert out["system_fingerprint"] == "gridready-sim" and out["object"] == "chat.completion"
    assert out["usage"] == {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9}
    assert len(out["choices"][0]["message"]["content"].split()) == 5

    events = sse(call(e.url, "/v1/chat/completions", {**body, "stream": True,
                                                       "stream_options": {"include_usage": True}})[2])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(x) for x in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == 5
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    assert all(c["system_fingerprint"] == "gridready-sim" for c in chunks)

    plain = sse(call(e.url, "/v1/completions", {"model": "llama-alias", "prompt": "a b", "max_tokens": 3,
                                                 "stream": True})[2])
    assert len(plain) == 4 and "usage" not in json.loads(plain[-2])  # no usage unless asked for
    status, _, raw = call(e.url, "/v1/completions", {"model": "llama", "prompt": "a b", "max_tokens": 3})
    assert json.loads(raw)["usage"]["completion_tokens"] == 3

    status, _, raw = call(e.url, "/v1/chat/completions", {**body, "model": "nope"})
    assert status == 404 and "does not exist" in json.loads(raw)["error"]["message"]


def test_vllm_metric_names(engine_factory):
    e = engine_factory("--model", "m", *FAST)
    call(e.url, "/v1/completions", {"model": "m", "prompt": "x y z", "max_tokens": 4})
    text = call(e.url, "/metrics")[2].decode()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_count",
                 "vllm:request_time_per_output_token_seconds_sum", "vllm:e2e_request_latency_seconds_count",
                 "vllm:request_queue_time_seconds_count", "gridready_sim_info"):
        assert name in text, name
    assert 'vllm:generation_tokens_total{engine="0",model_name="m"} 4.0' in text
    assert 'vllm:prompt_tokens_total{engine="0",model_name="m"} 3.0' in text


def test_load_time_makes_health_503_then_200(engine_factory):
    e = engine_factory("--model", "m", "--load-seconds", "0.6", *FAST)
    assert call(e.url, "/health")[0] == 503
    time.sleep(0.8)
    assert call(e.url, "/health")[0] == 200


def test_triton_endpoints_and_metrics(engine_factory, tmp_path):
    e = engine_factory("--mode", "triton", "--model-repository", triton_repository(tmp_path, "ensemble"), *FAST)
    assert call(e.url, "/v2/health/live")[0] == 200
    assert call(e.url, "/v2/health/ready")[0] == 200
    assert call(e.url, "/v2/models/ensemble/ready")[0] == 200
    assert call(e.url, "/v2/models/other/ready")[0] == 400
    status, headers, raw = call(e.url, "/v2/models/ensemble/generate", {"text_input": "a b c", "max_tokens": 6})
    out = json.loads(raw)
    assert status == 200 and headers["x-gridready-simulated"] == "1"
    assert out["model_name"] == "ensemble" and len(out["text_output"].split()) == 6
    events = [json.loads(x) for x in sse(call(e.url, "/v2/models/ensemble/generate_stream",
                                              {"text_input": "a b c", "max_tokens": 6, "stream": True})[2])]
    assert len(events) == 6 and all(ev["text_output"].strip() for ev in events)
    metrics = call(f"http://127.0.0.1:{e.ports['metrics']}", "/metrics")[2].decode()
    for name in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                 "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_infer_duration_us", "nv_inference_pending_request_count",
                 "nv_inference_first_response_histogram_ms_bucket", "nv_trt_llm_request_metrics",
                 "nv_trt_llm_kv_cache_block_metrics"):
        assert name in metrics, name
    assert 'nv_inference_request_success{model="ensemble",version="1"} 2.0' in metrics


def test_copied_directory_runs_on_plain_python(tmp_path):
    """The engine is stdlib-only: copy the directory, run it with the system python, without the venv."""
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    dest = tmp_path / "simengine"
    shutil.copytree(REPO / "sandbox" / "engine", dest,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for how in (["-E", "-s", "-m", "simengine"], ["-I", str(dest)]):
        pf = tmp_path / f"p{len(how)}.json"
        proc = subprocess.Popen([python, *how, "--model", "m", "--host", "127.0.0.1", "--port", "0",
                                 "--port-file", str(pf), *FAST], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            for _ in range(500):
                if pf.exists() or proc.poll() is not None:
                    break
                time.sleep(0.02)
            assert pf.exists(), proc.stderr.read().decode() if proc.stderr else ""
            port = json.loads(pf.read_text())["http"]
            assert call(f"http://127.0.0.1:{port}", "/health")[0] == 200
        finally:
            proc.terminate()
            proc.wait(10)


FAKE_RAY = textwrap.dedent('''
    """A stand-in for the ray package: enough API for ray_member.py, records what it was asked."""
    import json, os
    _log = os.environ["FAKE_RAY_LOG"]
    class util:
        @staticmethod
        def get_node_ip_address():
            return "10.77.0.11"
    def init(address=None, namespace=None, **kw):
        if address == "bad:1":
            raise ConnectionError("Could not find any running Ray instance")
        open(_log, "a").write(json.dumps({"init": address, "namespace": namespace}) + "\\n")
    class _Ref:
        def __init__(self, v): self.v = v
    class _Method:
        def __init__(self, f, obj): self.f, self.obj = f, obj
        def remote(self, *a): return _Ref(self.f(self.obj, *a))
    class _Actor:
        def __init__(self, cls, args):
            self._obj = cls(*args)
            for n in dir(cls):
                if not n.startswith("_"):
                    setattr(self, n, _Method(getattr(cls, n), self._obj))
    class _Remote:
        def __init__(self, cls): self.cls = cls; self.opts = {}
        def options(self, **kw):
            open(_log, "a").write(json.dumps({"actor": kw.get("name")}) + "\\n"); return self
        def remote(self, *a): return _Actor(self.cls, a)
    def remote(**kw):
        return lambda cls: _Remote(cls)
    def get(ref, timeout=None): return ref.v
    def nodes(): return [{"Alive": True}, {"Alive": True}, {"Alive": False}]
    def cluster_resources(): return {"GPU": 16.0}
    def shutdown(): open(_log, "a").write(json.dumps({"shutdown": True}) + "\\n")
    __version__ = "0.0-fake"
''')


@pytest.fixture
def fake_ray(tmp_path: Path) -> dict[str, str]:
    pkg = tmp_path / "fakeray" / "ray"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_RAY)
    return {**os.environ, "PYTHONPATH": f"{pkg.parent}:{REPO}", "FAKE_RAY_LOG": str(tmp_path / "ray.log")}


def test_ray_join_as_driver_with_named_actor(tmp_path, fake_ray):
    e = start_engine(tmp_path, "--model", "m", *FAST, "--ray-address", "10.77.0.11:6379", "--ray-python",
                     sys.executable, env=fake_ray)
    try:
        for _ in range(200):
            info = json.loads(call(e.url, "/gridready/info")[2])
            if "ray" in info:
                break
            time.sleep(0.05)
        assert info["ray"]["ray"] == "joined", info
        assert info["ray"]["alive_nodes"] == 2 and info["ray"]["cluster_gpus"] == 16.0
        log = [json.loads(x) for x in Path(fake_ray["FAKE_RAY_LOG"]).read_text().splitlines()]
        assert {"init": "10.77.0.11:6379", "namespace": "gridready"} in log
        assert any(str(x.get("actor", "")).startswith("gridready-sim-m-") for x in log)
    finally:
        e.proc.terminate()
        e.proc.wait(10)
    assert {"shutdown": True} in [json.loads(x) for x in Path(fake_ray["FAKE_RAY_LOG"]).read_text().splitlines()]


def test_ray_failure_falls_back_to_standalone_or_exits_when_required(tmp_path, fake_ray):
    e = start_engine(tmp_path, "--model", "m", *FAST, "--ray-address", "bad:1", "--ray-python", sys.executable,
                     env=fake_ray)
    try:
        for _ in range(200):
            info = json.loads(call(e.url, "/gridready/info")[2])
            if "ray" in info:
                break
            time.sleep(0.05)
        assert info["ray"]["ray"] == "standalone" and "Could not find any running Ray" in info["ray"]["reason"]
        assert call(e.url, "/health")[0] == 200  # still serving
    finally:
        e.proc.terminate()
        e.proc.wait(10)
    strict = start_engine(tmp_path, "--model", "m", "--ray-address", "bad:1", "--ray-python", sys.executable,
                          "--ray-required", env=fake_ray)
    assert strict.proc.wait(20) == 1
    assert "ray join required and failed" in strict.log()


def test_timing_scales_with_the_simulated_hardware(engine_factory, tmp_path):
    hw = tmp_path / "profile.json"
    hw.write_text(json.dumps({"host": "node1", "sku": "H200-SXM-141GB", "gpus": 8,
                              "faults": [{"kind": "thermal_throttle", "gpu": 2}, {"kind": "xid", "gpu": 1}]}))
    e = engine_factory("--model", "m", "--itl-ms", "20", "--ttft-ms", "40", "--hardware-profile", str(hw))
    info = json.loads(call(e.url, "/gridready/info")[2])
    assert info["sku"] == "H200-SXM-141GB" and info["throttle_faults"] == ["thermal_throttle"]
    assert info["profile"]["itl_ms"] == pytest.approx(20 * 3.35 / 4.8 * 1.5)
    assert info["profile"]["ttft_ms"] == pytest.approx(60)
    plain = engine_factory("--model", "m", "--itl-ms", "20")
    assert json.loads(call(plain.url, "/gridready/info")[2])["profile"]["itl_ms"] == 20


def test_simulated_triton_serves_only_its_repository_names(engine_factory, tmp_path):
    e = engine_factory("--mode", "triton", "--model-repository", triton_repository(tmp_path, "llama-8b"), *FAST)
    assert call(e.url, "/v2/models/llama-8b/ready")[0] == 200
    assert call(e.url, "/v2/models/ensemble/ready")[0] == 400  # a name that is no directory of the repository


def test_simulated_triton_refuses_what_tritonserver_has_no_flag_for(tmp_path):
    for extra in (("--served-model-name", "x"), ()):  # no --served-model-name; a repository is required
        with pytest.raises(RuntimeError, match="triton mode takes --model-repository"):
            start_engine(tmp_path, "--mode", "triton", *extra)


def test_openai_frontend_serves_metrics_on_its_port_and_no_metrics_port(engine_factory, tmp_path):
    e = engine_factory("--mode", "triton", "--model-repository", triton_repository(tmp_path, "m"),
                       "--openai-port", "0", *FAST)
    assert set(e.ports) == {"event", "simulated", "http", "openai"}
    assert call(f"http://127.0.0.1:{e.ports['openai']}", "/metrics")[0] == 200
