"""What an SGLang pod can load as a LoRA adapter on Kubernetes (issue 44, finding 4): SGLang 0.5.19 has no
object-storage loader (a path that is no local directory is taken for a Hugging Face repo id), and its pods mount
only the node's Hugging Face cache. vLLM tiers keep loading from object storage (Ray Serve LLM)."""

from __future__ import annotations

import pytest

from gridready.errors import GridreadyError
from gridready.exitcodes import ExitCode
from tests.unit.serving.conftest import vllm_tier
from tests.unit.serving_sglang.test_launch import sglang_tier


def _adapters(path: str) -> list[dict[str, str]]:
    return [{"name": "sql", "path": path}]


@pytest.mark.parametrize(("path", "reason"), [
    ("s3://acme-adapters/sql", "no adapter from object storage"),
    ("gs://acme-adapters/sql", "no adapter from object storage"),
    ("/srv/adapters/sql", "mount only the node's Hugging Face cache"),
])
def test_sglang_on_kubernetes_refuses_what_its_pods_cannot_load(make_inv, path: str, reason: str) -> None:
    with pytest.raises(GridreadyError) as err:
        make_inv(1, [sglang_tier(lora_adapters=_adapters(path))], target="kubernetes")
    assert err.value.code == ExitCode.INVALID
    assert "serving.tiers[0].lora_adapters[0].path" in str(err.value) and reason in str(err.value)


@pytest.mark.parametrize("path", ["acme/llama-sql-lora", "/var/lib/gridready/hf/adapters/sql"])
def test_sglang_on_kubernetes_takes_a_hub_id_or_a_folder_in_the_node_cache(make_inv, path: str) -> None:
    inv = make_inv(1, [sglang_tier(lora_adapters=_adapters(path))], target="kubernetes")
    assert inv.spec.serving.tiers[0].lora_adapters[0].path == path


def test_vllm_on_kubernetes_still_loads_from_object_storage(make_inv) -> None:
    inv = make_inv(1, [vllm_tier(lora_adapters=_adapters("s3://acme-adapters/sql"))], target="kubernetes")
    assert inv.spec.serving.tiers[0].lora_adapters[0].path.startswith("s3://")
