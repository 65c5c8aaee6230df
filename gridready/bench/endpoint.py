"""Where a tier answers and which protocol it speaks."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from gridready.bench.http import Url
from gridready.bench.protocols import Api
from gridready.spec.serving import Tier


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="base URL, e.g. http://10.77.0.11:8000")
    api: Api = Api.OPENAI_CHAT
    model: str = Field(description="the served model name clients send")
    metrics_url: str | None = Field(None, description="the engine's Prometheus endpoint")
    api_key: SecretStr | None = Field(None, exclude=True, description="Bearer token (vLLM --api-key); never dumped")

    @property
    def base(self) -> Url:
        return Url.parse(self.url, self.api_key.get_secret_value() if self.api_key else None)

    @property
    def triton(self) -> bool:
        """Triton's KServe v2 routes (/v2/health/ready, /v2/models/<m>/ready) answer here."""
        return self.api in (Api.TRITON_GENERATE, Api.KSERVE_INFER)

    @classmethod
    def for_tier(cls, tier: Tier, host: str, api_key: str | None = None) -> Endpoint:
        """The endpoint of a tier on a host.

        vllm: OpenAI chat on tier.port. triton-trtllm (the tier's optional `triton:` settings, duck-typed):
        frontend trtllm-serve -> OpenAI chat on tier.port; otherwise Triton's generate endpoint on http_port
        (8000; KServe HTTP, beside the OpenAI frontend on tier.port), metrics on tier.port with the OpenAI frontend,
        else on metrics_port (8002)."""
        if tier.engine == "triton-embedding":  # Triton's HTTP on the tier's port, metrics on its own
            metrics_port = int(_setting(getattr(tier, "embedding", None), "metrics_port", 8002))
            return cls(url=f"http://{host}:{tier.port}", api=Api.KSERVE_INFER, model=tier.served_name,
                       metrics_url=f"http://{host}:{metrics_port}/metrics")
        if tier.engine != "triton-trtllm":
            return cls(url=f"http://{host}:{tier.port}", api=Api.OPENAI_CHAT, model=tier.served_name,
                       metrics_url=f"http://{host}:{tier.port}/metrics",
                       api_key=SecretStr(api_key) if api_key else None)
        t = getattr(tier, "triton", None)
        if _setting(t, "frontend", "triton") == "trtllm-serve":
            return cls(url=f"http://{host}:{tier.port}", api=Api.OPENAI_CHAT, model=tier.served_name,
                       metrics_url=f"http://{host}:{tier.port}/metrics")
        http_port = int(_setting(t, "http_port", 8000))
        metrics = tier.port if _setting(t, "openai_frontend", True) else int(_setting(t, "metrics_port", 8002))
        return cls(url=f"http://{host}:{http_port}", api=Api.TRITON_GENERATE, model=tier.served_name,
                   metrics_url=f"http://{host}:{metrics}/metrics")


def _setting(settings: object, key: str, default: Any) -> Any:
    """A key of a settings model or dict, or the default when absent/None."""
    value = settings.get(key) if isinstance(settings, dict) else getattr(settings, key, None)
    return default if value is None else value
