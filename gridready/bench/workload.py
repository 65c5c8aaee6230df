"""What load to apply: the Workload model and its prompts (synthetic or from a JSONL dataset)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from gridready.bench.protocols import Api, Prompt
from gridready.errors import InvalidInput

# Common English words: about one token each in Llama/GPT tokenizers, exactly one in the simulator's.
_TEXT = (
    "the of and to in is was for on are with as be by at this have from or had not but what all were when we "
    "there can an your which their said if do will each about how up out them then she many some so these "
    "would other into has more her two like him see time could no make than first been its who now people my "
    "made over did down only way find use may water long little very after words called just where most know "
    "get through back much before go good new write our used me man too any day same right look think also "
    "around another came come work three word must because does part even place well such here take why help"
)
WORDS = tuple(_TEXT.split())


class Level(BaseModel):
    """One load level of a sweep: fixed concurrency, or Poisson arrivals at a request rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["concurrency", "rate"]
    value: float

    @property
    def label(self) -> str:
        return f"c={int(self.value)}" if self.kind == "concurrency" else f"rate={self.value:g}/s"


class InferInput(BaseModel):
    """One input tensor of a KServe v2 request (Api.KSERVE_INFER): shape without the batch dimension."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    datatype: str = Field(description="KServe v2 datatype, e.g. INT64, FP32")
    shape: list[PositiveInt]
    fill: Literal["token_ids", "ones", "zeros", "random"]

    def tensor(self, rng: random.Random) -> dict[str, object]:
        """The tensor of one request (batch 1), as KServe v2 JSON."""
        size = math.prod(self.shape)
        if self.fill == "token_ids":
            data: list[object] = [rng.randrange(1000, 30000) for _ in range(size)]
        elif self.fill == "random":
            data = [round(rng.uniform(-1.0, 1.0), 4) for _ in range(size)]
        else:
            data = [1 if self.fill == "ones" else 0] * size
        if self.datatype == "BOOL":
            data = [bool(v) for v in data]
        elif self.datatype.startswith(("FP", "BF")):
            data = [float(v) for v in data]  # type: ignore[arg-type]
        return {"name": self.name, "shape": [1, *self.shape], "datatype": self.datatype, "data": data}


class Workload(BaseModel):
    """The same workload is run on every tier of a decision. Limits are per level: whichever comes first."""

    model_config = ConfigDict(extra="forbid")

    api: Api | None = Field(None, description="default: openai-chat for vllm tiers, triton-generate for triton")
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1, 4, 16],
                                           description="fixed-concurrency levels (ignored when request_rate is set)")
    request_rate: list[PositiveFloat] | None = Field(None, description="Poisson request rates (req/s) instead")
    max_concurrency: PositiveInt | None = Field(None, description="cap on in-flight requests in rate mode")
    num_prompts: PositiveInt = Field(200, description="requests per level at most")
    duration_s: PositiveFloat = Field(20.0, description="seconds per level at most (in-flight ones finish)")
    input_len: PositiveInt = Field(128, description="tokens of each request's own part of the prompt")
    shared_prefix_len: int = Field(0, ge=0, description="tokens of a system prompt shared across requests "
                                                        "(the prefix-reuse shootout); 0: none")
    shared_prefix_share: float = Field(1.0, ge=0, le=1,
                                       description="share of requests that start with the shared system prompt")
    output_len: PositiveInt = 64
    dataset: Path | None = Field(None, description="JSONL: prompt|text|messages, optional output_len|max_tokens")
    seed: int = 0
    warmup: int = Field(2, ge=0, description="requests before each level, not counted")
    request_timeout_s: PositiveFloat = 120.0
    ignore_eos: bool = Field(True, description="ask OpenAI servers for exactly output_len tokens (vLLM ignore_eos)")
    gate_level: float | None = Field(None, description="the level the SLO gate judges (default: the highest)")
    infer_inputs: list[InferInput] | None = Field(
        None, description="kserve-infer: the model's input tensors (a fixed-cost model's requests)")

    @model_validator(mode="after")
    def _gate_level_exists(self) -> Workload:
        if self.gate_level is not None and self.gate_level not in [lv.value for lv in self.levels()]:
            raise ValueError(f"gate_level {self.gate_level} is not one of the levels")
        return self

    def levels(self) -> list[Level]:
        if self.request_rate:
            return [Level(kind="rate", value=r) for r in self.request_rate]
        return [Level(kind="concurrency", value=c) for c in self.concurrency]

    def gate(self) -> Level:
        levels = self.levels()
        if self.gate_level is None:
            return max(levels, key=lambda lv: lv.value)
        return next(lv for lv in levels if lv.value == self.gate_level)

    def prompts(self, n: int | None = None) -> list[Prompt]:
        n = n or self.num_prompts
        if self.infer_inputs:
            rng = random.Random(self.seed)
            size = self.infer_inputs[0].shape[0]
            return [Prompt("", size, 0, tuple(t.tensor(rng) for t in self.infer_inputs)) for _ in range(n)]
        if self.dataset is not None:
            return load_dataset(self.dataset, n, self.output_len)
        rng = random.Random(self.seed)
        shared = self.shared_prefix()
        out = []
        for i in range(n):
            words = [f"request {i}:"] + [rng.choice(WORDS) for _ in range(self.input_len - 2)]
            if shared and rng.random() < self.shared_prefix_share:
                words = shared + words
            text = " ".join(words)
            out.append(Prompt(text, len(text.split()), self.output_len))
        return out

    def shared_prefix(self) -> list[str]:
        """The shared system prompt: `shared_prefix_len` words, the same for every request and tier."""
        if not self.shared_prefix_len:
            return []
        rng = random.Random(f"system-{self.seed}")
        return ["system:"] + [rng.choice(WORDS) for _ in range(self.shared_prefix_len - 1)]


def load_dataset(path: Path, n: int, default_output: int) -> list[Prompt]:
    """Prompts from JSONL, cycled to n. One object per line: prompt|text|messages, output_len|max_tokens."""
    rows: list[Prompt] = []
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise InvalidInput(f"{path}: cannot read dataset: {err.strerror}") from err
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if "messages" in obj:
                text = " ".join(str(m.get("content", "")) for m in obj["messages"])
            else:
                text = str(obj.get("prompt") or obj["text"])
            out = int(obj.get("output_len") or obj.get("max_tokens") or default_output)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InvalidInput(f"{path}:{no}: not a dataset row (prompt|text|messages): {err}") from err
        rows.append(Prompt(text, len(text.split()), out))
    if not rows:
        raise InvalidInput(f"{path}: dataset has no rows")
    return [rows[i % len(rows)] for i in range(n)]
