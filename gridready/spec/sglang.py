"""The SGLang part of a serving tier: `tiers[].sglang` in cluster.yml (engine sglang).

Only what is SGLang-specific lives here; the tier's own fields map onto SGLang's server arguments in
gridready/serving/sglang/__init__.py (sources in docs/serving-sglang.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

# docs/advanced_features/server_arguments.md, "Memory and scheduling": --schedule-policy choices.
SchedulePolicy = Literal["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"]
# Same page: --quantization and --kv-cache-dtype choices; spec values outside them are refused for sglang tiers.
QUANTIZATION = ("awq", "fp8", "gptq", "modelopt")
KV_CACHE_DTYPES = ("auto", "fp8_e4m3", "fp8_e5m2")


def problems(quantization: str | None, kv_cache_dtype: str) -> list[str]:
    """Tier values SGLang does not accept, each as `key: what is wrong`."""
    out = []
    if quantization and quantization not in QUANTIZATION:
        out.append(f"quantization: {quantization!r} is not an SGLang --quantization choice "
                   f"(of the spec's: {', '.join(QUANTIZATION)})")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        out.append(f"kv_cache_dtype: {kv_cache_dtype!r} is not an SGLang --kv-cache-dtype choice "
                   f"({', '.join(KV_CACHE_DTYPES)})")
    return out


class SglangSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    dist_init_port: int = Field(
        50000, ge=1024, le=65535,
        description="port on the replica's rank-0 node for --dist-init-addr (multi-node only)")
    schedule_policy: SchedulePolicy = Field(
        "fcfs", description="--schedule-policy; lpm (longest prefix match) favours radix-cache hits")
    page_size: PositiveInt = Field(1, description="--page-size: tokens per KV page (SGLang default 1)")
    chunked_prefill_size: int | None = Field(
        None, ge=-1, description="--chunked-prefill-size; -1 disables chunked prefill; default: SGLang's")
    version: str | None = Field(None, pattern=r"^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?$",
                                description="override the pin of gridready/data/sglang_versions.yml")
