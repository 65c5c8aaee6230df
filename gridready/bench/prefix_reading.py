"""Each engine's prefix-cache hit rate over one benchmark run, read from the engine's own Prometheus metrics.

vLLM (vllm/v1/metrics/loggers.py; docs/usage/metrics.md): counters `vllm:prefix_cache_queries` and
`vllm:prefix_cache_hits`, in tokens, exposed with prometheus_client's `_total` suffix.
SGLang (docs/references/production_metrics.md; python/sglang/srt/metrics/collector.py): the gauge
`sglang:cache_hit_rate` and the counters `sglang:cached_tokens_total` and `sglang:prompt_tokens_total`.
The rate of the run is the counters' difference (after - before), so earlier traffic does not dilute it; SGLang's
own gauge is recorded beside it as the engine reports it. Triton tiers have no such series: no reading.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gridready.bench.http import HttpError, fetch

SERIES = {  # engine -> (hit tokens counter, queried tokens counter, engine's own rate gauge)
    "vllm": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total", None),
    "sglang": ("sglang:cached_tokens_total", "sglang:prompt_tokens_total", "sglang:cache_hit_rate"),
}


class PrefixCacheReading(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hit_series: str
    query_series: str
    hit_tokens: float
    queried_tokens: float
    hit_rate: float | None  # hit_tokens / queried_tokens over the run; None when nothing was queried
    engine_reported: float | None = None  # SGLang's sglang:cache_hit_rate gauge after the run
    engine_series: str | None = None


def parse(text: str) -> dict[str, float]:
    """Sum of every sample per metric name (labels dropped) from Prometheus text format."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


async def scrape(metrics_url: str | None, timeout: float = 10.0) -> dict[str, float] | None:
    """The engine's metrics, summed per name; None when it has no metrics URL or does not answer 200."""
    if not metrics_url:
        return None
    base, _, path = metrics_url.partition("://")[2].partition("/")
    scheme = metrics_url.split("://", 1)[0]
    try:
        status, _, body = await fetch(f"{scheme}://{base}", "/" + path, timeout=timeout)
    except HttpError:
        return None
    return parse(body.decode(errors="replace")) if status == 200 else None


def reading(engine: str, before: dict[str, float] | None, after: dict[str, float] | None
            ) -> PrefixCacheReading | None:
    """The run's hit rate from two scrapes; None for engines without prefix-cache series or missing scrapes."""
    if engine not in SERIES or before is None or after is None:
        return None
    hits_name, queries_name, gauge = SERIES[engine]
    if hits_name not in after or queries_name not in after:
        return None
    hits = after[hits_name] - before.get(hits_name, 0.0)
    queried = after[queries_name] - before.get(queries_name, 0.0)
    return PrefixCacheReading(
        hit_series=hits_name, query_series=queries_name, hit_tokens=hits, queried_tokens=queried,
        hit_rate=hits / queried if queried > 0 else None,
        engine_reported=after.get(gauge) if gauge else None, engine_series=gauge)
