"""KServe v2 inference against fixed-cost models over real HTTP: answers, metadata/config/ready, and every
refusal with the message Triton's HTTP frontend (http_server.cc) or core (infer_request.cc Normalize) gives."""

from __future__ import annotations

import copy
import math

import pytest

from .conftest import BGE, bge, call, tokens, write_model

CLF = """name: "clf"
backend: "tensorrt"
max_batch_size: 8
input { name: "features" data_type: TYPE_FP32 dims: 4 }
output { name: "scores" data_type: TYPE_FP32 dims: 2 }
"""
NOTE = ("NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to "
        "each input shape. If you want to specify the full shape including the batch dim in your input dims config, "
        "try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size.")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    write_model(root, "bge", bge("dynamic_batching { max_queue_delay_microseconds: 0 }"))
    write_model(root, "clf", CLF, "model.plan")
    return root


@pytest.fixture
def t(repo, triton):
    return triton(repo, "--fixed-cost-ms", "1", "--per-item-us", "0")


def test_answer_shapes_and_data(t):
    status, body = t.infer("bge", {"id": "req-1", **tokens(rows=2, seq=3)})
    assert status == 200, body
    assert (body["model_name"], body["model_version"], body["id"]) == ("bge", "1", "req-1")
    outs = {o["name"]: o for o in body["outputs"]}
    assert outs["last_hidden_state"]["shape"] == [2, 3, 4] and outs["pooled"]["shape"] == [2, 4]
    assert outs["last_hidden_state"]["datatype"] == "FP32"
    data = outs["last_hidden_state"]["data"]
    assert len(data) == 24 and all(math.isfinite(v) for v in data) and any(v != 0 for v in data)
    # deterministic per batch item: the second row alone gives the second half
    second = tokens(rows=2, seq=3)
    for i in second["inputs"]:
        i["shape"], i["data"] = [1, 3], i["data"][1:]
    alone = t.infer("bge", second)[1]["outputs"][0]["data"]
    assert alone == data[12:] and alone != data[:12]
    # requested outputs only; the versioned route too
    status, body = t.infer("bge", {**tokens(), "outputs": [{"name": "pooled"}]}, "/versions/1")
    assert status == 200 and [o["name"] for o in body["outputs"]] == ["pooled"] and "id" not in body
    status, body = t.infer("clf", {"inputs": [{"name": "features", "shape": [3, 4], "datatype": "FP32",
                                               "data": [0.5] * 12}]})
    assert status == 200 and body["outputs"][0]["shape"] == [3, 2]


def test_metadata_config_ready_and_index(t):
    status, meta = call(f"{t.url}/v2/models/bge")
    assert status == 200 and meta == {
        "name": "bge", "versions": ["1"], "platform": "onnxruntime_onnx",
        "inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [-1, -1]},
                   {"name": "attention_mask", "datatype": "INT64", "shape": [-1, -1]}],
        "outputs": [{"name": "last_hidden_state", "datatype": "FP32", "shape": [-1, -1, 4]},
                    {"name": "pooled", "datatype": "FP32", "shape": [-1, 4]}]}
    assert call(f"{t.url}/v2/models/clf")[1]["platform"] == "tensorrt_plan"
    status, cfg = call(f"{t.url}/v2/models/bge/config")
    assert status == 200 and cfg["name"] == "bge" and cfg["max_batch_size"] == 64
    assert cfg["dynamic_batching"] == {"preferred_batch_size": [64], "max_queue_delay_microseconds": 0}
    assert cfg["instance_group"] == [{"name": "bge_0", "count": 1, "kind": "KIND_GPU", "gpus": [0]}]
    assert cfg["input"][0] == {"name": "input_ids", "data_type": "TYPE_INT64", "dims": [-1]}
    assert call(f"{t.url}/v2/models/clf/config")[1]["instance_group"][0]["gpus"] == list(range(8))
    assert call(f"{t.url}/v2/models/bge/ready")[0] == 200
    assert call(f"{t.url}/v2/models/bge/versions/1/ready")[0] == 200
    assert call(f"{t.url}/v2/health/ready")[0] == 200
    assert call(f"{t.url}/v2/repository/index", "POST", {})[1] == [
        {"name": "bge", "version": "1", "state": "READY"}, {"name": "clf", "version": "1", "state": "READY"}]
    assert call(f"{t.url}/v2/models/bge/versions/2")[1] == {
        "error": "Request for unknown model: 'bge' version 2 is not found"}
    info = call(f"{t.url}/gridready/info")[1]["fixed_cost_models"]
    assert info["bge"]["max_batch_size"] == 64 and info["bge"]["preferred_batch_size"] == [64]
    assert info["clf"]["dynamic_batching"] is False and info["clf"]["instance_count"] == 8


def with_input(i, **change):
    body = tokens(rows=2, seq=3)
    body["inputs"][i].update(change)
    return body


