"""Triton's release lines (gridready/serving/triton/versions.py): the image reference with and without a digest
(a registry port is not a tag), the pins file's two lines and the fixed-cost image, and the order in which a
site's pins and a tier's override replace them."""

from __future__ import annotations

import pytest

from gridready.serving.triton import versions as v
from gridready.spec.triton import FixedCostOverride, SitePins, VersionOverride

D1, D2 = "sha256:" + "1a" * 32, "sha256:" + "2b" * 32


@pytest.mark.parametrize(("image", "digest", "ref"), [
    ("nvcr.io/nvidia/tritonserver:25.12-py3", D1, f"nvcr.io/nvidia/tritonserver@{D1}"),
    ("nvcr.io/nvidia/tritonserver:25.12-py3", None, "nvcr.io/nvidia/tritonserver:25.12-py3"),
    ("registry:5000/triton", D1, f"registry:5000/triton@{D1}"),
    ("registry:5000/triton:25.12", D1, f"registry:5000/triton@{D1}"),
    ("triton", D1, f"triton@{D1}"),
    ("triton", "", "triton"),
])
def test_image_ref_drops_only_the_tag(image: str, digest: str | None, ref: str) -> None:
    assert v.image_ref(image, digest) == ref


def test_the_pinned_lines_as_the_file_states_them() -> None:
    engine, llmapi = v.release_line("engine"), v.release_line("llmapi")
    assert (engine.triton, engine.tensorrt_llm, engine.tensorrt, engine.cuda, engine.image_digest) == (
        "25.12", "1.2.1", "10.14.1.48", None, None)
    assert engine.templates_dir == "/app/all_models/inflight_batcher_llm"
    assert engine.convert_script == "/app/examples/models/core/{family}/convert_checkpoint.py"
    assert (llmapi.templates_dir, llmapi.convert_script, llmapi.quantize_script) == (
        "/app/all_models/llmapi", None, None)
    assert llmapi.image_ref == "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"
    assert v.pins()["lines"]["engine"]["image"] == engine.image


def test_site_pins_then_the_tiers_override_per_key() -> None:
    site = SitePins(lines={"engine": VersionOverride(image_digest=D1, image="mirror.example/triton:25.12"),
                           "llmapi": VersionOverride(cuda="13.0")})
    line = v.release_line("engine", None, site)
    assert (line.image, line.image_digest, line.tensorrt_llm) == ("mirror.example/triton:25.12", D1, "1.2.1")
    line = v.release_line("engine", VersionOverride(image_digest=D2, tensorrt_llm="1.2.0"), site)
    assert (line.image, line.image_digest, line.tensorrt_llm, line.cuda) == (
        "mirror.example/triton:25.12", D2, "1.2.0", None)
    assert v.release_line("llmapi", None, site).cuda == "13.0"
    assert v.release_line("engine", VersionOverride(), None) == v.release_line("engine")
    assert v.release_line("engine", None, SitePins()).image_digest is None


def test_fixed_cost_image_and_its_site_override() -> None:
    pin = v.fixed_cost_pin()
    assert (pin.triton, pin.tensorrt, pin.image, pin.image_digest) == (
        "25.12", "10.14.1.48", "nvcr.io/nvidia/tritonserver:25.12-py3", None)
    assert pin.image_ref == "nvcr.io/nvidia/tritonserver:25.12-py3"
    site = v.fixed_cost_pin(SitePins(fixed_cost=FixedCostOverride(image_digest=D1)))
    assert (site.image, site.image_ref) == ("nvcr.io/nvidia/tritonserver:25.12-py3",
                                            f"nvcr.io/nvidia/tritonserver@{D1}")
    assert v.fixed_cost_pin(SitePins()) == pin
