"""The serving container's command (gridready/serving/triton/launch.py) as exact argv and script text: rank 0
against the other ranks, the OpenAI frontend, trtllm-serve, mpirun on one node and across nodes (hosts listed,
the environment exported), the bind address, the python models copied per mode, the LeaderWorkerSet prelude and
the MPI worker's sshd."""

from __future__ import annotations

import shlex

import pytest

from gridready.serving import mpi_ssh
from gridready.serving.triton import launch

from .conftest import plan

REPO = "/models/repo"
W8 = "/models/hf/meta-llama/Llama-3.1-8B-Instruct/0e9e39f2"
W70 = "/models/hf/meta-llama/Llama-3.3-70B-Instruct/6f6073b4"
OPENAI_MAIN = "/opt/tritonserver/python/openai/openai_frontend/main.py"


def rank0(bind: str = "0.0.0.0", http: int = 8000, grpc: int = 8001, metrics: int = 8002) -> list[str]:
    return ["tritonserver", f"--model-repository={REPO}", "--disable-auto-complete-config",
            "--backend-config=python,shm-region-prefix-name=prefix0_",
            f"--http-port={http}", f"--grpc-port={grpc}", f"--metrics-port={metrics}",
            f"--http-address={bind}", f"--grpc-address={bind}", f"--metrics-address={bind}",
            "--allow-metrics=true", "--allow-gpu-metrics=true"]


def rank(n: int) -> list[str]:
    return ["tritonserver", f"--model-repository={REPO}", "--disable-auto-complete-config",
            f"--backend-config=python,shm-region-prefix-name=prefix{n}_",
            "--model-control-mode=explicit", "--load-model=tensorrt_llm",
            "--allow-http=false", "--allow-grpc=false", "--allow-metrics=false"]


def openai(bind: str = "0.0.0.0", weights: str = W8) -> list[str]:
    return ["python3", OPENAI_MAIN, "--model-repository", REPO, "--tokenizer", weights, "--host", bind,
            "--openai-port", "9000", "--enable-kserve-frontends", "--kserve-http-port", "8000",
            "--kserve-grpc-port", "8001"]


def test_one_gpu_engine_runs_rank_0_alone_on_the_given_ports() -> None:
    p = plan("8b", mode="engine", openai_frontend=False, http_port=9100, grpc_port=9101, metrics_port=9102)
    assert launch.server_command(p) == rank0(http=9100, grpc=9101, metrics=9102)
    assert launch.server_command(p, ["10.0.0.5"]) == rank0("10.0.0.5", 9100, 9101, 9102)


def test_engine_tp2_one_context_per_rank_with_exported_environment() -> None:
    p = plan("8b", 2, 1, mode="engine", openai_frontend=False)
    assert launch.server_command(p, env_keys=["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"]) == [
        "mpirun", "--allow-run-as-root", "-x", "NCCL_IB_HCA", "-x", "NCCL_SOCKET_IFNAME",
        "-n", "1", *rank0(), ":", "-n", "1", *rank(1)]


def test_engine_across_nodes_lists_only_the_nodes_it_needs() -> None:
    p = plan("70b", 8, 2, mode="engine")
    argv = launch.server_command(p, ["10.0.0.1", "10.0.0.2", "10.0.0.3"])
    assert argv[:6] == [launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "--host", "10.0.0.1:8,10.0.0.2:8", "-n",
                        "1"]
    assert argv[6:6 + len(openai("10.0.0.1", W70))] == openai("10.0.0.1", W70)
    contexts = " ".join(argv).split(" : ")
    assert contexts[1:] == [shlex.join(["-n", "1", *rank(n)]).replace("'", "") for n in range(1, 16)]


def test_too_few_hosts_for_the_nodes_is_refused_and_enough_is_not() -> None:
    p = plan("70b", 8, 2, mode="engine")
    with pytest.raises(ValueError, match=r"^tier trt-70b: 2 nodes needed for TP x PP = 16, got \['10.0.0.1'\]$"):
        launch.server_command(p, ["10.0.0.1"])
    assert launch.server_command(p, ["a", "b"])[3] == "a:8,b:8"


