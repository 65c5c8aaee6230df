"""Tensor tables of the TensorRT-LLM Triton models (names, types, shapes), as the pinned backend expects them.

Source of the facts: NVIDIA/TensorRT-LLM triton_backend/all_models/{inflight_batcher_llm,llmapi}/*/config.pbtxt
(see gridready/data/triton_versions.yml for the commits read). The python models in the image look their
inputs and outputs up by name at load time, so these lists must match the pinned release, not be trimmed.
One row per tensor: `name TYPE dims [opt] [ragged] [scalar]`; `scalar` adds `reshape { shape: [] }`,
and the type `LOGITS` stands for the repository's logits data type.
"""

from __future__ import annotations

from typing import Any

from gridready.serving.triton.pbtxt import Enum

ENSEMBLE_IN = """
text_input STRING 1
decoder_text_input STRING 1 opt
max_tokens INT32 1
num_return_sequences INT32 1 opt
bad_words STRING -1 opt
stop_words STRING -1 opt
exclude_input_in_output BOOL 1 opt
end_id INT32 1 opt
pad_id INT32 1 opt
top_k INT32 1 opt
top_p FP32 1 opt
temperature FP32 1 opt
length_penalty FP32 1 opt
repetition_penalty FP32 1 opt
min_tokens INT32 1 opt
presence_penalty FP32 1 opt
frequency_penalty FP32 1 opt
seed UINT64 1 opt
return_log_probs BOOL 1 opt
return_context_logits BOOL 1 opt
return_generation_logits BOOL 1 opt
return_perf_metrics BOOL 1 opt
return_num_input_tokens BOOL 1 opt
return_num_output_tokens BOOL 1 opt
beam_width INT32 1 opt
stream BOOL 1 opt
prompt_embedding_table FP16 -1,-1 opt
prompt_table_extra_id UINT64 1 opt
prompt_vocab_size INT32 1 opt
embedding_bias_words STRING -1 opt
embedding_bias_weights FP32 -1 opt
lora_task_id UINT64 1 opt
lora_weights FP16 -1,-1 opt ragged
lora_config INT32 -1,3 opt ragged
guided_decoding_guide_type STRING 1 opt ragged
guided_decoding_guide STRING 1 opt ragged
"""

# Outputs shared by tensorrt_llm, the ensemble and the BLS model (tensorrt_llm adds context_phase_params).
RESULT_OUT = """
cum_log_probs FP32 -1
output_log_probs FP32 -1,-1
context_logits LOGITS -1,-1
generation_logits LOGITS -1,-1,-1
batch_index INT32 1
sequence_index INT32 1
kv_cache_alloc_new_blocks INT32 1
kv_cache_reused_blocks INT32 1
kv_cache_alloc_total_blocks INT32 1
arrival_time_ns INT64 1
first_scheduled_time_ns INT64 1
first_token_time_ns INT64 1
last_token_time_ns INT64 1
acceptance_rate FP32 1
total_accepted_draft_tokens INT32 1
total_draft_tokens INT32 1
num_input_tokens INT32 1
num_output_tokens INT32 1
"""

PRE_IN = """
QUERY STRING 1
DECODER_QUERY STRING 1 opt
IMAGE_BYTES UINT8 -1,-1,-1,-1 opt
IMAGE_URL STRING 1 opt
IMAGES STRING -1 opt
VIDEO_BYTES UINT8 -1,-1,-1,-1 opt
REQUEST_OUTPUT_LEN INT32 1
BAD_WORDS_DICT STRING -1 opt
STOP_WORDS_DICT STRING -1 opt
EMBEDDING_BIAS_WORDS STRING -1 opt
EMBEDDING_BIAS_WEIGHTS FP32 -1 opt
END_ID INT32 1 opt
PAD_ID INT32 1 opt
PROMPT_TABLE_EXTRA_ID UINT64 1 opt
"""

