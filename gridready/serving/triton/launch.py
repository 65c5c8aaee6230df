"""What the serving container runs: one bash script per tier (prepare the repository, then exec the server).

MPI layout (serving-anchors.md 2.5, launch_triton_server.py of the pinned line): engine mode runs one process
per rank, world size = TP x PP; rank 0 serves HTTP/gRPC/metrics (or the OpenAI frontend), ranks > 0 load only
tensorrt_llm with explicit model control and no listeners. LLM-API mode spawns its own workers on one node
and needs `trtllm-llmapi-launch` under MPI across nodes.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from gridready.serving import mpi_ssh
from gridready.serving.triton.plan import TritonPlan

WORKER_WAIT_STEP_S = 5

REPO_IN = "/models/repo.in"  # the generated repository, mounted read-only
REPO_DIR = "/models/repo"  # the working copy the server loads (python models' 1/ filled from the image)
PYTHON_MODELS = {"engine": ("preprocessing", "postprocessing", "tensorrt_llm_bls"), "llmapi": ("tensorrt_llm",)}
EXTRA_LLM_API = "extra-llm-api.yaml"  # trtllm-serve: LLM arguments beyond its flags
_LWS_HOSTS = "__GRIDREADY_MPI_HOSTS__"  # replaced by "$GRIDREADY_MPI_HOSTS" in the script
# LeaderWorkerSet: the leader is <lws>-<group>.<lws>.<ns> (LWS_LEADER_ADDRESS), worker i is <lws>-<group>-<i>.<...>
# The leader of a LeaderWorkerSet group: the workers' names from LWS' environment, then a wait for each worker's
# sshd (the group's pods start together, and mpirun fails at once on a worker it cannot reach), then mpirun.
_LWS_PRELUDE = """\
L="${{LWS_LEADER_ADDRESS:?not in a LeaderWorkerSet}}"; first="${{L%%.*}}"; rest="${{L#*.}}"
command -v ssh >/dev/null || {{ echo "gridready: the image has no ssh client; mpirun starts the ranks on the \
workers over ssh (build the image with openssh-client and openssh-server)" >&2; exit 1; }}
GRIDREADY_MPI_HOSTS="$L:{slots}"
waited=0
for i in $(seq 1 $((${{LWS_GROUP_SIZE:?}} - 1))); do
  w="$first-$i.$rest"
  GRIDREADY_MPI_HOSTS="$GRIDREADY_MPI_HOSTS,$w:{slots}"
  until (exec 3<>"/dev/tcp/$w/{port}") 2>/dev/null; do
    if [ "$waited" -ge {timeout} ]; then
      echo "gridready: worker $w: sshd (port {port}) not reachable after {timeout} s" >&2; exit 1
    fi
    sleep {step}; waited=$((waited + {step}))
  done
