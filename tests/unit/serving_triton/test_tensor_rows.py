"""Tensor rows as config.pbtxt tensor dicts (gridready/serving/triton/tensors.py): type, dims, and each flag
(opt, ragged, scalar) on its own and together, the LOGITS stand-in, and rows of the pinned tables whose shapes
the backend checks at load (TensorRT-LLM triton_backend/all_models/inflight_batcher_llm/*/config.pbtxt)."""

from __future__ import annotations

from gridready.serving.triton import tensors as t
from gridready.serving.triton.pbtxt import Enum


def test_a_row_per_flag_and_blank_or_whitespace_lines_skipped() -> None:
    table = """
   \t
a INT32 1
b FP16 -1,-1 opt
c INT32 2,-1 ragged
d BOOL 1 scalar
e LOGITS -1,-1,-1 opt ragged scalar
"""
    assert t.tensors(table) == [
        {"name": "a", "data_type": Enum("TYPE_INT32"), "dims": [1]},
        {"name": "b", "data_type": Enum("TYPE_FP16"), "dims": [-1, -1], "optional": True},
        {"name": "c", "data_type": Enum("TYPE_INT32"), "dims": [2, -1], "allow_ragged_batch": True},
        {"name": "d", "data_type": Enum("TYPE_BOOL"), "dims": [1], "reshape": {"shape": []}},
        {"name": "e", "data_type": Enum("TYPE_FP32"), "dims": [-1, -1, -1], "reshape": {"shape": []},
         "optional": True, "allow_ragged_batch": True}]
    assert t.tensors("x LOGITS 1", logits="BF16") == [{"name": "x", "data_type": Enum("TYPE_BF16"), "dims": [1]}]
    assert t.tensors("x FP32 1", logits="BF16")[0]["data_type"] == Enum("TYPE_FP32")


def by_name(table: str, logits: str = "FP32") -> dict[str, dict]:
    return {row["name"]: row for row in t.tensors(table, logits)}


def test_rows_of_the_pinned_tables() -> None:
    ens = by_name(t.ENSEMBLE_IN)
    assert ens["text_input"] == {"name": "text_input", "data_type": Enum("TYPE_STRING"), "dims": [1]}
    assert ens["lora_config"] == {"name": "lora_config", "data_type": Enum("TYPE_INT32"), "dims": [-1, 3],
                                  "optional": True, "allow_ragged_batch": True}
    assert ens["seed"]["data_type"] == Enum("TYPE_UINT64")
    out = by_name(t.RESULT_OUT, "BF16")
    assert out["generation_logits"] == {"name": "generation_logits", "data_type": Enum("TYPE_BF16"),
                                        "dims": [-1, -1, -1]}
    assert out["arrival_time_ns"]["data_type"] == Enum("TYPE_INT64")
    pre_in, pre_out = by_name(t.PRE_IN), by_name(t.PRE_OUT)
    assert pre_in["QUERY"] == {"name": "QUERY", "data_type": Enum("TYPE_STRING"), "dims": [1]}
    assert pre_out["BAD_WORDS_IDS"]["dims"] == [2, -1]
    assert pre_out["IMAGE_SIZES"]["dims"] == [-1, 2]
    trt = by_name(t.TRTLLM_IN)
    assert trt["input_lengths"] == {"name": "input_lengths", "data_type": Enum("TYPE_INT32"), "dims": [1],
                                    "reshape": {"shape": []}}
    assert trt["input_ids"] == {"name": "input_ids", "data_type": Enum("TYPE_INT32"), "dims": [-1],
                                "optional": True, "allow_ragged_batch": True}
    llm_in, llm_out = by_name(t.LLMAPI_IN), by_name(t.LLMAPI_OUT)
    assert llm_in["text_input"] == {"name": "text_input", "data_type": Enum("TYPE_STRING"), "dims": [-1]}
    assert llm_out["text_output"] == {"name": "text_output", "data_type": Enum("TYPE_STRING"), "dims": [-1]}
    assert [len(t.tensors(x)) for x in (t.ENSEMBLE_IN, t.RESULT_OUT, t.PRE_IN, t.PRE_OUT, t.LLMAPI_IN,
                                        t.LLMAPI_OUT)] == [36, 18, 14, 20, 22, 16]