def test_llmapi_on_one_node_and_across_nodes() -> None:
    assert launch.server_command(plan("8b", 8, 1)) == openai()
    p = plan("70b", 8, 2)
    assert launch.server_command(p, ["h1", "h2"], ["B", "A"]) == [
        launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "-x", "A", "-x", "B", "--host", "h1:8,h2:8",
        "-n", "16", "trtllm-llmapi-launch", *openai("h1", W70)]
    p = plan("8b", 4, 1, openai_frontend=False)
    assert launch.server_command(p) == rank0()


def test_trtllm_serve_flags_on_one_node_and_under_mpi() -> None:
    p = plan("8b", 2, 1, frontend="trtllm-serve", max_batch_size=48, kv_cache_free_gpu_mem_fraction=0.85,
             tier_over={"max_num_batched_tokens": 4096, "max_model_len": 16384})
    serve = ["trtllm-serve", W8, "--backend", "pytorch", "--host", "0.0.0.0", "--port", "9000",
             "--tp_size", "2", "--pp_size", "1", "--max_batch_size", "48", "--max_num_tokens", "4096",
             "--max_seq_len", "16384", "--kv_cache_free_gpu_memory_fraction", "0.85",
             "--extra_llm_api_options", f"{REPO}/extra-llm-api.yaml"]
    assert launch.server_command(p) == serve
    p = plan("70b", 8, 2, frontend="trtllm-serve")
    argv = launch.server_command(p, ["h1", "h2"])
    assert argv[:8] == [launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "--host", "h1:8,h2:8", "-n", "16",
                        "trtllm-llmapi-launch", "trtllm-serve"]
    assert argv[argv.index("--host", 8) + 1] == "h1"
    assert argv[argv.index("--kv_cache_free_gpu_memory_fraction") + 1] == "0.9"


def test_bind_address_and_model_directories() -> None:
    assert launch.bind_address([]) == "0.0.0.0"
    assert launch.bind_address(["10.0.0.9", "10.0.0.8"]) == "10.0.0.9"
    assert launch.bind_address([launch._LWS_HOSTS]) == "0.0.0.0"
    engine, bls, llmapi = plan("8b", mode="engine"), plan("8b", mode="engine", bls=True), plan("8b")
    assert [launch.entry_model(p) for p in (engine, bls, llmapi)] == ["ensemble", "tensorrt_llm_bls", "tensorrt_llm"]
    assert launch.served_model(engine) == "llama-8b"
    assert [launch.model_dir(engine, m) for m in ("ensemble", "tensorrt_llm", "tensorrt_llm_bls")] == [
        "llama-8b", "tensorrt_llm", "tensorrt_llm_bls"]
    assert [launch.model_dir(bls, m) for m in ("ensemble", "tensorrt_llm_bls")] == ["ensemble", "llama-8b"]


HEAD = """\
#!/bin/bash
# gridready: Triton/TensorRT-LLM tier {name} ({mode}, TP {tp} x PP {pp}): {what}
set -euo pipefail
rm -rf /models/repo && cp -rL /models/repo.in /models/repo
rm -rf /models/repo/..?*  # a ConfigMap volume's ..data bookkeeping
"""


def test_launch_script_of_llmapi_copies_its_model_into_the_served_directory() -> None:
    assert launch.launch_script(plan("8b")) == HEAD.format(name="trt-8b", mode="llmapi", tp=1, pp=1, what="server") + (
        "mkdir -p /models/repo/llama-8b/1 && cp -rn /app/all_models/llmapi/tensorrt_llm/1/. /models/repo/llama-8b/1/\n"
        f"exec {shlex.join(openai())}\n")


def test_launch_script_of_engine_mode_with_and_without_bls() -> None:
    src = "/app/all_models/inflight_batcher_llm"
    head = HEAD.format(name="trt-8b", mode="engine", tp=1, pp=1, what="server")
    assert launch.launch_script(plan("8b", mode="engine")) == head + (
        f"mkdir -p /models/repo/preprocessing/1 && cp -rn {src}/preprocessing/1/. /models/repo/preprocessing/1/\n"
        f"mkdir -p /models/repo/postprocessing/1 && cp -rn {src}/postprocessing/1/. /models/repo/postprocessing/1/\n"
        f"exec {shlex.join(openai())}\n")
    with_bls = launch.launch_script(plan("8b", mode="engine", bls=True))
    assert (f"mkdir -p /models/repo/llama-8b/1 && cp -rn {src}/tensorrt_llm_bls/1/. /models/repo/llama-8b/1/\n"
            in with_bls)


