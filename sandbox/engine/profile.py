"""Token timing of the simulated engine: what a request costs, as a pure function of the profile.

TTFT  = (ttft_ms + prefill_us_per_token * prompt_tokens / 1000) * slowdown * jitter
ITL   = itl_ms * slowdown * jitter, re-evaluated before every token
slowdown = 1 + batch_slowdown * (running - 1)   (the batch-size effect of continuous batching)
jitter   = 1 + jitter * u, u in [-1, 1] from a hash of (seed, request number, token index): deterministic.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Profile:
    """Timing knobs; every field has a CLI flag and a key in a --profile JSON file."""

    ttft_ms: float = 40.0  # base time to first token
    prefill_us_per_token: float = 20.0  # prefill cost per prompt token
    itl_ms: float = 20.0  # inter-token latency at batch size 1
    batch_slowdown: float = 0.01  # ITL/TTFT grow by this fraction per other running request
    max_num_seqs: int = 256  # requests beyond this wait in the queue
    max_model_len: int = 8192
    jitter: float = 0.0  # +/- fraction of every delay
    seed: int = 0
    load_s: float = 0.0  # simulated model load time: not ready before it
    default_max_tokens: int = 16

    @classmethod
    def from_file(cls, path: str | Path, **overrides: Any) -> Profile:
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown profile keys {unknown}; known: {sorted(known)}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def slowdown(self, running: int) -> float:
        return 1.0 + self.batch_slowdown * max(0, running - 1)

    def jitter_factor(self, request_no: int, token_index: int) -> float:
        if self.jitter <= 0:
            return 1.0
        digest = hashlib.blake2b(f"{self.seed}:{request_no}:{token_index}".encode(), digest_size=8).digest()
        u = int.from_bytes(digest, "big") / float(1 << 64) * 2.0 - 1.0
        return 1.0 + self.jitter * u

    def ttft_s(self, prompt_tokens: int, running: int, request_no: int) -> float:
        base = self.ttft_ms + self.prefill_us_per_token * prompt_tokens / 1000.0
        return base * self.slowdown(running) * self.jitter_factor(request_no, -1) / 1000.0

    def itl_s(self, running: int, request_no: int, token_index: int) -> float:
        return self.itl_ms * self.slowdown(running) * self.jitter_factor(request_no, token_index) / 1000.0


# The simulated tokenizer: one token per whitespace-separated word. Documented in docs/bench.md.
VOCAB = ("grid", "ready", "token", "simulated", "answer", "node", "fabric", "tensor", "batch", "cache")


def count_tokens(text: str) -> int:
    return len(text.split())


def token_text(request_no: int, index: int) -> str:
    """The index-th output token of a request: a word with a leading space."""
    return " " + VOCAB[(request_no * 7 + index) % len(VOCAB)]