PRE_OUT = """
INPUT_ID INT32 -1
REQUEST_INPUT_LEN INT32 1
DECODER_INPUT_ID INT32 -1
REQUEST_DECODER_INPUT_LEN INT32 1
BAD_WORDS_IDS INT32 2,-1
STOP_WORDS_IDS INT32 2,-1
EMBEDDING_BIAS FP32 -1
REQUEST_OUTPUT_LEN INT32 -1
OUT_END_ID INT32 1
OUT_PAD_ID INT32 1
OUT_PROMPT_TABLE_EXTRA_IDS UINT64 -1
PIXEL_VALUES FP16 -1,-1,-1,-1
ASPECT_RATIO_IDS INT64 -1
ASPECT_RATIO_MASK INT64 -1,-1
CROSS_ATTENTION_MASK INT64 -1,-1,-1
IMAGE_SIZES INT64 -1,2
IS_VIDEO_INPUT BOOL 1
ATTENTION_MASK INT64 -1
IMAGE_GRID_THW INT64 3
VISION_INPUT_ID INT32 -1
"""

TRTLLM_IN = """
input_ids INT32 -1 opt ragged
encoder_input_features FP16 -1,-1 opt ragged
encoder_output_lengths INT32 1 opt scalar
input_lengths INT32 1 scalar
request_output_len INT32 1 scalar
num_return_sequences INT32 1 opt scalar
draft_input_ids INT32 -1 opt ragged
decoder_input_ids INT32 -1 opt ragged
decoder_input_lengths INT32 1 opt scalar
draft_logits LOGITS -1,-1 opt ragged
draft_acceptance_threshold FP32 1 opt scalar
end_id INT32 1 opt scalar
pad_id INT32 1 opt scalar
stop_words_list INT32 2,-1 opt ragged
bad_words_list INT32 2,-1 opt ragged
embedding_bias FP32 -1 opt ragged
beam_width INT32 1 opt scalar
temperature FP32 1 opt scalar
runtime_top_k INT32 1 opt scalar
runtime_top_p FP32 1 opt scalar
runtime_top_p_min FP32 1 opt scalar
runtime_top_p_decay FP32 1 opt scalar
runtime_top_p_reset_ids INT32 1 opt scalar
len_penalty FP32 1 opt scalar
early_stopping BOOL 1 opt scalar
repetition_penalty FP32 1 opt scalar
min_tokens INT32 1 opt scalar
beam_search_diversity_rate FP32 1 opt scalar
presence_penalty FP32 1 opt scalar
frequency_penalty FP32 1 opt scalar
seed UINT64 1 opt scalar
return_log_probs BOOL 1 opt scalar
return_context_logits BOOL 1 opt scalar
return_generation_logits BOOL 1 opt scalar
return_perf_metrics BOOL 1 opt scalar
return_num_input_tokens BOOL 1 opt scalar
return_num_output_tokens BOOL 1 opt scalar
exclude_input_in_output BOOL 1 opt scalar
stop BOOL 1 opt scalar
streaming BOOL 1 opt scalar
prompt_embedding_table FP16 -1,-1 opt ragged
prompt_table_extra_ids UINT64 -1 opt ragged
prompt_vocab_size INT32 1 opt scalar
cross_attention_mask BOOL -1,-1 opt ragged
mrope_rotary_cos_sin FP32 -1 opt
mrope_position_deltas INT64 1 opt
lora_task_id UINT64 1 opt scalar
lora_weights FP16 -1,-1 opt ragged
lora_config INT32 -1,3 opt ragged
context_phase_params UINT8 -1 opt ragged
skip_cross_attn_blocks BOOL 1 opt ragged
retention_token_range_starts INT32 -1 opt ragged
retention_token_range_ends INT32 -1 opt ragged
retention_token_range_priorities INT32 -1 opt ragged
retention_token_range_durations_ms INT32 -1 opt ragged
retention_decode_priority INT32 1 opt ragged
retention_decode_duration_ms INT32 1 opt ragged
guided_decoding_guide_type STRING 1 opt ragged
guided_decoding_guide STRING 1 opt ragged
lookahead_window_size INT32 1 opt ragged
lookahead_ngram_size INT32 1 opt ragged
lookahead_verification_set_size INT32 1 opt ragged
"""

TRTLLM_OUT = "output_ids INT32 -1,-1\nsequence_length INT32 -1\ncontext_phase_params UINT8 -1\n" + RESULT_OUT

POST_IN = """
TOKENS_BATCH INT32 -1,-1
SEQUENCE_LENGTH INT32 -1
"""
POST_OUT = "OUTPUT STRING -1"

