"""The simulated engine's state: admission queue, token timing, metrics and ground-truth request records."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .metrics import Registry
from .prefix_cache import PrefixCache
from .profile import Profile, token_text

# vLLM 0.33.0's own bounds (vllm/v1/metrics/buckets.py; witness: gridready/data/engine_cli/vllm-0.33.0-metrics.json,
# tests/unit/bench/test_vllm_metrics_witness.py compares): TTFT, inter-token (also TPOT), request phases (e2e, queue,
# prefill, decode). SGLang's histograms keep LAT_BUCKETS/ITL_BUCKETS below.
VLLM_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
VLLM_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                    40.0, 80.0)
VLLM_REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                        240.0, 480.0, 960.0, 1920.0, 7680.0)
# name, help and bounds of vLLM 0.33.0's histograms (vllm/v1/metrics/loggers.py), in the order Engine assigns them
VLLM_HISTOGRAMS = (
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", VLLM_TTFT_BUCKETS),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", VLLM_ITL_BUCKETS),
    ("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
     VLLM_ITL_BUCKETS),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", VLLM_REQUEST_BUCKETS),
    ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
     VLLM_REQUEST_BUCKETS),
    ("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
     VLLM_REQUEST_BUCKETS),
    ("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
     VLLM_REQUEST_BUCKETS),
)
LAT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)
MS_BUCKETS = (10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0)


@dataclass
class RequestRecord:
    """What the server actually did for one request: the ground truth the client is tested against."""

    no: int
    request_id: str
    model: str
    prompt_tokens: int
    max_tokens: int
    received: float  # perf_counter when the request body was complete
    started: float = 0.0  # admitted (left the queue)
    token_times: list[float] = field(default_factory=list)  # perf_counter after each token was written
    finished: float = 0.0
    finish_reason: str = "length"
    cached_tokens: int = 0  # prompt tokens found in the prefix cache

    def summary(self) -> dict[str, Any]:
        t = self.token_times
        out = {k: v for k, v in asdict(self).items() if k != "token_times"}
        out["completion_tokens"] = len(t)
        out["ttft_s"] = (t[0] - self.received) if t else None
        out["itl_mean_s"] = ((t[-1] - t[0]) / (len(t) - 1)) if len(t) > 1 else None
        out["e2e_s"] = (self.finished - self.received) if self.finished else None
        return out


class Engine:
    """Admission, timing and bookkeeping shared by the OpenAI and Triton front ends."""

    def __init__(self, profile: Profile, models: list[str], mode: str,
                 prefix_cache: PrefixCache | None = None) -> None:
        self.profile = profile
        # openai (vLLM) and sglang modes reuse shared prompt prefixes; see prefix_cache.py for the granularity
        self.cache = prefix_cache or PrefixCache(granularity=1 if mode == "sglang" else 16,
                                                 enabled=mode != "triton")
        self.models = models
        self.mode = mode
        self.started_at = time.time()
        self._ready_at = time.monotonic() + profile.load_s
        self.peers_missing: Callable[[], int] = lambda: 0  # multi-node SGLang: ranks not yet joined
        self.running = 0
        self.waiting = 0
        self._next_no = 0
        self._slots = asyncio.Semaphore(profile.max_num_seqs)
        self.records: deque[RequestRecord] = deque(maxlen=20000)
        self.info: dict[str, Any] = {}
        self.fixed: dict[str, Any] = {}  # triton mode: fixed-cost models (fixed_model.FixedCostModel) by name
        self.registry = Registry()
        self._init_metrics()

    # -- readiness --------------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return time.monotonic() >= self._ready_at and self.peers_missing() == 0

    # -- metrics ------------------------------------------------------------------------------------
    def _init_metrics(self) -> None:
        r = self.registry
        if self.mode == "openai":
            self.m_running = r.gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
            self.m_waiting = r.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
            self.m_kv = r.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
            self.m_prompt = r.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
            self.m_gen = r.counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
            self.m_success = r.counter("vllm:request_success_total", "Count of successfully processed requests.")
            (self.h_ttft, self.h_itl, self.h_tpot, self.h_e2e, self.h_queue, self.h_prefill,
             self.h_decode) = (r.histogram(name, help_, bounds) for name, help_, bounds in VLLM_HISTOGRAMS)
            # vllm/v1/metrics/loggers.py: Counter("vllm:prefix_cache_queries"|"vllm:prefix_cache_hits"), in tokens;
            # prometheus_client exposes counters with the _total suffix
            self.m_pc_queries = r.counter("vllm:prefix_cache_queries_total",
                                          "Prefix cache queries, in terms of number of queried tokens.")
            self.m_pc_hits = r.counter("vllm:prefix_cache_hits_total",
                                       "Prefix cache hits, in terms of number of cached tokens.")
        elif self.mode == "sglang":
            self._init_sglang_metrics(r)
        else:
            self.m_success = r.counter("nv_inference_request_success", "Number of successful inference requests")
            self.m_failure = r.counter("nv_inference_request_failure", "Number of failed inference requests")
            self.m_count = r.counter("nv_inference_count", "Number of inferences performed")
            self.m_exec = r.counter("nv_inference_exec_count", "Number of model executions performed")
            self.m_req_us = r.counter("nv_inference_request_duration_us", "Cumulative inference request duration")
            self.m_queue_us = r.counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration")
            self.m_in_us = r.counter("nv_inference_compute_input_duration_us", "Cumulative compute input duration")
            self.m_infer_us = r.counter("nv_inference_compute_infer_duration_us",
                                        "Cumulative compute inference duration")
            self.m_out_us = r.counter("nv_inference_compute_output_duration_us",
                                      "Cumulative inference compute output duration")
            self.m_pending = r.gauge("nv_inference_pending_request_count", "Instantaneous number of pending requests")
            self.h_first = r.histogram("nv_inference_first_response_histogram_ms",
                                       "Duration from request to first response in milliseconds", MS_BUCKETS)
            self.m_trt = r.gauge("nv_trt_llm_request_metrics", "TRT LLM request metrics")
            self.m_kvblocks = r.gauge("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics")
        self.m_info = r.gauge("gridready_sim_info", "The engine answering is gridready's simulator (1).")

    def _init_sglang_metrics(self, r: Registry) -> None:
        """SGLang's names (docs/references/production_metrics.md; python/sglang/srt/metrics/collector.py)."""
        self.m_running = r.gauge("sglang:num_running_reqs", "The number of running requests.")
        self.m_waiting = r.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.m_kv = r.gauge("sglang:token_usage", "The token usage.")
        self.m_hit_rate = r.gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.m_prompt = r.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
        self.m_gen = r.counter("sglang:generation_tokens_total", "Number of generation tokens processed.")
        self.m_cached = r.counter("sglang:cached_tokens_total", "Number of cached prompt tokens.")
        self.m_success = r.counter("sglang:num_requests_total", "Number of requests processed.")
        self.h_ttft = r.histogram("sglang:time_to_first_token_seconds",
                                  "Histogram of time to first token in seconds.", LAT_BUCKETS)
        self.h_itl = r.histogram("sglang:inter_token_latency_seconds",
                                 "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.h_e2e = r.histogram("sglang:e2e_request_latency_seconds",
                                 "Histogram of End-to-end request latency in seconds", LAT_BUCKETS)

    def _labels(self, model: str) -> tuple[tuple[str, str], ...]:
        if self.mode == "openai":
            return (("engine", "0"), ("model_name", model))
        if self.mode == "sglang":
            return (("model_name", model),)
        return (("model", model), ("version", "1"))

    def update_gauges(self) -> None:
        for model in self.models:
            lb = self._labels(model)
            if self.mode in ("openai", "sglang"):
                self.m_running.set(lb, self.running)
                self.m_waiting.set(lb, self.waiting)
                self.m_kv.set(lb, min(1.0, self.running / max(1, self.profile.max_num_seqs)))
                if self.mode == "sglang":  # scheduler.py: hit tokens / (hit + new input tokens) since start
                    self.m_hit_rate.set(lb, self.cache.hit_rate)
            else:
                self.m_pending.set(lb, self.waiting)
                for kind, v in (("active", self.running), ("max", self.profile.max_num_seqs),
                                ("scheduled", self.running), ("context", 0), ("waiting", self.waiting)):
                    self.m_trt.set((("model", model), ("request_type", kind), ("version", "1")), v)
                used = min(1.0, self.running / max(1, self.profile.max_num_seqs))
                self.m_kvblocks.set((("kv_cache_block_type", "fraction"), ("model", model), ("version", "1")), used)
        self.m_info.set((("mode", self.mode), ("simulated", "true")), 1)

    def metrics_text(self) -> str:
        self.update_gauges()
        return self.registry.render()

    # -- generation --------------------------------------------------------------------------------
    async def generate(self, model: str, prompt_tokens: int, max_tokens: int, request_id: str,
                       received: float, prompt: list[str] | None = None
                       ) -> AsyncGenerator[tuple[int, str], None]:
        """Yield (index, text) per output token at the profile's times; the caller writes each one.

        A token's time is recorded when the caller asks for the next one, i.e. after it was written. Use
        contextlib.aclosing() so a dropped client releases the slot at once.
        """
        rec = RequestRecord(self._next_no, request_id, model, prompt_tokens, max_tokens, received)
        self._next_no += 1
        loop = asyncio.get_running_loop()
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        rec.started = time.perf_counter()
        p = self.profile
        rec.cached_tokens = self.cache.lookup_and_insert(prompt) if prompt is not None else 0
        try:
            # deadlines on the loop clock, so sleep overshoot does not accumulate over tokens
            # only the uncached part of the prompt is prefilled
            deadline = loop.time() + p.ttft_s(prompt_tokens - rec.cached_tokens, self.running, rec.no)
            for i in range(max_tokens):
                delay = deadline - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                yield i, token_text(rec.no, i)
                rec.token_times.append(time.perf_counter())
                step = p.itl_s(self.running, rec.no, i)
                if i == 0:  # the decode schedule starts at the first token actually sent
                    deadline = loop.time() + step
                else:  # on schedule; after a stall, restart it rather than burst tokens
                    deadline = max(deadline + step, loop.time() + step - p.itl_ms / 1000.0)
        finally:
            self.running -= 1
            self._slots.release()
            rec.finished = time.perf_counter()
            self.records.append(rec)
            self._account(rec)

    def _account(self, rec: RequestRecord) -> None:
        lb = self._labels(rec.model)
        t = rec.token_times
        done = len(t) == rec.max_tokens
        queue_s = rec.started - rec.received
        e2e_s = rec.finished - rec.received
        if self.mode == "sglang":
            self._account_sglang(rec, lb, e2e_s)
        elif self.mode == "openai":
            self.m_pc_queries.inc(lb, rec.prompt_tokens)
            self.m_pc_hits.inc(lb, rec.cached_tokens)
            self.m_prompt.inc(lb, rec.prompt_tokens)
            self.m_gen.inc(lb, len(t))
            if done:
                self.m_success.inc((*lb, ("finished_reason", rec.finish_reason)))
            self.h_queue.observe(lb, queue_s)
            self.h_e2e.observe(lb, e2e_s)
            if t:
                self.h_ttft.observe(lb, t[0] - rec.received)
                self.h_prefill.observe(lb, t[0] - rec.started)
                self.h_decode.observe(lb, t[-1] - t[0])
                for a, b in itertools.pairwise(t):
                    self.h_itl.observe(lb, b - a)
                if len(t) > 1:
                    self.h_tpot.observe(lb, (t[-1] - t[0]) / (len(t) - 1))
        else:
            (self.m_success if done else self.m_failure).inc(lb)
            self.m_count.inc(lb)
            self.m_exec.inc(lb)
            self.m_req_us.inc(lb, e2e_s * 1e6)
            self.m_queue_us.inc(lb, queue_s * 1e6)
            self.m_infer_us.inc(lb, (rec.finished - rec.started) * 1e6)
            self.m_in_us.inc(lb, 0.0)
            self.m_out_us.inc(lb, 0.0)
            if t:
                self.h_first.observe(lb, (t[0] - rec.received) * 1000.0)

    def _account_sglang(self, rec: RequestRecord, lb: tuple[tuple[str, str], ...], e2e_s: float) -> None:
        t = rec.token_times
        self.m_prompt.inc(lb, rec.prompt_tokens)
        self.m_cached.inc(lb, rec.cached_tokens)
        self.m_gen.inc(lb, len(t))
        self.m_success.inc(lb)
        self.h_e2e.observe(lb, e2e_s)
        if t:
            self.h_ttft.observe(lb, t[0] - rec.received)
            for a, b in itertools.pairwise(t):
                self.h_itl.observe(lb, b - a)

    def record_tail(self, since: int = 0) -> list[dict[str, Any]]:
        return [r.summary() for r in self.records if r.no >= since]
