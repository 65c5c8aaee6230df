"""SGLang's accepted --quantization and --kv-cache-dtype choices, each refusal as the key and the choices named."""

from __future__ import annotations

import pytest

from gridready.spec.sglang import problems


@pytest.mark.parametrize(("quantization", "kv", "found"), [
    (None, "auto", []),
    ("fp8", "fp8_e5m2", []),
    ("compressed-tensors", "auto",
     ["quantization: 'compressed-tensors' is not an SGLang --quantization choice (of the spec's: awq, fp8, gptq, "
      "modelopt)"]),
    (None, "fp8", ["kv_cache_dtype: 'fp8' is not an SGLang --kv-cache-dtype choice (auto, fp8_e4m3, fp8_e5m2)"]),
    ("compressed-tensors", "bf16", [
        "quantization: 'compressed-tensors' is not an SGLang --quantization choice (of the spec's: awq, fp8, gptq, "
        "modelopt)",
        "kv_cache_dtype: 'bf16' is not an SGLang --kv-cache-dtype choice (auto, fp8_e4m3, fp8_e5m2)"]),
])
def test_problems(quantization, kv, found):
    assert problems(quantization, kv) == found
