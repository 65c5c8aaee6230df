"""Loading fixed-cost models as tritonserver does: autofill and defaults, and each refusal with Triton's message;
a refused model stops the server (exit 1, "failed to load all models") before it listens."""

from __future__ import annotations

import json
import subprocess

import pytest

from sandbox.engine import fixed_model
from sandbox.engine.fixed_model import FixedCostModel, LoadError

from .conftest import BGE, REPO, bge, call, command, write_model


def load(tmp_path, config, gpus=8, model_file="model.onnx", name="bge"):
    return FixedCostModel(write_model(tmp_path / "repo", name, config, model_file), gpus)


def refusal(tmp_path, config, **kw) -> LoadError:
    with pytest.raises(LoadError) as err:
        load(tmp_path, config, **kw)
    return err.value


def test_defaults_as_normalize_model_config(tmp_path):
    m = load(tmp_path, bge("dynamic_batching { }", instances=""))
    assert m.batching is not None and m.batching.preferred == (64,)  # preferred defaults to max_batch_size
    assert m.batching.delay_us == 0
    assert [(i.kind, i.gpu) for i in m.instances] == [("KIND_GPU", g) for g in range(8)]  # one per GPU
    assert m.config_json()["instance_group"] == [{"name": "bge", "kind": "KIND_GPU", "count": 1,
                                                   "gpus": list(range(8))}]
    assert m.config_json()["version_policy"] == {"latest": {"num_versions": 1}}
    assert m.backend == "onnxruntime" and m.filename == "model.onnx"
    m2 = load(tmp_path, bge(instances="instance_group { count: 2 kind: KIND_GPU }"), gpus=2)
    assert [(i.kind, i.gpu) for i in m2.instances] == [("KIND_GPU", 0), ("KIND_GPU", 0), ("KIND_GPU", 1),
                                                        ("KIND_GPU", 1)]
    assert m2.batching is None
    m3 = load(tmp_path, bge(instances="instance_group { count: 3 kind: KIND_CPU }\ninstance_group { kind: KIND_CPU }"))
    assert [i.kind for i in m3.instances] == ["KIND_CPU"] * 5  # onnxruntime: 2 CPU instances by default
    assert [g["name"] for g in m3.groups] == ["bge_0", "bge_1"]


def test_autofill_from_backend_and_tensorrt_plan(tmp_path):
    text = BGE.replace('platform: "onnxruntime_onnx"', 'backend: "tensorrt"')
    m = load(tmp_path, text, model_file="model.plan")
    assert (m.platform, m.backend, m.filename) == ("tensorrt_plan", "tensorrt", "model.plan")
    unnamed = load(tmp_path, BGE.replace('name: "bge"\n', ""), name="bge")
    assert unnamed.name == "bge"  # the name comes from the directory


def test_which_models_are_fixed_cost(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "bge", BGE)
    write_model(repo, "ensemble", 'name: "ensemble"\nplatform: "ensemble"\n', None)
    write_model(repo, "tensorrt_llm", 'name: "tensorrt_llm"\nbackend: "tensorrtllm"\n', None)
    write_model(repo, "py", 'name: "py"\nbackend: "python"\nplatform: "onnxruntime_onnx"\n', None)
    write_model(repo, "plan", 'name: "plan"\n', "model.plan")  # found by its file, as autofill does
    fixed, errors = fixed_model.load_repository(repo, ["bge", "ensemble", "tensorrt_llm", "py", "plan"], 8,
                                                fixed_model.Timing())
    assert sorted(fixed) == ["bge"] and [e.model for e in errors] == ["plan"]  # plan lists no input


@pytest.mark.parametrize(("config", "message", "poll"), [
    (BGE.replace('platform: "onnxruntime_onnx"', 'platform: "onnxruntime_onnx"\nbackend: "tensorrt"'),
     "unexpected 'platform' and 'backend' pair, got:onnxruntime_onnx, tensorrt", True),
    (BGE.replace("max_batch_size: 64", "max_batch_size: -1"),
     "'max_batch_size' must be non-negative value for bge", True),
    (bge("dynamic_batching { preferred_batch_size: [0, 8] }"),
     "dynamic batching preferred size must be positive for bge", True),
    (bge("dynamic_batching { preferred_batch_size: 128 }"),
     "dynamic batching preferred size must be <= max batch size for bge", True),
    (BGE.replace('name: "bge"', 'name: "bge-small"'),
     "unexpected directory name 'bge' for model 'bge-small', directory name must equal model name", True),
    (bge(instances="instance_group { count: 1 kind: KIND_GPU gpus: [0, 8] }"),
     "instance group bge_0 of model bge specifies invalid or unsupported gpu id 8. GPUs with at least the minimum "
     "required CUDA compute compatibility of 7.500000 are: 0, 1, 2, 3, 4, 5, 6, 7", False),
    (bge(instances="instance_group { kind: KIND_CPU gpus: 0 }"),
     "instance group bge_0 of model bge has kind KIND_CPU but specifies one or more GPUs", False),
    (BGE.replace("dims: 4", "dims: 0"),
     "model output 'pooled' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for bge",
     False),
])
def test_refusals_with_tritons_messages(tmp_path, config, message, poll):
    err = refusal(tmp_path, config)
    assert err.message == message and err.poll is poll
    line = err.line()
    if poll:
        assert line.endswith(f"] Poll failed for model directory 'bge': {message}")
    else:
        assert line.endswith(f"] failed to load 'bge' version 1: Invalid argument: {message}")
    assert line.startswith("E")