def test_trtllm_serve_copies_no_python_model() -> None:
    script = launch.launch_script(plan("8b", frontend="trtllm-serve"))
    assert script.splitlines()[5].startswith("exec trtllm-serve ")
    assert len(script.splitlines()) == 6


def test_leaderworkerset_prelude_waits_for_each_workers_sshd() -> None:
    p = plan("70b", 8, 2, startup_timeout_s=600)
    script = launch.launch_script(p, lws=True, env_keys=["NCCL_IB_HCA"])
    lines = script.splitlines()
    assert lines[6] == ('L="${LWS_LEADER_ADDRESS:?not in a LeaderWorkerSet}"; first="${L%%.*}"; rest="${L#*.}"')
    assert 'GRIDREADY_MPI_HOSTS="$L:8"' in lines
    assert '  GRIDREADY_MPI_HOSTS="$GRIDREADY_MPI_HOSTS,$w:8"' in lines
    assert '  until (exec 3<>"/dev/tcp/$w/2222") 2>/dev/null; do' in lines
    assert '    if [ "$waited" -ge 600 ]; then' in lines
    assert '      echo "gridready: worker $w: sshd (port 2222) not reachable after 600 s" >&2; exit 1' in lines
    assert "    sleep 5; waited=$((waited + 5))" in lines
    argv = shlex.join([launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "-x", "NCCL_IB_HCA", "--host", "X",
                       "-n", "16", "trtllm-llmapi-launch", *openai(weights=W70)])
    assert lines[-1] == "exec " + argv.replace("--host X", '--host "$GRIDREADY_MPI_HOSTS"')
    one_node = launch.launch_script(plan("8b", 8, 1), lws=True)
    assert "LWS_LEADER_ADDRESS" not in one_node and one_node.endswith(f"exec {shlex.join(openai())}\n")


def test_worker_script_prepares_the_repository_then_runs_sshd() -> None:
    p = plan("70b", 8, 2, mode="engine")
    lines = launch.worker_script(p).splitlines()
    assert "\n".join(lines[:5]) + "\n" == HEAD.format(name="trt-70b", mode="engine", tp=8, pp=2,
                                                      what="MPI worker")
    assert lines[-2] == ('[ -x /usr/sbin/sshd ] || { echo "gridready: the image has no /usr/sbin/sshd; mpirun on '
                         'the leader starts the ranks here over ssh (build the image with openssh-server)" >&2; '
                         'exit 1; }')
    assert lines[-1] == "mkdir -p /run/sshd && exec " + shlex.join(mpi_ssh.sshd_command())
    assert len(lines) == 9


def test_launch_script_across_nodes_lists_the_given_hosts_unless_lws() -> None:
    p = plan("70b", 8, 2)
    script = launch.launch_script(p, ["h1", "h2"], env_keys=["NCCL_IB_HCA"])
    assert "LWS_LEADER_ADDRESS" not in script
    assert script.splitlines()[-1] == "exec " + shlex.join([
        launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "-x", "NCCL_IB_HCA", "--host", "h1:8,h2:8", "-n", "16",
        "trtllm-llmapi-launch", *openai("h1", W70)])
    lws = launch.launch_script(p, lws=True).splitlines()
    assert lws[-2:-1] == ["done"]  # the prelude ends at its loop, no blank line before exec


def test_trtllm_serve_across_nodes_exports_the_environment() -> None:
    argv = launch.server_command(plan("70b", 8, 2, frontend="trtllm-serve"), ["h1", "h2"], ["NCCL_IB_HCA"])
    assert argv[:6] == [launch.MPIRUN_ACROSS_NODES, "--allow-run-as-root", "-x", "NCCL_IB_HCA", "--host",
                        "h1:8,h2:8"]
