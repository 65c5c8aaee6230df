"""Wrong parameters and broken wiring fail generation with clear messages (file:line:col where it applies)."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from gridready.errors import InvalidInput
from gridready.exitcodes import ExitCode
from gridready.serving import triton
from gridready.serving.triton import repo as triton_repo
from gridready.serving.triton.pbtxt import Enum, RepositoryError, parse, render
from gridready.serving.triton.wiring import check_ensemble

from .conftest import SITE_DIGEST, plan


def test_misspelt_field_fails_with_line_and_column() -> None:
    msg = {"name": "tensorrt_llm", "backend": "tensorrtllm", "max_batch_sizee": 64}
    with pytest.raises(RepositoryError) as err:
        render(msg, "tensorrt_llm/config.pbtxt", frozenset())
    text = str(err.value)
    assert text.startswith("tensorrt_llm/config.pbtxt:3:1: ")
    assert 'has no field named "max_batch_sizee"' in text
    assert err.value.code == ExitCode.INVALID


def test_wrong_enum_fails_with_line_and_column() -> None:
    msg = {"name": "m", "input": [{"name": "x", "data_type": Enum("TYPE_FOO"), "dims": [1]}]}
    with pytest.raises(RepositoryError, match=r"m/config.pbtxt:4:\d+: .*TYPE_FOO"):
        render(msg, "m/config.pbtxt", frozenset())


def test_parse_reports_syntax_errors() -> None:
    with pytest.raises(RepositoryError, match=r"x/config.pbtxt:1:\d+:"):
        parse('name: "x" max_batch_size: {', "x/config.pbtxt")


def test_misspelt_parameter_key_is_named_with_a_suggestion() -> None:
    p = plan("8b", mode="engine", parameters={"tensorrt_llm": {"kv_cache_free_gpu_mem_fracton": "0.5"}})
    with pytest.raises(RepositoryError) as err:
        triton.render_repository(p)
    assert str(err.value) == (
        "tensorrt_llm/config.pbtxt: parameters: unknown key 'kv_cache_free_gpu_mem_fracton' for model "
        "'tensorrt_llm' (did you mean 'kv_cache_free_gpu_mem_fraction'?)"
    )


def test_leftover_placeholder_is_refused() -> None:
    p = plan("8b", mode="engine", parameters={"tensorrt_llm": {"decoding_mode": "${decoding_mode}"}})
    with pytest.raises(RepositoryError, match=r"unfilled template placeholder \$\{decoding_mode\}"):
        triton.render_repository(p)


def test_parameters_for_a_model_of_the_other_mode_are_refused() -> None:
    with pytest.raises(ValidationError, match="no model 'preprocessing' in llmapi mode"):
        plan("8b", parameters={"preprocessing": {"tokenizer_dir": "/x"}})


def _models(p):
    msgs = triton_repo.engine_models(p)
    return msgs, {n: render(m, n, triton_repo.KNOWN_PARAMETERS[n])[1] for n, m in msgs.items()}


def _ensemble(msg):
    return render(msg, "ensemble/config.pbtxt", frozenset())[1]


def test_generated_wiring_is_sound() -> None:
    _, cfgs = _models(plan("70b", 8, 2, mode="engine"))
    check_ensemble(cfgs["ensemble"], cfgs)


def test_input_read_from_nowhere_is_caught() -> None:
    msgs, cfgs = _models(plan("8b", mode="engine"))
    bad = copy.deepcopy(msgs["ensemble"])
    bad["ensemble_scheduling"]["step"][1]["input_map"]["input_ids"] = "_INPUT_IDS"
    with pytest.raises(RepositoryError, match=r"step 2 \(tensorrt_llm\): input 'input_ids' reads '_INPUT_IDS'"):
        check_ensemble(_ensemble(bad), cfgs)


def test_steps_out_of_order_are_caught() -> None:
    msgs, cfgs = _models(plan("8b", mode="engine"))
    bad = copy.deepcopy(msgs["ensemble"])
    steps = bad["ensemble_scheduling"]["step"]
    steps[1], steps[2] = steps[2], steps[1]  # postprocessing before tensorrt_llm
    with pytest.raises(RepositoryError) as err:
        check_ensemble(_ensemble(bad), cfgs)
    assert "step 2 (postprocessing): input 'TOKENS_BATCH' reads '_TOKENS_BATCH', which neither" in str(err.value)


def test_unmapped_required_input_unknown_key_and_unproduced_output_are_caught() -> None:
    msgs, cfgs = _models(plan("8b", mode="engine"))
    bad = copy.deepcopy(msgs["ensemble"])
    trt = bad["ensemble_scheduling"]["step"][1]
    del trt["input_map"]["input_lengths"]
    trt["input_map"]["input_idz"] = "_INPUT_ID"
    del trt["output_map"]["cum_log_probs"]
    with pytest.raises(RepositoryError) as err:
        check_ensemble(_ensemble(bad), cfgs)
    lines = err.value.lines
    assert any("required input 'input_lengths' is not mapped" in x for x in lines)
    assert any("input_map key 'input_idz' is not an input of tensorrt_llm" in x for x in lines)
    assert any("ensemble output 'cum_log_probs' is produced by no step" in x for x in lines)


def test_missing_step_model_is_caught() -> None:
    _, cfgs = _models(plan("8b", mode="engine"))
    del cfgs["postprocessing"]
    with pytest.raises(RepositoryError, match="no model 'postprocessing' in the repository"):
        check_ensemble(cfgs["ensemble"], cfgs)


def test_a_deployment_needs_an_image_digest() -> None:
    """The pins name no confirmed digest: without the site's (inventory triton_versions.yml) or the tier's own,
    the plan is refused; the tier's triton.versions goes over the site's."""
    with pytest.raises(InvalidInput, match=r"serving.tiers\[trt-8b\].triton.versions.image_digest: .* not pinned"):
        plan("8b", site_pins=None)
    digest = "sha256:" + "ab" * 32
    p = plan("8b", site_pins=None, versions={"image_digest": digest})
    assert p.release.image_ref == f"nvcr.io/nvidia/tritonserver@{digest}"
    assert plan("8b").release.image_ref == f"nvcr.io/nvidia/tritonserver@{SITE_DIGEST}"
    assert plan("8b", versions={"image_digest": digest}).release.image_digest == digest


def test_plan_checks() -> None:
    with pytest.raises(InvalidInput, match="exceeds max_model_len"):
        plan("8b", max_input_len=100_000)
    with pytest.raises(InvalidInput, match="collides with a Triton port"):
        plan("8b", tier_over={"port": 8002})
    with pytest.raises(ValidationError, match="trtllm-serve needs mode llmapi"):
        plan("8b", mode="engine", frontend="trtllm-serve")
    with pytest.raises(ValidationError, match="bls is a model of the engine-mode repository"):
        plan("8b", bls=True)