done
"""


def entry_model(plan: TritonPlan) -> str:
    """The template model clients address: the ensemble, the BLS model, or the LLM-API model."""
    if plan.mode == "engine":
        return "tensorrt_llm_bls" if plan.settings.bls else "ensemble"
    return "tensorrt_llm"


def served_model(plan: TritonPlan) -> str:
    """The Triton model name clients (and readiness) address: the entry model's directory is named after the
    tier's served_name, because Triton knows a model only by its repository directory name (KServe
    /v2/models/<name>), and the OpenAI frontend lists those names as model ids (server:python/openai/
    openai_frontend/engine/triton_engine.py, https://github.com/triton-inference-server/server)."""
    return plan.tier.served_name


def model_dir(plan: TritonPlan, model: str) -> str:
    """Repository directory of a template model."""
    return served_model(plan) if model == entry_model(plan) else model


ANY_ADDRESS = "0.0.0.0"  # in a pod: the pod's own network, closed by the tier's NetworkPolicy


def bind_address(hosts: Sequence[str]) -> str:
    """Where the frontend listens: on hosts, the leader's service address (the node IP Ray and clients use; Triton
    has no authentication of its own, so it never listens on the other interfaces); in a pod, every address."""
    return hosts[0] if hosts and list(hosts) != [_LWS_HOSTS] else ANY_ADDRESS


def _tritonserver(plan: TritonPlan, rank: int, bind: str = ANY_ADDRESS) -> list[str]:
    s = plan.settings
    cmd = ["tritonserver", f"--model-repository={REPO_DIR}", "--disable-auto-complete-config"]
    cmd.append(f"--backend-config=python,shm-region-prefix-name=prefix{rank}_")
    if rank == 0:
        # --http-address/--grpc-address/--metrics-address: "The address for the ... server to bind to"
        # (triton-inference-server/server src/command_line_parser.cc)
        cmd += [f"--http-port={s.http_port}", f"--grpc-port={s.grpc_port}", f"--metrics-port={s.metrics_port}"]
        cmd += [f"--http-address={bind}", f"--grpc-address={bind}", f"--metrics-address={bind}"]
        cmd += ["--allow-metrics=true", "--allow-gpu-metrics=true"]
    else:
        cmd += ["--model-control-mode=explicit", "--load-model=tensorrt_llm"]
        cmd += ["--allow-http=false", "--allow-grpc=false", "--allow-metrics=false"]
    return cmd


def _openai(plan: TritonPlan, bind: str = ANY_ADDRESS) -> list[str]:
    s = plan.settings
    return [
        "python3", plan.release.openai_frontend, "--model-repository", REPO_DIR, "--tokenizer", plan.weights_dir,
        "--host", bind, "--openai-port", str(plan.openai_port), "--enable-kserve-frontends",
        "--kserve-http-port", str(s.http_port), "--kserve-grpc-port", str(s.grpc_port),
    ]


# Open MPI of the TensorRT-LLM images (HPC-X), checked by the multi-node image recipe (docs/kubernetes.md). Called
# by its absolute path across nodes: that implies --prefix, so the non-interactive ssh session on a worker (no
# image ENV, no login PATH) finds orted and the libraries (Open MPI mpirun(1), "--prefix": "the absolute pathname
# to mpirun ... is equivalent to --prefix").
MPIRUN_ACROSS_NODES = "/opt/hpcx/ompi/bin/mpirun"


def _mpirun(plan: TritonPlan, hosts: Sequence[str], env_keys: Sequence[str] = ()) -> list[str]:
    """mpirun starts remote ranks over ssh with their own environment: `-x NAME` exports the tier's NCCL/Gloo
    settings to every rank (Open MPI mpirun(1), "-x <env>: Export the specified environment variables to the
    remote nodes before executing the program", https://docs.open-mpi.org/en/main/man-openmpi/man1/mpirun.1.html)."""
    cmd = [MPIRUN_ACROSS_NODES if plan.nodes > 1 else "mpirun", "--allow-run-as-root"]
    for key in sorted(env_keys):
        cmd += ["-x", key]
    if plan.nodes > 1:
        listed = _LWS_HOSTS if list(hosts) == [_LWS_HOSTS] else ",".join(
            f"{h}:{plan.gpus_on_node}" for h in hosts[: plan.nodes]
        )
        cmd += ["--host", listed]
    return cmd


def server_command(plan: TritonPlan, hosts: Sequence[str] = (), env_keys: Sequence[str] = ()) -> list[str]:
    """argv of the server (no shell); `hosts` = the tier's node addresses, leader first (multi-node only)."""
    s = plan.settings
    if plan.nodes > 1 and len(hosts) < plan.nodes and list(hosts) != [_LWS_HOSTS]:
        raise ValueError(f"tier {plan.name}: {plan.nodes} nodes needed for TP x PP = {plan.world_size}, got {hosts}")
    bind = bind_address(hosts)
    if s.frontend == "trtllm-serve":
        cmd = [
            "trtllm-serve", plan.weights_dir, "--backend", "pytorch", "--host", bind,
            "--port", str(plan.openai_port), "--tp_size", str(plan.tp), "--pp_size", str(plan.pp),
            "--max_batch_size", str(plan.max_batch_size), "--max_num_tokens", str(plan.max_num_tokens),
            "--max_seq_len", str(plan.max_seq_len), "--kv_cache_free_gpu_memory_fraction", f"{plan.kv_fraction:g}",
            "--extra_llm_api_options", f"{REPO_DIR}/{EXTRA_LLM_API}",
        ]
        if plan.nodes == 1:
            return cmd
        return [*_mpirun(plan, hosts, env_keys), "-n", str(plan.world_size), "trtllm-llmapi-launch", *cmd]
    front = _openai(plan, bind) if s.openai_frontend else _tritonserver(plan, 0, bind)
    if plan.mode == "llmapi":
        if plan.nodes == 1:
            return front
        return [*_mpirun(plan, hosts, env_keys), "-n", str(plan.world_size), "trtllm-llmapi-launch", *front]
    if plan.world_size == 1:
        return front
    cmd = [*_mpirun(plan, hosts, env_keys), "-n", "1", *front]
    for rank in range(1, plan.world_size):
        cmd += [":", "-n", "1", *_tritonserver(plan, rank)]
    return cmd


def _prepare(plan: TritonPlan, what: str) -> list[str]:
    """Script head shared by the leader and the MPI workers: the working repository every rank loads."""
    tmpl = plan.release.templates_dir
    lines = [
        "#!/bin/bash",
        f"# gridready: Triton/TensorRT-LLM tier {plan.name} ({plan.mode}, TP {plan.tp} x PP {plan.pp}): {what}",
        "set -euo pipefail",
        f"rm -rf {REPO_DIR} && cp -rL {REPO_IN} {REPO_DIR}",
        f"rm -rf {REPO_DIR}/..?*  # a ConfigMap volume's ..data bookkeeping",
    ]
    if plan.settings.frontend == "triton":
        for model in PYTHON_MODELS[plan.mode]:
            if model == "tensorrt_llm_bls" and not plan.settings.bls:
                continue
            src = f"{tmpl}/{model}/1"
            # model.py (and helpers) of the pinned image; gridready's model.yaml/config.pbtxt are kept (-n)
            dest = f"{REPO_DIR}/{model_dir(plan, model)}/1"
            lines.append(f"mkdir -p {shlex.quote(dest)} && cp -rn {src}/. {shlex.quote(dest)}/")
    return lines


def launch_script(plan: TritonPlan, hosts: Sequence[str] = (), *, lws: bool = False,
                  env_keys: Sequence[str] = ()) -> str:
    """bash script run as the container's command: copy the repository, add the image's python models, exec.

    Multi-node: `hosts` are the nodes' addresses (leader first), or `lws=True` to read them from the
    LeaderWorkerSet environment at start; `env_keys` are exported to the remote ranks (mpirun -x)."""
    lines = _prepare(plan, "server")
    if lws and plan.nodes > 1:
        lines.append(_LWS_PRELUDE.format(slots=plan.gpus_on_node, port=mpi_ssh.PORT, step=WORKER_WAIT_STEP_S,
                                         timeout=plan.settings.startup_timeout_s).rstrip())
        hosts = [_LWS_HOSTS]
    exec_line = "exec " + shlex.join(server_command(plan, hosts, env_keys))
    lines.append(exec_line.replace(_LWS_HOSTS, '"$GRIDREADY_MPI_HOSTS"'))
    return "\n".join(lines) + "\n"


def worker_script(plan: TritonPlan) -> str:
    """An MPI worker pod: the same working repository as the leader (the ranks mpirun starts here over ssh
    load /models/repo on this node, launch_triton_server.py's layout), then sshd in the foreground with the tier's
    host key and the leader's client key (gridready/serving/mpi_ssh.py). NGC's tritonserver images carry no sshd:
    the pod says so and stops, rather than leaving mpirun to time out."""
    lines = _prepare(plan, "MPI worker")
    lines.append('[ -x /usr/sbin/sshd ] || { echo "gridready: the image has no /usr/sbin/sshd; mpirun on the leader '
                 'starts the ranks here over ssh (build the image with openssh-server)" >&2; exit 1; }')
    lines.append("mkdir -p /run/sshd && exec " + shlex.join(mpi_ssh.sshd_command()))
    return "\n".join(lines) + "\n"