BLS_IN = """
text_input STRING 1
decoder_text_input STRING 1 opt
image_input FP16 -1,3,-1,-1 opt
image_bytes_input UINT8 -1,-1,-1,-1 opt
image_url_input STRING 1 opt
video_bytes_input UINT8 -1,-1,-1,-1 opt
max_tokens INT32 1
bad_words STRING -1 opt
stop_words STRING -1 opt
exclude_input_in_output BOOL 1 opt
end_id INT32 1 opt
pad_id INT32 1 opt
top_k INT32 1 opt
top_p FP32 1 opt
temperature FP32 1 opt
length_penalty FP32 1 opt
repetition_penalty FP32 1 opt
min_tokens INT32 1 opt
presence_penalty FP32 1 opt
frequency_penalty FP32 1 opt
seed UINT64 1 opt
return_log_probs BOOL 1 opt scalar
return_context_logits BOOL 1 opt scalar
return_generation_logits BOOL 1 opt scalar
num_return_sequences INT32 1 opt scalar
beam_width INT32 1 opt
stream BOOL 1 opt
prompt_embedding_table FP16 -1,-1 opt
prompt_vocab_size INT32 1 opt
prompt_table_extra_id UINT64 1 opt
embedding_bias_words STRING -1 opt
embedding_bias_weights FP32 -1 opt
num_draft_tokens INT32 1 opt
use_draft_logits BOOL 1 opt scalar
lora_task_id UINT64 1 opt scalar
lora_weights FP16 -1,-1 opt ragged
lora_config INT32 -1,3 opt ragged
return_perf_metrics BOOL 1 opt scalar
return_num_input_tokens BOOL 1 opt scalar
return_num_output_tokens BOOL 1 opt scalar
guided_decoding_guide_type STRING 1 opt
guided_decoding_guide STRING 1 opt
"""

LLMAPI_IN = """
text_input STRING -1
image_url STRING -1 opt
streaming BOOL 1 opt
sampling_param_best_of INT32 1 opt
sampling_param_temperature FP32 1 opt
sampling_param_top_k INT32 1 opt
sampling_param_top_p FP32 1 opt
sampling_param_frequency_penalty FP32 1 opt
sampling_param_presence_penalty FP32 1 opt
sampling_param_max_tokens INT32 1 opt
sampling_param_stop STRING -1 opt
sampling_param_seed UINT64 1 opt
sampling_param_exclude_input_from_output BOOL 1 opt
sampling_param_return_perf_metrics BOOL 1 opt
return_finish_reason BOOL 1 opt
return_stop_reason BOOL 1 opt
return_cumulative_logprob BOOL 1 opt
stop BOOL 1 opt
lora_id UINT64 1 opt
lora_name STRING 1 opt
lora_path STRING 1 opt
lora_ckpt_source STRING 1 opt
"""

LLMAPI_OUT = """
text_output STRING -1
finish_reason STRING -1
stop_reason STRING -1
cumulative_logprob FP32 -1
kv_cache_reused_block INT32 -1
kv_cache_missed_block INT32 -1
kv_cache_alloc_new_blocks INT32 -1
kv_cache_alloc_total_blocks INT32 -1
kv_cache_hit_rate FP32 -1
arrival_time_ns INT64 1
first_scheduled_time_ns INT64 1
first_token_time_ns INT64 1
last_token_time_ns INT64 1
acceptance_rate FP32 1
total_accepted_draft_tokens INT32 1
total_draft_tokens INT32 1
"""


def tensors(table: str, logits: str = "FP32") -> list[dict[str, Any]]:
    """Rows of a table as config.pbtxt tensor dicts (input or output)."""
    out: list[dict[str, Any]] = []
    for row in filter(str.strip, table.splitlines()):
        name, dtype, dims, *flags = row.split()
        kind = logits if dtype == "LOGITS" else dtype
        t: dict[str, Any] = {"name": name, "data_type": Enum(f"TYPE_{kind}"), "dims": [int(d) for d in dims.split(",")]}
        if "scalar" in flags:
            t["reshape"] = {"shape": []}
        if "opt" in flags:
            t["optional"] = True
        if "ragged" in flags:
            t["allow_ragged_batch"] = True
        out.append(t)
    return out