def test_gpu_ids_come_from_the_host_profile(tmp_path):
    text = bge(instances="instance_group { count: 1 kind: KIND_GPU gpus: 2 }")
    err = refusal(tmp_path, text, gpus=2)
    assert err.message.endswith("specifies invalid or unsupported gpu id 2. GPUs with at least the minimum required "
                                "CUDA compute compatibility of 7.500000 are: 0, 1")
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"sku": "H100-SXM-80GB", "gpus": 2}))
    assert fixed_model.gpu_count(profile) == 2 and fixed_model.gpu_count(None) == 8


def test_missing_model_file(tmp_path):
    err = refusal(tmp_path, BGE, model_file=None)
    assert (err.code, err.message) == ("Internal", f"failed to stat file {tmp_path}/repo/bge/1/model.onnx")
    assert err.line().endswith(f"failed to load 'bge' version 1: Internal: failed to stat file "
                               f"{tmp_path}/repo/bge/1/model.onnx")
    plan = BGE.replace('platform: "onnxruntime_onnx"', 'platform: "tensorrt_plan"')
    err = refusal(tmp_path, plan, model_file="model.onnx", name="bge")
    assert err.message == f"unable to load plan file to auto complete config: {tmp_path}/repo/bge/1/model.plan"
    named = plan + 'default_model_filename: "embed.plan"\n'
    err = refusal(tmp_path, named, model_file="model.plan")
    assert err.message.endswith("/repo/bge/1/embed.plan")


def test_unreadable_config_is_a_poll_failure(tmp_path):
    err = refusal(tmp_path, BGE.replace("TYPE_INT64", "TYPE_LONG", 1))
    assert err.poll and err.message == f"failed to read text proto from {tmp_path}/repo/bge/config.pbtxt"
    err = refusal(tmp_path, BGE + "dynamic_batching {")
    assert err.poll and "failed to read text proto" in err.message


def test_server_exits_1_when_any_model_fails_to_load(tmp_path):
    repo = tmp_path / "repo"
    write_model(repo, "bge", BGE)
    bad = BGE.replace('name: "bge"', 'name: "bad"') + "dynamic_batching { preferred_batch_size: 65 }"
    write_model(repo, "bad", bad)
    write_model(repo, "ensemble", 'name: "ensemble"\nplatform: "ensemble"\n', None)
    pf = tmp_path / "ports.json"
    proc = subprocess.run(command(repo, pf, "--hardware-profile", "none"), cwd=REPO, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "error: creating server: Internal - failed to load all models"
    assert lines[-2].endswith("] Poll failed for model directory 'bad': dynamic batching preferred size must be <= "
                              "max batch size for bad")
    assert not pf.exists()  # it never listened


def test_a_repository_of_fixed_cost_models_only_serves(tmp_path, triton):
    repo = tmp_path / "repo"
    write_model(repo, "bge", BGE)
    write_model(repo, "ensemble", 'name: "ensemble"\nplatform: "ensemble"\n', None)
    both = triton(repo)
    status, index = call(f"{both.url}/v2/repository/index", "POST", {})
    assert status == 200 and [r["name"] for r in index] == ["bge", "ensemble"]
    assert call(f"{both.url}/v2/models/ensemble/generate", "POST", {"text_input": "hi", "max_tokens": 2})[0] == 200
    only = tmp_path / "only"
    write_model(only, "bge", BGE)
    e = triton(only)
    assert call(f"{e.url}/v2/health/ready")[0] == 200
    assert call(f"{e.url}/v2/repository/index", "POST", {})[1] == [{"name": "bge", "version": "1", "state": "READY"}]
    assert call(f"{e.url}/gridready/info")[1]["models"] == ["bge"]
