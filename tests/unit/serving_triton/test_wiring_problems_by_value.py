"""The ensemble wiring check (gridready/serving/triton/wiring.py) on small ModelConfig messages built with
tritonclient's model_config_pb2: the exact problem line for each way a step can be miswired, in step order, and
every problem of one ensemble listed together. A protobuf map's iteration order is not fixed between runs, so no
expectation here depends on the order of two entries of one input_map or output_map."""

from __future__ import annotations

import pytest
from tritonclient.grpc import model_config_pb2 as pb

from gridready.serving.triton.pbtxt import RepositoryError
from gridready.serving.triton.wiring import check_ensemble

S, I32, F32 = pb.TYPE_STRING, pb.TYPE_INT32, pb.TYPE_FP32


def model(name: str, inputs: dict[str, int], outputs: dict[str, int],
          optional: tuple[str, ...] = ()) -> pb.ModelConfig:
    cfg = pb.ModelConfig(name=name)
    for n, t in inputs.items():
        cfg.input.add(name=n, data_type=t, optional=n in optional)
    for n, t in outputs.items():
        cfg.output.add(name=n, data_type=t)
    return cfg


def ensemble(request: dict[str, int], outputs: dict[str, int],
             steps: list[tuple[str, dict[str, str], dict[str, str]]]) -> pb.ModelConfig:
    cfg = model("ens", request, outputs)
    for name, in_map, out_map in steps:
        step = cfg.ensemble_scheduling.step.add(model_name=name)
        step.input_map.update(in_map)
        step.output_map.update(out_map)
    return cfg


MODELS = {
    "pre": model("pre", {"QUERY": S, "MAX": I32}, {"IDS": I32}, optional=("MAX",)),
    "llm": model("llm", {"input_ids": I32}, {"output_ids": I32, "logits": F32}),
    "post": model("post", {"TOKENS": I32}, {"OUT": S}),
}
GOOD = [("pre", {"QUERY": "text_input"}, {"IDS": "_ids"}),
        ("llm", {"input_ids": "_ids"}, {"output_ids": "_out"}),
        ("post", {"TOKENS": "_out"}, {"OUT": "text_output"})]


def problems(ens: pb.ModelConfig) -> list[str]:
    with pytest.raises(RepositoryError) as err:
        check_ensemble(ens, MODELS)
    return err.value.lines


def test_a_sound_chain_passes_with_an_optional_input_unmapped() -> None:
    check_ensemble(ensemble({"text_input": S}, {"text_output": S}, GOOD), MODELS)
    # the optional input mapped from the request, of its type
    steps = [("pre", {"QUERY": "text_input", "MAX": "max_tokens"}, {"IDS": "_ids"}), *GOOD[1:]]
    check_ensemble(ensemble({"text_input": S, "max_tokens": I32}, {"text_output": S}, steps), MODELS)


def test_a_step_of_a_model_not_in_the_repository_is_named_and_the_rest_checked() -> None:
    steps = [GOOD[0], ("gone", {"x": "_ids"}, {"y": "_out"}), GOOD[2]]
    assert problems(ensemble({"text_input": S}, {"text_output": S}, steps)) == [
        "ens/config.pbtxt: step 2 (gone): no model 'gone' in the repository",
        "ens/config.pbtxt: step 3 (post): input 'TOKENS' reads '_out', which neither the request nor an earlier "
        "step produces"]


def test_input_map_keys_and_sources() -> None:
    steps = [("pre", {"QUERY": "text_input", "TYPO": "text_input"}, {"IDS": "_ids"}),
             ("llm", {"input_ids": "_later"}, {"output_ids": "_out"}),
             ("post", {"TOKENS": "_out"}, {"OUT": "text_output", "_later": "x"})]
    assert problems(ensemble({"text_input": S}, {"text_output": S}, steps)) == [
        "ens/config.pbtxt: step 1 (pre): input_map key 'TYPO' is not an input of pre",
        "ens/config.pbtxt: step 2 (llm): input 'input_ids' reads '_later', which neither the request nor an "
        "earlier step produces",
        "ens/config.pbtxt: step 3 (post): output_map key '_later' is not an output of post"]


