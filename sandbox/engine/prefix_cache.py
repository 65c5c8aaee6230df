"""SIMULATED prefix cache: how many leading prompt tokens an engine finds already computed.

Both engines reuse the KV of a shared prefix; they differ in granularity, which this models:
- vLLM automatic prefix caching hashes full KV blocks only (vllm docs/design/prefix_caching.md: "We only cache
  full blocks"; `--block-size` default 16 on CUDA), so a shared prefix is reused up to its last full block.
- SGLang's RadixAttention matches the radix tree token by token at `--page-size` 1 (its default,
  server_arguments.md "Memory and scheduling"), or page by page with a larger page size.
Both recompute at least the last prompt token (the engine needs its logits), so hits <= prompt length - 1.
Entries are evicted least-recently-used beyond `capacity_tokens` (KV pool size of the simulated GPU); among the
blocks one request used, the ones at the end of its prefix go first (vLLM docs/design/prefix_caching.md, "Free
Block Queue": a finished request's blocks are freed in reverse order, so tail blocks are evicted before the head
blocks that other prompts share). A chain whose head survives keeps serving hits; one whose head were evicted
first would hold blocks no lookup can reach.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


class PrefixCache:
    def __init__(self, granularity: int, capacity_tokens: int = 2_000_000, enabled: bool = True) -> None:
        if granularity < 1:
            raise ValueError("granularity must be >= 1")
        self.granularity = granularity
        self.capacity = capacity_tokens
        self.enabled = enabled
        self._entries: OrderedDict[bytes, int] = OrderedDict()  # prefix hash -> prefix length
        self._tokens = 0
        self.queried = 0  # prompt tokens looked up
        self.hit = 0  # of those, found cached

    def _hashes(self, tokens: list[str]) -> list[tuple[int, bytes]]:
        """(length, hash) of every prefix that ends on a granule boundary, hash-chained like vLLM's blocks."""
        out = []
        h = hashlib.blake2b(digest_size=16)
        for i, tok in enumerate(tokens, 1):
            h.update(tok.encode() + b"\x00")
            if i % self.granularity == 0:
                out.append((i, h.copy().digest()))
        return out

    def lookup_and_insert(self, tokens: list[str]) -> int:
        """Cached leading tokens of this prompt; then the prompt's own granules are cached (after prefill)."""
        n = len(tokens)
        self.queried += n
        if not self.enabled or n == 0:
            return 0
        hashes = self._hashes(tokens)
        cached = 0
        for length, digest in hashes:
            if digest not in self._entries:
                break
            cached = length
        cached = min(cached, n - 1)
        self.hit += cached
        for length, digest in reversed(hashes):  # the head most recent: tail blocks are evicted first
            if digest not in self._entries:
                self._entries[digest] = length
                self._tokens += self.granularity
            self._entries.move_to_end(digest)
        while self._tokens > self.capacity and self._entries:
            self._entries.popitem(last=False)
            self._tokens -= self.granularity
        return cached

    @property
    def hit_rate(self) -> float:
        return self.hit / self.queried if self.queried else 0.0
