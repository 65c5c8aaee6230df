"""The Triton role reports the metrics URL the server really serves (issue #29, finding 16): under the OpenAI
frontend tritonserver has no metrics listener and /metrics is on the OpenAI port, not :8002."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

VARS = Path(__file__).resolve().parents[3] / "roles" / "gridready_triton_trtllm" / "vars" / "main.yml"


def _url(**values: object) -> str:
    expr = yaml.safe_load(VARS.read_text())["__gridready_triton_trtllm_metrics_url"]
    return jinja2.Environment().from_string(expr).render(
        __gridready_triton_trtllm_probe_host="10.0.0.1", gridready_triton_trtllm_metrics_port=8002,
        **values).strip()


def test_metrics_follow_the_frontend() -> None:
    assert _url(gridready_triton_trtllm_frontend="triton", gridready_triton_trtllm_openai_port=9000) == \
        "http://10.0.0.1:9000/metrics"
    assert _url(gridready_triton_trtllm_frontend="triton", gridready_triton_trtllm_openai_port=0) == \
        "http://10.0.0.1:8002/metrics"
    assert _url(gridready_triton_trtllm_frontend="trtllm-serve", gridready_triton_trtllm_openai_port=8000) == \
        "http://10.0.0.1:8000/metrics"