def test_data_types_from_the_request_and_from_an_earlier_step() -> None:
    steps = [("pre", {"QUERY": "text_input", "MAX": "max_tokens"}, {"IDS": "_ids"}),
             ("llm", {"input_ids": "_ids"}, {"logits": "_out"}),
             ("post", {"TOKENS": "_out"}, {"OUT": "text_output"})]
    assert problems(ensemble({"text_input": S, "max_tokens": F32}, {"text_output": S}, steps)) == [
        "ens/config.pbtxt: step 1 (pre): input 'MAX' has another data type than 'max_tokens'",
        "ens/config.pbtxt: step 3 (post): input 'TOKENS' has another data type than '_out'"]


def test_required_inputs_must_be_mapped() -> None:
    steps = [("pre", {"MAX": "max_tokens"}, {"IDS": "_ids"}), ("llm", {}, {"output_ids": "_out"}), GOOD[2]]
    assert problems(ensemble({"max_tokens": I32}, {"text_output": S}, steps)) == [
        "ens/config.pbtxt: step 1 (pre): required input 'QUERY' is not mapped",
        "ens/config.pbtxt: step 2 (llm): required input 'input_ids' is not mapped"]


def test_a_tensor_produced_twice_or_shadowing_the_request() -> None:
    steps = [("pre", {"QUERY": "text_input"}, {"IDS": "text_input"}),
             ("llm", {"input_ids": "max_tokens"}, {"output_ids": "_out"}),
             ("post", {"TOKENS": "_out"}, {"OUT": "_out"})]
    assert problems(ensemble({"text_input": S, "max_tokens": I32}, {"text_output": S}, steps)) == [
        "ens/config.pbtxt: step 1 (pre): tensor 'text_input' is produced twice",
        "ens/config.pbtxt: step 3 (post): tensor '_out' is produced twice",
        "ens/config.pbtxt: ensemble output 'text_output' is produced by no step"]


def test_ensemble_outputs_no_step_produces() -> None:
    assert problems(ensemble({"text_input": S}, {"text_output": S, "ids": I32, "_ids": I32}, GOOD)) == [
        "ens/config.pbtxt: ensemble output 'ids' is produced by no step"]
    # a request tensor is not a step's product
    assert problems(ensemble({"text_input": S}, {"text_input": S}, GOOD[:1])) == [
        "ens/config.pbtxt: ensemble output 'text_input' is produced by no step"]


def test_every_entry_of_a_step_is_checked_after_a_bad_one() -> None:
    # two bad entries of each kind: whichever the map yields first, the other is still reported
    steps = [("pre", {"QUERY": "text_input", "TYPO1": "text_input", "TYPO2": "text_input"}, {"IDS": "_ids"}),
             ("llm", {"input_ids": "_ids"}, {"output_ids": "_out", "none1": "a", "none2": "b"}),
             ("post", {"TOKENS": "_out"}, {"OUT": "text_output"})]
    assert sorted(problems(ensemble({"text_input": S}, {"text_output": S}, steps))) == [
        "ens/config.pbtxt: step 1 (pre): input_map key 'TYPO1' is not an input of pre",
        "ens/config.pbtxt: step 1 (pre): input_map key 'TYPO2' is not an input of pre",
        "ens/config.pbtxt: step 2 (llm): output_map key 'none1' is not an output of llm",
        "ens/config.pbtxt: step 2 (llm): output_map key 'none2' is not an output of llm"]
    steps = [("pre", {"QUERY": "nowhere1", "MAX": "nowhere2"}, {"IDS": "text_input"}),
             ("llm", {"input_ids": "text_input"}, {"output_ids": "text_input", "logits": "text_input"}),
             ("post", {"TOKENS": "text_input"}, {"OUT": "text_output"})]
    assert sorted(problems(ensemble({"text_input": S}, {"text_output": S}, steps))) == [
        "ens/config.pbtxt: step 1 (pre): input 'MAX' reads 'nowhere2', which neither the request nor an earlier "
        "step produces",
        "ens/config.pbtxt: step 1 (pre): input 'QUERY' reads 'nowhere1', which neither the request nor an earlier "
        "step produces",
        "ens/config.pbtxt: step 1 (pre): tensor 'text_input' is produced twice",
        "ens/config.pbtxt: step 2 (llm): input 'input_ids' has another data type than 'text_input'",
        "ens/config.pbtxt: step 2 (llm): tensor 'text_input' is produced twice",
        "ens/config.pbtxt: step 2 (llm): tensor 'text_input' is produced twice",
        "ens/config.pbtxt: step 3 (post): input 'TOKENS' has another data type than 'text_input'"]