CASES = [
    ("unknown model", "nope", tokens(), 400, "Request for unknown model: 'nope' is not found"),
    ("unexpected input", "bge", with_input(1, name="token_type_ids"), 400,
     "unexpected inference input 'token_type_ids' for model 'bge'"),
    ("missing input", "bge", {"inputs": tokens()["inputs"][:1]}, 400,
     "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model 'bge'. Got input(s) ['input_ids'], "
     "but missing required input(s) ['attention_mask']. Please provide all required input(s)."),
    ("too many inputs", "bge", {"inputs": [*tokens()["inputs"], {**tokens()["inputs"][0], "name": "x"}]}, 400,
     "[request id: <id_unknown>] expected 2 inputs but got 3 inputs for model 'bge'. Got input(s) ['input_ids',"
     "'attention_mask','x'], but missing required input(s) ]. Please provide all required input(s)."),
    ("batch mismatch", "bge", with_input(1, shape=[1, 6]), 400,
     "[request id: <id_unknown>] input 'attention_mask' batch size does not match other inputs for 'bge'"),
    ("no batch dim", "bge", with_input(1, shape=[], data=[]), 400,
     "[request id: <id_unknown>] input 'attention_mask' has no shape but model requires batch dimension for 'bge'"),
    ("batch too large", "clf", {"id": "r1", "inputs": [{"name": "features", "shape": [9, 4], "datatype": "FP32",
                                                        "data": [0.0] * 36}]}, 400,
     "[request id: r1] inference request batch-size must be <= 8 for 'clf'"),
    ("data type", "bge", with_input(0, datatype="INT32"), 400,
     "[request id: <id_unknown>] inference input 'input_ids' data-type is 'INT32', but model 'bge' expects 'INT64'"),
    ("shape", "clf", {"inputs": [{"name": "features", "shape": [1, 3], "datatype": "FP32", "data": [1.0] * 3}]},
     400, "[request id: <id_unknown>] unexpected shape for input 'features' for model 'clf'. Expected [-1,4], got "
     f"[1,3]. {NOTE}"),
    ("too few elements", "bge", with_input(0, data=[1, 2, 3, 4, 5]), 500,
     "Failed to parse 'data' field: shape does not match true shape"),
    ("too many elements", "bge", with_input(0, data=[1, 2, 3, 4, 5, 6, 7]), 500,
     "Unable to parse 'data': Shape does not match true shape of 'data' field"),
    ("element type", "bge", with_input(0, data=[1, 2, 3, 4, 5, 6.5]), 500,
     "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"),
    ("no data", "bge", {"inputs": [{k: v for k, v in tokens()["inputs"][0].items() if k != "data"},
                                   tokens()["inputs"][1]]}, 500,
     "Unable to parse 'data': attempt to access non-existing object member 'data'"),
    ("no inputs", "bge", {"id": "x"}, 500, "Unable to parse 'inputs': attempt to access non-existing object member "
     "'inputs'"),
    ("fp16 as json", "clf", {"inputs": [{"name": "features", "shape": [1, 4], "datatype": "FP16",
                                         "data": [1.0] * 4}]}, 400,
     "receiving FP16 data via JSON is not supported. Please use the binary data format for input features"),
    ("unknown datatype", "clf", {"inputs": [{"name": "features", "shape": [1, 4], "datatype": "FLOAT",
                                             "data": [1.0] * 4}]}, 400, "invalid datatype for input features"),
    ("duplicate input", "bge", {"inputs": [tokens()["inputs"][0]] * 2}, 400,
     "[request id: <id_unknown>] input 'input_ids' already exists in request"),
    ("unknown output", "bge", {**tokens(), "outputs": [{"name": "cls"}]}, 400,
     "unexpected inference output 'cls' for model 'bge'"),
]


@pytest.mark.parametrize(("model", "body", "status", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusals(t, model, body, status, message):
    assert t.infer(model, copy.deepcopy(body)) == (status, {"error": message})


def test_refusals_are_not_executions_and_metrics_have_tritons_names(t):
    t.infer("bge", with_input(0, datatype="INT32"))
    t.infer("bge", tokens(rows=3))
    assert call(f"{t.url}/v2/models/bge/infer")[0] == 405  # GET
    assert t.infer("bge", b"{not json")[0] == 500
    m = t.metrics()
    lb = '{model="bge",version="1"}'
    assert m[f"nv_inference_request_success{lb}"] == 1 and m[f"nv_inference_count{lb}"] == 3
    assert m[f"nv_inference_exec_count{lb}"] == 1 and m[f"nv_inference_request_failure{lb}"] == 0
    for name in ("nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_infer_duration_us"):
        assert m[f"{name}{lb}"] > 0
    assert m['nv_inference_request_success{model="clf",version="1"}'] == 0  # a loaded model's series exist


def test_a_tensorrt_llm_model_beside_keeps_its_routes(tmp_path, triton):
    root = tmp_path / "mixed"
    write_model(root, "bge", BGE)
    write_model(root, "ensemble", 'name: "ensemble"\nplatform: "ensemble"\n', None)
    e = triton(root)
    status, body = call(f"{e.url}/v2/models/ensemble")
    assert status == 200 and body["platform"] == "ensemble"
    status, body = call(f"{e.url}/v2/models/ensemble/generate", "POST", {"text_input": "a b", "max_tokens": 3})
    assert status == 200 and body["model_name"] == "ensemble"
    assert e.infer("bge", tokens())[0] == 200
    assert call(f"{e.url}/gridready/info")[1]["models"] == ["ensemble", "bge"]
